// Package metrics defines postern's Prometheus metrics and serves them.
//
// One *Metrics holds every collector, registered on the Registerer given to
// New (serve passes a registry of its own, never the global one, so that
// nothing in the process is package-level state and tests build as many as
// they like). It is passed down through the Config or Options structs of
// bastion, sftpgate, policy and notify. Its methods are safe on a nil
// *Metrics and do nothing, so tests and the CLI's one-shot commands need
// none.
//
// Labels come only from small fixed sets: outcomes, classes, rules, SFTP
// packet types and directions. A value outside a label's set is counted as
// "other", so that no caller can put a command, a path, an agent's name or
// an alias into a label and grow the series without bound, or leak it to
// whoever scrapes. docs/deploy.md lists the metrics.
//
// The package imports nothing of postern's, so that every other package may
// import it without a cycle.
package metrics
