package model

import "github.com/postern/postern/store"

// Lock is a lock on an agent or a connection: while it holds, the agent's
// (or connection's) sessions are ended and new ones refused.
type Lock struct {
	ID string `json:"id"`
	// Kind is "agent" or "connection"; Name the agent's name or the
	// connection's alias, TargetID its id.
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	TargetID  string `json:"target_id"`
	Reason    string `json:"reason"`
	CreatedBy string `json:"created_by"`
	CreatedAt Time   `json:"created_at"`
	// ModifiedAt is CreatedAt: locking again replaces a lock, never
	// changes it.
	ModifiedAt Time `json:"modified_at"`
	// ExpiresAt is null for a lock that holds until removed.
	ExpiresAt Time `json:"expires_at"`
}

// LockOf is the JSON shape of l.
func LockOf(l store.Lock) Lock {
	return Lock{ID: l.ID, Kind: l.Kind, Name: l.TargetName, TargetID: l.TargetID, Reason: l.Reason,
		CreatedBy: l.CreatedBy, CreatedAt: Time(l.CreatedAt), ModifiedAt: Time(l.CreatedAt), ExpiresAt: Time(l.ExpiresAt)}
}
