package store

import (
	"context"
	"testing"
	"time"
)

// TestChangeRequestsListWithoutWriting: a pending change request past its
// expiry is listed expired (and left out of the waiting list) by reads
// alone; the page's live list reads the queue every second and must not
// write each time.
func TestChangeRequestsListWithoutWriting(t *testing.T) {
	s, clock, _ := openTestStore(t)
	ctx := context.Background()
	c, err := s.CreateChangeRequest(ctx, Unaudited(), ChangeRequest{Kind: "grant", Summary: "grant bot web: write=ask",
		RequestedBy: "alice", RequestedVia: "test", Payload: []byte(`{}`)}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := s.ListChangeRequests(ctx, false); err != nil || len(list) != 1 || list[0].Status != ChangePending {
		t.Fatalf("waiting list before expiry: %+v, %v; want the request, pending", list, err)
	}
	clock.Advance(time.Minute)
	if list, err := s.ListChangeRequests(ctx, false); err != nil || len(list) != 0 {
		t.Errorf("waiting list at expiry: %+v, %v; want none", list, err)
	}
	if list, err := s.ListChangeRequests(ctx, true); err != nil || len(list) != 1 || list[0].Status != ChangeExpired {
		t.Errorf("whole list at expiry: %+v, %v; want the request, expired", list, err)
	}
	if got, err := s.ChangeRequestShown(ctx, c.ID); err != nil || got.Status != ChangeExpired || got.Payload != nil {
		t.Errorf("ChangeRequestShown at expiry: status %s, payload %q, %v; want expired without the payload", got.Status, got.Payload, err)
	}
	var stored string
	if err := s.db.QueryRow(`SELECT status FROM change_requests WHERE id = ?`, c.ID).Scan(&stored); err != nil || stored != ChangePending {
		t.Errorf("stored status after the reads: %q, %v; want pending (no read writes)", stored, err)
	}
}
