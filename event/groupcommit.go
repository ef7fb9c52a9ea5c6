package event

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// GroupCommitter is a capability a [Store] declares when it writes
// concurrent Appends together on its own (group commit: the appends that
// wait while one write runs go in the next one, as one transaction or one
// insert), as the SQLite, PostgreSQL and MongoDB stores do. A [Bus] over a
// store whose GroupCommits reports true hands each [Bus.Publish] to Append
// at once: a group commit of the Bus's in front of the store's would only
// add a step between the store's writes. Over a store that declares
// neither this nor [InProcessStore], the Bus group-commits the records of
// concurrent Bus.Publish calls itself. A wrapper that embeds such a store
// declares it too, by promotion, and its Append sees each call.
type GroupCommitter interface {
	Store
	// GroupCommits reports whether concurrent Appends are written
	// together by the store.
	GroupCommits() bool
}

// groupCommit is the shared write path of [Bus.Publish] over a store that
// is neither an [InProcessStore] nor a [GroupCommitter]: callers that publish at the same time hand
// their records to one writer goroutine, which writes the records waiting
// for a topic with one [Store.Append] (group commit at the Bus: one store
// call, and in the stores one transaction or one insert, for many waiting
// callers). Each caller waits for the outcome of its own records only.
//
// It sits under the publish interceptors, which each caller runs with its
// own context and records, and over the store: the partitions are set and
// the interceptors have run before a record is queued.
type groupCommit struct {
	b    *Bus
	mu   sync.Mutex
	q    []*commitReq // handed over, not taken by the writer yet (FIFO)
	busy bool         // a writer goroutine runs
}

// commitReq is one caller's records waiting for the shared write.
type commitReq struct {
	ctx   context.Context
	topic string
	recs  []Record
	bytes int
	taken bool // in a batch being written (groupCommit.mu)
	out   []Record
	err   error
	done  chan struct{}
}

// append queues recs, all of topic, for the shared write and waits for
// their outcome or for ctx to end. A caller whose ctx ends before the
// writer took its records leaves the queue: nothing of it is written. One
// whose ctx ends while its records are being written returns ctx's error;
// they may then be stored or not, and publishing them again with the same
// ids is safe (a topic keeps one record per id).
func (gc *groupCommit) append(ctx context.Context, topic string, recs []Record) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req := &commitReq{ctx: ctx, topic: topic, recs: recs, done: make(chan struct{})}
	for i := range recs {
		req.bytes += len(recs[i].Payload)
	}
	gc.mu.Lock()
	start := !gc.busy
	if start {
		if !gc.b.startWorker() {
			gc.mu.Unlock()
			return nil, ErrClosed
		}
		gc.busy = true
	}
	gc.q = append(gc.q, req)
	gc.mu.Unlock()
	if start {
		go gc.run()
	}
	select {
	case <-req.done:
		return req.out, req.err
	case <-ctx.Done():
	}
	gc.mu.Lock()
	taken := req.taken
	if !taken {
		gc.remove(req)
	}
	gc.mu.Unlock()
	if !taken {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("event: publish to %q: %w (the record may have been stored: publishing it again with the same id is safe)", topic, ctx.Err())
}

// remove takes req out of the queue. Called with gc.mu held.
func (gc *groupCommit) remove(req *commitReq) {
	for i, r := range gc.q {
		if r == req {
			copy(gc.q[i:], gc.q[i+1:])
			gc.q[len(gc.q)-1] = nil
			gc.q = gc.q[:len(gc.q)-1]
			return
		}
	}
}

// queued returns the number of requests waiting to be taken.
func (gc *groupCommit) queued() int {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return len(gc.q)
}

// run writes the queue in batches until it is empty.
func (gc *groupCommit) run() {
	defer gc.b.wg.Done()
	var batch []*commitReq
	for {
		gc.mu.Lock()
		if len(gc.q) == 0 {
			gc.busy = false
			gc.mu.Unlock()
			return
		}
		batch = gc.take(batch[:0])
		gc.mu.Unlock()
		gc.write(batch)
		clear(batch)
	}
}

// take moves to batch the requests of the topic at the head of the queue,
// in queue order, up to DefaultPublishBatch records and
// DefaultPublishBatchBytes (the first request whatever its size); the
// requests of other topics keep their places. Called with gc.mu held.
func (gc *groupCommit) take(batch []*commitReq) []*commitReq {
	topic := gc.q[0].topic
	n, size, k := 0, 0, 0
	for _, r := range gc.q {
		if r.topic != topic || (len(batch) > 0 &&
			(n+len(r.recs) > DefaultPublishBatch || size+r.bytes > DefaultPublishBatchBytes)) {
			gc.q[k] = r
			k++
			continue
		}
		r.taken = true
		batch = append(batch, r)
		n += len(r.recs)
		size += r.bytes
	}
	clear(gc.q[k:])
	gc.q = gc.q[:k]
	return batch
}

// write stores the records of batch, all of one topic, with one append
// and gives each request its outcome. A batch refused as a whole is tried
// again one request at a time, in order, so that records the store
// refuses fail alone and the others are stored.
func (gc *groupCommit) write(batch []*commitReq) {
	if len(batch) == 1 {
		r := batch[0]
		r.out, r.err = gc.store(r.ctx, r.topic, r.recs)
		close(r.done)
		return
	}
	ctx, cancel := allDone(batch)
	defer cancel()
	var recs []Record
	for _, r := range batch {
		recs = append(recs, r.recs...)
	}
	out, err := gc.store(ctx, batch[0].topic, recs)
	var re *RecordErrors
	switch {
	case err == nil:
		for _, r := range batch {
			r.out, out = out[:len(r.recs):len(r.recs)], out[len(r.recs):]
		}
	case errors.As(err, &re) && len(re.Errs) == len(recs) && len(out) == len(recs):
		// The store refused some records and stored the others.
		for _, r := range batch {
			n := len(r.recs)
			r.out, out = out[:n:n], out[n:]
			errs := re.Errs[:n]
			re.Errs = re.Errs[n:]
			for _, e := range errs {
				if e != nil {
					r.err = fmt.Errorf("event: publish to %q: %w", r.topic, &RecordErrors{Errs: errs})
					break
				}
			}
			if r.err != nil && n == 1 {
				r.out, r.err = nil, fmt.Errorf("event: publish to %q: %w", r.topic, errs[0])
			}
		}
	case errors.Is(err, ErrClosed):
		for _, r := range batch {
			r.err = err
		}
	default:
		for _, r := range batch {
			r.out, r.err = gc.store(r.ctx, r.topic, r.recs)
		}
	}
	for _, r := range batch {
		close(r.done)
	}
}

// store appends recs through the Bus (which wakes the topic's consumers),
// unless ctx ended: a caller that gave up is not written.
func (gc *groupCommit) store(ctx context.Context, topic string, recs []Record) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return gc.b.append(ctx, topic, recs)
}

// allDone returns the context of a shared write: it carries no caller's
// values and ends when every caller of batch has given up (their contexts
// ended), so that a write nobody waits for stops.
func allDone(batch []*commitReq) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	left := len(batch)
	stops := make([]func() bool, 0, len(batch))
	for _, r := range batch {
		stops = append(stops, context.AfterFunc(r.ctx, func() {
			mu.Lock()
			left--
			if left == 0 {
				cancel()
			}
			mu.Unlock()
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
