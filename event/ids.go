package event

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/google/uuid"
)

// newID returns a new id for a record published without one, a UUIDv7
// (RFC 9562, section 5.7) made by google/uuid in canonical form, and the
// wall clock time it holds, in milliseconds since the Unix epoch.
//
// What an id must be: unique within its topic, among the ids of every
// process that publishes to it (idempotent publish stores nothing for an
// id the topic holds). Not secret and not unguessable: nothing is
// authorized by knowing an id. Increasing is for speed only: the memory
// store keeps ids that arrive in increasing order in a sorted run with no
// lookup (store_memory.go); order and cursors go by seq, never by id.
//
// google/uuid's NewV7 holds the milliseconds and a 12-bit fraction of the
// millisecond, bumped past the last id's when the clock reads the same
// fraction again or steps back, so that the ids of one process increase;
// the rest is random. Its random bits come from idRand here, not from the
// operating system's generator through a lock (uuid's default), which
// took a seventh of the memory bus's CPU: two processes collide only on
// the same millisecond, fraction and 62 random bits.
func newID() (string, int64) {
	u, err := uuid.NewV7FromReader(idRand{})
	if err != nil {
		// idRand never fails; uuid fails only when its reader does.
		panic("event: new id: " + err.Error())
	}
	ms := int64(u[0])<<40 | int64(u[1])<<32 | int64(u[2])<<24 | int64(u[3])<<16 | int64(u[4])<<8 | int64(u[5])
	return uuidString((*[16]byte)(&u)), ms
}

// idRand reads random bytes from the runtime's generator (math/rand/v2:
// ChaCha8 per thread, seeded from the operating system's entropy), which
// takes no lock and makes no system call. Safe for concurrent use.
type idRand struct{}

func (idRand) Read(p []byte) (int, error) {
	i := 0
	for ; i+8 <= len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], rand.Uint64())
	}
	if i < len(p) {
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], rand.Uint64())
		copy(p[i:], tail[:])
	}
	return len(p), nil
}
