// Package recipes is postern's catalog of target kinds.
//
// A recipe tells postern what a kind of SSH target is: which hosts it claims,
// which credential fields an admin fills in, which shell runs the agent's
// command string there, which extra rules raise a command to write, which
// whole commands are read on a target without a shell, and which harmless
// read proves that a key works.
//
// The catalog is embedded in the binary, one JSON file per recipe under
// catalog/, and validated when it is loaded. The package's tests load it, so
// an invalid recipe fails the build's tests instead of an admin's request.
//
// Two views of a recipe exist on purpose. Recipe carries everything postern
// needs internally; PublicRecipe, answered by the CLI and the REST API, leaves
// out the shell dialect, the default user and port, the rules, the exact read
// commands and the key check: they are how postern guards a target, not
// something an agent or an admin configures.
package recipes
