package ws

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Connections lists each connection with its principal, address and
// subscriptions; a closed one is gone.
func TestConnections(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	anon := e.dial()
	// The server registers a connection after the client's dial returns:
	// wait for the first before dialling the second, so that it is older.
	require.Eventually(t, func() bool { return len(e.gw.Connections()) == 1 }, 10*time.Second, 5*time.Millisecond)
	r := e.authed()
	r.subscribe("orders", "billing", "s1", nil)
	r.subscribe("audit", "all", "s2", nil)

	var cs []ConnInfo
	require.Eventually(t, func() bool { cs = e.gw.Connections(); return len(cs) == 2 }, 10*time.Second, 5*time.Millisecond)
	assert.Less(t, cs[0].ID, cs[1].ID, "oldest first")
	assert.Empty(t, cs[0].Principal, "no AUTH yet")
	assert.Empty(t, cs[0].Subscriptions)
	assert.NotEmpty(t, cs[1].Principal)
	assert.NotEmpty(t, cs[1].RemoteAddr)
	assert.False(t, cs[1].Opened.IsZero())
	assert.Equal(t, []string{"audit/all", "orders/billing"}, cs[1].Subscriptions)

	_ = anon.c.CloseNow()
	require.Eventually(t, func() bool { return len(e.gw.Connections()) == 1 }, 10*time.Second, 5*time.Millisecond)
}
