package sqltxtest

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/outbox/outboxtest"
	"github.com/promethean/promlib/txn"
)

const wait = 60 * time.Second

// Env is one database: a runner of its transactions and stores in it.
type Env struct {
	Runner txn.Runner
	Outbox outboxtest.Store
	Dedupe dedupe.TxStore
	// Exec runs a statement as the application does: in the transaction
	// ctx carries (it must fail without one).
	Exec func(ctx context.Context, query string, args ...any) error
	// Int runs a query that returns one integer, outside any
	// transaction.
	Int func(ctx context.Context, query string, args ...any) (int64, error)
	// Events is an event store that processes share, for RunProcesses;
	// nil in Run, which uses an in-memory store.
	Events event.Store
}

// Statements on the application's tables, in the SQL that SQLite and
// PostgreSQL share.
const (
	createTables = `CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY)`
	createFX     = `CREATE TABLE IF NOT EXISTS effects (id TEXT PRIMARY KEY, n INTEGER NOT NULL)`
	incFX        = `INSERT INTO effects (id, n) VALUES ($1, 1) ON CONFLICT (id) DO UPDATE SET n = effects.n + 1`
	countFX      = `SELECT COALESCE(SUM(n), 0) FROM effects WHERE id = $1`
)

// Run runs the in-process tests against environments made by newEnv,
// each on a new, empty database.
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	t.Run("OutboxAddCommitsWithTheCallersWrites", func(t *testing.T) { t.Parallel(); testOutbox(t, newEnv(t)) })
	t.Run("CommitWakesTheDrainer", func(t *testing.T) { t.Parallel(); testCommitWakes(t, newEnv(t)) })
	t.Run("ExactlyOnceTxRollbackRedelivers", func(t *testing.T) { t.Parallel(); testRollbackRedelivers(t, newEnv(t)) })
	t.Run("ExactlyOnceTxConcurrent", func(t *testing.T) { t.Parallel(); testConcurrent(t, newEnv(t)) })
}

func setup(t *testing.T, env Env) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, env.Runner.InTx(ctx, func(ctx context.Context) error {
		if err := env.Exec(ctx, createTables); err != nil {
			return err
		}
		return env.Exec(ctx, createFX)
	}))
}

func count(t *testing.T, env Env, query string, args ...any) int64 {
	t.Helper()
	n, err := env.Int(context.Background(), query, args...)
	require.NoError(t, err)
	return n
}

// An order row and its outbox row commit together; a failed transaction
// leaves neither; a refused Add inside a transaction leaves the
// transaction usable and without its rows; an InTx inside joins; the
// drainer publishes the committed rows only.
func testOutbox(t *testing.T, env Env) {
	setup(t, env)
	ctx := context.Background()
	ob, tx := env.Outbox, env.Runner
	order := func(ctx context.Context, id string) error {
		return env.Exec(ctx, `INSERT INTO orders (id) VALUES ($1)`, id)
	}
	msg := func(id string) outbox.Message {
		return outbox.Message{ID: id, Topic: "orders", Payload: []byte(`{"order":"` + id + `"}`)}
	}
	require.NoError(t, tx.InTx(ctx, func(ctx context.Context) error {
		if err := order(ctx, "o-1"); err != nil {
			return err
		}
		return ob.Add(ctx, msg("ev-1"))
	}))

	errAbort := errors.New("payment refused")
	err := tx.InTx(ctx, func(ctx context.Context) error {
		if err := order(ctx, "o-2"); err != nil {
			return err
		}
		if err := tx.InTx(ctx, func(ctx context.Context) error { return ob.Add(ctx, msg("ev-2")) }); err != nil {
			return err
		}
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)

	require.NoError(t, tx.InTx(ctx, func(ctx context.Context) error {
		if err := order(ctx, "o-3"); err != nil {
			return err
		}
		err := ob.Add(ctx, msg("ev-3"), msg("ev-1"))
		if !assert.ErrorIs(t, err, outbox.ErrInvalid, "ev-1 is in the outbox") {
			return errors.New("the duplicate was not refused")
		}
		return ob.Add(ctx, msg("ev-4"))
	}), "the transaction goes on after a refused Add")

	assert.Equal(t, int64(1), count(t, env, `SELECT COUNT(*) FROM orders WHERE id = $1`, "o-1"))
	assert.Zero(t, count(t, env, `SELECT COUNT(*) FROM orders WHERE id = $1`, "o-2"), "the failed transaction's order")
	assert.Equal(t, int64(1), count(t, env, `SELECT COUNT(*) FROM orders WHERE id = $1`, "o-3"))
	for id, want := range map[string]bool{"ev-1": true, "ev-2": false, "ev-3": false, "ev-4": true} {
		_, err := ob.Row(ctx, id)
		assert.Equal(t, want, err == nil, "row %s stored: %v", id, err)
	}
	st, err := ob.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, outbox.Stats{Pending: 2}, st)

	es := event.NewMemoryStore()
	bus, err := event.NewBus(es, event.Config{})
	require.NoError(t, err)
	defer bus.Close(ctx)
	d, err := outbox.NewDrainer(outbox.Config{Store: ob, Bus: bus, PollInterval: 10 * time.Millisecond})
	require.NoError(t, err)
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	require.Eventually(t, func() bool {
		st, err := ob.Stats(ctx)
		return err == nil && st.Sent == 2
	}, wait, 5*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	recs, err := es.Read(ctx, "orders", 0, 10)
	require.NoError(t, err)
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	assert.Equal(t, []string{"ev-1", "ev-4"}, ids, "the committed rows, once each")
}

// claimCounter counts the drainer's claims that returned.
type claimCounter struct {
	outboxtest.Store
	claims atomic.Int32
}

func (c *claimCounter) Claim(ctx context.Context, token int64, n int) ([]outbox.Row, error) {
	rows, err := c.Store.Claim(ctx, token, n)
	c.claims.Add(1)
	return rows, err
}

func (c *claimCounter) Watch() (<-chan struct{}, func()) { return c.Store.(outbox.Notifier).Watch() }

// A drainer whose polls never come (its clock stands still) publishes a
// row added in a transaction as soon as the transaction commits: the
// commit wakes it.
func testCommitWakes(t *testing.T, env Env) {
	ctx := context.Background()
	ob := &claimCounter{Store: env.Outbox}
	bus := newBus(t)
	d, err := outbox.NewDrainer(outbox.Config{
		Store: ob, Bus: bus, LeaseTTL: time.Hour,
		Clock: clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	})
	require.NoError(t, err)
	dctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(dctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	require.Eventually(t, func() bool { return ob.claims.Load() > 0 }, wait, time.Millisecond, "the drainer's first claim")

	require.NoError(t, env.Runner.InTx(ctx, func(ctx context.Context) error {
		return env.Outbox.Add(ctx, outbox.Message{ID: "woken", Topic: "t", Payload: []byte(`1`)})
	}))
	require.Eventually(t, func() bool {
		st, err := env.Outbox.Stats(ctx)
		return err == nil && st.Sent == 1
	}, wait, time.Millisecond, "published after the commit, with no poll")
}

// fxHandler counts its runs and increments the delivery's effect in the
// transaction; fail makes a run fail after writing its effect.
func fxHandler(env Env, runs *atomic.Int32, fail func(d *event.Delivery) bool) event.Handler {
	return func(ctx context.Context, d *event.Delivery) error {
		runs.Add(1)
		if err := env.Exec(ctx, incFX, d.ID); err != nil {
			return err
		}
		if fail != nil && fail(d) {
			return errors.New("the handler fails after writing its effect")
		}
		return nil
	}
}

func newBus(t *testing.T) *event.Bus {
	t.Helper()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	return bus
}

func waitCursor(t *testing.T, bus *event.Bus, seq uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := bus.Cursor(context.Background(), "t", "g")
		return err == nil && c.Seq == seq
	}, wait, 5*time.Millisecond)
}

// A handler that fails after writing its effect rolls the effect and the
// mark back: the event is redelivered and the handler runs again, and
// the effect is there once. Rewound, the group gets the event again, and
// the committed work is not redone.
func testRollbackRedelivers(t *testing.T, env Env) {
	setup(t, env)
	ctx := context.Background()
	bus := newBus(t)
	var runs atomic.Int32
	h := fxHandler(env, &runs, func(d *event.Delivery) bool { return d.Attempt == 1 })
	sub, err := dedupe.SubscribeExactlyOnceTx(ctx, dedupe.TxConfig{
		Bus: bus, Topic: "t", Group: "g", Store: env.Dedupe, Tx: env.Runner, Handler: h,
		Options: dedupe.Options{Subscribe: []event.SubscribeOption{event.FromEarliest(), event.WithBackoff(time.Millisecond, 10*time.Millisecond)}},
	})
	require.NoError(t, err)
	rec, err := bus.Publish(ctx, "t", []byte(`1`))
	require.NoError(t, err)
	waitCursor(t, bus, rec.Seq)
	assert.Equal(t, int32(2), runs.Load(), "redelivered after the rollback and run again")
	assert.Equal(t, int64(1), count(t, env, countFX, rec.ID), "the rolled-back effect is gone, the second is there")
	seen, err := env.Dedupe.Seen(ctx, dedupe.Key("t", "g", rec.ID))
	require.NoError(t, err)
	assert.True(t, seen)

	require.NoError(t, sub.Close())
	_, err = bus.ResetCursor(ctx, "t", "g", event.Earliest(), false)
	require.NoError(t, err)
	_, err = dedupe.SubscribeExactlyOnceTx(ctx, dedupe.TxConfig{
		Bus: bus, Topic: "t", Group: "g", Store: env.Dedupe, Tx: env.Runner, Handler: h,
		Options: dedupe.Options{Subscribe: []event.SubscribeOption{event.FromEarliest()}},
	})
	require.NoError(t, err)
	waitCursor(t, bus, rec.Seq)
	assert.Equal(t, int32(2), runs.Load(), "the committed work is not redone")
	assert.Equal(t, int64(1), count(t, env, countFX, rec.ID))
}

// Three subscribers of one group, some handlers slower than the ack
// timeout (so another subscriber gets the event while the first still
// runs its transaction): each event's effect commits once.
func testConcurrent(t *testing.T, env Env) {
	setup(t, env)
	ctx := context.Background()
	bus := newBus(t)
	var runs atomic.Int32
	slow := func(ctx context.Context, d *event.Delivery) error {
		if d.Attempt == 1 && string(d.Payload) == "0" {
			time.Sleep(300 * time.Millisecond) // past the ack timeout: redelivered meanwhile
		}
		return fxHandler(env, &runs, nil)(ctx, d)
	}
	opts := dedupe.Options{Subscribe: []event.SubscribeOption{
		event.FromEarliest(), event.WithConcurrency(4), event.WithAckTimeout(200 * time.Millisecond),
		event.WithBackoff(time.Millisecond, 10*time.Millisecond), event.WithMaxAttempts(50),
	}}
	marks := &markCounter{TxStore: env.Dedupe}
	for range 3 {
		_, err := dedupe.SubscribeExactlyOnceTx(ctx, dedupe.TxConfig{
			Bus: bus, Topic: "t", Group: "g", Store: marks, Tx: env.Runner, Handler: slow, Options: opts,
		})
		require.NoError(t, err)
	}
	const n = 60
	ids := make([]string, n)
	for i := range n {
		rec, err := bus.Publish(ctx, "t", []byte(strconv.Itoa(i%10)))
		require.NoError(t, err)
		ids[i] = rec.ID
	}
	waitCursor(t, bus, n)
	for _, id := range ids {
		assert.Equal(t, int64(1), count(t, env, countFX, id), "id %s", id)
	}
	assert.Equal(t, int32(n), runs.Load(), "each handler run committed")
	t.Logf("%d handler runs for %d events; %d marks refused (a concurrent delivery's)", runs.Load(), n, marks.refused.Load())
}

// markCounter counts the marks refused because another delivery's
// transaction wrote the key's mark first.
type markCounter struct {
	dedupe.TxStore
	refused atomic.Int32
}

func (m *markCounter) MarkDone(ctx context.Context, key, owner string, ttl time.Duration) error {
	err := m.TxStore.MarkDone(ctx, key, owner, ttl)
	if errors.Is(err, dedupe.ErrDone) {
		m.refused.Add(1)
	}
	return err
}
