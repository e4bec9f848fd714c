// Package usererr is the one error type whose message is written for the
// person at the other end of a door: the admin at the CLI, on the web page
// or behind the REST API.
//
// Errors in postern say where they come from ("store: ", "policy: ") and
// wrap their cause, which is right for a log and wrong for a person: a
// door that wanted readable words used to strip those prefixes off
// err.Error(), in each door its own way, and showed whatever else the chain
// held. Instead, the layer that knows what a person should read — policy's
// refusals, manage's and store's validation, a record not found or taken —
// puts an *Error in the chain, and a door shows that error's message, found
// with As or Message, and a generic message (logging the whole error) for
// anything else.
//
// The message of an *Error is shown as it is, so it must never carry a
// secret or an internal detail: no key material or key path, no SQL, no
// address an agent may not learn. The cause it wraps is for errors.Is,
// errors.As and the log, and is never shown.
//
// This package imports nothing of postern's, so that every package can use
// it without changing the direction of imports.
package usererr
