package store

import (
	"context"
	"testing"
)

func TestDataVersion(t *testing.T) {
	ctx := context.Background()
	s, _, path := openTestStore(t)
	other, err := openRef(ctx, path, Options{MasterKey: testMasterKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	v1, err := s.DataVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v2, _ := s.DataVersion(ctx); v2 != v1 {
		t.Errorf("no change: got %d then %d; want equal", v1, v2)
	}
	mustCreateAgent(t, other, "bot")
	v3, err := s.DataVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v3 == v1 {
		t.Errorf("after a commit by another store: got %d; want a value other than %d", v3, v1)
	}
	// A commit through this store's own pool counts too: it uses a
	// different connection than the one DataVersion holds.
	mustCreateAgent(t, s, "bot2")
	if v4, _ := s.DataVersion(ctx); v4 == v3 {
		t.Errorf("after a commit by this store: got %d; want a value other than %d", v4, v3)
	}
	s.Close()
	if _, err := s.DataVersion(ctx); err == nil {
		t.Error("DataVersion after Close: got nil error")
	}
}
