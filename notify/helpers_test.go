package notify

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/postern/postern/internal/fakeclock"
	"github.com/postern/postern/internal/testkey"
	"github.com/postern/postern/internal/testpg"
	"github.com/postern/postern/internal/testwait"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/store"
)

// TestMain fails the package if a goroutine outlives its tests: Run's
// workers and every attempt's connection must end. It stops the tests'
// PostgreSQL server first.
func TestMain(m *testing.M) {
	os.Exit(testpg.Main(m, true, &testPG))
}

// testPG is the PostgreSQL server of this package's tests, started by the
// first test that needs it and stopped by TestMain; its databases are
// copies of a migrated one.
var testPG = testpg.Shared{Template: migratedTemplate}

// migratedTemplate runs the store's migrations on the template database.
func migratedTemplate(ctx context.Context, url string) error {
	s, err := store.OpenPostgres(ctx, url, store.Options{})
	if err != nil {
		return err
	}
	return s.Close()
}

// forEachDB runs fn on SQLite and on PostgreSQL (testpg.ForEachDB): newRig called
// inside uses that database.
func forEachDB(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	testpg.ForEachDB(t, fn)
}

// openRef opens the database ref names: a PostgreSQL URL or an SQLite file.
func openRef(ctx context.Context, ref string, opts store.Options) (*store.Store, error) {
	if store.IsPostgresURL(ref) {
		return store.OpenPostgres(ctx, ref, opts)
	}
	return store.Open(ctx, ref, opts)
}

// Secrets the tests give channels. None may appear in a log line, a
// stored error or a test result.
const (
	urlToken   = "Zq7urlTokenInThePath"
	queryToken = "Zq7queryToken"
	hmacSecret = "Zq7hmacSecretOfTheChannel"
	ntfyToken  = "tk_Zq7ntfyAccessToken"
)

// secrets lists the needles a leak check looks for.
func secrets() []string { return []string{urlToken, queryToken, hmacSecret, ntfyToken} }

// received is one request a receiver got.
type received struct {
	header http.Header
	body   []byte
	path   string
}

// receiver is a local HTTP server (httptest, on 127.0.0.1) standing in for
// a webhook. answer decides each response; got records every request and
// signals arrivals.
type receiver struct {
	srv *httptest.Server
	// mu guards answer and got.
	mu     sync.Mutex
	answer func(n int, w http.ResponseWriter, r *http.Request) // n counts requests from 1
	got    []received
	// arrived gets a value per request, before it is answered.
	arrived chan received
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{arrived: make(chan received, 1000)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rq := received{header: r.Header.Clone(), body: body, path: r.URL.RequestURI()}
		rc.mu.Lock()
		rc.got = append(rc.got, rq)
		n, answer := len(rc.got), rc.answer
		rc.mu.Unlock()
		rc.arrived <- rq
		if answer != nil {
			answer(n, w, r)
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// url is the receiver's URL with a token in its path and query, as real
// webhook URLs have.
func (rc *receiver) url() string {
	return rc.srv.URL + "/hook/" + urlToken + "?key=" + queryToken
}

func (rc *receiver) setAnswer(f func(n int, w http.ResponseWriter, r *http.Request)) {
	rc.mu.Lock()
	rc.answer = f
	rc.mu.Unlock()
}

// requests is a copy of what the receiver got so far.
func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// status answers every request with code.
func status(code int) func(int, http.ResponseWriter, *http.Request) {
	return func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(code) }
}

// logBuffer is a zerolog sink a test reads after the fact.
type logBuffer struct {
	// mu guards b.
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// rig is a store with an agent "bot" and a production connection "web",
// a clock, and a log buffer every dispatcher of the test writes to.
type rig struct {
	t     *testing.T
	clock *fakeclock.Clock
	st    *store.Store
	path  string
	agent *store.Agent
	conn  *store.Connection
	logs  *logBuffer
	// alice is the registered approver who decides the rig's requests.
	alice store.Decider
}

func testMasterKey() []byte {
	k := make([]byte, store.MasterKeySize)
	for i := range k {
		k[i] = byte(0x40 + i)
	}
	return k
}

func newRig(t *testing.T) *rig {
	t.Helper()
	ctx := context.Background()
	clock := fakeclock.New()
	path := filepath.Join(t.TempDir(), store.DatabaseFile)
	if slices.Contains(strings.Split(t.Name(), "/"), "postgres") {
		path = testPG.NewDatabase(t)
	}
	st, err := openRef(ctx, path, store.Options{Now: clock.Now, MasterKey: testMasterKey()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	r := &rig{t: t, clock: clock, st: st, path: path, logs: &logBuffer{}}
	alice, err := st.CreateAdmin(ctx, store.Unaudited(), "alice", "$argon2id$unused", store.RoleApprover)
	if err != nil {
		t.Fatal(err)
	}
	r.alice = store.Decider{AdminID: alice.ID, Name: alice.Name}
	if r.agent, err = st.CreateAgent(ctx, store.Unaudited(), "bot", testkey.New(t, "").Authorized); err != nil {
		t.Fatal(err)
	}
	key, host := testkey.New(t, ""), testkey.New(t, "")
	if r.conn, err = st.CreateConnection(ctx, store.Unaudited(), store.NewConnection{Alias: "web", Host: "127.0.0.1", Port: 2022,
		User: "deploy", PrivateKey: key.PrivatePEM, HostKeys: []string{"127.0.0.1 " + host.Authorized},
		Env: store.EnvProduction}); err != nil {
		t.Fatal(err)
	}
	return r
}

// secondStore opens the rig's database again, as another process would.
func (r *rig) secondStore() *store.Store {
	r.t.Helper()
	st, err := openRef(context.Background(), r.path, store.Options{Now: r.clock.Now, MasterKey: testMasterKey()})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { st.Close() })
	return st
}

// channel adds a channel.
func (r *rig) channel(nc store.NewNotifyChannel) *store.NotifyChannel {
	r.t.Helper()
	c, err := r.st.CreateNotifyChannel(context.Background(), store.Unaudited(), nc)
	if err != nil {
		r.t.Fatalf("CreateNotifyChannel(%s): %v", nc.Name, err)
	}
	return c
}

// ask stores a pending request of bot on web that lives for lifetime.
func (r *rig) ask(text string, lifetime time.Duration) store.Approval {
	r.t.Helper()
	a, _, err := r.st.RequestApproval(context.Background(), store.Approval{AgentID: r.agent.ID,
		ConnectionID: r.conn.ID, Class: "destructive", Kind: "exec", Operation: policy.Redact(text),
		Reasons: "rm deletes files", OperationSHA256: policy.OperationHash(text), ApprovalsNeeded: 1}, lifetime)
	if err != nil {
		r.t.Fatal(err)
	}
	return a
}

// decide records alice's decision of request id.
func (r *rig) decide(id string, approve bool, reason string) (store.Approval, store.DecideOutcome, error) {
	return r.st.DecideApproval(context.Background(), store.Decision{ID: id, Approve: approve,
		By: r.alice, Reason: reason})
}

// dispatcher makes a dispatcher over st (the rig's store if nil) with the
// rig's clock, no jitter and a short attempt timeout, edited by edit.
func (r *rig) dispatcher(st Store, edit func(*Config)) *Dispatcher {
	r.t.Helper()
	if st == nil {
		st = r.st
	}
	cfg := Config{Store: st, BaseURL: "https://postern.example:8443", Now: r.clock.Now,
		// An attempt's timeout is the test's remaining time: a receiver on
		// loopback that answers must never be cut short by a busy machine.
		// The tests of the timeout set their own.
		Logger: zerolog.New(r.logs), Timeout: testwait.Remaining(r.t), Jitter: func(d time.Duration) time.Duration { return d }}
	if edit != nil {
		edit(&cfg)
	}
	d, err := New(cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	return d
}

// deliverDue runs one round, bounded by the test's deadline.
func (r *rig) deliverDue(d *Dispatcher) int {
	r.t.Helper()
	n, err := d.DeliverDue(testwait.Context(r.t))
	if err != nil {
		r.t.Fatalf("DeliverDue: %v", err)
	}
	return n
}

// outbox is the approval's outbox rows by event.
func (r *rig) outbox(approvalID string) map[store.NotifyEvent]store.Notification {
	r.t.Helper()
	ns, err := r.st.NotificationsOf(context.Background(), approvalID)
	if err != nil {
		r.t.Fatal(err)
	}
	out := map[store.NotifyEvent]store.Notification{}
	for _, n := range ns {
		out[n.Event] = n
	}
	return out
}

// checkNoSecrets fails if any secret is in what.
func checkNoSecrets(t *testing.T, place, what string) {
	t.Helper()
	for _, s := range secrets() {
		if strings.Contains(what, s) {
			t.Errorf("%s holds a channel secret (%s…)", place, s[:6])
		}
	}
}

// checkStoredNoSecrets searches the rig's log, every channel's last error
// and every outbox row's error for the secrets.
func (r *rig) checkStoredNoSecrets() {
	r.t.Helper()
	ctx := context.Background()
	checkNoSecrets(r.t, "the log", r.logs.String())
	chs, err := r.st.ListNotifyChannels(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, c := range chs {
		checkNoSecrets(r.t, "channel "+c.Name, c.LastError+" "+c.URLShown)
	}
	ns, err := r.st.ListNotifications(ctx, 1000)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, n := range ns {
		checkNoSecrets(r.t, "notification "+n.ID, n.LastError)
	}
}
