package event

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Defaults of [PublisherConfig].
const (
	DefaultMaxPending          = 1024
	DefaultMaxPendingInProcess = 128 // over an [InProcessStore]; see MaxPending
	DefaultPublishBatch        = 1000
	DefaultPublishBatchBytes   = 4 << 20
)

// PublisherConfig configures a [Publisher]. The zero value of every field
// means its default.
type PublisherConfig struct {
	// MaxPending bounds the publishes handed to the Publisher that are not
	// finished yet (the window); at the bound [Publisher.Publish] waits for
	// room. The default is 1024, enough to fill large batches over a store
	// a write of which is a round trip, and 128 over an [InProcessStore]
	// (the [MemoryStore]). Its appends take microseconds, so a batch of 128 costs no more per record
	// than a larger one, and a publisher that never waits keeps a processor
	// to itself: the subscribers of the same process then fall behind
	// while it runs ahead of them (docs/PERFORMANCE.md measures both).
	MaxPending int
	// MaxBatch bounds the records of one store append (default 1000).
	MaxBatch int
	// MaxBatchBytes bounds the payload bytes of one store append; a single
	// larger record is written alone (default 4 MiB).
	MaxBatchBytes int
}

func (c *PublisherConfig) setDefaults() {
	if c.MaxPending == 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = DefaultPublishBatch
	}
	if c.MaxBatchBytes == 0 {
		c.MaxBatchBytes = DefaultPublishBatchBytes
	}
}

// Validate reports every problem of c, joined. Zero values are valid (they
// mean the default).
func (c *PublisherConfig) Validate() error {
	var errs []error
	if c.MaxPending < 0 {
		errs = append(errs, invalid("MaxPending", "%d is negative", c.MaxPending))
	}
	if c.MaxBatch < 0 {
		errs = append(errs, invalid("MaxBatch", "%d is negative", c.MaxBatch))
	}
	if c.MaxBatchBytes < 0 {
		errs = append(errs, invalid("MaxBatchBytes", "%d is negative", c.MaxBatchBytes))
	}
	return errors.Join(errs...)
}

// Publisher publishes pipelined: [Publisher.Publish] hands a record over
// and returns at once with a [PublishFuture] to wait on, so that one
// goroutine keeps up to MaxPending publishes in flight and the store
// writes them in batches (as JetStream's PublishAsync and Pub/Sub's
// PublishResult do). It is the pipelined way to publish; [Bus.Publish] is
// the one that waits.
//
// Records are stored in the order of their Publish calls (for the calls of
// one goroutine, or calls ordered by the caller otherwise); consecutive
// publishes to one topic with the same ctx are written by one store
// append, of at most MaxBatch records and MaxBatchBytes. Give one ctx to a
// stream of publishes to let them batch: ctx is the context of the write
// (its values reach the publish interceptors) and cancelling it fails the
// publishes not written yet.
//
// Each publish gets its own outcome: a store that refuses some records of
// an append says which ([RecordErrors]); a batch refused as a whole is
// tried again one record at a time in order, so that a record the store or
// an interceptor refuses fails alone and the others are stored.
//
// A Publisher is safe for concurrent use and holds no goroutine while it
// has nothing to write. [Bus.Close] waits for the publishes handed over
// before it started.
type Publisher struct {
	b   *Bus
	cfg PublisherConfig
	// pending counts the publishes handed over and not finished (the
	// window). A Publish that finds it full waits for room, which the
	// writer announces once per batch it finished (see take1), so that a
	// caller faster than the store wakes once per batch, not per record.
	pending atomic.Int64
	mu      sync.Mutex
	room    chan struct{}   // closed when a batch is finished; nil: no one waits (p.mu)
	wakes   []chan struct{} // of the results the writer finished; see finish
	q       []pending       // handed over, not taken by the writer yet
	last    *PublishFuture  // the latest handed over
	busy    bool            // a writer goroutine runs
}

// pending is a publish handed over and not written yet. The record waits
// here, in the queue, rather than in its result: a result that outlives
// the write then holds a pointer to the stored record and no copy.
type pending struct {
	r   *PublishFuture
	rec Record
	ctx context.Context
}

// writeBuf holds a writer's batch between its appends. A writer ends at
// every lull (a paced publisher makes many) and the next one takes a
// buffer from the pool instead of growing new ones; an idle Publisher
// holds none.
type writeBuf struct {
	batch []pending
	recs  []Record
}

var writeBufs = sync.Pool{New: func() any { return new(writeBuf) }}

// PublishFuture is the outcome of one pipelined publish
// ([Publisher.Publish]), known once Done is closed.
type PublishFuture struct {
	ready atomic.Bool // rec and err are set
	mu    sync.Mutex
	ch    chan struct{} // made by the first Done before the outcome, if any
	rec   *Record       // in the store's result of the batch; nil on error
	err   error
}

// closedChan is the Done of results known before anyone asked.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Done is closed when the outcome is known.
func (r *PublishFuture) Done() <-chan struct{} {
	if r.ready.Load() {
		return closedChan
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ready.Load() {
		return closedChan
	}
	if r.ch == nil {
		r.ch = make(chan struct{})
	}
	return r.ch
}

// Get waits for the outcome and returns the stored record (its ID and Seq
// set; the stored one where the topic already held the id) or the error
// that refused it. When ctx ends first it returns ctx's error; the publish
// goes on.
func (r *PublishFuture) Get(ctx context.Context) (Record, error) {
	if !r.ready.Load() {
		select {
		case <-r.Done():
		case <-ctx.Done():
			return Record{}, ctx.Err()
		}
	}
	if r.rec == nil {
		return Record{}, r.err
	}
	return *r.rec, r.err
}

// set records the outcome and wakes those waiting on Done.
func (r *PublishFuture) set(rec *Record, err error) {
	if ch := r.settle(rec, err); ch != nil {
		close(ch)
	}
}

// settle records the outcome and returns the channel to close to wake
// those already waiting on Done, if any: from now on Get and Done see the
// outcome.
func (r *PublishFuture) settle(rec *Record, err error) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rec, r.err = rec, err
	r.ready.Store(true)
	return r.ch
}

func failed(err error) *PublishFuture {
	r := &PublishFuture{}
	r.set(nil, err)
	return r
}

// NewPublisher returns a Publisher that publishes through b. Over an
// [InProcessStore] the default MaxPending is [DefaultMaxPendingInProcess].
func (b *Bus) NewPublisher(cfg PublisherConfig) (*Publisher, error) {
	if _, local := b.store.(InProcessStore); local && cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPendingInProcess
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Publisher{b: b, cfg: cfg}, nil
}

// Config returns the Publisher's configuration, defaults filled in.
func (p *Publisher) Config() PublisherConfig { return p.cfg }

// Publish hands a record of topic over to be stored, as [Bus.Publish]
// stores it, and returns its result. It waits only while the window is
// full (MaxPending publishes not finished). A bad topic, payload or option,
// a closed Bus, or ctx ending while Publish waits for room gives a result
// that is done already with the error. payload must not be changed until
// the result is done.
func (p *Publisher) Publish(ctx context.Context, topic string, payload []byte, opts ...PublishOption) *PublishFuture {
	rec, err := p.b.NewRecord(topic, payload, resolvePublish(opts))
	if err != nil {
		return failed(err)
	}
	if err := p.take1(ctx); err != nil {
		return failed(err)
	}
	r := &PublishFuture{}
	p.mu.Lock()
	start := !p.busy
	if start {
		if !p.b.startWorker() {
			p.mu.Unlock()
			p.pending.Add(-1)
			p.announceRoom()
			return failed(ErrClosed)
		}
		p.busy = true
	}
	p.q = append(p.q, pending{r: r, rec: rec, ctx: ctx})
	p.last = r
	p.mu.Unlock()
	if start {
		go p.run()
	}
	return r
}

// Flush waits until every publish handed over before the call is
// finished, or ctx ends.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	last := p.last
	p.mu.Unlock()
	if last == nil {
		return nil
	}
	select {
	case <-last.Done():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pending returns the number of publishes handed over and not finished.
func (p *Publisher) Pending() int { return int(p.pending.Load()) }

// take1 takes a place in the window, waiting while it is full until ctx
// ends or the Bus closes.
func (p *Publisher) take1(ctx context.Context) error {
	limit := int64(p.cfg.MaxPending)
	for {
		n := p.pending.Load()
		if n < limit {
			if p.pending.CompareAndSwap(n, n+1) {
				return nil
			}
			continue
		}
		p.mu.Lock()
		if p.room == nil {
			p.room = make(chan struct{})
		}
		room := p.room
		full := p.pending.Load() >= limit // the writer may have finished a batch since
		p.mu.Unlock()
		if !full {
			continue
		}
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.b.done:
			return ErrClosed
		}
	}
}

// announceRoom wakes the publishes waiting for room in the window.
func (p *Publisher) announceRoom() {
	p.mu.Lock()
	if p.room != nil {
		close(p.room)
		p.room = nil
	}
	p.mu.Unlock()
}

// startWorker registers a writer goroutine with the Bus, so that Close
// waits for it; it reports false once the Bus is closed.
func (b *Bus) startWorker() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	return true
}

// run writes the queue in batches until it is empty.
func (p *Publisher) run() {
	defer p.b.wg.Done()
	buf := writeBufs.Get().(*writeBuf)
	batch, recs := buf.batch, buf.recs
	used := 0 // the longest batch: each batch overwrites the one before
	for {
		p.mu.Lock()
		if len(p.q) == 0 {
			p.busy = false
			p.mu.Unlock()
			// Hold no finished result or payload while idle.
			clear(batch[:used])
			clear(recs[:used])
			buf.batch, buf.recs = batch[:0], recs[:0]
			writeBufs.Put(buf)
			return
		}
		batch, p.q = p.take(batch[:0])
		p.mu.Unlock()
		recs = recs[:0]
		for i := range batch {
			recs = append(recs, batch[i].rec)
		}
		used = max(used, len(batch))
		p.write(batch, recs)
		p.wakeAll()
		runtime.Gosched()
	}
}

// take moves the longest run at the head of the queue that one append may
// write (one topic, one ctx, within MaxBatch and MaxBatchBytes) to batch.
// Called with p.mu held.
func (p *Publisher) take(batch []pending) ([]pending, []pending) {
	first := &p.q[0]
	n, size := 0, 0
	for i := range p.q {
		r := &p.q[i]
		if n > 0 && (r.ctx != first.ctx || r.rec.Topic != first.rec.Topic ||
			n == p.cfg.MaxBatch || size+len(r.rec.Payload) > p.cfg.MaxBatchBytes) {
			break
		}
		n++
		size += len(r.rec.Payload)
	}
	batch = append(batch, p.q[:n]...)
	// The rest moves to the front: a queue that slid along its array
	// would grow a new one every few batches.
	m := copy(p.q, p.q[n:])
	clear(p.q[m:])
	return batch, p.q[:m]
}

// write stores recs, the records of batch, and finishes batch's results.
// A batch refused whole is tried again one record at a time, so that each
// record gets its own outcome.
//
// The results point into the store's result slice of the batch, which
// lives as long as one of them does.
func (p *Publisher) write(batch []pending, recs []Record) {
	ctx := batch[0].ctx
	var out []Record
	err := ctx.Err()
	if err == nil {
		out, err = p.b.publish(ctx, recs[0].Topic, recs)
	}
	if len(out) > 0 && &out[0] == &recs[0] {
		// An interceptor answered with the records it was given: they are
		// the writer's buffer, reused for the next batch.
		out = slices.Clone(out)
	}
	if err == nil {
		p.free(len(batch))
		for i := range batch {
			p.finish(batch[i].r, &out[i], nil)
		}
		return
	}
	var re *RecordErrors
	if errors.As(err, &re) && len(re.Errs) == len(batch) && len(out) == len(batch) {
		// The store refused some records and stored the others.
		p.free(len(batch))
		for i := range batch {
			if re.Errs[i] != nil {
				p.finish(batch[i].r, nil, re.Errs[i])
			} else {
				p.finish(batch[i].r, &out[i], nil)
			}
		}
		return
	}
	if len(batch) == 1 || ctx.Err() != nil {
		p.free(len(batch))
		for i := range batch {
			p.finish(batch[i].r, nil, err)
		}
		return
	}
	for i := range batch {
		out, err := p.b.publish(ctx, recs[i].Topic, recs[i:i+1])
		p.free(1)
		if err != nil {
			p.finish(batch[i].r, nil, err)
		} else {
			p.finish(batch[i].r, &out[0], nil)
		}
	}
}

// free gives back n places in the window, those of results about to be
// finished: whoever sees an outcome (Flush among them) sees the window
// without its place. One atomic add per batch rather than one per
// record: the publishing goroutine takes places from the same word, and
// each write to it from the writer's core takes the word from the
// publisher's.
func (p *Publisher) free(n int) { p.pending.Add(-int64(n)) }

// finish makes r's outcome known; its place in the window was freed
// before (free). Those waiting on r's Done are woken by wakeAll, after the
// batch: a caller that waits for the oldest of its results then finds the
// batch's others done too, instead of waking once per record while the
// writer goes on finishing them.
func (p *Publisher) finish(r *PublishFuture, rec *Record, err error) {
	if ch := r.settle(rec, err); ch != nil {
		p.wakes = append(p.wakes, ch)
	}
}

// wakeAll wakes those waiting on the results finished since the last call,
// and the publishes waiting for room in the window.
func (p *Publisher) wakeAll() {
	for _, ch := range p.wakes {
		close(ch)
	}
	clear(p.wakes)
	p.wakes = p.wakes[:0]
	p.announceRoom()
}
