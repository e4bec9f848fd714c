package config

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/postern/postern/internal/testkey"
	"github.com/postern/postern/manage"
	"github.com/postern/postern/policy"
	"github.com/postern/postern/recipes"
	"github.com/postern/postern/store"
)

// fakeChecker answers key checks without dialing.
type fakeChecker struct{ result recipes.Result }

func (f *fakeChecker) Check(context.Context, recipes.Target, ssh.Signer, *recipes.Recipe) recipes.Result {
	return f.result
}

// rig is a manager over a fresh SQLite store, a directory of the files a
// test's config names, and the key pairs its placeholders name:
//
//	{a1} {a2}        agents' public key lines; {a1.fp} their fingerprints
//	{h1} {h2}        host key lines; {h1.fp}; ScanHostKey answers h1
//	c1.key c2.key    connections' private key files; {c1.fp}
//
// and the files ops.secret, other.secret, ops.url and other.url, in {dir}.
type rig struct {
	t     *testing.T
	m     *manage.Manager
	st    *store.Store
	chk   *fakeChecker
	dir   string
	path  string // the store's database
	mk    []byte // its master key
	keys  map[string]testkey.Pair
	subst *strings.Replacer
}

const (
	opsURL      = "https://hooks.example.com/services/T0/B0/hook-token-4711"
	otherURL    = "https://ntfy.example.com/alerts-token-0815"
	opsSecret   = "ops-signing-secret"
	otherSecret = "other-signing-secret"
)

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{t: t, dir: t.TempDir(), keys: map[string]testkey.Pair{},
		chk: &fakeChecker{result: recipes.Result{Status: recipes.StatusOK, Message: "ran true"}}}
	var pairs []string
	for _, name := range []string{"a1", "a2", "h1", "h2", "c1", "c2"} {
		k := testkey.New(t, "")
		r.keys[name] = k
		pairs = append(pairs, "{"+name+"}", k.Authorized, "{"+name+".fp}", ssh.FingerprintSHA256(k.Public))
	}
	pairs = append(pairs, "{dir}", r.dir)
	r.subst = strings.NewReplacer(pairs...)
	r.write("c1.key", string(r.keys["c1"].PrivatePEM))
	r.write("c2.key", string(r.keys["c2"].PrivatePEM))
	r.write("ops.secret", opsSecret+"\n")
	r.write("other.secret", otherSecret+"\n")
	r.write("ops.url", opsURL+"\n")
	r.write("other.url", otherURL+"\n")
	r.mk = bytes.Repeat([]byte{7}, store.MasterKeySize)
	r.path = filepath.Join(r.dir, store.DatabaseFile)
	r.open(r.mk)
	return r
}

// open opens the rig's store with master key mk.
func (r *rig) open(mk []byte) {
	r.t.Helper()
	st, err := store.Open(context.Background(), r.path, store.Options{MasterKey: mk})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { st.Close() })
	cat, err := recipes.Load()
	if err != nil {
		r.t.Fatal(err)
	}
	hostKey := r.keys["h1"].Public
	m, err := manage.New(manage.Config{Store: st, Catalog: cat, Checker: r.chk,
		ScanHostKey: func(context.Context, string) (ssh.PublicKey, error) { return hostKey, nil }})
	if err != nil {
		r.t.Fatal(err)
	}
	r.st, r.m = st, m
}

// reopen closes the store and opens it again with another master key: the
// sealed keys, URLs and secrets no longer open.
func (r *rig) reopenWithOtherKey() {
	r.t.Helper()
	r.st.Close()
	r.open(bytes.Repeat([]byte{9}, store.MasterKeySize))
}

// write writes a file into the rig's directory.
func (r *rig) write(name, content string) string {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// expand replaces the placeholders in s.
func (r *rig) expand(s string) string { return r.subst.Replace(s) }

// load writes conf (placeholders expanded) as postern.toml and loads it.
func (r *rig) load(conf string) (*File, error) {
	r.t.Helper()
	return Load(r.write("postern.toml", r.expand(conf)))
}

// apply loads conf and applies it, and returns what Apply printed.
func (r *rig) apply(conf string, opts Options) (string, *Result, error) {
	r.t.Helper()
	f, err := r.load(conf)
	if err != nil {
		return "", nil, err
	}
	var out bytes.Buffer
	opts.Out = &out
	if opts.Actor.Name == "" {
		// The CLI's OS user: an owner who is no registered admin.
		opts.Actor = policy.Actor{Name: "cli:test", Via: "apply", Role: store.RoleOwner}
	}
	res, err := Apply(context.Background(), r.m, f, opts)
	return out.String(), res, err
}

// mustApply applies conf and fails the test unless every change is made.
func (r *rig) mustApply(conf string, opts Options) string {
	r.t.Helper()
	out, res, err := r.apply(conf, opts)
	if err != nil {
		r.t.Fatalf("apply: %v\n%s", err, r.expand(conf))
	}
	if res.Failed != 0 || res.Done != res.Planned {
		r.t.Fatalf("apply: %+v; want every change made\n%s", res, out)
	}
	return out
}

// planLines is an ErrInvalid's lines after its first.
func planLines(t *testing.T, err error) []string {
	t.Helper()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("got error %v; want ErrInvalid", err)
	}
	lines := strings.Split(err.Error(), "\n")
	for i := range lines {
		lines[i] = strings.TrimPrefix(lines[i], "  ")
	}
	return lines[1:]
}

// diffLines reports the lines of got and want that differ.
func diffLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") == strings.Join(want, "\n") {
		return
	}
	t.Errorf("%s:\ngot:\n\t%s\nwant:\n\t%s", what, strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
}
