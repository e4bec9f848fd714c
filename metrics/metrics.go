package metrics

import (
	"fmt"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// namespace prefixes every metric name.
const namespace = "postern"

// other is the label value of anything outside a label's fixed set.
const other = "other"

// Outcomes of an agent's TCP connection at admission (SSHConnection).
const (
	ConnAccepted = "accepted" // admitted to the SSH handshake
	ConnRefused  = "refused"  // over the unauthenticated limits, or the server is stopping
)

// Outcomes of an SSH handshake with an agent (SSHHandshake).
const (
	HandshakeOK         = "ok"          // authenticated
	HandshakeAuthFailed = "auth_failed" // no registered key, or a disabled agent
	HandshakeTimeout    = "timeout"     // the handshake deadline passed
	HandshakeError      = "error"       // anything else: a protocol error, a client that left
	// HandshakeDropped: the connection got no handshake slot (the queue
	// was full, the deadline passed in it, or the server is stopping).
	HandshakeDropped = "dropped"
)

// Reasons of a failed dial of a target by the upstream pool (UpstreamDialError).
const (
	DialUnreachable    = "unreachable"      // TCP or the SSH handshake failed or timed out
	DialHostKeyChanged = "host_key_changed" // the target's host key is not the pinned one
	DialOther          = "other"            // anything else: the connection's keys could not be read
)

// Directions of SFTP bytes (SFTPBytes).
const (
	FromAgent = "from_agent"
	ToAgent   = "to_agent"
)

// Outcomes of a notification attempt (Notification).
const (
	NotifyDelivered = "delivered"
	NotifyRetry     = "retry"     // failed; queued for another attempt
	NotifyFailed    = "failed"    // failed for good
	NotifyCancelled = "cancelled" // not sent: the request or channel went away
	NotifyStopped   = "stopped"   // cut short at shutdown; given back to the outbox
)

// Metrics holds postern's collectors. Build it with New; a nil *Metrics is
// valid and records nothing.
type Metrics struct {
	sshConnections     *prometheus.CounterVec
	sshHandshakes      *prometheus.CounterVec
	sshActive          prometheus.Gauge
	decisions          *prometheus.CounterVec
	approvalsPending   prometheus.Gauge
	approvalWait       *prometheus.HistogramVec
	upstreamClients    prometheus.Gauge
	upstreamDialErrors *prometheus.CounterVec
	sftpBytes          *prometheus.CounterVec
	sftpOps            *prometheus.CounterVec
	auditWrite         prometheus.Histogram
	notifications      *prometheus.CounterVec
	readCommands       *prometheus.CounterVec
	auditHead          *auditHeadCollector
	// reg is where New registered the collectors, for those added later
	// (WatchReadSandboxes).
	reg prometheus.Registerer
}

// approvalWaitBuckets are the bounds, in seconds, of the approval wait
// histogram: a person answers in seconds to an hour (the default approval
// lifetime is DefaultApprovalLifetime in policy).
func approvalWaitBuckets() []float64 {
	return []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600}
}

// auditWriteBuckets are the bounds, in seconds, of the audit write
// histogram: one row is written in well under a millisecond on SQLite, and
// a write that waits for the database's write lock takes longer.
func auditWriteBuckets() []float64 {
	return []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
}

// New builds the collectors and registers them on reg. Series of the small
// label sets start at zero, so that a rate over them exists before the
// first event.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		sshConnections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "ssh_connections_total",
			Help: "Agent TCP connections, by whether they were admitted to the SSH handshake.",
		}, []string{"outcome"}),
		sshHandshakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "ssh_handshakes_total",
			Help: "SSH handshakes with agents, by outcome.",
		}, []string{"outcome"}),
		sshActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "ssh_connections_active",
			Help: "Authenticated agent connections open now.",
		}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "decisions_total",
			Help: "Operations decided by the policy engine, by class, the grant's rule and outcome.",
		}, []string{"class", "rule", "outcome"}),
		approvalsPending: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "approvals_pending",
			Help: "Approval requests that this process's sessions are waiting on now.",
		}),
		approvalWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "approval_wait_seconds",
			Help:    "How long a session waited for an approval request to be decided, by outcome.",
			Buckets: approvalWaitBuckets(),
		}, []string{"outcome"}),
		upstreamClients: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "upstream_clients",
			Help: "SSH connections to targets held by the upstream pool now.",
		}),
		upstreamDialErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "upstream_dial_errors_total",
			Help: "Failed dials of a target by the upstream pool, by reason.",
		}, []string{"reason"}),
		sftpBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "sftp_bytes_total",
			Help: "SFTP packet bytes relayed between agents and postern, by direction.",
		}, []string{"direction"}),
		sftpOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "sftp_operations_total",
			Help: "SFTP requests from agents, by packet type (or extension).",
		}, []string{"op"}),
		auditWrite: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: namespace, Name: "audit_write_seconds",
			Help:    "How long appending one audit row took.",
			Buckets: auditWriteBuckets(),
		}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "notifications_total",
			Help: "Notification delivery attempts, by outcome.",
		}, []string{"outcome"}),
		readCommands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "read_commands_total",
			Help: "Commands allowed as read, by the read sandbox they ran in (bwrap, unshare, none), or refused because their connection requires one and its target has none.",
		}, []string{"sandbox"}),
		auditHead: newAuditHeadCollector(),
		reg:       reg,
	}
	if err := register(reg,
		m.sshConnections, m.sshHandshakes, m.sshActive, m.decisions, m.approvalsPending,
		m.approvalWait, m.upstreamClients, m.upstreamDialErrors, m.sftpBytes, m.sftpOps,
		m.auditWrite, m.notifications, m.readCommands, m.auditHead,
	); err != nil {
		return nil, err
	}
	for _, o := range connOutcomes() {
		m.sshConnections.WithLabelValues(o)
	}
	for _, o := range handshakeOutcomes() {
		m.sshHandshakes.WithLabelValues(o)
	}
	for _, r := range dialReasons() {
		m.upstreamDialErrors.WithLabelValues(r)
	}
	for _, d := range directions() {
		m.sftpBytes.WithLabelValues(d)
	}
	for _, o := range notifyOutcomes() {
		m.notifications.WithLabelValues(o)
	}
	for _, r := range readRuns() {
		m.readCommands.WithLabelValues(r)
	}
	return m, nil
}

// The label sets. Functions, not variables, so that the package holds no
// mutable state.

func connOutcomes() []string { return []string{ConnAccepted, ConnRefused} }

func handshakeOutcomes() []string {
	return []string{HandshakeOK, HandshakeAuthFailed, HandshakeTimeout, HandshakeError, HandshakeDropped}
}

func dialReasons() []string { return []string{DialUnreachable, DialHostKeyChanged, DialOther} }

func directions() []string { return []string{FromAgent, ToAgent} }

func notifyOutcomes() []string {
	return []string{NotifyDelivered, NotifyRetry, NotifyFailed, NotifyCancelled, NotifyStopped}
}

// classes, rules and decisionOutcomes mirror policy's Class, Rule and
// Outcome values (this package may not import policy).
func classes() []string { return []string{"read", "write", "destructive"} }

func rules() []string { return []string{"allow", "ask", "deny"} }

func decisionOutcomes() []string {
	return []string{"allowed", "asked", "approved", "denied", "expired", "failed"}
}

// sftpOps are the SFTP requests postern knows: the packet types of draft-ietf-secsh-filexfer-02 that an
// agent sends, and the extensions postern serves (sftpgate/request.go).
func sftpOps() []string {
	return []string{
		"open", "close", "read", "write", "lstat", "fstat", "setstat", "fsetstat", "opendir",
		"readdir", "remove", "mkdir", "rmdir", "realpath", "stat", "rename", "readlink", "symlink",
		"posix-rename@openssh.com", "statvfs@openssh.com", "fstatvfs@openssh.com",
		"hardlink@openssh.com", "fsync@openssh.com", "lsetstat@openssh.com", "limits@openssh.com",
		"expand-path@openssh.com", "copy-data", "home-directory", "users-groups-by-id@openssh.com",
	}
}

// bounded is v when it is one of set, and "other" otherwise.
func bounded(v string, set []string) string {
	if slices.Contains(set, v) {
		return v
	}
	return other
}

// SSHConnection counts an agent's TCP connection: ConnAccepted or
// ConnRefused.
func (m *Metrics) SSHConnection(outcome string) {
	if m == nil {
		return
	}
	m.sshConnections.WithLabelValues(bounded(outcome, connOutcomes())).Inc()
}

// SSHHandshake counts a handshake's outcome (the Handshake constants).
func (m *Metrics) SSHHandshake(outcome string) {
	if m == nil {
		return
	}
	m.sshHandshakes.WithLabelValues(bounded(outcome, handshakeOutcomes())).Inc()
}

// SSHConnectionOpened and SSHConnectionClosed keep the gauge of open
// authenticated connections; every Opened is followed by one Closed.
func (m *Metrics) SSHConnectionOpened() {
	if m != nil {
		m.sshActive.Inc()
	}
}

// SSHConnectionClosed: see SSHConnectionOpened.
func (m *Metrics) SSHConnectionClosed() {
	if m != nil {
		m.sshActive.Dec()
	}
}

// Decision counts one decided operation: its class (read, write,
// destructive), the grant's rule (allow, ask, deny) and the outcome
// (allowed, asked, approved, denied, expired, failed).
func (m *Metrics) Decision(class, rule, outcome string) {
	if m == nil {
		return
	}
	m.decisions.WithLabelValues(bounded(class, classes()), bounded(rule, rules()),
		bounded(outcome, decisionOutcomes())).Inc()
}

// ApprovalWaitStarted counts a session that starts waiting for an approval;
// ApprovalWaitEnded, called once for each, stops counting it and observes
// how long it waited, under the wait's outcome (approved, denied, expired,
// asked when the agent gave up or postern stopped, failed).
func (m *Metrics) ApprovalWaitStarted() {
	if m != nil {
		m.approvalsPending.Inc()
	}
}

// ApprovalWaitEnded: see ApprovalWaitStarted.
func (m *Metrics) ApprovalWaitEnded(outcome string, waited time.Duration) {
	if m == nil {
		return
	}
	m.approvalsPending.Dec()
	m.approvalWait.WithLabelValues(bounded(outcome, decisionOutcomes())).Observe(waited.Seconds())
}

// UpstreamClientAdded and UpstreamClientRemoved keep the gauge of the
// upstream pool's connections; every Added is followed by one Removed.
func (m *Metrics) UpstreamClientAdded() {
	if m != nil {
		m.upstreamClients.Inc()
	}
}

// UpstreamClientRemoved: see UpstreamClientAdded.
func (m *Metrics) UpstreamClientRemoved() {
	if m != nil {
		m.upstreamClients.Dec()
	}
}

// UpstreamDialError counts a failed dial of a target (the Dial reasons).
func (m *Metrics) UpstreamDialError(reason string) {
	if m == nil {
		return
	}
	m.upstreamDialErrors.WithLabelValues(bounded(reason, dialReasons())).Inc()
}

// SFTPBytes counts n bytes of SFTP packets in direction (FromAgent,
// ToAgent).
func (m *Metrics) SFTPBytes(direction string, n int) {
	if m == nil || n <= 0 {
		return
	}
	m.sftpBytes.WithLabelValues(bounded(direction, directions())).Add(float64(n))
}

// SFTPOperation counts one SFTP request by its packet type's name in
// lower case ("open", "write") or its extension's name
// ("posix-rename@openssh.com"); any other name counts as "other".
func (m *Metrics) SFTPOperation(op string) {
	if m == nil {
		return
	}
	m.sftpOps.WithLabelValues(bounded(op, sftpOps())).Inc()
}

// AuditWrite observes how long appending one audit row took.
func (m *Metrics) AuditWrite(took time.Duration) {
	if m != nil {
		m.auditWrite.Observe(took.Seconds())
	}
}

// Notification counts one notification attempt's outcome (the Notify
// constants).
func (m *Metrics) Notification(outcome string) {
	if m == nil {
		return
	}
	m.notifications.WithLabelValues(bounded(outcome, notifyOutcomes())).Inc()
}

// register registers each collector with reg, the one way every collector
// of this package is registered.
func register(reg prometheus.Registerer, cs ...prometheus.Collector) error {
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics: register: %w", err)
		}
	}
	return nil
}
