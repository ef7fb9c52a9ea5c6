package watchhub

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait = 10 * time.Second

// fixture is a hub whose pollers run on a WaitGroup of the test and read
// heads from head.
type fixture struct {
	hub    *Hub
	wg     sync.WaitGroup
	closed atomic.Bool
	cancel context.CancelFunc
	quit   chan struct{}
	logs   *syncBuffer

	mu    sync.Mutex
	heads map[string]uint64
	fail  error
	calls []call
}

type call struct {
	last uint64
	n    int
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newFixture(t *testing.T, interval time.Duration) *fixture {
	t.Helper()
	f := &fixture{heads: map[string]uint64{}, quit: make(chan struct{}), logs: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.hub = New(Config{
		Name: "test", Logger: slog.New(slog.NewTextHandler(f.logs, nil)), Interval: interval, Ctx: ctx, Quit: f.quit,
		Go: func(fn func()) bool {
			if f.closed.Load() {
				return false
			}
			f.wg.Add(1)
			go func() { defer f.wg.Done(); fn() }()
			return true
		},
		Head: func(_ context.Context, topic string, last uint64, n int) (uint64, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.calls = append(f.calls, call{last, n})
			if f.fail != nil {
				return 0, f.fail
			}
			return f.heads[topic], nil
		},
	})
	t.Cleanup(func() { cancel(); f.wg.Wait() })
	return f
}

func (f *fixture) set(topic string, head uint64, fail error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heads[topic], f.fail = head, fail
}

func (f *fixture) polls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Announce wakes the watchers of a topic when the head is beyond the one
// they were told, Wake whatever the head; other topics are not woken.
func TestAnnounceAndWake(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Hour) // the first poll only, head 0
	a1, stopA1 := f.hub.Watch("a")
	a2, stopA2 := f.hub.Watch("a")
	b, stopB := f.hub.Watch("b")
	defer stopB()

	f.hub.Announce("a", 3)
	assert.True(t, woken(a1))
	assert.True(t, woken(a2))
	assert.False(t, woken(b))
	f.hub.Announce("a", 3)
	f.hub.Announce("a", 2)
	assert.False(t, woken(a1), "a head announced before wakes no one")

	f.hub.Wake("a")
	assert.True(t, woken(a1))
	assert.True(t, woken(a2))

	stopA1()
	stopA1() // a second stop does nothing
	f.hub.Announce("a", 4)
	assert.False(t, woken(a1), "a stopped watch is not woken")
	assert.True(t, woken(a2))

	stopA2()
	f.hub.Announce("b", 1)
	assert.True(t, woken(b))
	f.hub.Announce("unwatched", 1) // nothing to wake
	f.hub.Wake("unwatched")
}

// The poller of a watched topic announces the heads Head returns, passing
// the last one it read and the poll's number; Polled reports the head
// once it polled; the last stop of the topic ends the poller.
func TestPoller(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Millisecond)
	_, ok := f.hub.Polled("t")
	assert.False(t, ok, "not watched")

	ch, stop := f.hub.Watch("t")
	require.Eventually(t, func() bool { _, ok := f.hub.Polled("t"); return ok }, wait, time.Millisecond)
	f.set("t", 5, nil)
	require.Eventually(t, func() bool { return woken(ch) }, wait, time.Millisecond, "another process's append found")
	require.Eventually(t, func() bool { h, _ := f.hub.Polled("t"); return h == 5 }, wait, time.Millisecond)
	require.Eventually(t, func() bool {
		p := f.polls()
		return len(p) > 0 && p[len(p)-1].last == 5
	}, wait, time.Millisecond, "Head gets the head of the last poll")
	for i, c := range f.polls() {
		assert.Equal(t, i, c.n, "polls counted from 0")
	}

	stop()
	f.wg.Wait() // the poller ended
	_, ok = f.hub.Polled("t")
	assert.False(t, ok, "no longer watched")
}

// A failing poll is logged once until one succeeds, and keeps the last
// head that succeeded.
func TestPollFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, time.Millisecond)
	f.set("t", 2, nil)
	ch, stop := f.hub.Watch("t")
	defer stop()
	require.Eventually(t, func() bool { return woken(ch) }, wait, time.Millisecond)
	f.set("t", 9, errors.New("server gone"))
	n := len(f.polls())
	require.Eventually(t, func() bool { return len(f.polls()) > n+3 }, wait, time.Millisecond)
	assert.Equal(t, 1, strings.Count(f.logs.String(), "test: poll for new records failed"), f.logs.String())
	assert.Contains(t, f.logs.String(), "server gone")
	p := f.polls()
	assert.Equal(t, uint64(2), p[len(p)-1].last, "the last head that was read")
	assert.False(t, woken(ch))

	f.set("t", 9, nil)
	require.Eventually(t, func() bool { return woken(ch) }, wait, time.Millisecond)
	f.set("t", 9, errors.New("server gone again"))
	require.Eventually(t, func() bool { return strings.Contains(f.logs.String(), "again") }, wait, time.Millisecond,
		"a failure after a success is logged again")
}

// Pollers stop when Quit is closed or Ctx ends, and none starts on a
// closed store, where watches still get announcements.
func TestStopAndClosed(t *testing.T) {
	t.Parallel()
	t.Run("quit", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, time.Millisecond)
		_, stop := f.hub.Watch("t")
		defer stop()
		close(f.quit)
		f.wg.Wait()
	})
	t.Run("ctx", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, time.Millisecond)
		_, stop := f.hub.Watch("t")
		defer stop()
		f.cancel()
		f.wg.Wait()
	})
	t.Run("closed", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, time.Millisecond)
		f.closed.Store(true)
		ch, stop := f.hub.Watch("t")
		defer stop()
		f.wg.Wait()
		assert.Empty(t, f.polls(), "no poller")
		f.hub.Announce("t", 1)
		assert.True(t, woken(ch))
	})
}
