package projector_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/projector"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type deposit struct {
	Account string `json:"account"`
	Amount  int    `json:"amount"`
}

type balance struct {
	Total int `json:"total"`
	Count int `json:"count"`
}

func newCounter(t *testing.T, bus *event.Bus) *projector.Projector[deposit, balance] {
	t.Helper()
	p, err := projector.NewProjector(projector.Config[deposit, balance]{
		Bus: bus, Input: "deposits", Output: "balances",
		Key: func(_ *event.Record, d deposit) (string, error) { return d.Account, nil },
		Reduce: func(_ string, prev balance, _ bool, d deposit, _ *event.Record) (balance, error) {
			return balance{prev.Total + d.Amount, prev.Count + 1}, nil
		},
	})
	require.NoError(t, err)
	return p
}

// A counting projector stopped and restarted (on a new Bus over the same
// store, as after a crash) counts every deposit exactly once.
func TestRestartCountsEachInputOnce(t *testing.T) {
	ctx := context.Background()
	store := event.NewMemoryStore()
	publish := func(bus *event.Bus, from, to int) {
		for i := from; i < to; i++ {
			_, err := event.PublishJSON(ctx, bus, "deposits", deposit{"acct-" + strconv.Itoa(i%5), i}, event.WithKey("acct-"+strconv.Itoa(i%5)))
			require.NoError(t, err)
		}
	}
	want := func(to int) map[string]balance {
		m := make(map[string]balance)
		for i := 0; i < to; i++ {
			k := "acct-" + strconv.Itoa(i%5)
			b := m[k]
			m[k] = balance{b.Total + i, b.Count + 1}
		}
		return m
	}
	run := func(to int) {
		bus, err := event.NewBus(store, event.Config{})
		require.NoError(t, err)
		p := newCounter(t, bus)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- p.Run(rctx) }()
		publish(bus, to-100, to)
		w := want(to)
		require.Eventually(t, func() bool {
			for k, b := range w {
				if s, ok := p.State(k); !ok || s != b {
					return false
				}
			}
			return true
		}, 10*time.Second, 5*time.Millisecond)
		cancel()
		require.NoError(t, <-done)
		// As if the process died before committing its last 50 acks: the
		// next run gets those inputs again.
		c, err := bus.Cursor(ctx, "deposits", "projector:balances")
		require.NoError(t, err)
		require.NoError(t, bus.Close(ctx))
		require.NoError(t, store.SetCursor(ctx, event.PartitionRef{Topic: "deposits", Group: "projector:balances", Partition: 0}, c.Seq-50))
	}
	run(100)
	run(200)
	run(300)
	latest, err := store.LatestByKey(ctx, "balances", []string{"acct-0"})
	require.NoError(t, err)
	b, err := event.Decode[balance](ptr(latest["acct-0"]))
	require.NoError(t, err)
	assert.Equal(t, want(300)["acct-0"], b)
}

func ptr(r event.Record) *event.Record { return &r }

func TestUndecodableInputIsDeadLettered(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(context.Background())
	p := newCounter(t, bus)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()
	dead := make(chan *event.Delivery, 1)
	_, err = bus.Subscribe(ctx, "deposits.dlq", "inspect", func(ctx context.Context, d *event.Delivery) error {
		dead <- d
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	_, err = bus.Publish(ctx, "deposits", []byte(`{"account":7}`))
	require.NoError(t, err)
	_, err = event.PublishJSON(ctx, bus, "deposits", deposit{"a", 5})
	require.NoError(t, err)
	d := <-dead
	assert.Contains(t, d.Headers[event.HeaderDLQReason], "decode")
	require.Eventually(t, func() bool { s, ok := p.State("a"); return ok && s.Total == 5 }, 5*time.Second, 5*time.Millisecond,
		"the bad input does not block the good one")
}

func TestConfigValidate(t *testing.T) {
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	defer bus.Close(context.Background())
	_, err = projector.NewProjector(projector.Config[deposit, balance]{Bus: bus, Input: "x", Output: "x", StaleCheck: -1})
	require.ErrorIs(t, err, projector.ErrInvalid)
	for _, f := range []string{"Output", "Key", "Reduce", "StaleCheck"} {
		assert.ErrorContains(t, err, f)
	}
}
