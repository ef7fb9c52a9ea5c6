package event

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLeaseQueueModel runs random pushes (mostly in order of lease end,
// as deliveries make them), removes and fixes against a plain set of
// entries: the queue's first lease is always the set's earliest, and its
// count the set's size.
func TestLeaseQueueModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 1))
		q := newLeaseQueue()
		base := time.Unix(1_700_000_000, 0)
		clock := time.Duration(0)
		in := map[*entry]bool{}
		var all []*entry
		for step := range 3000 {
			switch op := rng.IntN(10); {
			case op < 5 || len(in) == 0: // a delivery: lease end in order, now and then not
				e := &entry{hidx: -1}
				clock += time.Duration(rng.IntN(3)) * time.Millisecond
				e.deadline = base.Add(clock + 30*time.Second)
				if rng.IntN(10) == 0 {
					e.deadline = base.Add(clock + time.Duration(rng.IntN(30_000))*time.Millisecond)
				}
				q.push(e)
				in[e] = true
				all = append(all, e)
			case op < 8: // an ack
				e := pick(rng, in)
				q.remove(e)
				delete(in, e)
			default: // an extension, or a lease moved to its handler's start
				e := pick(rng, in)
				e.deadline = base.Add(clock + time.Duration(rng.IntN(60_000))*time.Millisecond)
				q.fix(e)
			}
			require.Equal(t, len(in), q.count(), "seed %d step %d", seed, step)
			want := earliest(in)
			got := q.peek()
			if want == nil {
				require.Nil(t, got, "seed %d step %d", seed, step)
				continue
			}
			require.NotNil(t, got, "seed %d step %d", seed, step)
			require.True(t, got.deadline.Equal(want.deadline), "seed %d step %d: first lease ends %v, want %v", seed, step, got.deadline, want.deadline)
			require.True(t, in[got], "seed %d step %d: the first lease is of an entry not in flight", seed, step)
		}
		// An entry removed is left alone by a second remove.
		for e := range in {
			q.remove(e)
			q.remove(e)
			delete(in, e)
		}
		assert.Zero(t, q.count())
		assert.Nil(t, q.peek())
		for _, e := range all {
			assert.Equal(t, lqNone, e.lq)
		}
	}
}

// TestLeaseQueueBounded checks that the FIFO keeps no more slots than
// about twice its leases when acks come out of order (one lease held long
// while others come and go) and when they come in order for long.
func TestLeaseQueueBounded(t *testing.T) {
	t.Parallel()
	q := newLeaseQueue()
	base := time.Unix(1_700_000_000, 0)
	held := &entry{hidx: -1, deadline: base}
	q.push(held)
	window := make([]*entry, 0, 100)
	for i := range 20_000 {
		e := &entry{hidx: -1, deadline: base.Add(time.Duration(i+1) * time.Microsecond)}
		q.push(e)
		window = append(window, e)
		if len(window) == cap(window) {
			for _, w := range window {
				q.remove(w)
			}
			window = window[:0]
		}
		require.LessOrEqual(t, cap(q.fifo), 4*(q.count()+compactMin), "step %d", i)
	}
	assert.Same(t, held, q.peek(), "the held lease is still first")
	q.remove(held)
	assert.Equal(t, len(window), q.count())
}

func pick(rng *rand.Rand, in map[*entry]bool) *entry {
	i := rng.IntN(len(in))
	for e := range in {
		if i == 0 {
			return e
		}
		i--
	}
	return nil
}

func earliest(in map[*entry]bool) *entry {
	var m *entry
	for e := range in {
		if m == nil || e.deadline.Before(m.deadline) {
			m = e
		}
	}
	return m
}

// BenchmarkLeases measures a delivery's lease added and its ack taking it
// off again with 1,000 leases in flight, acks in the order of delivery:
// the group's leaseQueue against the heap it replaced. ns/op is per
// delivery.
func BenchmarkLeases(b *testing.B) {
	const inflight = 1000
	base := time.Unix(1_700_000_000, 0)
	es := make([]entry, inflight)
	for name, q := range map[string]interface {
		push(*entry)
		remove(*entry)
	}{
		"queue": func() *leaseQueue { q := newLeaseQueue(); return &q }(),
		"heap":  &entryHeap{less: func(a, b *entry) bool { return a.deadline.Before(b.deadline) }},
	} {
		b.Run(name, func(b *testing.B) {
			for i := range es {
				es[i] = entry{hidx: -1, deadline: base.Add(time.Duration(i) * time.Microsecond)}
				q.push(&es[i])
			}
			i := 0
			for b.Loop() {
				e := &es[i%inflight]
				q.remove(e)
				e.deadline = base.Add(time.Duration(i+inflight) * time.Microsecond)
				q.push(e)
				i++
			}
			for i := range es {
				q.remove(&es[i])
			}
		})
	}
}
