package wsclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClientPublishSubscribe(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(nil)
	ctx := context.Background()

	const n = 200
	var mu sync.Mutex
	got := map[string]int{}
	all := make(chan struct{})
	_, err := c.Subscribe(ctx, "orders", "billing", func(ctx context.Context, m *Message) error {
		mu.Lock()
		defer mu.Unlock()
		got[m.ID]++
		assert.Equal(t, 1, m.Attempt)
		assert.Equal(t, "billing", m.Group)
		assert.True(t, m.Deadline.After(time.Now()))
		if len(got) == n {
			close(all)
		}
		return nil
	}, event.WithMaxInFlight(20))
	require.NoError(t, err)

	ids := map[string]bool{}
	for i := 0; i < n; i++ {
		res, err := c.Publish(ctx, "orders", []byte(fmt.Sprint(i)))
		require.NoError(t, err)
		assert.Equal(t, uint64(i+1), res.Seq)
		ids[res.ID] = true
	}
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		t.Fatal("not all delivered")
	}
	require.Eventually(t, func() bool {
		cur, err := e.bus.Cursor(ctx, "orders", "billing")
		return err == nil && cur.Seq == n
	}, 5*time.Second, 10*time.Millisecond, "all auto-acked")
	mu.Lock()
	for id, k := range got {
		assert.True(t, ids[id])
		assert.Equal(t, 1, k)
	}
	mu.Unlock()

	// Publish with an id is idempotent; a bad payload is refused locally.
	r1, err := c.Publish(ctx, "orders", []byte(`1`), event.WithID("x-1"), event.WithKey("k"))
	require.NoError(t, err)
	r2, err := c.Publish(ctx, "orders", []byte(`2`), event.WithID("x-1"))
	require.NoError(t, err)
	assert.Equal(t, r1, r2)
	_, err = c.Publish(ctx, "orders", []byte(`{`))
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = c.Subscribe(ctx, "orders", "billing", func(context.Context, *Message) error { return nil })
	assert.ErrorIs(t, err, wsproto.ErrAlreadySubscribed)
}

func TestClientNackAndManualAck(t *testing.T) {
	t.Parallel()
	// Leases and backoffs run on a fake clock, moved by the test.
	clk := clock.NewFake(time.Now())
	e := newEnv(t, func(c *ws.Config) { c.Clock = clk })
	c := e.client(nil)
	ctx := context.Background()

	// A handler error nacks: attempt 2 comes.
	attempts := make(chan int, 4)
	_, err := c.Subscribe(ctx, "a", "g", func(ctx context.Context, m *Message) error {
		attempts <- m.Attempt
		if m.Attempt == 1 {
			return errors.New("try again")
		}
		return nil
	})
	require.NoError(t, err)
	_, err = c.Publish(ctx, "a", []byte(`1`))
	require.NoError(t, err)
	assert.Equal(t, 1, <-attempts)
	assert.Equal(t, 2, nextAdvancing(t, clk, attempts))

	// Manual ack: ModAck extends past the ack timeout, then Ack settles.
	msgs := make(chan *Message, 4)
	sub, err := c.Subscribe(ctx, "b", "g", func(ctx context.Context, m *Message) error {
		msgs <- m
		return nil
	}, event.WithManualAck(), event.WithAckTimeout(500*time.Millisecond))
	require.NoError(t, err)
	_, err = c.Publish(ctx, "b", []byte(`1`))
	require.NoError(t, err)
	m := <-msgs
	require.NoError(t, m.ModAck(ctx, 3*time.Second))
	clk.Advance(800 * time.Millisecond)
	select {
	case m2 := <-msgs:
		t.Fatalf("redelivered despite ModAck: attempt %d", m2.Attempt)
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, m.Ack(ctx))
	err = c.ModAck(ctx, "b", "g", m.ID, time.Second)
	assert.ErrorIs(t, err, wsproto.ErrUnknownID)

	// A late ack of an expired lease fails with ack_failed.
	_, err = c.Publish(ctx, "b", []byte(`2`))
	require.NoError(t, err)
	m = <-msgs
	m2 := nextAdvancing(t, clk, msgs) // redelivery after the lease
	assert.Equal(t, m.ID, m2.ID)
	assert.Equal(t, 2, m2.Attempt)
	assert.ErrorIs(t, m.Ack(ctx), wsproto.ErrAckFailed)
	require.NoError(t, sub.Close())
}

// nextAdvancing returns the next value of ch, moving clk on by 10ms while
// none has come.
func nextAdvancing[T any](t *testing.T, clk *clock.Fake, ch <-chan T) T {
	t.Helper()
	for range 10_000 {
		select {
		case v := <-ch:
			return v
		case <-time.After(time.Millisecond):
			clk.Advance(10 * time.Millisecond)
		}
	}
	t.Fatal("nothing came within 100s of the fake clock")
	var zero T
	return zero
}

func TestClientPauseResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(nil)
	ctx := context.Background()
	var n atomic.Int32
	sub, err := c.Subscribe(ctx, "t", "g", func(context.Context, *Message) error { n.Add(1); return nil })
	require.NoError(t, err)
	require.NoError(t, sub.Pause(ctx))
	for i := 0; i < 5; i++ {
		_, err := c.Publish(ctx, "t", []byte(`1`))
		require.NoError(t, err)
	}
	require.Never(t, func() bool { return n.Load() > 0 }, 200*time.Millisecond, 10*time.Millisecond)
	require.NoError(t, sub.Resume(ctx))
	require.Eventually(t, func() bool { return n.Load() == 5 }, 5*time.Second, 5*time.Millisecond)
}

type order struct {
	ID    string  `json:"id"`
	Total float64 `json:"total"`
}

func TestClientTyped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(nil)
	ctx := context.Background()
	got := make(chan order, 1)
	bad := make(chan int, 8)
	_, err := SubscribeJSON(ctx, c, "orders", "g", func(ctx context.Context, o order, m *Message) error {
		got <- o
		return nil
	}, event.FromEarliest(), event.WithMaxAttempts(2))
	require.NoError(t, err)
	_, err = SubscribeJSON(ctx, c, "orders.dlq", "g", func(ctx context.Context, v any, m *Message) error {
		bad <- m.Attempt
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	_, err = PublishJSON(ctx, c, "orders", order{ID: "o1", Total: 9.5})
	require.NoError(t, err)
	assert.Equal(t, order{ID: "o1", Total: 9.5}, <-got)
	// A payload that does not decode is nacked until dead-lettered.
	_, err = c.Publish(ctx, "orders", []byte(`"not an order"`))
	require.NoError(t, err)
	select {
	case <-bad:
	case <-time.After(10 * time.Second):
		t.Fatal("undecodable payload not dead-lettered")
	}
}

func TestClientAuthFailed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	_, err := Dial(context.Background(), e.url, &Options{Token: "wrong"})
	require.Error(t, err)
	assert.ErrorIs(t, err, wsproto.ErrAuthFailed)
	_, err = Dial(context.Background(), "ws://127.0.0.1:1/nothing", &Options{DialTimeout: time.Second})
	assert.Error(t, err)
}

// TestClientReconnect: after the connection is cut, the client reconnects,
// authenticates (with a fresh token), subscribes again and gets what was
// published meanwhile; a publish during the outage completes once.
func TestClientReconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	var tokens atomic.Int32
	c := e.client(&Options{
		TokenFunc:  func(context.Context) (string, error) { tokens.Add(1); return testToken, nil },
		MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
	})
	var mu sync.Mutex
	got := map[string]bool{}
	sub, err := c.Subscribe(ctx, "t", "g", func(ctx context.Context, m *Message) error {
		mu.Lock()
		got[string(m.Payload)] = true
		mu.Unlock()
		return nil
	})
	require.NoError(t, err)
	_, err = c.Publish(ctx, "t", []byte(`"before"`))
	require.NoError(t, err)

	e.dropConnections()
	// Published by another party while the client is away.
	_, err = e.bus.Publish(ctx, "t", []byte(`"during"`))
	require.NoError(t, err)
	res, err := c.Publish(ctx, "t", []byte(`"after"`))
	require.NoError(t, err)
	assert.Equal(t, uint64(3), res.Seq, "stored once")

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return got[`"before"`] && got[`"during"`] && got[`"after"`]
	}, 10*time.Second, 10*time.Millisecond)
	assert.GreaterOrEqual(t, tokens.Load(), int32(2), "the token was fetched again")
	select {
	case <-sub.Done():
		t.Fatalf("subscription ended: %v", sub.Err())
	default:
	}
}

func TestClientNoReconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(&Options{Token: testToken, DisableReconnect: true})
	ctx := context.Background()
	e.dropConnections()
	require.Eventually(t, func() bool {
		_, err := c.Publish(ctx, "t", []byte(`1`))
		return errors.Is(err, ErrDisconnected)
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Close())
	_, err := c.Publish(ctx, "t", []byte(`1`))
	assert.ErrorIs(t, err, ErrClosed)
}

// TestClientCloseGivesBack: closing a client with events in flight gives
// them to another member of the group at once.
func TestClientCloseGivesBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	a, err := Dial(ctx, e.url, &Options{Token: testToken})
	require.NoError(t, err)
	held := make(chan string, 10)
	_, err = a.Subscribe(ctx, "t", "g", func(ctx context.Context, m *Message) error {
		held <- m.ID
		return nil
	}, event.WithManualAck(), event.WithAckTimeout(time.Minute))
	require.NoError(t, err)
	for i := 0; i < 5; i++ {
		_, err := a.Publish(ctx, "t", []byte(`1`))
		require.NoError(t, err)
	}
	for i := 0; i < 5; i++ {
		<-held
	}
	b := e.client(nil)
	again := make(chan int, 10)
	_, err = b.Subscribe(ctx, "t", "g", func(ctx context.Context, m *Message) error {
		again <- m.Attempt
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, a.Close())
	for i := 0; i < 5; i++ {
		select {
		case at := <-again:
			assert.Equal(t, 2, at)
		case <-time.After(10 * time.Second):
			t.Fatal("in-flight events not given back")
		}
	}
}
