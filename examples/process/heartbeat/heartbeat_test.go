package heartbeat_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/examples/process/heartbeat"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const wait, tick = 10 * time.Second, time.Millisecond

// newBus returns a Bus on a fake clock, closed at cleanup.
func newBus(t *testing.T) (*event.Bus, *event.MemoryStore, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	store := event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk})
	bus, err := event.NewBus(store, event.Config{Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	return bus, store, clk
}

// Heartbeats from 3 processes give one process.state per process; the one
// that stops beating turns stale after the threshold, the others stay
// alive. The time is the Bus's fake clock, moved by the test once each
// beat is projected: load on the machine cannot make a live process
// stale.
func TestThreeProcessesOneStops(t *testing.T) {
	t.Parallel()
	bus, store, clk := newBus(t)
	ctx, cancel := context.WithCancel(context.Background())
	p, err := heartbeat.NewProjector(bus, 300*time.Millisecond)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-done) }()

	procs := []heartbeat.Heartbeat{{PID: 1, Name: "stt", Host: "dev"}, {PID: 2, Name: "tts", Host: "dev"}, {PID: 3, Name: "llm", Host: "dev"}}
	stale := func(id string) bool {
		s, ok := p.State(id)
		return ok && s.Status == heartbeat.Stale
	}
	// Each step beats the live processes, waits until the projector has
	// them, and moves the clock on by 50ms; llm stops after 200ms.
	step := 50 * time.Millisecond
	for i := 0; i < 40 && !stale("dev:llm:3"); i++ {
		live := procs
		if time.Duration(i)*step > 200*time.Millisecond {
			live = procs[:2]
		}
		now := clk.Now().UnixMilli()
		for _, h := range live {
			require.NoError(t, heartbeat.Beat(ctx, bus, h))
		}
		require.Eventually(t, func() bool {
			for _, h := range live {
				if s, ok := p.State(heartbeat.ProcessID(h)); !ok || s.LastSeenTS != now {
					return false
				}
			}
			return true
		}, wait, tick, "step %d projected", i)
		clk.Advance(step)
	}
	require.Eventually(t, func() bool { return stale("dev:llm:3") }, wait, tick, "the stopped process turns stale")
	for _, id := range []string{"dev:stt:1", "dev:tts:2"} {
		s, ok := p.State(id)
		require.True(t, ok)
		assert.Equal(t, heartbeat.Alive, s.Status, id)
	}
	assert.Equal(t, 3, p.Keys())
	// The output topic holds the same, as its latest record per key.
	require.Eventually(t, func() bool {
		latest, err := store.LatestByKey(context.Background(), heartbeat.TopicState, []string{"dev:llm:3", "dev:stt:1"})
		if err != nil || len(latest) != 2 {
			return false
		}
		llm, err1 := event.Decode[heartbeat.ProcessState](ptr(latest["dev:llm:3"]))
		stt, err2 := event.Decode[heartbeat.ProcessState](ptr(latest["dev:stt:1"]))
		return err1 == nil && err2 == nil && llm.Status == heartbeat.Stale && stt.Status == heartbeat.Alive
	}, wait, tick)
}

// Simulate beats every interval of the Bus's clock, and a process with
// StopAfter stops beating after it.
func TestSimulate(t *testing.T) {
	t.Parallel()
	bus, store, clk := newBus(t)
	ctx, cancel := context.WithCancel(context.Background())
	simDone := make(chan struct{})
	go func() {
		defer close(simDone)
		heartbeat.Simulate(ctx, bus, time.Second, []heartbeat.SimProcess{
			{Heartbeat: heartbeat.Heartbeat{PID: 1, Name: "stt", Host: "dev"}},
			{Heartbeat: heartbeat.Heartbeat{PID: 3, Name: "llm", Host: "dev"}, StopAfter: 2500 * time.Millisecond},
		})
	}()
	defer func() { cancel(); <-simDone }()
	beats := func() map[string]int {
		recs, err := store.Read(context.Background(), heartbeat.TopicHeartbeat, 0, 100)
		require.NoError(t, err)
		n := map[string]int{}
		for _, r := range recs {
			n[r.Key]++
		}
		return n
	}
	for i := 1; i <= 5; i++ {
		// Beats i-1 are out and Simulate waits for its timer.
		require.NoError(t, clk.WaitTimers(ctx, 1))
		require.Eventually(t, func() bool { return beats()["dev:stt:1"] == i }, wait, tick)
		clk.Advance(time.Second)
	}
	require.Eventually(t, func() bool { return beats()["dev:stt:1"] == 6 }, wait, tick)
	assert.Equal(t, 3, beats()["dev:llm:3"], "llm beat at 0s, 1s and 2s, then stopped")
}

func ptr(r event.Record) *event.Record { return &r }
