package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// Many writers at once, as when the bastion writes audit rows while an admin
// runs the CLI: every write must succeed (waiting on the busy timeout, not
// failing with SQLITE_BUSY), and a contested unique name has one winner.
func TestConcurrentWriters(t *testing.T) {
	forEachDB(t, func(t *testing.T) {
		ctx := context.Background()
		s, _, path := openTestStore(t)
		other, err := openRef(ctx, path, Options{MasterKey: testMasterKey()})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()

		const n = 20
		keys := make([]testKeyPair, 2*n)
		for i := range keys {
			keys[i] = newTestKeyPair(t, "")
		}
		var wg sync.WaitGroup
		errs := make(chan error, 2*n)
		for i := 0; i < n; i++ {
			for j, st := range []*Store{s, other} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, err := st.CreateAgent(ctx, Unaudited(), fmt.Sprintf("agent-%d-%d", i, j), keys[2*i+j].authorized)
					errs <- err
				}()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("concurrent CreateAgent: %v", err)
			}
		}
		as, _ := s.ListAgents(ctx)
		if len(as) != 2*n {
			t.Errorf("got %d agents; want %d", len(as), 2*n)
		}

		// The same name from many goroutines: exactly one wins.
		var wins, dups int
		var mu sync.Mutex // protects wins and dups
		contested := make([]testKeyPair, n)
		for i := range contested {
			contested[i] = newTestKeyPair(t, "")
		}
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st := s
				if i%2 == 1 {
					st = other
				}
				_, err := st.CreateAgent(ctx, Unaudited(), "contested", contested[i].authorized)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, ErrDuplicate):
					dups++
				default:
					t.Errorf("contested CreateAgent: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 || dups != n-1 {
			t.Errorf("contested name: got %d wins, %d duplicates; want 1 and %d", wins, dups, n-1)
		}
	})
}
