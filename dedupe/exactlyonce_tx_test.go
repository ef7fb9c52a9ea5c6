package dedupe_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/txn"
)

// effects is the handler's own in-process store: Inc counts a delivery's
// effect, in the memory transaction ctx carries, so the count and the
// dedupe mark commit together.
type effects struct {
	mu sync.Mutex
	n  map[string]int
}

type effectsPart struct {
	e   *effects
	inc map[string]int
}

func (p *effectsPart) Lock()        { p.e.mu.Lock() }
func (p *effectsPart) Unlock()      { p.e.mu.Unlock() }
func (p *effectsPart) Check() error { return nil }
func (p *effectsPart) Apply() {
	for id, n := range p.inc {
		p.e.n[id] += n
	}
}

func (e *effects) Inc(ctx context.Context, id string) error {
	tx := txn.MemoryTxFrom(ctx)
	if tx == nil {
		return errors.New("effects: no transaction in ctx")
	}
	p, err := tx.Join(e, func() txn.Participant { return &effectsPart{e: e, inc: map[string]int{}} })
	if err != nil {
		return err
	}
	p.(*effectsPart).inc[id]++
	return nil
}

// Total sums the effects of every id.
func (e *effects) Total() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, v := range e.n {
		n += v
	}
	return n
}

func (e *effects) Get(id string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[id]
}

// txRun is a delivery's run of SubscribeExactlyOnceTx over the memory
// runner, with a crash point the test places around it.
type txRun struct {
	bus    *event.Bus
	store  *dedupe.MemoryStore
	fx     *effects
	runs   atomic.Int32 // handler runs
	inTx   atomic.Int32 // transactions begun
	before int          // the effects visible right after the first transaction
}

// startTx subscribes a handler that counts its runs and writes its
// effect; wrap wraps the memory runner to place the crash, and fail
// makes the handler fail on its first run.
func startTx(t *testing.T, wrap func(r *txRun, mem txn.Runner) txn.Runner, fail bool) *txRun {
	t.Helper()
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	r := &txRun{bus: bus, store: dedupe.NewMemoryStore(), fx: &effects{n: map[string]int{}}}
	h := func(ctx context.Context, d *event.Delivery) error {
		n := r.runs.Add(1)
		if err := r.fx.Inc(ctx, d.ID); err != nil {
			return err
		}
		if fail && n == 1 {
			return errors.New("handler fails after writing its effect")
		}
		return nil
	}
	_, err = dedupe.SubscribeExactlyOnceTx(ctx, dedupe.TxConfig{
		Bus: bus, Topic: "t", Group: "g", Store: r.store, Tx: wrap(r, txn.NewMemory()), Handler: h,
		Options: dedupe.Options{Subscribe: []event.SubscribeOption{
			event.FromEarliest(), event.WithBackoff(time.Millisecond, 10*time.Millisecond),
		}},
	})
	require.NoError(t, err)
	return r
}

// publishAndWait publishes one event and waits until the group acked it.
func (r *txRun) publishAndWait(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	rec, err := r.bus.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c, err := r.bus.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == rec.Seq
	}, 10*time.Second, 5*time.Millisecond)
	return rec.ID
}

// noteFirst runs a transaction and, after the first one, notes the
// effects as the rest of the process sees them.
func (r *txRun) noteFirst(run func() error) error {
	err := run()
	if r.inTx.Add(1) == 1 {
		r.before = r.fx.Total()
	}
	return err
}

// The handler wrote its effect and the process died before the commit:
// the effect is not visible, the event is redelivered and the handler
// runs again, once.
func TestSubscribeExactlyOnceTxKilledBeforeCommit(t *testing.T) {
	t.Parallel()
	r := startTx(t, func(r *txRun, mem txn.Runner) txn.Runner {
		return txn.RunnerFunc(func(ctx context.Context, fn func(context.Context) error) error {
			first := r.inTx.Load() == 0
			return r.noteFirst(func() error {
				ctx, kill := context.WithCancel(ctx)
				defer kill()
				return mem.InTx(ctx, func(ctx context.Context) error {
					err := fn(ctx)
					if first {
						kill() // dies after the handler, before the commit
					}
					return err
				})
			})
		})
	}, false)
	got := r.publishAndWait(t)
	assert.Equal(t, 0, r.before, "the uncommitted effect is not visible")
	assert.Equal(t, int32(2), r.runs.Load(), "redelivered and run again")
	assert.Equal(t, 1, r.fx.Get(got), "the effect happened once")
	seen, err := r.store.Seen(context.Background(), dedupe.Key("t", "g", got))
	require.NoError(t, err)
	assert.True(t, seen)
}

// The commit happened and the process died before the ack: the event is
// redelivered, finds its mark and is acked without running the handler.
func TestSubscribeExactlyOnceTxKilledAfterCommit(t *testing.T) {
	t.Parallel()
	r := startTx(t, func(r *txRun, mem txn.Runner) txn.Runner {
		return txn.RunnerFunc(func(ctx context.Context, fn func(context.Context) error) error {
			err := mem.InTx(ctx, fn)
			if r.inTx.Add(1) == 1 && err == nil {
				return errors.New("killed after the commit, before the ack")
			}
			return err
		})
	}, false)
	got := r.publishAndWait(t)
	assert.Equal(t, int32(1), r.runs.Load(), "the redelivery does not run the handler again")
	assert.Equal(t, int32(1), r.inTx.Load(), "nor begin a transaction")
	assert.Equal(t, 1, r.fx.Get(got))
}

// The handler failed after writing its effect: the transaction rolls
// back, the effect and the mark with it, and the redelivery runs the
// handler again.
func TestSubscribeExactlyOnceTxRollbackRedelivers(t *testing.T) {
	t.Parallel()
	r := startTx(t, func(r *txRun, mem txn.Runner) txn.Runner {
		return txn.RunnerFunc(func(ctx context.Context, fn func(context.Context) error) error {
			return r.noteFirst(func() error {
				return mem.InTx(ctx, func(ctx context.Context) error {
					return fn(ctx)
				})
			})
		})
	}, true)
	got := r.publishAndWait(t)
	assert.Equal(t, 0, r.before, "the rolled-back effect is not visible")
	assert.Equal(t, int32(2), r.runs.Load())
	assert.Equal(t, 1, r.fx.Get(got))
}

// Under redeliveries and concurrent subscribers, each id's effect
// commits once: the memory twin of mongodedupe's transaction test.
func TestSubscribeExactlyOnceTxConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	s, fx, tx := dedupe.NewMemoryStore(), &effects{n: map[string]int{}}, txn.NewMemory()
	h := func(ctx context.Context, d *event.Delivery) error { return fx.Inc(ctx, d.ID) }
	opts := dedupe.Options{Subscribe: []event.SubscribeOption{event.FromEarliest(), event.WithConcurrency(4)}}
	for range 3 {
		_, err := dedupe.SubscribeExactlyOnceTx(ctx, dedupe.TxConfig{
			Bus: bus, Topic: "t", Group: "g", Store: s, Tx: tx, Handler: h, Options: opts,
		})
		require.NoError(t, err)
	}
	const n = 300
	ids := make([]string, n)
	for i := range n {
		rec, err := bus.Publish(ctx, "t", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
		ids[i] = rec.ID
	}
	require.Eventually(t, func() bool {
		c, err := bus.Cursor(ctx, "t", "g")
		return err == nil && c.Seq == n
	}, 30*time.Second, 5*time.Millisecond)
	for _, id := range ids {
		assert.Equal(t, 1, fx.Get(id), "id %s", id)
	}
}
