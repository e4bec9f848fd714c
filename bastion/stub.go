package bastion

import "errors"

var errNotImplemented = errors.New("bastion: not implemented yet")
