package ws

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/promethean/promlib/clock"
)

// A negative PingInterval disables pings, as documented: the gateway
// starts (PingTimeout is not derived from it), and a connection idle far
// beyond the default interval is not closed.
func TestNegativePingIntervalDisablesPings(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	e := newEnv(t, func(c *Config) { c.Clock, c.PingInterval = clk, -1 })
	assert.Zero(t, e.gw.cfg.PingTimeout)
	r := e.authed()
	clk.Advance(10 * DefaultPingInterval)
	r.publish("t", 1, "p1")
}
