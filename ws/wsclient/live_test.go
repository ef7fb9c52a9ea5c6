package wsclient

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// liveLog records what a live subscription handled, in order.
type liveLog struct {
	mu   sync.Mutex
	seqs []uint64
	gaps [][3]any // from, to, reason
	news chan struct{}
}

func newLiveLog() *liveLog { return &liveLog{news: make(chan struct{}, 1)} }

func (l *liveLog) handler(_ context.Context, m *Message) error {
	l.mu.Lock()
	l.seqs = append(l.seqs, m.Seq)
	l.mu.Unlock()
	select {
	case l.news <- struct{}{}:
	default:
	}
	return nil
}

func (l *liveLog) onGap(from, to uint64, reason string) {
	l.mu.Lock()
	l.gaps = append(l.gaps, [3]any{from, to, reason})
	l.mu.Unlock()
	select {
	case l.news <- struct{}{}:
	default:
	}
}

// waitPast waits until the subscription's position reaches seq. The
// handler's signal comes before the subscription moves its position past
// the event (it does so once the handler returns), so the signal alone
// can come too early for the last event: a tick looks again.
func (l *liveLog) waitPast(t *testing.T, s *LiveSubscription, seq uint64) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.Position() < seq {
		select {
		case <-l.news:
		case <-tick.C:
		case <-deadline:
			l.mu.Lock()
			defer l.mu.Unlock()
			t.Fatalf("position %d, want %d; handled %d, gaps %v", s.Position(), seq, len(l.seqs), l.gaps)
		}
	}
}

func (l *liveLog) got() ([]uint64, [][3]any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]uint64(nil), l.seqs...), append([][3]any(nil), l.gaps...)
}

func seqs(from, to uint64) []uint64 {
	var s []uint64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// SubscribeLive gets the topic's events from its head, in order, with
// Group "" and nothing to settle; Close ends it on the server too.
func TestSubscribeLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(nil)
	ctx := context.Background()
	for range 3 {
		_, err := c.Publish(ctx, "news", []byte(`0`))
		require.NoError(t, err)
	}
	l := newLiveLog()
	var ackErr error
	var once sync.Once
	s, err := c.SubscribeLive(ctx, "news", func(ctx context.Context, m *Message) error {
		assert.Empty(t, m.Group)
		once.Do(func() { ackErr = m.Ack(ctx) })
		return l.handler(ctx, m)
	}, WithOnGap(l.onGap))
	require.NoError(t, err)
	assert.Equal(t, uint64(3), s.Position(), "it starts at the head")
	assert.Equal(t, "news", s.Topic())
	_, err = c.SubscribeLive(ctx, "news", l.handler)
	assert.ErrorIs(t, err, wsproto.ErrAlreadySubscribed)

	for range 5 {
		_, err := c.Publish(ctx, "news", []byte(`1`))
		require.NoError(t, err)
	}
	l.waitPast(t, s, 8)
	got, gaps := l.got()
	assert.Equal(t, seqs(4, 8), got)
	assert.Empty(t, gaps)
	require.Error(t, ackErr)
	assert.ErrorIs(t, ackErr, ErrInvalid)
	assert.Contains(t, ackErr.Error(), "live")

	require.NoError(t, s.Close())
	<-s.Done()
	assert.NoError(t, s.Err())
	// The server ended it too: subscribing again works.
	s2, err := c.SubscribeLive(ctx, "news", l.handler, WithSince(8))
	require.NoError(t, err)
	assert.Equal(t, uint64(8), s2.Position())
}

// The client resumes a live subscription across connections the server
// drops while events are published: every seq once, in order, no gap.
func TestSubscribeLiveResumesAcrossDrops(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(nil)
	ctx := context.Background()
	l := newLiveLog()
	s, err := c.SubscribeLive(ctx, "feed", l.handler, WithOnGap(l.onGap))
	require.NoError(t, err)

	const n = 1000
	published := make(chan struct{})
	go func() {
		defer close(published)
		for range n {
			if _, err := e.bus.Publish(ctx, "feed", []byte(`1`)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	// Drop the connection three times while the events come.
	for _, at := range []uint64{100, 300, 600} {
		l.waitPast(t, s, at)
		e.dropConnections()
	}
	<-published
	l.waitPast(t, s, n)
	got, gaps := l.got()
	assert.Equal(t, seqs(1, n), got, "every seq once, in order")
	assert.Empty(t, gaps)
}

// Events deleted before the subscription read them are a gap, "deleted",
// and the position moves past it.
func TestSubscribeLiveGapDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	for i := range 10 {
		_, err := e.bus.Publish(ctx, "ret", []byte(`1`), event.WithTS(int64(1000+i)))
		require.NoError(t, err)
	}
	pr, ok := e.bus.Store().(event.Pruner)
	require.True(t, ok)
	_, err := pr.Prune(ctx, "ret", 1004, false) // seqs 1..4
	require.NoError(t, err)

	c := e.client(nil)
	l := newLiveLog()
	s, err := c.SubscribeLive(ctx, "ret", l.handler, WithSince(1), WithOnGap(l.onGap), WithSlow(wsproto.SlowSkip))
	require.NoError(t, err)
	l.waitPast(t, s, 10)
	got, gaps := l.got()
	assert.Equal(t, seqs(5, 10), got)
	assert.Equal(t, [][3]any{{uint64(2), uint64(4), wsproto.GapDeleted}}, gaps)
}

// Bad options are refused before anything is sent; a client that does
// not reconnect ends its live subscriptions when the connection is lost.
func TestSubscribeLiveOptionsAndNoReconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	c := e.client(&Options{Token: testToken, DisableReconnect: true})
	_, err := c.SubscribeLive(ctx, "a..b", func(context.Context, *Message) error { return nil })
	assert.ErrorIs(t, err, event.ErrInvalid)
	_, err = c.SubscribeLive(ctx, "t", nil)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = c.SubscribeLive(ctx, "t", func(context.Context, *Message) error { return nil }, WithSlow("wait"))
	assert.ErrorIs(t, err, ErrInvalid)

	s, err := c.SubscribeLive(ctx, "t", func(context.Context, *Message) error { return nil })
	require.NoError(t, err)
	e.dropConnections()
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("not ended")
	}
	assert.ErrorIs(t, s.Err(), ErrDisconnected)
}

// A live subscription of a topic the server refuses (its limit of live
// subscribers) is an error matching wsproto.ErrRateLimited.
func TestSubscribeLiveRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ws.Config) { c.MaxLiveSubscribers = 1 })
	ctx := context.Background()
	_, err := e.client(nil).SubscribeLive(ctx, "t", func(context.Context, *Message) error { return nil })
	require.NoError(t, err)
	_, err = e.client(nil).SubscribeLive(ctx, "t", func(context.Context, *Message) error { return nil })
	var pe *wsproto.Error
	require.True(t, errors.As(err, &pe), "%v", err)
	assert.ErrorIs(t, err, wsproto.ErrRateLimited)
}

// The recovery goal of live subscriptions, as a test: 100 clients cut off
// at once stay away for about a second (their reconnect backoff) while
// 1,000 events are published, and each resumes from its position with
// every seq once, in order, and no gap.
func TestSubscribeLiveHundredClientsResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	ctx := context.Background()
	const clients, before, during = 100, 50, 1000
	logs := make([]*liveLog, clients)
	subs := make([]*LiveSubscription, clients)
	for i := range clients {
		c := e.client(&Options{Token: testToken, MinBackoff: time.Second, MaxBackoff: time.Second})
		logs[i] = newLiveLog()
		s, err := c.SubscribeLive(ctx, "feed", logs[i].handler, WithOnGap(logs[i].onGap))
		require.NoError(t, err)
		subs[i] = s
	}
	for range before {
		_, err := e.bus.Publish(ctx, "feed", []byte(`1`))
		require.NoError(t, err)
	}
	for i := range clients {
		logs[i].waitPast(t, subs[i], before)
	}
	e.dropConnections()
	for range during {
		_, err := e.bus.Publish(ctx, "feed", []byte(`2`))
		require.NoError(t, err)
	}
	for i := range clients {
		logs[i].waitPast(t, subs[i], before+during)
		got, gaps := logs[i].got()
		require.Equal(t, seqs(1, before+during), got, "client %d: every seq once, in order", i)
		require.Empty(t, gaps, "client %d", i)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	assert.Len(t, e.conns, clients, "each client came back on a new connection")
}
