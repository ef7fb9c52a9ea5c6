package event

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A key-ordered group holds, per key, its MaxPerKey or a tenth of the
// MaxInFlight of its subscriptions in the Bus (at least 1), never more
// than that MaxInFlight.
func TestKeyOrderedMaxPerKeyDefault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    SubscribeOptions
		want int
	}{
		{"default maxInFlight", SubscribeOptions{Group: GroupConfig{KeyOrdered: true}}, DefaultMaxInFlight / 10},
		{"a tenth", SubscribeOptions{Group: GroupConfig{KeyOrdered: true}, MaxInFlight: 50}, 5},
		{"at least 1", SubscribeOptions{Group: GroupConfig{KeyOrdered: true}, MaxInFlight: 5}, 1},
		{"given", SubscribeOptions{Group: GroupConfig{KeyOrdered: true, MaxPerKey: 50}, MaxInFlight: 50}, 50},
		{"at most maxInFlight", SubscribeOptions{Group: GroupConfig{KeyOrdered: true, MaxPerKey: 80}, MaxInFlight: 50}, 50},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := NewBus(NewMemoryStore(), Config{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = b.Close(context.Background()) })
			_, err = b.Subscribe(context.Background(), "t", "g", func(context.Context, *Delivery) error { return nil }, WithOptions(tc.o))
			require.NoError(t, err)
			g, err := b.group("t", "g")
			require.NoError(t, err)
			g.mu.Lock()
			defer g.mu.Unlock()
			assert.Equal(t, tc.want, g.maxPerKey)
		})
	}
}
