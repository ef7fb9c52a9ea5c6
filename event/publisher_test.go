package event_test

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// partialStore refuses the records with id "bad" one by one, as a store
// that reports errors per record does, and counts its appends.
type partialStore struct {
	*event.MemoryStore
	appends atomic.Int32
}

var errBad = errors.New("bad record")

func (s *partialStore) Append(ctx context.Context, topic string, recs []event.Record) ([]event.Record, error) {
	s.appends.Add(1)
	var good []event.Record
	for _, r := range recs {
		if r.ID != "bad" {
			good = append(good, r)
		}
	}
	if len(good) == len(recs) {
		return s.MemoryStore.Append(ctx, topic, recs)
	}
	stored, err := s.MemoryStore.Append(ctx, topic, good)
	if err != nil {
		return nil, err
	}
	out := make([]event.Record, len(recs))
	errs := make([]error, len(recs))
	for i, r := range recs {
		if r.ID == "bad" {
			errs[i] = errBad
			continue
		}
		out[i], stored = stored[0], stored[1:]
	}
	return out, &event.RecordErrors{Errs: errs}
}

// TestPublisherTakesRecordErrors checks that a store's per-record errors
// reach each publish's result, without a retry of the batch.
func TestPublisherTakesRecordErrors(t *testing.T) {
	s := &partialStore{MemoryStore: event.NewMemoryStore()}
	bus, err := event.NewBus(s, event.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	defer bus.Close(ctx)
	pub, err := bus.NewPublisher(event.PublisherConfig{})
	require.NoError(t, err)

	// However the four are split into batches, a retry of a batch that
	// holds "bad" with another record would take more than four appends.
	ids := []string{"a", "b", "bad", "c"}
	var res []*event.PublishFuture
	for _, id := range ids {
		res = append(res, pub.Publish(ctx, "t", []byte(`1`), event.WithID(id)))
	}
	require.NoError(t, pub.Flush(ctx))
	var seqs []uint64
	for i, r := range res {
		rec, err := r.Get(ctx)
		if ids[i] == "bad" {
			assert.ErrorIs(t, err, errBad)
			continue
		}
		require.NoError(t, err)
		seqs = append(seqs, rec.Seq)
	}
	assert.Equal(t, []uint64{1, 2, 3}, seqs)
	assert.LessOrEqual(t, s.appends.Load(), int32(len(ids)), "no record was appended twice")
	head, err := s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), head)
}

// TestPublisherResultsOutliveTheirBatch checks that a result reads the
// record it was given after the Publisher has written other batches, also
// when an interceptor answers with the very slice it was handed (the
// writer's buffer, which the next batch reuses).
func TestPublisherResultsOutliveTheirBatch(t *testing.T) {
	for _, echo := range []bool{false, true} {
		t.Run(map[bool]string{false: "store", true: "echoing interceptor"}[echo], func(t *testing.T) {
			t.Parallel()
			var cfg event.Config
			if echo {
				var seq atomic.Uint64
				cfg.PublishInterceptors = []event.PublishInterceptor{func(event.PublishFunc) event.PublishFunc {
					return func(_ context.Context, _ string, recs []event.Record) ([]event.Record, error) {
						for i := range recs {
							recs[i].Seq = seq.Add(1)
						}
						return recs, nil
					}
				}}
			}
			bus, err := event.NewBus(event.NewMemoryStore(), cfg)
			require.NoError(t, err)
			ctx := context.Background()
			defer bus.Close(ctx)
			pub, err := bus.NewPublisher(event.PublisherConfig{MaxBatch: 3})
			require.NoError(t, err)

			const n = 50
			res := make([]*event.PublishFuture, n)
			for i := range n {
				res[i] = pub.Publish(ctx, "t", []byte(strconv.Itoa(i)), event.WithKey("k"+strconv.Itoa(i)))
				if i%7 == 0 {
					require.NoError(t, pub.Flush(ctx)) // some batches written before others are handed over
				}
			}
			require.NoError(t, pub.Flush(ctx))
			for i, r := range res {
				rec, err := r.Get(ctx)
				require.NoError(t, err)
				assert.Equal(t, uint64(i+1), rec.Seq)
				assert.Equal(t, "k"+strconv.Itoa(i), rec.Key)
				assert.Equal(t, strconv.Itoa(i), string(rec.Payload))
			}
		})
	}
}

// TestPublisherIdleHoldsNoPayload checks that once its queue is written a
// Publisher keeps no reference to the payloads it was handed (the store
// keeps its own copy): a host publishing large payloads now and then does
// not pin the last batch's memory.
func TestPublisherIdleHoldsNoPayload(t *testing.T) {
	t.Parallel()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	defer bus.Close(ctx)
	pub, err := bus.NewPublisher(event.PublisherConfig{})
	require.NoError(t, err)

	var refs []weak.Pointer[byte]
	for i := range 20 {
		payload := []byte(`{"n":` + strconv.Itoa(i) + `,"pad":"` + strings.Repeat("x", 4096) + `"}`)
		refs = append(refs, weak.Make(&payload[0]))
		pub.Publish(ctx, "t", payload)
	}
	require.NoError(t, pub.Flush(ctx))
	require.Eventually(t, func() bool {
		runtime.GC()
		for _, r := range refs {
			if r.Value() != nil {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "a payload is still referenced after its publish was written")
	assert.Zero(t, pub.Pending()) // and the Publisher lived all along
}

// remoteStore is a memory store that declares no capability beyond
// [event.Store]: the Bus treats it as a store behind a server.
type remoteStore struct{ event.Store }

// A Publisher's window defaults to DefaultMaxPendingInProcess over an
// in-process store and to DefaultMaxPending over any other; a window given
// is kept. (storetest's PipelinedWindow checks that a full window holds.)
func TestPublisherWindowDefaults(t *testing.T) {
	t.Parallel()
	mem := newTestBus(t)
	other, err := event.NewBus(remoteStore{event.NewMemoryStore()}, event.Config{Cursors: event.NewMemoryStore()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, other.Close(context.Background())) })
	for _, c := range []struct {
		name string
		bus  *event.Bus
		cfg  event.PublisherConfig
		want int
	}{
		{"memory", mem, event.PublisherConfig{}, event.DefaultMaxPendingInProcess},
		{"other store", other, event.PublisherConfig{}, event.DefaultMaxPending},
		{"memory, given", mem, event.PublisherConfig{MaxPending: 5000}, 5000},
		{"other store, given", other, event.PublisherConfig{MaxPending: 7}, 7},
	} {
		pub, err := c.bus.NewPublisher(c.cfg)
		require.NoError(t, err, c.name)
		got := pub.Config()
		assert.Equal(t, c.want, got.MaxPending, c.name)
		assert.Equal(t, event.DefaultPublishBatch, got.MaxBatch, c.name)
		assert.Equal(t, event.DefaultPublishBatchBytes, got.MaxBatchBytes, c.name)
	}
}

// localStore is a store of another package's kind that declares
// [event.InProcessStore] itself: it keeps its records in a memory store
// and counts the reads that go into a caller's buffer.
type localStore struct {
	event.Store
	into atomic.Int64
}

func (s *localStore) ReadInto(ctx context.Context, topic string, after uint64, limit int, buf []event.Record) ([]event.Record, error) {
	s.into.Add(1)
	recs, err := s.Read(ctx, topic, after, limit)
	return append(buf, recs...), err
}

var _ event.InProcessStore = (*localStore)(nil)

// A store that declares InProcessStore, not only the MemoryStore, gets
// the in-process paths: the small Publisher window and groups reading
// through ReadInto.
func TestInProcessStoreCapability(t *testing.T) {
	t.Parallel()
	s := &localStore{Store: event.NewMemoryStore()}
	b, err := event.NewBus(s, event.Config{Cursors: event.NewMemoryStore(), PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	ctx := context.Background()

	pub, err := b.NewPublisher(event.PublisherConfig{})
	require.NoError(t, err)
	assert.Equal(t, event.DefaultMaxPendingInProcess, pub.Config().MaxPending)

	got := make(chan string, 3)
	sub, err := b.Subscribe(ctx, "t", "g", func(_ context.Context, d *event.Delivery) error {
		got <- string(d.Payload)
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	for _, p := range []string{`1`, `2`, `3`} {
		pub.Publish(ctx, "t", []byte(p))
	}
	require.NoError(t, pub.Flush(ctx))
	for _, want := range []string{`1`, `2`, `3`} {
		select {
		case p := <-got:
			assert.Equal(t, want, p)
		case <-time.After(10 * time.Second):
			t.Fatalf("record %s not delivered", want)
		}
	}
	assert.Positive(t, s.into.Load(), "the group read through ReadInto")
}
