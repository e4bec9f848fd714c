package bastion

import "errors"

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("bastion: server closed")
