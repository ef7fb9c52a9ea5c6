package ops_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

// Topics nobody subscribes to are listed with their counts, from the
// store; a group whose only subscriber left is still listed, with its lag.
func TestTopicsFromTheStore(t *testing.T) {
	t.Parallel()
	bus := newBus(t)
	h := newHandler(t, ops.Config{Bus: bus})
	publishN(t, bus, "orders", 3)
	publishN(t, bus, "billing.invoices", 2)

	var resp ops.TopicsResponse
	getJSON(t, h, "/ops/topics", &resp)
	require.Len(t, resp.Topics, 2)
	assert.Equal(t, "billing.invoices", resp.Topics[0].Topic)
	assert.Equal(t, int64(2), resp.Topics[0].Events)
	assert.Equal(t, "orders", resp.Topics[1].Topic)
	assert.Equal(t, int64(3), resp.Topics[1].Events)
	assert.Equal(t, uint64(1), resp.Topics[1].FirstSeq)
	assert.Equal(t, uint64(3), resp.Topics[1].LastSeq)
	assert.Positive(t, resp.Topics[1].Bytes)

	ctx := context.Background()
	sub, err := bus.Subscribe(ctx, "orders", "audit", func(context.Context, *event.Delivery) error { return nil },
		event.FromEarliest())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		c, err := bus.Cursor(ctx, "orders", "audit")
		return err == nil && c.Seq == 3
	}, 10*time.Second, 5*time.Millisecond)
	require.NoError(t, sub.Close())
	publishN(t, bus, "orders", 2)

	getJSON(t, h, "/ops/topics?topic=orders", &resp)
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Groups, 1, "the group outlives its subscriber")
	g := resp.Topics[0].Groups[0]
	assert.Equal(t, "audit", g.Group)
	assert.Nil(t, g.Local, "no subscriber here")
	assert.Equal(t, uint64(2), g.Lag)
	assert.Equal(t, []string{}, g.Members)
	assert.NotEmpty(t, g.Partitions)
}
