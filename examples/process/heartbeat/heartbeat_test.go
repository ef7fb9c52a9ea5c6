package heartbeat_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/examples/process/heartbeat"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Heartbeats from 3 processes give one process.state per process; the one
// that stops beating turns stale after the threshold, the others stay alive.
func TestThreeProcessesOneStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	store := event.NewMemoryStore()
	bus, err := event.NewBus(store, event.Config{})
	require.NoError(t, err)
	defer bus.Close(context.Background())
	p, err := heartbeat.NewProjector(bus, 300*time.Millisecond)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	procs := []heartbeat.SimProcess{
		{Heartbeat: heartbeat.Heartbeat{PID: 1, Name: "stt", Host: "dev"}},
		{Heartbeat: heartbeat.Heartbeat{PID: 2, Name: "tts", Host: "dev"}},
		{Heartbeat: heartbeat.Heartbeat{PID: 3, Name: "llm", Host: "dev"}, StopAfter: 200 * time.Millisecond},
	}
	simDone := make(chan struct{})
	go func() { defer close(simDone); heartbeat.Simulate(ctx, bus, 50*time.Millisecond, procs) }()
	defer func() { cancel(); <-simDone; require.NoError(t, <-done) }()

	require.Eventually(t, func() bool {
		s, ok := p.State("dev:llm:3")
		return ok && s.Status == heartbeat.Stale
	}, 10*time.Second, 10*time.Millisecond, "the stopped process turns stale")
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
	}, 10*time.Second, 10*time.Millisecond)
}

func ptr(r event.Record) *event.Record { return &r }
