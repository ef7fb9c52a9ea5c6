package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/examples/process/heartbeat"
	"github.com/promethean/promlib/ws/wsclient"
)

// With -demo the hub projects simulated heartbeats onto process.state.
func TestHubDemo(t *testing.T) {
	addr, _, stop := runHub(t, map[string]string{"WS_TOKEN": "tok"}, "-demo")
	defer stop()
	ctx := context.Background()
	c, err := wsclient.Dial(ctx, "ws://"+addr+"/ws", &wsclient.Options{Token: "tok"})
	require.NoError(t, err)
	defer c.Close()
	states := make(chan heartbeat.ProcessState, 100)
	_, err = c.Subscribe(ctx, heartbeat.TopicState, "watch", func(ctx context.Context, m *wsclient.Message) error {
		var s heartbeat.ProcessState
		if err := json.Unmarshal(m.Payload, &s); err != nil {
			return err
		}
		select {
		case states <- s:
		default:
		}
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(seen) < 3 {
		select {
		case s := <-states:
			require.Equal(t, heartbeat.Alive, s.Status)
			seen[s.ProcessID] = true
		case <-deadline:
			t.Fatalf("saw only %v", seen)
		}
	}
}
