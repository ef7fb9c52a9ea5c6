package event

import "time"

// leaseQueue holds a group's in-flight entries by the end of their lease
// (entry.deadline), for the group's timer to find the first that runs out.
//
// A delivery's lease ends at the time of the delivery plus the group's
// AckTimeout, so the leases of the deliveries come in the order they end,
// nearly always: those go to a FIFO, where adding one costs an append and
// taking one off (an ack) marks it gone without moving anything (lazy
// deletion); gone ones are dropped as they reach the front, which in-order
// acks make at once. A lease that ends before the last one added (an
// extension, a lease moved to its handler's start, a shorter AckTimeout)
// goes to a heap. The first to run out is the earlier of the FIFO's front
// and the heap's top.
//
// Memory: the FIFO holds the live leases and the gone ones behind a live
// one that is still in front; it is compacted when the gone ones
// outnumber the live ones, so it never holds more than about twice as many
// slots as leases (plus a constant).
type leaseQueue struct {
	fifo []leaseSlot
	head int       // the front of fifo
	tail time.Time // the lease end of the last slot appended
	live int       // slots of fifo that hold a lease
	heap entryHeap // the leases that came out of order
}

// leaseSlot is a place in the FIFO: e's lease while e.lslot is still tag.
type leaseSlot struct {
	e   *entry
	tag uint32
}

// Where an entry's lease is (entry.lq).
const (
	lqNone uint8 = iota
	lqFIFO
	lqHeap
)

// compactMin is how many gone slots the FIFO keeps before it is compacted
// whatever the number of live ones.
const compactMin = 64

func newLeaseQueue() leaseQueue {
	return leaseQueue{heap: entryHeap{less: func(a, b *entry) bool { return a.deadline.Before(b.deadline) }}}
}

// push adds e, not in the queue, with its lease ending at e.deadline.
func (q *leaseQueue) push(e *entry) {
	if q.live > 0 && e.deadline.Before(q.tail) {
		e.lq = lqHeap
		q.heap.push(e)
		return
	}
	e.lslot++
	e.lq = lqFIFO
	if len(q.fifo) == cap(q.fifo) && q.head >= len(q.fifo)/2 {
		// Full, with half of it or more in front of the head: slide down
		// rather than grow, so that the slots acks went past are reused.
		n := copy(q.fifo, q.fifo[q.head:])
		clear(q.fifo[n:])
		q.fifo, q.head = q.fifo[:n], 0
	}
	q.fifo = append(q.fifo, leaseSlot{e: e, tag: e.lslot})
	q.tail = e.deadline
	q.live++
}

// remove takes e's lease out of the queue; e not in it is left alone.
func (q *leaseQueue) remove(e *entry) {
	switch e.lq {
	case lqHeap:
		q.heap.remove(e)
	case lqFIFO:
		e.lslot++ // its slot is gone
		q.live--
		if q.live == 0 {
			clear(q.fifo)
			q.fifo, q.head = q.fifo[:0], 0
		} else {
			q.trim()
			if gone := len(q.fifo) - q.head - q.live; gone > q.live && gone > compactMin {
				q.compact()
			}
		}
	}
	e.lq = lqNone
}

// fix moves e, in the queue, to its new lease end e.deadline.
func (q *leaseQueue) fix(e *entry) {
	q.remove(e)
	q.push(e)
}

// peek returns the entry whose lease ends first, nil when there is none.
func (q *leaseQueue) peek() *entry {
	f := q.front()
	h := q.heap.peek()
	switch {
	case f == nil:
		return h
	case h == nil || !h.deadline.Before(f.deadline):
		return f
	default:
		return h
	}
}

// count returns the number of leases in the queue.
func (q *leaseQueue) count() int { return q.live + len(q.heap.items) }

// front returns the entry of the FIFO's first live slot.
func (q *leaseQueue) front() *entry {
	if q.live == 0 {
		return nil
	}
	return q.fifo[q.head].e // trim keeps a live slot in front
}

// trim drops the gone slots in front.
func (q *leaseQueue) trim() {
	for q.head < len(q.fifo) && q.fifo[q.head].tag != q.fifo[q.head].e.lslot {
		q.fifo[q.head] = leaseSlot{}
		q.head++
	}
}

// compact drops every gone slot, keeping the live ones in order.
func (q *leaseQueue) compact() {
	w := 0
	for _, s := range q.fifo[q.head:] {
		if s.tag == s.e.lslot {
			q.fifo[w] = s
			w++
		}
	}
	clear(q.fifo[w:])
	q.fifo, q.head = q.fifo[:w], 0
}
