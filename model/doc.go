// Package model is postern's resources as programs see them: one JSON shape
// per resource (agents, connections, grants, tokens, admins, approvals,
// audit rows, notification channels, recipes, locks), used by the CLI's -o json
// and by the REST API alike, so that a field is named once and a script can
// move between the two without translating.
//
// Each type is built from the store's record by a function named after it
// (AgentOf, ConnectionOf, ...). None has a field that could hold a secret: a
// connection shows its pinned host keys and the public half of its key, a
// token its name and scope, a channel its URL as scheme://host/… and its
// secret only as whether there is one. Times are RFC 3339 in UTC, null when
// they never happened. web/openapi.json describes these types;
// web/api_openapi_test.go checks each schema's properties against their
// JSON fields.
//
// The package sits under both cmd/postern and web and imports only store,
// recipes and x/crypto/ssh.
package model
