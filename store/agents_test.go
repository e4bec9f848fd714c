package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func TestCreateAgent(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openTestStore(t)
		kp := newTestKeyPair(t, "ci@runner")
		a, err := s.CreateAgent(ctx, Unaudited(), "ci-bot", "  "+kp.authorized+"\n")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(a.ID, "agt_") || len(a.ID) != len("agt_")+16 {
			t.Errorf("id: got %q; want agt_ and 16 characters", a.ID)
		}
		if a.Name != "ci-bot" || a.Disabled {
			t.Errorf("got name %q disabled %v; want ci-bot false", a.Name, a.Disabled)
		}
		if !a.CreatedAt.Equal(clock.Now()) || !a.ModifiedAt.Equal(clock.Now()) {
			t.Errorf("times: got %v %v; want %v", a.CreatedAt, a.ModifiedAt, clock.Now())
		}
		if len(a.Keys) != 1 {
			t.Fatalf("keys: got %d; want 1", len(a.Keys))
		}
		wantFP := ssh.FingerprintSHA256(kp.signer.PublicKey())
		if a.Keys[0].Fingerprint != wantFP || a.Keys[0].AuthorizedKey != kp.authorized {
			t.Errorf("key: got %q %q; want %q %q", a.Keys[0].Fingerprint, a.Keys[0].AuthorizedKey, wantFP, kp.authorized)
		}

		got, err := s.AgentByFingerprint(ctx, wantFP)
		if err != nil || got.ID != a.ID {
			t.Fatalf("AgentByFingerprint: got %v, %v; want %s", got, err, a.ID)
		}
	})
}

func TestCreateAgentErrors(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, _ := openTestStore(t)
		_, taken := mustCreateAgent(t, s, "taken")
		fresh := newTestKeyPair(t, "")
		tests := []struct {
			name    string
			agent   string
			key     string
			want    error
			wantMsg string
		}{
			{"duplicate name", "taken", fresh.authorized, ErrDuplicate, "agent taken already exists"},
			{"key of another agent", "other", taken.authorized, ErrDuplicate, "of agent taken"},
			{"empty name", "", fresh.authorized, ErrInvalid, "agent name"},
			{"name with space", "a b", fresh.authorized, ErrInvalid, "agent name"},
			{"name starting with dash", "-x", fresh.authorized, ErrInvalid, "agent name"},
			{"empty key", "x", "", ErrInvalid, "empty"},
			{"garbage key", "x", "ssh-ed25519 not-base64!", ErrInvalid, "malformed"},
			{"private key", "x", string(fresh.privatePEM), ErrInvalid, "private key"},
			{"two keys", "x", fresh.authorized + "\n" + taken.authorized, ErrInvalid, "one public key"},
			{"options", "x", `command="true" ` + fresh.authorized, ErrInvalid, "options"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := s.CreateAgent(ctx, Unaudited(), tt.agent, tt.key)
				if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.wantMsg) {
					t.Fatalf("got %v; want %v containing %q", err, tt.want, tt.wantMsg)
				}
				if !strings.HasPrefix(err.Error(), "store: ") {
					t.Errorf("got %q; want a 'store: ' prefix", err)
				}
				if strings.Contains(err.Error(), "PRIVATE KEY") {
					t.Errorf("error quotes the private key: %q", err)
				}
			})
		}
		as, err := s.ListAgents(ctx)
		if err != nil || len(as) != 1 {
			t.Fatalf("agents after failures: got %d, %v; want 1", len(as), err)
		}
		var conflict *ConflictError
		_, err = s.CreateAgent(ctx, Unaudited(), "taken", fresh.authorized)
		if !errors.As(err, &conflict) || conflict.Kind != "agent" || conflict.Value != "taken" {
			t.Errorf("got %#v; want *ConflictError{agent taken}", err)
		}
	})
}

func TestAgentKeys(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openTestStore(t)
		a, first := mustCreateAgent(t, s, "bot")
		second := newTestKeyPair(t, "laptop")
		clock.Advance(time.Minute)
		a2, err := s.AddAgentKey(ctx, Unaudited(), "bot", second.authorized)
		if err != nil {
			t.Fatal(err)
		}
		if len(a2.Keys) != 2 || !a2.ModifiedAt.After(a.ModifiedAt) {
			t.Fatalf("got %d keys, modified %v; want 2 keys, modified after %v", len(a2.Keys), a2.ModifiedAt, a.ModifiedAt)
		}
		for _, kp := range []testKeyPair{first, second} {
			got, err := s.AgentByFingerprint(ctx, ssh.FingerprintSHA256(kp.signer.PublicKey()))
			if err != nil || got.Name != "bot" {
				t.Errorf("AgentByFingerprint: got %v, %v; want bot", got, err)
			}
		}
		if _, err := s.AddAgentKey(ctx, Unaudited(), "bot", second.authorized); !errors.Is(err, ErrDuplicate) {
			t.Errorf("adding the same key twice: got %v; want ErrDuplicate", err)
		}
		if _, err := s.AddAgentKey(ctx, Unaudited(), "nobody", newTestKeyPair(t, "").authorized); !errors.Is(err, ErrNotFound) {
			t.Errorf("key for unknown agent: got %v; want ErrNotFound", err)
		}

		fp1 := ssh.FingerprintSHA256(first.signer.PublicKey())
		a3, err := s.RemoveAgentKey(ctx, Unaudited(), "bot", fp1)
		if err != nil || len(a3.Keys) != 1 {
			t.Fatalf("RemoveAgentKey: got %v, %v; want one key left", a3, err)
		}
		if _, err := s.AgentByFingerprint(ctx, fp1); !errors.Is(err, ErrNotFound) {
			t.Errorf("removed key still finds the agent: %v", err)
		}
		fp2 := ssh.FingerprintSHA256(second.signer.PublicKey())
		if _, err := s.RemoveAgentKey(ctx, Unaudited(), "bot", fp2); !errors.Is(err, ErrInvalid) {
			t.Errorf("removing the last key: got %v; want ErrInvalid", err)
		}
		if got, _ := s.AgentByName(ctx, "bot"); got == nil || len(got.Keys) != 1 {
			t.Errorf("refused removal changed the keys: %+v", got)
		}
	})
}

func TestDisableAndRemoveAgent(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, _ := openTestStore(t)
		_, kp := mustCreateAgent(t, s, "bot")
		mustCreateConnection(t, s, "web", EnvDev)
		if _, err := s.SetGrant(ctx, Unaudited(), "bot", "web", DefaultRules()); err != nil {
			t.Fatal(err)
		}
		a, err := s.SetAgentDisabled(ctx, Unaudited(), "bot", true)
		if err != nil || !a.Disabled {
			t.Fatalf("disable: got %+v, %v", a, err)
		}
		got, err := s.AgentByFingerprint(ctx, ssh.FingerprintSHA256(kp.signer.PublicKey()))
		if err != nil || !got.Disabled {
			t.Fatalf("AgentByFingerprint of disabled agent: got %+v, %v; want it, Disabled", got, err)
		}
		if err := s.RemoveAgent(ctx, Unaudited(), "bot"); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveAgent(ctx, Unaudited(), "bot"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second remove: got %v; want ErrNotFound", err)
		}
		gs, err := s.ListGrants(ctx)
		if err != nil || len(gs) != 0 {
			t.Errorf("grants after removing the agent: got %d, %v; want 0 (cascade)", len(gs), err)
		}
		var n int
		s.db.QueryRow(`SELECT COUNT(*) FROM agent_keys`).Scan(&n)
		if n != 0 {
			t.Errorf("agent_keys after removing the agent: got %d; want 0", n)
		}
	})
}

func TestListAgentsOrder(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, _, _ := openTestStore(t)
		for _, n := range []string{"zeta", "alpha", "mid"} {
			mustCreateAgent(t, s, n)
		}
		s.AddAgentKey(context.Background(), Unaudited(), "mid", newTestKeyPair(t, "").authorized)
		as, err := s.ListAgents(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, a := range as {
			names = append(names, a.Name)
		}
		if got, want := strings.Join(names, ","), "alpha,mid,zeta"; got != want {
			t.Errorf("got %s; want %s", got, want)
		}
		if len(as[1].Keys) != 2 {
			t.Errorf("mid keys: got %d; want 2", len(as[1].Keys))
		}
	})
}
