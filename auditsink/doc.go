// Package auditsink ships every audit row, in seq order and at least once,
// to where an organisation keeps its logs: a syslog server (RFC 5424 over
// TCP), a JSON lines file that it rotates, or an HTTP log collector. That is
// its one job.
//
// Each configured sink has a name, under which its cursor — the seq of the
// last row the receiver took — is kept in the database (store.ClaimAuditSink
// and friends, migration 0016). A Shipper reads the rows after the cursor,
// hands them to its sink, and moves the cursor only once the sink reports
// them delivered; so a restart of postern, an outage of the receiver or a
// failure in the middle of a batch resumes with the first row not known
// to be delivered, and a receiver may see a row twice (its seq tells) but
// never misses one or sees them out of order. With several replicas on one
// PostgreSQL database a lease on the sink's row lets exactly one replica
// ship it at a time; another takes over, from the cursor, once the lease
// has run out.
//
// The rows are already redacted where they are written (policy/redact.go);
// the record (record.go) carries the row's fields and its chain hash, and
// nothing secret. The package imports store, never bastion or web; serve
// owns the Shippers' goroutines (cmd/postern/auditsinks.go).
package auditsink
