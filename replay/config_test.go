package replay_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/replay"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	store := event.NewMemoryStore()
	tests := []struct {
		name    string
		cfg     replay.Config
		wantErr error
		wantIn  []string
	}{
		{"defaults", replay.Config{Store: store}, nil, nil},
		{"no store", replay.Config{}, replay.ErrInvalid, []string{"Store"}},
		{"every problem", replay.Config{DefaultLimit: -1, MaxLimit: -2, ExportPageSize: -3, ExportWriteTimeout: -1}, replay.ErrInvalid,
			[]string{"Store", "DefaultLimit", "MaxLimit", "ExportPageSize", "ExportWriteTimeout"}},
		{"default over max", replay.Config{Store: store, DefaultLimit: 50, MaxLimit: 10}, replay.ErrInvalid, []string{"DefaultLimit"}},
		{"small max lowers the default", replay.Config{Store: store, MaxLimit: 10}, nil, nil},
		{"large default raises the max", replay.Config{Store: store, DefaultLimit: 5000}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := replay.NewHandler(tt.cfg)
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			for _, s := range tt.wantIn {
				assert.ErrorContains(t, err, s)
			}
		})
	}
}

func TestConfigLimits(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	fill(t, bus, "t", 30, sameTS(1), nil)
	h := newHandler(t, store, replay.Config{MaxLimit: 10})
	var page replay.ReplayPage
	decode(t, get(t, h, "/replay?topic=t"), &page)
	assert.Len(t, page.Events, 10, "the default page is at most the maximum")
	e := errorOf(t, get(t, h, "/replay?topic=t&limit=11"), 400)
	assert.Contains(t, e.Msg, "maximum of 10")

	h = newHandler(t, store, replay.Config{DefaultLimit: 7})
	decode(t, get(t, h, "/replay?topic=t"), &page)
	assert.Len(t, page.Events, 7)
}
