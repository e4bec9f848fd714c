// Package config is postern as code: one TOML file (postern.toml) that
// declares agents, connections, grants and notification channels, read by
// `postern apply`, written by `postern export`, and the settings of
// `postern serve` (its [serve] table, read by `serve --config`).
//
// Apply plans first: it reads the whole file, checks every name, rule and
// referenced file, compares what the file declares with what the database
// holds, and only then makes the changes, each through package manage
// (checked, key-checked and audited like any admin's change, "via apply").
// It is idempotent: a second run finds nothing to do. It never removes
// what the file does not name, unless asked to prune. Export writes the
// database in the same format, without a secret: a connection's key and a
// channel's URL and secret stay sealed, and apply keeps the stored ones
// when the file gives none.
//
// The file's format is documented in docs/config.md; TOML is parsed by
// github.com/pelletier/go-toml/v2, strictly (an unknown key is an error
// with its line, not a silently ignored typo).
package config
