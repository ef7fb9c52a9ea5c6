package sqltxtest

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/dedupe"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/proctest"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/txn"
)

// Shared makes databases that several processes share, for
// [RunProcesses]: the test binary runs again as helper processes (see
// [HelperMain]), which open the environment from the settings New
// returned.
type Shared struct {
	// New prepares a new, empty database (and a shared event store) for
	// the test and returns the settings a process needs to open them, as
	// environment variables.
	New func(t *testing.T) map[string]string
	// Open opens the environment the settings name (read with getenv),
	// Events included, creating the stores' tables if absent, and returns
	// it with a function that closes it.
	Open func(ctx context.Context, getenv func(string) string) (Env, func(), error)
}

const helperEnv = "SQLTXTEST_HELPER"

// HelperMain runs this process as a helper of [RunProcesses] and exits,
// if it was started as one; otherwise it returns at once. Call it first
// in TestMain.
func HelperMain(open func(ctx context.Context, getenv func(string) string) (Env, func(), error)) {
	if os.Getenv(helperEnv) == "" {
		return
	}
	if err := helper(open); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// line is one report of a helper process.
type line struct {
	Ready bool `json:"ready,omitempty"`
	// Effect: the handler wrote the effect of event I (in its
	// transaction).
	Effect bool `json:"effect,omitempty"`
	// Committed: the transaction of event I committed.
	Committed bool `json:"committed,omitempty"`
	// Seen: a delivery of event I found its mark (or not).
	Seen *bool `json:"seen,omitempty"`
	// Hang: the process stops at its kill point, at event I (or, for a
	// drainer, before marking its I-th batch).
	Hang bool `json:"hang,omitempty"`
	// Sent: a drainer marked I rows sent.
	Sent bool `json:"sent,omitempty"`
	I    int  `json:"i"`
}

// lineWriter writes a helper's reports.
type lineWriter = proctest.Writer[line]

// seenStore reports every Seen of the dedupe store: each delivery of
// SubscribeExactlyOnceTx asks it first, which also tells the runner which
// event it runs.
type seenStore struct {
	dedupe.TxStore
	out *lineWriter
	idx func(key string) int
}

func (s seenStore) Seen(ctx context.Context, key string) (bool, error) {
	ok, err := s.TxStore.Seen(ctx, key)
	if err == nil {
		s.out.Write(line{Seen: &ok, I: s.idx(key)})
	}
	return ok, err
}

// helper consumes topic "t" in group "g" with SubscribeExactlyOnceTx, one
// delivery at a time: the handler increments the event's effect and adds
// an outbox row "out-<id>", in the delivery's transaction. With
// HANG_IN_TX=i it stops in event i's transaction after writing its
// effect; with HANG_AFTER_COMMIT=i it stops after event i's transaction
// committed, before the ack. It runs until SIGTERM.
func helper(open func(ctx context.Context, getenv func(string) string) (Env, func(), error)) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	env, closeEnv, err := open(ctx, os.Getenv)
	if err != nil {
		return err
	}
	defer closeEnv()
	out := proctest.NewWriter[line](os.Stdout)
	if os.Getenv("HELPER_ROLE") == "drain" {
		return drain(ctx, env, out)
	}
	hangInTx, hangAfter := envInt("HANG_IN_TX"), envInt("HANG_AFTER_COMMIT")
	bus, err := event.NewBus(env.Events, event.Config{LeaseTTL: time.Second, CommitInterval: 20 * time.Millisecond, MemberID: os.Getenv("HELPER_MEMBER")})
	if err != nil {
		return err
	}
	// The index of each event (its payload) by its dedupe key: the
	// events were published before the helpers start.
	recs, err := env.Events.Read(ctx, "t", 0, 1000)
	if err != nil {
		return err
	}
	ids := make(map[string]int, len(recs))
	for _, r := range recs {
		i, err := strconv.Atoi(string(r.Payload))
		if err != nil {
			return err
		}
		ids[dedupe.Key("t", "g", r.ID)] = i
	}
	var mu sync.Mutex
	current := -1 // the event whose delivery is in progress (one at a time)
	idx := func(key string) int {
		mu.Lock()
		defer mu.Unlock()
		current = ids[key]
		return current
	}
	runner := txn.RunnerFunc(func(ctx context.Context, fn func(context.Context) error) error {
		err := env.Runner.InTx(ctx, fn)
		mu.Lock()
		i := current
		mu.Unlock()
		if err == nil {
			out.Write(line{Committed: true, I: i})
			if i == hangAfter {
				out.Write(line{Hang: true, I: i})
				select {} // killed here: committed, not acked
			}
		}
		return err
	})
	h := func(ctx context.Context, d *event.Delivery) error {
		i, err := strconv.Atoi(string(d.Payload))
		if err != nil {
			return err
		}
		if err := env.Exec(ctx, incFX, d.ID); err != nil {
			return err
		}
		if err := env.Outbox.Add(ctx, outbox.Message{ID: "out-" + d.ID, Topic: "fx", Payload: d.Payload}); err != nil {
			return err
		}
		out.Write(line{Effect: true, I: i})
		if i == hangInTx {
			out.Write(line{Hang: true, I: i})
			select {} // killed here: the effect written, not committed
		}
		return nil
	}
	_, err = dedupe.SubscribeExactlyOnceTx(ctx, dedupe.TxConfig{
		Bus: bus, Topic: "t", Group: "g", Store: seenStore{TxStore: env.Dedupe, out: out, idx: idx}, Tx: runner, Handler: h,
		Options: dedupe.Options{Subscribe: []event.SubscribeOption{
			event.FromEarliest(), event.WithMaxInFlight(1), event.WithBackoff(time.Millisecond, 10*time.Millisecond),
		}},
	})
	if err != nil {
		return err
	}
	out.Write(line{Ready: true})
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return bus.Close(cctx)
}

// markReporter reports the drainer's marks, and stops before the
// hang-th one: the batch is published, not marked.
type markReporter struct {
	outbox.Store
	out     *lineWriter
	hang    int
	batches int
}

func (m *markReporter) MarkSent(ctx context.Context, token int64, ids ...string) error {
	m.batches++
	if m.batches == m.hang {
		m.out.Write(line{Hang: true, I: m.batches})
		select {} // killed here: published, not marked sent
	}
	err := m.Store.MarkSent(ctx, token, ids...)
	if err == nil {
		m.out.Write(line{Sent: true, I: len(ids)})
	}
	return err
}

// drain runs an outbox drainer (Worker HELPER_MEMBER, batches of 10, a
// lease of one second) publishing into the shared event store until
// SIGTERM; with HANG_AT_BATCH=i it stops before marking its i-th batch.
func drain(ctx context.Context, env Env, out *lineWriter) error {
	bus, err := event.NewBus(env.Events, event.Config{})
	if err != nil {
		return err
	}
	defer bus.Close(context.Background())
	d, err := outbox.NewDrainer(outbox.Config{
		Store: &markReporter{Store: env.Outbox, out: out, hang: envInt("HANG_AT_BATCH")}, Bus: bus,
		Worker: os.Getenv("HELPER_MEMBER"), BatchSize: 10, LeaseTTL: time.Second, PollInterval: 20 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// envInt returns the integer in the environment variable name, or -1.
func envInt(name string) int { return proctest.EnvInt(name, -1) }

// proc is a helper process and what it reported.
type proc = proctest.Proc[line]

func start(t *testing.T, name string, settings, env map[string]string) *proc {
	return startRole(t, name, "consume", settings, env)
}

func startRole(t *testing.T, name, role string, settings, env map[string]string) *proc {
	t.Helper()
	return proctest.Start[line](t, name, map[string]string{helperEnv: "1", "HELPER_MEMBER": name, "HELPER_ROLE": role}, settings, env)
}

// RunProcesses publishes events and consumes them with
// SubscribeExactlyOnceTx in a helper process, one at a time, killing it
// with SIGKILL twice: first inside an event's transaction, after its
// effect was written (the effect is not there; the next process runs the
// handler again), then after another event's transaction committed,
// before its ack (the effect is there; the next process gets the event
// again, finds its mark and does not run the handler). At the end every
// event's effect and outbox row are there exactly once. It also kills the
// leader of two outbox drainer processes between a publish and its mark
// (testDrainerKilled).
func RunProcesses(t *testing.T, sh Shared) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Run("KilledBetweenEffectAndAck", func(t *testing.T) { t.Parallel(); testKilled(t, sh) })
	t.Run("DrainerKilled", func(t *testing.T) { t.Parallel(); testDrainerKilled(t, sh) })
}

func testKilled(t *testing.T, sh Shared) {
	settings := sh.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	env, closeEnv, err := sh.Open(ctx, func(k string) string { return settings[k] })
	require.NoError(t, err)
	t.Cleanup(closeEnv)
	setup(t, env)
	const n, inTx, afterCommit = 10, 3, 6
	bus, err := event.NewBus(env.Events, event.Config{})
	require.NoError(t, err)
	ids := make([]string, n)
	for i := range n {
		rec, err := bus.Publish(ctx, "t", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
		ids[i] = rec.ID
	}
	require.NoError(t, bus.Close(ctx))
	fx := func(i int) int64 { return count(t, env, countFX, ids[i]) }
	is := func(kind string, i int) func(line) bool {
		return func(l line) bool {
			switch kind {
			case "hang":
				return l.Hang && l.I == i
			case "effect":
				return l.Effect && l.I == i
			case "seen":
				return l.Seen != nil && *l.Seen && l.I == i
			}
			return false
		}
	}

	first := start(t, "first", settings, map[string]string{"HANG_IN_TX": strconv.Itoa(inTx)})
	first.WaitFor(t, "stops in a transaction", wait, is("hang", inTx))
	first.Kill(t)
	assert.Zero(t, fx(inTx), "the effect of the killed transaction is not there")
	for i := range inTx {
		assert.Equal(t, int64(1), fx(i), "event %d", i)
	}

	second := start(t, "second", settings, map[string]string{"HANG_AFTER_COMMIT": strconv.Itoa(afterCommit)})
	second.WaitFor(t, "stops after a commit", wait, is("hang", afterCommit))
	second.Kill(t)
	assert.True(t, second.Has(is("effect", inTx)), "the rolled-back event is redelivered and its handler runs again")
	assert.Equal(t, int64(1), fx(afterCommit), "the committed effect is there")

	third := start(t, "third", settings, nil)
	third.WaitFor(t, "ready", wait, func(l line) bool { return l.Ready })
	cs, ok := env.Events.(event.CursorStore)
	require.True(t, ok)
	require.Eventually(t, func() bool {
		c, err := cs.Cursors(ctx, "t", "g")
		return err == nil && c[0] == n
	}, wait, 10*time.Millisecond, "the group acks every event")
	require.NoError(t, third.Signal(syscall.SIGTERM))
	<-third.Exited()
	assert.True(t, third.Has(is("seen", afterCommit)), "the committed event is redelivered and finds its mark")
	assert.False(t, third.Has(is("effect", afterCommit)), "its handler does not run again")

	for i := range n {
		assert.Equal(t, int64(1), fx(i), "event %d's effect", i)
		_, err := env.Outbox.Row(ctx, "out-"+ids[i])
		assert.NoError(t, err, "event %d's outbox row", i)
	}
	st, err := env.Outbox.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, outbox.Stats{Pending: n}, st, "one outbox row per event")
}

// testDrainerKilled runs two outbox drainer processes over one outbox and
// kills the leader with SIGKILL after it published a batch and before it
// marked it: the other takes the lease over when it ends and publishes
// the rest, the killed batch again, and the shared event store holds every
// row once, in order per key.
func testDrainerKilled(t *testing.T, sh Shared) {
	settings := sh.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	env, closeEnv, err := sh.Open(ctx, func(k string) string { return settings[k] })
	require.NoError(t, err)
	t.Cleanup(closeEnv)
	const n, keys = 100, 5
	msgs := make([]outbox.Message, n)
	for i := range msgs {
		msgs[i] = outbox.Message{ID: fmt.Sprintf("row-%03d", i), Topic: "drained", Key: "k" + strconv.Itoa(i%keys), Payload: []byte(strconv.Itoa(i))}
	}
	require.NoError(t, env.Outbox.Add(ctx, msgs...))

	first := startRole(t, "first", "drain", settings, map[string]string{"HANG_AT_BATCH": "3"})
	first.WaitFor(t, "leads", wait, func(l line) bool { return l.Sent })
	second := startRole(t, "second", "drain", settings, nil)
	first.WaitFor(t, "stops before a mark", wait, func(l line) bool { return l.Hang })
	first.Kill(t)
	require.Eventually(t, func() bool {
		st, err := env.Outbox.Stats(ctx)
		return err == nil && st.Sent == n
	}, wait, 10*time.Millisecond, "the other drainer sends the rest")
	require.NoError(t, second.Signal(syscall.SIGTERM))
	<-second.Exited()
	assert.True(t, second.Has(func(l line) bool { return l.Sent }), "the second drainer sent rows")

	recs, err := env.Events.Read(ctx, "drained", 0, 2*n)
	require.NoError(t, err)
	require.Len(t, recs, n, "every row once in the topic")
	last := map[string]int{}
	for _, r := range recs {
		i, err := strconv.Atoi(string(r.Payload))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("row-%03d", i), r.ID)
		if prev, ok := last[r.Key]; ok {
			assert.Greater(t, i, prev, "key %s out of order", r.Key)
		}
		last[r.Key] = i
	}
}
