package event_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// A Bus sweeps by itself: a thousand viewers, each with a group of its own
// that expires after a minute, leave nothing in the store once they are
// gone for that long, and the Bus's sweep finds them without being asked.
func TestExpirySweepRunsByItself(t *testing.T) {
	t.Parallel()
	clk := fakeClock()
	st := event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk})
	b, err := event.NewBus(st, event.Config{Clock: clk, ExpirySweep: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	ctx := context.Background()
	const viewers = 1000
	for i := range viewers {
		s, err := b.Subscribe(ctx, "page", "viewer-"+strconv.Itoa(i), nopHandler, event.WithExpireAfter(time.Minute))
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	_, err = b.Subscribe(ctx, "page", "service", nopHandler) // no policy: stays
	require.NoError(t, err)
	gis, err := st.ListGroups(ctx, "page")
	require.NoError(t, err)
	require.Len(t, gis, viewers+1)
	_, err = b.Publish(ctx, "page", []byte(`1`)) // the sweep sees topics with records
	require.NoError(t, err)

	require.Eventually(t, func() bool {
		clk.Advance(5 * time.Second)
		gis, err := st.ListGroups(ctx, "page")
		require.NoError(t, err)
		return len(gis) == 1
	}, 30*time.Second, time.Millisecond, "the viewers' groups expire")
	gis, err = st.ListGroups(ctx, "page")
	require.NoError(t, err)
	assert.Equal(t, "service", gis[0].Group, "the group with a live member and no policy stays")
}
