package ws

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/stacktest"
)

// deepGroupStore is a memory store whose reads of group settings need a
// deep stack, as the SQLite library's calls do (it runs on its caller's
// stack): 64 frames of 1 KB.
type deepGroupStore struct{ *event.MemoryStore }

func (d deepGroupStore) GroupConfig(ctx context.Context, topic, group string) (event.GroupConfig, error) {
	stacktest.Deep(64)
	return d.MemoryStore.GroupConfig(ctx, topic, group)
}

// An idle connection does not keep the stack of the store calls its
// SUBSCRIBE made: the goroutine that handled the frame ends once the
// socket has no byte pending, and a new one with a small stack waits for
// the next frame (conn.readFrames). Were it to wait on, each connection
// that subscribed a group over a store whose calls need a deep stack
// would hold that stack for as long as it stayed idle (64 KB each here,
// with the hand-over taken out). Measured as the stacks in use per
// connection, with one collection (which halves a parked goroutine's
// stack at most once). Not parallel: it measures the process.
func TestSubscribingLeavesTheReadersStackAsItWas(t *testing.T) {
	const conns = 100
	ctx := context.Background()
	bus, err := event.NewBus(deepGroupStore{event.NewMemoryStore()}, event.Config{})
	require.NoError(t, err)
	gw, err := NewGateway(Config{Bus: bus, Verifier: auth.StaticTokens(testToken)})
	require.NoError(t, err)
	srv := httptest.NewServer(gw)
	e := &testEnv{t: t, bus: bus, gw: gw, srv: srv, url: "ws" + strings.TrimPrefix(srv.URL, "http")}
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		assert.NoError(t, gw.Shutdown(cctx))
		srv.Close()
		assert.NoError(t, bus.Close(cctx))
	})

	stacks := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.StackInuse
	}
	clients := make([]*raw, conns)
	for i := range clients {
		clients[i] = e.authed()
	}
	before := stacks()
	for i, c := range clients {
		c.subscribe("t", fmt.Sprintf("g%d", i), "s", nil)
	}
	require.Eventually(t, func() bool { return gw.Stats().Subscriptions == conns }, 10*time.Second, time.Millisecond)
	after := stacks()
	perConn := (int64(after) - int64(before)) / conns
	t.Logf("stacks grew by %d KB for %d subscriptions: %.1f KB each", (int64(after)-int64(before))>>10, conns, float64(perConn)/1024)
	// Kept, each reader's stack would be 64 KB or more (a 128 KB stack
	// halved once); the group's run loop holds a few KB.
	assert.Less(t, perConn, int64(32<<10), "the connections' readers kept the stack of their SUBSCRIBE's store calls")
}
