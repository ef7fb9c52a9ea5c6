package dedupe

import (
	"context"
	"time"
)

// State is the outcome of a claim.
type State int

const (
	// Acquired: the caller holds the key until its lease ends; run the work.
	Acquired State = iota
	// Done: the work for the key was completed and has not expired.
	Done
	// Busy: another owner holds a live claim on the key.
	Busy
)

func (s State) String() string {
	switch s {
	case Acquired:
		return "acquired"
	case Done:
		return "done"
	case Busy:
		return "busy"
	}
	return "unknown"
}

// Store remembers which keys were processed. Implementations must be safe
// for concurrent use by several processes, and must never count an expired
// key as done.
type Store interface {
	// Claim takes key for owner until now+lease, unless it is done or
	// another owner's claim is live.
	Claim(ctx context.Context, key, owner string, lease time.Duration) (State, error)
	// Complete marks key done until now+ttl. It fails with ErrNotOwner
	// when key is done or another owner holds a live claim on it. A claim
	// of owner's that expired (deleted yet or not) and that no other owner
	// took since is still owner's: no other delivery ran the work, and
	// refusing the mark would make the next delivery run it again.
	Complete(ctx context.Context, key, owner string, ttl time.Duration) error
	// Release frees owner's claim on key, so that another delivery may
	// run the work.
	Release(ctx context.Context, key, owner string) error
	// Seen reports whether key is done and not expired.
	Seen(ctx context.Context, key string) (bool, error)
	// Reap deletes expired keys and returns how many.
	Reap(ctx context.Context) (int, error)
}
