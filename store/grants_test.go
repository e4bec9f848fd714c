package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidateGrant(t *testing.T) {
	tests := []struct {
		name    string
		env     Env
		rules   Rules
		wantErr string
	}{
		{"default dev", EnvDev, DefaultRules(), ""},
		{"default production", EnvProduction, DefaultRules(), ""},
		{"all allow on staging", EnvStaging, Rules{RuleAllow, RuleAllow, RuleAllow}, ""},
		{"destructive ask on production", EnvProduction, Rules{RuleAllow, RuleAllow, RuleAsk}, ""},
		{"destructive allow on production", EnvProduction, Rules{RuleAllow, RuleAllow, RuleAllow}, "not permitted on a production connection"},
		{"bad word", EnvDev, Rules{"yes", RuleDeny, RuleDeny}, `read rule "yes"`},
		{"empty word", EnvDev, Rules{RuleAllow, "", RuleDeny}, `write rule ""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateGrant(tt.env, tt.rules)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("got %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("got %v; want ErrInvalid containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseRule(t *testing.T) {
	for _, w := range []string{"allow", "ask", "deny"} {
		if r, err := ParseRule(w); err != nil || string(r) != w {
			t.Errorf("ParseRule(%q): got %q, %v", w, r, err)
		}
	}
	for _, w := range []string{"", "Allow", "yes", "allow "} {
		if _, err := ParseRule(w); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRule(%q): got %v; want ErrInvalid", w, err)
		}
	}
}

func TestSetGrant(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, clock, _ := openTestStore(t)
		agent, _ := mustCreateAgent(t, s, "bot")
		web, _ := mustCreateConnection(t, s, "web", EnvDev)
		prod, _ := mustCreateConnection(t, s, "prod", EnvProduction)

		g, err := s.SetGrant(ctx, Unaudited(), "bot", "web", DefaultRules())
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(g.ID, "gra_") || g.AgentID != agent.ID || g.ConnectionID != web.ID ||
			g.AgentName != "bot" || g.Alias != "web" || g.Env != EnvDev || g.Rules != DefaultRules() {
			t.Errorf("got %+v", g)
		}

		clock.Advance(time.Minute)
		all := Rules{RuleAllow, RuleAsk, RuleAllow}
		g2, err := s.SetGrant(ctx, Unaudited(), "bot", "web", all)
		if err != nil {
			t.Fatal(err)
		}
		if g2.ID != g.ID || g2.Rules != all || !g2.CreatedAt.Equal(g.CreatedAt) || !g2.ModifiedAt.After(g.ModifiedAt) {
			t.Errorf("update: got %+v; want same id and created_at, new rules and modified_at", g2)
		}

		errTests := []struct {
			name, agent, alias string
			rules              Rules
			want               error
		}{
			{"production destructive allow", "bot", "prod", all, ErrInvalid},
			{"unknown agent", "nobody", "web", DefaultRules(), ErrNotFound},
			{"unknown connection", "bot", "nowhere", DefaultRules(), ErrNotFound},
			{"bad rule", "bot", "web", Rules{"maybe", RuleDeny, RuleDeny}, ErrInvalid},
		}
		for _, tt := range errTests {
			t.Run(tt.name, func(t *testing.T) {
				if _, err := s.SetGrant(ctx, Unaudited(), tt.agent, tt.alias, tt.rules); !errors.Is(err, tt.want) {
					t.Fatalf("got %v; want %v", err, tt.want)
				}
			})
		}
		if got, _ := s.GrantByNames(ctx, "bot", "web"); got == nil || got.Rules != all {
			t.Errorf("refused updates changed the grant: %+v", got)
		}

		if _, err := s.SetGrant(ctx, Unaudited(), "bot", "prod", Rules{RuleAllow, RuleAsk, RuleAsk}); err != nil {
			t.Fatal(err)
		}
		gs, err := s.GrantsForAgent(ctx, agent.ID)
		if err != nil || len(gs) != 2 || gs[0].Alias != "prod" || gs[1].Alias != "web" || gs[0].Env != EnvProduction {
			t.Fatalf("GrantsForAgent: got %+v, %v; want prod (production), web", gs, err)
		}
		got, err := s.GrantFor(ctx, agent.ID, prod.ID)
		if err != nil || got.Alias != "prod" {
			t.Fatalf("GrantFor: got %+v, %v", got, err)
		}

		if err := s.RevokeGrant(ctx, Unaudited(), "bot", "prod"); err != nil {
			t.Fatal(err)
		}
		if err := s.RevokeGrant(ctx, Unaudited(), "bot", "prod"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second revoke: got %v; want ErrNotFound", err)
		}
		if _, err := s.GrantFor(ctx, agent.ID, prod.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("GrantFor after revoke: got %v; want ErrNotFound", err)
		}
	})
}
