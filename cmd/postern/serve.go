package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
	"golang.org/x/crypto/ssh"
	"golang.org/x/sync/errgroup"

	"github.com/postern/postern/auditsink"
	"github.com/postern/postern/bastion"
	"github.com/postern/postern/config"
	"github.com/postern/postern/metrics"
	"github.com/postern/postern/notify"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
	"github.com/postern/postern/web"
)

// Defaults of the flags serve and demo share.
const (
	defaultSSHListen = "127.0.0.1:2222"
	defaultLogLevel  = "info"
)

// serveFlags are the flags of `postern serve` that `postern demo` has too.
type serveFlags struct {
	listen string
	// metricsListen is where /metrics is served; none if empty. serve
	// only (the demo has none).
	metricsListen string
	// keyCheckTimeout bounds the key checks the page and the API run;
	// serve only.
	keyCheckTimeout time.Duration
	// auditSinks are the --audit-sink values (auditsinks.go); serve only.
	auditSinks  []string
	approvalTTL time.Duration
	logLevel    string
	limits      limitFlags
}

// limitFlags are the bastion's and the API's limits that an admin may
// tune; zero keeps each one's default (SECURITY.md, Defaults).
type limitFlags struct {
	commandRate      float64
	commandBurst     int
	maxSessions      int
	handshakeTimeout time.Duration
	apiRate          float64
	apiBurst         int
	commandWait      time.Duration
	sessionLifetime  time.Duration
	terminalLife     time.Duration
	// maxPendingPerAgent and maxPendingPerConnection bound the approval
	// requests that wait at once (policy.Options).
	maxPendingPerAgent      int
	maxPendingPerConnection int
	// recordingBound and recordingRetention: the bytes one recording
	// keeps, and how long recordings are kept (recording.go).
	recordingBound     int64
	recordingRetention time.Duration
}

func addServeFlags(cmd *cobra.Command) *serveFlags {
	f := &serveFlags{}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "ssh-listen", defaultSSHListen,
		"address agents connect to (port 0 picks a free port)")
	fl.DurationVar(&f.approvalTTL, "approval-ttl", policy.DefaultApprovalLifetime,
		"how long an approval request waits for an admin before it expires")
	fl.StringVar(&f.logLevel, "log-level", defaultLogLevel,
		"log level: debug, info, warn or error")
	l := &f.limits
	fl.Float64Var(&l.commandRate, "command-rate", 0,
		fmt.Sprintf("commands one agent may start a second (default %v; negative: no limit)", float64(bastion.DefaultCommandRate)))
	fl.IntVar(&l.commandBurst, "command-burst", 0, fmt.Sprintf("commands one agent may start at once (default %d)", bastion.DefaultCommandBurst))
	fl.DurationVar(&l.commandWait, "command-wait", 0,
		fmt.Sprintf("how long a command over the rate waits for its turn before it is refused (default %v; negative: refused at once)", bastion.DefaultCommandWait))
	fl.IntVar(&l.maxSessions, "max-sessions-per-conn", 0,
		fmt.Sprintf("sessions on one agent connection (default %d)", bastion.DefaultMaxSessionsPerConn))
	fl.DurationVar(&l.terminalLife, "terminal-life", 0,
		fmt.Sprintf("how long an approved session with a terminal (an interactive shell, or any command on a pty) may run before postern ends it (default %v)", bastion.DefaultTerminalLife))
	fl.IntVar(&l.maxPendingPerAgent, "max-pending-per-agent", 0,
		fmt.Sprintf("approval requests of one agent that may wait at once; past it a request is denied at once (default %d)", policy.DefaultMaxPendingPerAgent))
	fl.IntVar(&l.maxPendingPerConnection, "max-pending-per-connection", 0,
		fmt.Sprintf("approval requests on one connection, of every agent, that may wait at once (default %d)", policy.DefaultMaxPendingPerConnection))
	fl.DurationVar(&l.handshakeTimeout, "handshake-timeout", 0,
		fmt.Sprintf("bound from an agent's TCP connect to its authentication (default %v)", bastion.DefaultHandshakeTimeout))
	fl.Float64Var(&l.apiRate, "api-rate", 0, fmt.Sprintf("API requests a second per console token (default %d)", web.DefaultAPIRate))
	fl.IntVar(&l.apiBurst, "api-burst", 0, fmt.Sprintf("API requests at once per console token (default %d)", web.DefaultAPIBurst))
	fl.DurationVar(&l.sessionLifetime, "session-lifetime", 0,
		fmt.Sprintf("how long an admin stays logged in to the web page (default %v)", web.DefaultSessionLifetime))
	fl.Int64Var(&l.recordingBound, "recording-bound", bastion.DefaultRecordingBound,
		"bytes of output one recorded session keeps (connections with --record); the rest is counted, not kept")
	fl.DurationVar(&l.recordingRetention, "recording-retention", defaultRecordingRetention,
		"how long recordings are kept before serve deletes them")
	return f
}

// addConfigFlag registers --config FILE: the [serve] table of a config
// file (docs/config.md) sets what the command line does not.
func addConfigFlag(cmd *cobra.Command) *string {
	var path string
	cmd.Flags().StringVar(&path, "config", "", "a config file whose [serve] table gives the settings the flags do not (docs/config.md)")
	return &path
}

// applyServeConfig reads the config file's [serve] table and sets each
// flag the command line left alone (and the data directory, unless
// --data or `+envData+` gives one): flags override the file, and the
// file overrides the defaults.
func applyServeConfig(cmd *cobra.Command, path string, data *dataFlag, f *serveFlags, w *webFlags) error {
	if path == "" {
		return nil
	}
	file, err := config.Load(path)
	if err != nil {
		return usageError{err}
	}
	c := file.Serve
	if c == nil {
		return nil
	}
	set := func(name string, apply func()) {
		if !cmd.Flags().Changed(name) {
			apply()
		}
	}
	str := func(name string, dst *string, v string) {
		if v != "" {
			set(name, func() { *dst = v })
		}
	}
	dur := func(name string, dst *time.Duration, v config.Duration) {
		if v != 0 {
			set(name, func() { *dst = time.Duration(v) })
		}
	}
	if c.Data != "" && data != nil && !cmd.Flags().Changed("data") && os.Getenv(envData) == "" {
		data.dir = c.Data
	}
	str("ssh-listen", &f.listen, c.SSHListen)
	str("log-level", &f.logLevel, c.LogLevel)
	dur("approval-ttl", &f.approvalTTL, c.ApprovalTTL)
	if cmd.Flags().Lookup("key-check-timeout") != nil {
		dur("key-check-timeout", &f.keyCheckTimeout, c.KeyCheckTimeout)
	}
	if len(c.AuditSinks) > 0 && cmd.Flags().Lookup("audit-sink") != nil {
		set("audit-sink", func() { f.auditSinks = c.AuditSinks })
	}
	str("http-listen", &w.listen, c.HTTPListen)
	str("metrics-listen", &f.metricsListen, c.MetricsListen)
	str("tls-cert", &w.certFile, c.TLSCert)
	str("tls-key", &w.keyFile, c.TLSKey)
	str("public-url", &w.publicURL, c.PublicURL)
	l := &f.limits
	if c.CommandRate != 0 {
		set("command-rate", func() { l.commandRate = c.CommandRate })
	}
	if c.CommandBurst != 0 {
		set("command-burst", func() { l.commandBurst = c.CommandBurst })
	}
	dur("command-wait", &l.commandWait, c.CommandWait)
	if c.MaxSessionsPerConn != 0 {
		set("max-sessions-per-conn", func() { l.maxSessions = c.MaxSessionsPerConn })
	}
	if c.MaxPendingPerAgent != 0 {
		set("max-pending-per-agent", func() { l.maxPendingPerAgent = c.MaxPendingPerAgent })
	}
	if c.MaxPendingPerConnection != 0 {
		set("max-pending-per-connection", func() { l.maxPendingPerConnection = c.MaxPendingPerConnection })
	}
	dur("handshake-timeout", &l.handshakeTimeout, c.HandshakeTimeout)
	if c.APIRate != 0 {
		set("api-rate", func() { l.apiRate = c.APIRate })
	}
	if c.APIBurst != 0 {
		set("api-burst", func() { l.apiBurst = c.APIBurst })
	}
	dur("session-lifetime", &l.sessionLifetime, c.SessionLifetime)
	dur("terminal-life", &l.terminalLife, c.TerminalLife)
	if c.RecordingBound != 0 {
		set("recording-bound", func() { l.recordingBound = c.RecordingBound })
	}
	dur("recording-retention", &l.recordingRetention, c.RecordingRetention)
	return nil
}

// check validates the flags that cobra cannot, as usage errors (exit 2),
// and returns the logger they ask for.
func (f *serveFlags) check(cmd *cobra.Command) (zerolog.Logger, error) {
	if f.approvalTTL <= 0 {
		return zerolog.Logger{}, usagef("%s: --approval-ttl must be positive, got %s", cmdPath(cmd), f.approvalTTL)
	}
	l := f.limits
	if l.commandBurst < 0 || l.maxSessions < 0 || l.handshakeTimeout < 0 || l.apiRate < 0 || l.apiBurst < 0 || l.sessionLifetime < 0 || l.terminalLife < 0 ||
		l.maxPendingPerAgent < 0 || l.maxPendingPerConnection < 0 || l.recordingBound < 0 {
		return zerolog.Logger{}, usagef("%s: a limit is negative (only --command-rate may be, for no limit, and --command-wait, for no wait)", cmdPath(cmd))
	}
	if l.recordingRetention <= 0 {
		return zerolog.Logger{}, usagef("%s: --recording-retention must be positive, got %s", cmdPath(cmd), l.recordingRetention)
	}
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return zerolog.Logger{}, usagef("%s: --ssh-listen %q: want HOST:PORT", cmdPath(cmd), f.listen)
	}
	if f.metricsListen != "" {
		if _, _, err := net.SplitHostPort(f.metricsListen); err != nil {
			return zerolog.Logger{}, usagef("%s: --metrics-listen %q: want HOST:PORT", cmdPath(cmd), f.metricsListen)
		}
	}
	return newLogger(cmd.ErrOrStderr(), f.logLevel)
}

// newLogger logs to w at level: human-readable lines when w is a terminal,
// one JSON object per line otherwise (for journald and log shippers).
func newLogger(w io.Writer, level string) (zerolog.Logger, error) {
	return newLoggerAt(w, level, time.Now)
}

// newLoggerAt is newLogger with the clock of the lines' times.
func newLoggerAt(w io.Writer, level string, now func() time.Time) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(strings.ToLower(level))
	if err != nil || level == "" {
		return zerolog.Logger{}, usagef("--log-level %q: want debug, info, warn or error", level)
	}
	if isTerminal(w) {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.TimeOnly}
	}
	return zerolog.New(w).Level(lvl).Hook(logTime{now: now}), nil
}

// logTimeLayout is the time of a log line: RFC 3339 in UTC with
// milliseconds. zerolog's Timestamp writes whole seconds unless its
// package-level TimeFieldFormat is changed, and whole seconds cannot order
// the many lines of one second (a decision, its relay, its audit).
const logTimeLayout = "2006-01-02T15:04:05.000Z07:00"

// logTime adds the time to each line as it is written.
type logTime struct{ now func() time.Time }

func (h logTime) Run(e *zerolog.Event, _ zerolog.Level, _ string) {
	e.Str(zerolog.TimestampFieldName, h.now().UTC().Format(logTimeLayout))
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// signalContext ends on SIGINT or SIGTERM. After the first signal the
// handler is removed, so that a second Ctrl-C during the shutdown grace kills
// the process at once, as an operator expects.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve agents over SSH, and admins over HTTPS with --http-listen",
		Long: `serve runs the bastion: agents connect over SSH with their registered keys,
and each command is classified, decided by the grants (waiting for an admin
on ask) and relayed to the target with the connection's sealed key.

With --http-listen it also serves the admin web page and the REST API over
HTTPS (TLS 1.2 or newer), with --tls-cert and --tls-key or else a
self-signed certificate kept in the data directory; its fingerprint and the
page's URL are logged at start. Admins log in with accounts made by
postern admin add; the API takes console tokens made by postern token add.
An agent waiting for approval is shown the approval's page. The same
listener answers GET /healthz and GET /readyz, without a login, for load
balancers.

With --metrics-listen it serves Prometheus metrics at /metrics over plain
HTTP on that address of its own, without a login: keep it internal.

SIGINT or SIGTERM stops accepting agents and lets running sessions finish
for up to ` + bastion.DefaultShutdownGrace.String() + `; a second signal stops at once.`,
		Args: exactArgs(0, "no arguments"),
	}
	data := addDataFlag(cmd)
	flags := addServeFlags(cmd)
	wflags := addWebFlags(cmd, "")
	hostKeyFile := addHostKeyFileFlag(cmd)
	cmd.Flags().StringVar(&flags.metricsListen, "metrics-listen", "",
		"address to serve Prometheus metrics on at /metrics, plain HTTP and unauthenticated: keep it internal (empty: none; port 0 picks a free port)")
	cmd.Flags().DurationVar(&flags.keyCheckTimeout, "key-check-timeout", recipes.DefaultCheckTimeout,
		"bound on a key check, and on fetching a host key, that the web page or the API runs")
	headInterval := cmd.Flags().Duration("audit-head-interval", defaultAuditHeadInterval,
		"how often to publish the audit head (the newest row's SEQ:HASH) to the log and the metrics, besides at start and shutdown, to keep elsewhere for audit verify --from (0: never)")
	cmd.Flags().StringArrayVar(&flags.auditSinks, "audit-sink", nil,
		"ship every audit row, in order and at least once, to [NAME=]URL: syslog+tcp://HOST:PORT, jsonl:///PATH[?max_size=100MiB&keep=5] or http(s)://COLLECTOR/PATH; NAME (default: the URL without its query) keys the sink's cursor in the database (repeatable; docs/deploy.md)")
	lease := cmd.Flags().Duration("replica-lease", policy.DefaultReplicaLease,
		"with several serve on one PostgreSQL database: how long a replica that stopped renewing its registration is taken to be still running its operations; after that another replica audits them as interrupted")
	configPath := addConfigFlag(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := applyServeConfig(cmd, *configPath, data, flags, wflags); err != nil {
			return err
		}
		log, err := flags.check(cmd)
		if err != nil {
			return err
		}
		publicURL, err := wflags.check(cmd)
		if err != nil {
			return err
		}
		if *lease <= 0 {
			return usagef("%s: --replica-lease must be positive, got %s", cmdPath(cmd), *lease)
		}
		if *headInterval < 0 {
			return usagef("%s: --audit-head-interval must not be negative, got %s", cmdPath(cmd), *headInterval)
		}
		sinks, err := parseAuditSinks(flags.auditSinks)
		if err != nil {
			return usagef("%s: --audit-sink: %w", cmdPath(cmd), err)
		}
		if flags.keyCheckTimeout <= 0 {
			return usagef("%s: --key-check-timeout must be positive, got %s", cmdPath(cmd), flags.keyCheckTimeout)
		}
		if err := data.check(); err != nil {
			return err
		}
		ctx, stop := signalContext(cmd.Context())
		defer stop()

		d := data.storeDir()
		d.HostKeyFile = *hostKeyFile
		data.log = &log
		hostKey, err := d.HostKey()
		if err != nil {
			return storeErr(err)
		}
		// One serve per SQLite data directory: a second one would audit
		// the first one's running operations as interrupted. Replicas on
		// PostgreSQL may share a directory (the master key and host key):
		// their journal rows name their replica (policy/replica.go).
		if d.DatabaseURL == "" {
			lock, err := d.Lock()
			if err != nil {
				return lockErr("serve", d, err)
			}
			defer lock.Unlock()
		}
		st, err := d.Open(ctx, data.options()) // data.check ran above
		if err != nil {
			return storeErr(err)
		}
		// The store is closed last, after the bastion, the web page and the
		// policy engine that use it.
		defer closeStore(st, log)
		if err := st.CheckMasterKey(); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		ln, err := net.Listen("tcp", flags.listen)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		var mln net.Listener
		if flags.metricsListen != "" {
			if mln, err = net.Listen("tcp", flags.metricsListen); err != nil {
				ln.Close()
				return fmt.Errorf("serve: metrics: %w", err)
			}
		}
		closeEarly := func() {
			ln.Close()
			if mln != nil {
				mln.Close()
			}
		}
		hint := cliApproveHint
		var wp *webParams
		if wflags.listen != "" {
			wln, err := net.Listen("tcp", wflags.listen)
			if err != nil {
				closeEarly()
				return fmt.Errorf("serve: web: %w", err)
			}
			if wp, err = loadWeb(wln, wflags, publicURL, d.Path, time.Now()); err != nil {
				closeEarly()
				wln.Close()
				return fmt.Errorf("serve: %w", err)
			}
			hint = webApproveHint(wp.URL)
		}
		return runBastion(ctx, bastionParams{
			Store:           st,
			HostKey:         hostKey,
			Listener:        ln,
			Metrics:         mln,
			Web:             wp,
			ApprovalTTL:     flags.approvalTTL,
			ApproveHint:     hint,
			Logger:          log,
			DataDir:         d.Path,
			Database:        d.Database(),
			ReplicaLease:    *lease,
			KeyCheckTimeout: flags.keyCheckTimeout,
			Limits:          flags.limits,
			AuditHead:       *headInterval,
			AuditSinks:      sinks,
		})
	}
	return cmd
}

// lockErr says that the data directory is taken, naming the holder's pid.
func lockErr(cmd string, d store.Dir, err error) error {
	var le *store.LockedError
	if !errors.As(err, &le) {
		return fmt.Errorf("%s: %w", cmd, err)
	}
	holder := "another process"
	if le.PID > 0 {
		holder = fmt.Sprintf("process %d", le.PID)
	}
	return fmt.Errorf("%s: the data directory %s is in use by %s (a postern serve or demo; it holds %s): one runs per data directory",
		cmd, d.Path, holder, le.Path)
}

// closeStore closes st at the end of serve or demo, logging a failure: by
// then the outcome of the command is decided.
func closeStore(st *store.Store, log zerolog.Logger) {
	if err := st.Close(); err != nil {
		log.Error().Err(err).Msg("close store")
	}
}

// bastionParams is what runBastion needs; serve and demo fill it.
type bastionParams struct {
	Store    *store.Store
	HostKey  ssh.Signer
	Listener net.Listener // runBastion owns it from here on
	Web      *webParams   // the admin web page; none if nil
	// Metrics is the listener of /metrics; none if nil. runBastion owns
	// it from here on.
	Metrics     net.Listener
	ApprovalTTL time.Duration
	ApproveHint func(id string) string // the bastion's default if nil
	Logger      zerolog.Logger
	DataDir     string     // for the start log line
	Database    string     // the same, without a password
	Limits      limitFlags // zero fields keep the defaults
	// ReplicaLease is the lease of this process's registration as a
	// replica of the database (policy.DefaultReplicaLease if zero).
	ReplicaLease time.Duration
	// KeyCheckTimeout bounds the key checks and host key fetches of the
	// web page and the API (recipes.DefaultCheckTimeout if zero).
	KeyCheckTimeout time.Duration
	// AuditHead is how often the audit head is published, besides at
	// start and at shutdown (headPublisher); never if zero.
	AuditHead time.Duration
	// AuditSinks are where every audit row is shipped (auditsinks.go).
	AuditSinks []auditsink.Spec
}

// addHostKeyFileFlag registers --host-key-file: replicas behind one load
// balancer share one host key, so that agents see one host.
func addHostKeyFileFlag(cmd *cobra.Command) *string {
	return cmd.Flags().String("host-key-file", "",
		"the bastion's SSH host key (OpenSSH private key file); the data directory's "+store.HostKeyFile+" if empty. Replicas behind one load balancer must share one")
}

// runBastion builds the policy engine and the bastion over p.Store, and the
// web page when p.Web is set, sharing the one engine so that a decision on
// the page wakes the waiting session at once. It serves until ctx ends (a
// signal) or any server fails, which stops the others too: half a postern
// (agents waiting on approvals nobody can open, or a page for a bastion
// that is gone) must exit for a supervisor to see. Running sessions get
// bastion.DefaultShutdownGrace (see serveUntil). It returns nil after a
// clean shutdown, else the first server's failure, the cause of the
// shutdown. The caller closes the store.
func runBastion(ctx context.Context, p bastionParams) error {
	log := p.Logger
	closeListeners := func() {
		p.Listener.Close()
		if p.Web != nil {
			p.Web.Listener.Close()
		}
		if p.Metrics != nil {
			p.Metrics.Close()
		}
	}
	// The collectors exist only when something serves them; a nil
	// *metrics.Metrics records nothing.
	var reg *prometheus.Registry
	var m *metrics.Metrics
	if p.Metrics != nil {
		var err error
		if reg, m, err = newMetrics(); err != nil {
			closeListeners()
			return fmt.Errorf("serve: %w", err)
		}
		if err := watchReadSandboxes(m, p.Store); err != nil {
			closeListeners()
			return fmt.Errorf("serve: %w", err)
		}
		if err := watchHealth(m, p.Store); err != nil {
			closeListeners()
			return fmt.Errorf("serve: %w", err)
		}
	}
	host, _ := os.Hostname()
	eng, err := policy.New(policy.Options{Store: p.Store, ApprovalLifetime: p.ApprovalTTL, Logger: &log, Metrics: m,
		MaxPendingPerAgent: p.Limits.maxPendingPerAgent, MaxPendingPerConnection: p.Limits.maxPendingPerConnection,
		Replica: &policy.ReplicaOptions{Host: host, PID: os.Getpid(), Lease: p.ReplicaLease,
			// SQLite's data directory is served by one process: what a
			// previous run left is recovered at once. On PostgreSQL other
			// replicas may be running theirs.
			Exclusive: !p.Store.Postgres()}})
	if err != nil {
		closeListeners()
		return fmt.Errorf("serve: %w", err)
	}
	defer func() {
		if err := eng.Close(); err != nil {
			log.Error().Err(err).Msg("close policy engine")
		}
	}()
	// Operations a previous run let through and did not see end (it was
	// killed while they ran) are audited as failed before anything new
	// starts: on SQLite every one left, on PostgreSQL those of replicas
	// whose lease ran out (the heartbeat recovers the others' later).
	if n, err := eng.RecoverInterrupted(ctx); err != nil {
		closeListeners()
		return fmt.Errorf("serve: %w", err)
	} else if n > 0 {
		log.Warn().Int("operations", n).Msg("audited operations that a previous run did not see end as failed")
	}
	st := p.Store
	srv, err := bastion.New(bastion.Config{
		Store:              st,
		Policy:             eng,
		HostKey:            p.HostKey,
		Logger:             log,
		ApproveHint:        p.ApproveHint,
		CommandRate:        p.Limits.commandRate,
		CommandBurst:       p.Limits.commandBurst,
		CommandWait:        p.Limits.commandWait,
		MaxSessionsPerConn: p.Limits.maxSessions,
		HandshakeTimeout:   p.Limits.handshakeTimeout,
		TerminalLife:       p.Limits.terminalLife,
		RecordingBound:     p.Limits.recordingBound,
		Metrics:            m,
		Upstream: bastion.PoolOptions{
			Signer: func(ctx context.Context, c *store.Connection) (ssh.Signer, error) {
				return st.ConnectionSigner(ctx, c.ID)
			},
			Logger: log,
		},
	})
	if err != nil {
		closeListeners()
		return fmt.Errorf("serve: %w", err)
	}
	// The notification dispatcher delivers what the outbox holds, whichever
	// process queued it (this one, the CLI, another postern).
	baseURL := ""
	if p.Web != nil {
		baseURL = p.Web.URL
	}
	notifier, err := notify.New(notify.Config{Store: st, BaseURL: baseURL, Logger: log, Metrics: m})
	if err != nil {
		closeListeners()
		return fmt.Errorf("serve: %w", err)
	}
	var ws *web.Server
	if p.Web != nil {
		mgr, err := newManager(st, p.Web.Catalog, p.KeyCheckTimeout)
		if err != nil {
			closeListeners()
			return fmt.Errorf("serve: %w", err)
		}
		ws, err = web.New(web.Config{
			Store:           st,
			Engine:          eng,
			Catalog:         p.Web.Catalog,
			Manager:         mgr,
			Notifier:        notifier,
			Logger:          log,
			APIRate:         p.Limits.apiRate,
			APIBurst:        p.Limits.apiBurst,
			SessionLifetime: p.Limits.sessionLifetime,
		})
		if err != nil {
			closeListeners()
			return fmt.Errorf("serve: %w", err)
		}
	}
	notifyCtx, stopNotify := context.WithCancel(ctx)
	notifyDone := make(chan struct{})
	go func() {
		defer close(notifyDone)
		notifier.Run(notifyCtx)
	}()
	// Runs before the engine closes, and before the caller closes the store.
	defer func() {
		stopNotify()
		<-notifyDone
	}()

	var sinks *auditSinks
	if len(p.AuditSinks) > 0 {
		if sinks, err = newAuditSinks(p.AuditSinks, st, eng.ReplicaID(), log, m); err != nil {
			closeListeners()
			return err
		}
	}

	log.Info().
		Str("addr", p.Listener.Addr().String()).
		Str("data", p.DataDir).
		Str("database", p.Database).
		Str("replica", eng.ReplicaID()).
		Str("host_key", ssh.FingerprintSHA256(p.HostKey.PublicKey())).
		Str("approval_ttl", p.ApprovalTTL.String()).
		Int("max_pending_per_agent", eng.PendingLimits().PerAgent).
		Int("max_pending_per_connection", eng.PendingLimits().PerConnection).
		Str("key_check_timeout", p.KeyCheckTimeout.String()).
		Msg("postern serving")
	// The bastion, the web page and the metrics listener serve as one
	// group: the first of them to fail ends the others (through gctx), as
	// does the signal, and runBastion returns once all three have stopped,
	// before the notifier, the engine and the store close.
	g, gctx := errgroup.WithContext(ctx)
	if ws != nil {
		g.Go(func() error {
			err := ws.Serve(gctx, p.Web.Listener, p.Web.Cert.TLS)
			if err == nil && gctx.Err() == nil {
				err = errWebStopped
			}
			return err
		})
		log.Info().
			Str("url", p.Web.URL).
			Str("addr", p.Web.Listener.Addr().String()).
			Str("tls_fingerprint", p.Web.Cert.Fingerprint).
			Bool("self_signed", p.Web.Cert.SelfSigned).
			Str("cert_file", p.Web.Cert.CertFile).
			Msg("web page serving")
	}
	if p.Metrics != nil {
		g.Go(func() error { return metrics.Serve(gctx, p.Metrics, reg) })
		log.Info().Str("url", "http://"+p.Metrics.Addr().String()+"/metrics").Msg("metrics serving")
	}
	g.Go(func() error { return serveUntil(gctx, srv, p.Listener, bastion.DefaultShutdownGrace, log) })
	// The audit head publisher runs beside the group, not in it (it never
	// fails), and ends with it; its last head is published once the
	// sessions have ended and written their rows, before the store closes.
	var heads *headPublisher
	headsDone := make(chan struct{})
	if p.AuditHead > 0 {
		heads = &headPublisher{src: st, log: log, metrics: m, interval: p.AuditHead}
		go func() {
			defer close(headsDone)
			heads.run(gctx)
		}()
	} else {
		close(headsDone)
	}
	// The recording sweep runs beside the group too, and ends with it.
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		if p.Limits.recordingRetention > 0 {
			newRecordingSweeper(st, log, p.Limits.recordingRetention).run(gctx)
		}
	}()
	// The audit sinks ship beside the group too, and once it has stopped
	// they ship the sessions' last rows, within auditSinkFinalTimeout.
	sinksDone := make(chan struct{})
	if sinks != nil {
		go func() {
			defer close(sinksDone)
			sinks.run(gctx)
		}()
	} else {
		close(sinksDone)
	}
	err = g.Wait()
	<-sweepDone
	<-headsDone // g.Wait has ended gctx
	<-sinksDone
	if heads != nil {
		heads.publishFinal(ctx)
	}
	if sinks != nil {
		sinks.flush(ctx)
	}
	// runBastion owns the listeners it was given: each is closed when it
	// returns, whichever moment the group stopped in. A server whose
	// goroutine had not yet begun to serve when another failed never took
	// its listener (seen in CI: the bastion's stayed open after the metrics
	// listener failed at once).
	closeListeners()
	return err
}

// newMetrics is serve's registry, its own and not the process-global one:
// postern's collectors, and the Go runtime's and the process's (memory,
// goroutines, file descriptors) that every Go service exports.
func newMetrics() (*prometheus.Registry, *metrics.Metrics, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	m, err := metrics.New(reg)
	if err != nil {
		return nil, nil, err
	}
	return reg, m, nil
}

// agentServer is the part of *bastion.Server that serveUntil drives; tests
// give it a fake to pin the shutdown logic without a bastion.
type agentServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}

// serveUntil serves on ln until ctx ends, then shuts srv down with grace for
// running sessions. It returns nil after a clean shutdown, including one
// where the grace ran out and sessions were cut, and an error when Serve
// stopped on its own: agents can no longer connect, so postern must exit
// non-zero for a supervisor to see.
func serveUntil(ctx context.Context, srv agentServer, ln net.Listener, grace time.Duration, log zerolog.Logger) error {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err := <-served:
		ln.Close()
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		defer cancel()
		if serr := srv.Shutdown(sctx); serr != nil {
			log.Error().Err(serr).Msg("shutdown after serve failed")
		}
		if err == nil || errors.Is(err, bastion.ErrServerClosed) {
			err = errors.New("stopped without being asked to")
		}
		return fmt.Errorf("serve: bastion: %w", err)
	case <-ctx.Done():
	}

	log.Info().Str("grace", grace.String()).Msg("shutting down: no new agents; running sessions may finish (signal again to stop at once)")
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	shutErr := srv.Shutdown(sctx)
	var serveErr error
	select {
	case serveErr = <-served:
	case <-time.After(grace):
		// Shutdown has closed everything; a Serve that still has not
		// returned must not keep postern up.
		serveErr = errors.New("the bastion kept serving after Shutdown")
	}
	switch {
	case errors.Is(shutErr, context.DeadlineExceeded):
		log.Warn().Msg("shutdown grace ended; remaining sessions were closed")
	case shutErr != nil:
		return fmt.Errorf("serve: shutdown: %w", shutErr)
	}
	if serveErr != nil && !errors.Is(serveErr, bastion.ErrServerClosed) {
		return fmt.Errorf("serve: bastion: %w", serveErr)
	}
	log.Info().Msg("postern stopped")
	return nil
}
