package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"
	"time"
)

func TestRecentDecidedApprovals(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		s, clk, _ := openDecidingStore(t)
		ctx := context.Background()
		agent, _ := mustCreateAgent(t, s, "bot")
		conn, _ := mustCreateConnection(t, s, "web", "dev")
		var ids []string
		for i := range 5 {
			text := fmt.Sprintf("rm /tmp/%d", i)
			sum := sha256.Sum256([]byte(text))
			a, _, err := s.RequestApproval(ctx, Approval{AgentID: agent.ID, ConnectionID: conn.ID, Class: "destructive",
				Kind: "exec", Operation: text, Reasons: "rm removes files", OperationSHA256: hex.EncodeToString(sum[:]),
				ApprovalsNeeded: 1}, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, a.ID)
			clk.Advance(time.Second)
		}
		// Decide 0, 1 and 2 in the order 2, 0, 1; 3 and 4 stay pending.
		for _, i := range []int{2, 0, 1} {
			if _, _, err := s.DecideApproval(ctx, Decision{ID: ids[i], Approve: i != 0, By: Decider{AdminID: "adm_alice", Name: "alice"}}); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Second)
		}
		for _, tc := range []struct {
			limit int
			want  []string
		}{
			{0, nil},
			{2, []string{ids[1], ids[0]}},
			{10, []string{ids[1], ids[0], ids[2]}},
		} {
			got, err := s.RecentDecidedApprovals(ctx, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var gotIDs []string
			for _, a := range got {
				gotIDs = append(gotIDs, a.ID)
				if a.Reasons != "rm removes files" || a.ConnectionEnv != "dev" || a.AgentName != "bot" {
					t.Errorf("approval %s: got reasons %q, env %q, agent %q; want the stored reasons, dev, bot",
						a.ID, a.Reasons, a.ConnectionEnv, a.AgentName)
				}
			}
			if fmt.Sprint(gotIDs) != fmt.Sprint(tc.want) {
				t.Errorf("RecentDecidedApprovals(%d) = %v; want %v (newest decision first, pending left out)", tc.limit, gotIDs, tc.want)
			}
		}
	})
}
