package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// gate is a publish interceptor that holds every publish of a record with
// the header "gate" until open is closed, and counts the records of the
// largest publish it saw.
type gate struct {
	open     chan struct{}
	mu       sync.Mutex
	largest  int
	refuseID string // a publish holding this id is refused whole
}

var errRefused = errors.New("refused by the test interceptor")

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) intercept(next event.PublishFunc) event.PublishFunc {
	return func(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
		g.mu.Lock()
		g.largest = max(g.largest, len(recs))
		g.mu.Unlock()
		for _, r := range recs {
			if r.ID == g.refuseID {
				return nil, fmt.Errorf("record %q: %w", r.ID, errRefused)
			}
			if r.Headers["gate"] != "" {
				select {
				case <-g.open:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
		}
		return next(ctx, topic, recs)
	}
}

func (g *gate) largestBatch() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.largest
}

func withGate(g *gate) func(*event.Config) {
	return func(c *event.Config) { c.PublishInterceptors = append(c.PublishInterceptors, g.intercept) }
}

// testPipelinedOrder runs several pipelined publishers at once, each over
// two topics with a small window and small batches, and checks that every
// publish is stored once, in each publisher's order, and delivered.
func testPipelinedOrder(t *testing.T, s event.Store) {
	const pubs, per = 4, 60
	b := newBus(t, s)
	ctx := context.Background()
	c := newCollector()
	subscribe(t, b, "pipe.a", "g", c.handler, event.FromEarliest())

	type sent struct {
		topic string
		res   *event.PublishFuture
	}
	results := make([][]sent, pubs)
	var wg sync.WaitGroup
	for p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pub, err := b.NewPublisher(event.PublisherConfig{MaxPending: 8, MaxBatch: 5})
			if !assert.NoError(t, err) {
				return
			}
			for i := range per {
				topic := "pipe.a"
				if i%7 == 3 {
					topic = "pipe.b" // splits batches
				}
				payload := fmt.Appendf(nil, `{"p":%d,"i":%d}`, p, i)
				results[p] = append(results[p], sent{topic, pub.Publish(ctx, topic, payload, event.WithKey(fmt.Sprint(p)))})
			}
			assert.NoError(t, pub.Flush(ctx))
		}()
	}
	wg.Wait()

	seen := map[string]map[uint64]bool{"pipe.a": {}, "pipe.b": {}}
	wantA := 0
	for p := range pubs {
		last := map[string]uint64{}
		for i, sr := range results[p] {
			select {
			case <-sr.res.Done():
			default:
				t.Fatalf("publisher %d: publish %d not done after Flush", p, i)
			}
			rec, err := sr.res.Get(ctx)
			require.NoError(t, err, "publisher %d, publish %d", p, i)
			assert.Equal(t, sr.topic, rec.Topic)
			assert.NotEmpty(t, rec.ID)
			assert.JSONEq(t, fmt.Sprintf(`{"p":%d,"i":%d}`, p, i), string(rec.Payload))
			assert.Greater(t, rec.Seq, last[sr.topic], "publisher %d, publish %d stored before an earlier one", p, i)
			last[sr.topic] = rec.Seq
			assert.False(t, seen[sr.topic][rec.Seq], "seq %d of %s given twice", rec.Seq, sr.topic)
			seen[sr.topic][rec.Seq] = true
			if sr.topic == "pipe.a" {
				wantA++
			}
		}
	}
	for topic, seqs := range seen {
		head, err := s.Head(ctx, topic)
		require.NoError(t, err)
		assert.Equal(t, uint64(len(seqs)), head, "topic %s holds exactly what was published", topic)
	}
	require.Eventually(t, func() bool { return c.distinct() == wantA }, wait, tick)
	waitCursor(t, b, "pipe.a", "g", uint64(wantA))
}

// testPipelinedErrorsPerEvent hands one Publisher a batch of good records
// with bad ones among them (an id the topic holds, an id repeated in the
// batch, an id too long, a payload that is not JSON, a record an
// interceptor refuses) and checks that each bad one gets its own outcome
// and the good ones are stored, in order.
func testPipelinedErrorsPerEvent(t *testing.T, s event.Store) {
	g := newGate()
	g.refuseID = "refused"
	b := newBus(t, s, withGate(g))
	ctx := context.Background()
	old, err := b.Publish(ctx, "t", []byte(`"old"`), event.WithID("old"))
	require.NoError(t, err)

	pub, err := b.NewPublisher(event.PublisherConfig{})
	require.NoError(t, err)
	// The first publish holds the writer, so that the others queue up
	// behind it and are written as one batch.
	first := pub.Publish(ctx, "t", []byte(`"first"`), event.WithHeaders(map[string]string{"gate": "1"}))
	type want struct {
		id      string
		payload string
		err     error  // the error wanted, nil for stored
		seqOf   string // the stored record it must equal, "" for a new one
	}
	wants := []want{
		{id: "g1", payload: `1`},
		{id: "old", payload: `"again"`, seqOf: "old"},
		{id: "g2", payload: `2`},
		{id: "refused", payload: `3`, err: errRefused},
		{id: strings.Repeat("x", event.MaxIDLen+1), payload: `4`, err: event.ErrInvalid},
		{id: "g1", payload: `"repeat"`, seqOf: "g1"},
		{id: "bad-json", payload: `{`, err: event.ErrInvalid},
		{id: "g3", payload: `5`},
	}
	res := make([]*event.PublishFuture, len(wants))
	for i, w := range wants {
		res[i] = pub.Publish(ctx, "t", []byte(w.payload), event.WithID(w.id))
	}
	close(g.open)
	require.NoError(t, pub.Flush(ctx))

	r0, err := first.Get(ctx)
	require.NoError(t, err)
	stored := map[string]event.Record{"old": old}
	last := r0.Seq
	for i, w := range wants {
		rec, err := res[i].Get(ctx)
		if w.err != nil {
			assert.ErrorIs(t, err, w.err, "publish %d (id %.20q)", i, w.id)
			continue
		}
		require.NoError(t, err, "publish %d (id %q)", i, w.id)
		if w.seqOf != "" {
			assert.Equal(t, stored[w.seqOf].Seq, rec.Seq, "publish %d (id %q) returns the stored record", i, w.id)
			assert.JSONEq(t, string(stored[w.seqOf].Payload), string(rec.Payload))
			continue
		}
		assert.JSONEq(t, w.payload, string(rec.Payload))
		assert.Greater(t, rec.Seq, last, "publish %d (id %q) stored in order", i, w.id)
		last = rec.Seq
		stored[w.id] = rec
	}
	assert.Greater(t, g.largestBatch(), 1, "the queued publishes were written as a batch")
	head, err := s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(5), head, "old, first, g1, g2 and g3 are stored, nothing else")
	for _, id := range []string{"refused", "bad-json"} {
		_, err := s.FindByID(ctx, "t", id)
		assert.ErrorIs(t, err, event.ErrNotFound, "id %q", id)
	}
}

// testPipelinedWindow checks the back-pressure of a full window, Flush,
// a second Publisher of the same Bus, and that Close waits for what was handed
// over and refuses the rest.
func testPipelinedWindow(t *testing.T, s event.Store) {
	g := newGate()
	b := newBus(t, s, withGate(g))
	ctx := context.Background()
	pub, err := b.NewPublisher(event.PublisherConfig{MaxPending: 3})
	require.NoError(t, err)
	held := []*event.PublishFuture{
		pub.Publish(ctx, "w", []byte(`0`), event.WithHeaders(map[string]string{"gate": "1"})),
		pub.Publish(ctx, "w", []byte(`1`)),
		pub.Publish(ctx, "w", []byte(`2`)),
	}
	assert.Equal(t, 3, pub.Pending())
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = pub.Publish(cancelled, "w", []byte(`3`)).Get(ctx)
	require.ErrorIs(t, err, context.Canceled, "a full window waits, until ctx ends")
	flushCtx, cancelFlush := context.WithCancel(ctx)
	cancelFlush()
	require.ErrorIs(t, pub.Flush(flushCtx), context.Canceled, "Flush waits for the held publishes")
	for _, r := range held {
		select {
		case <-r.Done():
			t.Fatal("a publish finished while the writer was held")
		default:
		}
	}

	close(g.open)
	require.NoError(t, pub.Flush(ctx))
	assert.Zero(t, pub.Pending())
	for i, r := range held {
		rec, err := r.Get(ctx)
		require.NoError(t, err)
		assert.Equal(t, uint64(i+1), rec.Seq)
	}

	other, err := b.NewPublisher(event.PublisherConfig{})
	require.NoError(t, err)
	fut := other.Publish(ctx, "w", []byte(`4`))
	require.NoError(t, other.Flush(ctx))
	rec, err := fut.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(4), rec.Seq)
	_, err = other.Publish(ctx, "w", []byte(`not json`)).Get(ctx)
	assert.ErrorIs(t, err, event.ErrInvalid)

	// Close waits for the publishes handed over before it.
	last := pub.Publish(ctx, "w", []byte(`5`))
	closeCtx, cancelClose := context.WithTimeout(ctx, wait)
	defer cancelClose()
	require.NoError(t, b.Close(closeCtx))
	rec, err = last.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, uint64(5), rec.Seq)
	_, err = pub.Publish(ctx, "w", []byte(`6`)).Get(ctx)
	assert.ErrorIs(t, err, event.ErrClosed)
}
