package event

import (
	"math/rand/v2"
	"sync/atomic"
	"time"
)

// recordIDs makes the ids of the records published without one: UUIDv7s (RFC
// 9562, section 5.7) in canonical form, strictly increasing in the order
// this process makes them.
//
// What an id must be: unique within its topic, among the ids of every
// process that publishes to it (idempotent publish stores nothing for an
// id the topic holds). Not secret and not unguessable: nothing is
// authorized by knowing an id. Increasing is for speed only: the memory
// store keeps ids that arrive in increasing order in a sorted run with no
// lookup (store_memory.go); order and cursors go by seq, never by id.
//
// Layout: 48 bits of Unix milliseconds; the version; 12 bits counting
// fractions of the millisecond (section 6.2, method 3, as google/uuid's
// NewV7 does), bumped past the last id's when the clock reads the same
// fraction again or steps back, so that ids stay increasing; the variant
// and 62 random bits. Two processes collide only on the same millisecond,
// fraction and 62 random bits. The random bits come from the runtime's
// generator (math/rand/v2: ChaCha8 per thread, seeded from the OS's
// entropy), which takes no lock and makes no system call; the state that
// keeps ids increasing is one atomic word.
var recordIDs idGen

type idGen struct {
	// last is the time field of the last id made: milliseconds<<12 |
	// fraction.
	last atomic.Int64
}

// newID returns a new UUIDv7 in canonical form and the wall clock time it
// holds, in milliseconds since the Unix epoch.
func newID() (string, int64) {
	return recordIDs.next(time.Now())
}

// next returns a new id for the wall clock time now, and the milliseconds
// it holds: now's, or later ones when ids made before it hold later
// times.
func (g *idGen) next(now time.Time) (string, int64) {
	nano := now.UnixNano()
	ms := nano / int64(time.Millisecond)
	// A millisecond's 1e6 ns in 256 ns steps is 3,907 fractions: 12 bits.
	t := ms<<12 | (nano-ms*int64(time.Millisecond))>>8
	for {
		last := g.last.Load()
		next := t
		if next <= last {
			next = last + 1 // past 4,095 it carries into the milliseconds
		}
		if g.last.CompareAndSwap(last, next) {
			t = next
			break
		}
	}
	var u [16]byte
	ms = t >> 12
	u[0], u[1], u[2], u[3], u[4], u[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	u[6] = 0x70 | byte(t>>8)&0x0f // version 7, the fraction's high 4 bits
	u[7] = byte(t)
	r := rand.Uint64()
	u[8] = 0x80 | byte(r>>56)&0x3f // variant 10, then 62 random bits
	u[9], u[10], u[11], u[12], u[13], u[14], u[15] = byte(r>>48), byte(r>>40), byte(r>>32), byte(r>>24), byte(r>>16), byte(r>>8), byte(r)
	return uuidString(&u), ms
}
