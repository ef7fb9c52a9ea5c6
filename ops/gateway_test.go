package ops_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
	"github.com/promethean/promlib/ws"
	"github.com/promethean/promlib/ws/wsclient"
)

// seqs collects the seqs a client was delivered.
type seqs struct {
	mu sync.Mutex
	s  []uint64
}

func (s *seqs) add(v uint64) { s.mu.Lock(); s.s = append(s.s, v); s.mu.Unlock() }
func (s *seqs) all() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.s...)
}

// A forced reset with subscribers connected over the gateway: as in the
// hub, a WebSocket gateway and the ops handler serve one Bus, and a
// client subscribed through the gateway acks what it gets. Without force
// the reset is refused with 409 naming the group's members (the
// gateway's own connection is one); with force=true it moves them: the
// client receives the records from the new position again.
func TestForcedResetWithSubscribersOverTheGateway(t *testing.T) {
	t.Parallel()
	const token = "tok"
	bus := newBus(t)
	gw, err := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.StaticTokens(token)})
	require.NoError(t, err)
	h := newHandler(t, ops.Config{Bus: bus, Verifier: auth.StaticTokens(token)})
	mux := http.NewServeMux()
	mux.Handle("/ws", gw)
	mux.Handle("/ops/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, gw.Shutdown(ctx))
		srv.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	publishN(t, bus, "orders", 5)

	c, err := wsclient.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", &wsclient.Options{Token: token})
	require.NoError(t, err)
	defer c.Close()
	var got seqs
	_, err = c.Subscribe(ctx, "orders", "billing", func(_ context.Context, m *wsclient.Message) error {
		got.add(m.Seq)
		return nil // acked
	}, event.FromEarliest())
	require.NoError(t, err)
	var st event.GroupStatus
	require.Eventually(t, func() bool {
		st, err = bus.GroupStatus(ctx, "orders", "billing")
		require.NoError(t, err)
		return st.Committed == 5 && len(st.Members) == 1
	}, 10*time.Second, 5*time.Millisecond, "the client acks every record")
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, got.all())

	post := func(body string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/ops/cursor", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := post(`{"topic":"orders","group":"billing","to":"seq","seq":2}`)
	assert.Equal(t, http.StatusConflict, code, body)
	assert.Contains(t, body, st.Members[0], "the answer names the member")
	assert.Equal(t, []uint64{1, 2, 3, 4, 5}, got.all(), "nothing moved")

	code, body = post(`{"topic":"orders","group":"billing","to":"seq","seq":2,"force":"true"}`)
	require.Equal(t, http.StatusOK, code, body)
	var res event.ResetResult
	require.NoError(t, json.Unmarshal([]byte(body), &res))
	assert.Equal(t, uint64(2), res.Seq)
	assert.Equal(t, st.Members, res.Members, "the gateway's member was moved")
	assert.Equal(t, map[int]uint64{0: 5}, res.Previous)

	require.Eventually(t, func() bool { return len(got.all()) >= 8 }, 10*time.Second, 5*time.Millisecond,
		"the client gets the records after seq 2 again: %v", got.all())
	assert.Equal(t, []uint64{3, 4, 5}, got.all()[5:])
	require.Eventually(t, func() bool {
		st, err = bus.GroupStatus(ctx, "orders", "billing")
		require.NoError(t, err)
		return st.Committed == 5
	}, 10*time.Second, 5*time.Millisecond, "and acks them")

	// The subscription goes on from there: a new record once.
	_, err = bus.Publish(ctx, "orders", []byte(`{"n":6}`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(got.all()) == 9 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, uint64(6), got.all()[8])
}
