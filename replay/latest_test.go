package replay_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/replay"
)

func TestLatest(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	// 50 updates over 5 keys: the last update of key k is record 45+k.
	fill(t, bus, "state", 50, sameTS(7), func(i int) string { return fmt.Sprintf("k%d", i%5) })
	h := newHandler(t, store, replay.Config{})

	t.Run("key", func(t *testing.T) {
		t.Parallel()
		var got replay.KeyRecord
		decode(t, get(t, h, "/latest?topic=state&key=k3"), &got)
		assert.Equal(t, uint64(49), got.Event.Seq)
		assert.Equal(t, "k3", got.Event.Key)
		assert.JSONEq(t, `{"i":48}`, string(got.Event.Payload))
	})
	t.Run("unknown key", func(t *testing.T) {
		t.Parallel()
		e := errorOf(t, get(t, h, "/latest?topic=state&key=k9"), http.StatusNotFound)
		assert.Equal(t, replay.CodeNotFound, e.Code)
		assert.Contains(t, e.Msg, "key")
		assert.Contains(t, e.Msg, `"k9"`)
	})
	t.Run("unknown topic", func(t *testing.T) {
		t.Parallel()
		errorOf(t, get(t, h, "/latest?topic=nothing&key=k1"), http.StatusNotFound)
	})
	t.Run("pages", func(t *testing.T) {
		t.Parallel()
		var keys []string
		var lastSeqs []uint64
		target := "/latest?topic=state&limit=2"
		for pages := 0; ; pages++ {
			require.Less(t, pages, 5)
			var page replay.LatestPage
			decode(t, get(t, h, target), &page)
			require.NotNil(t, page.Events)
			for _, r := range page.Events {
				keys = append(keys, r.Key)
				lastSeqs = append(lastSeqs, r.Seq)
			}
			if page.NextAfter == "" {
				break
			}
			target = "/latest?topic=state&limit=2&after=" + page.NextAfter
		}
		assert.Equal(t, []string{"k0", "k1", "k2", "k3", "k4"}, keys)
		assert.Equal(t, []uint64{46, 47, 48, 49, 50}, lastSeqs)
	})
	t.Run("default page", func(t *testing.T) {
		t.Parallel()
		var page replay.LatestPage
		decode(t, get(t, h, "/latest?topic=state"), &page)
		assert.Len(t, page.Events, 5)
		assert.Empty(t, page.NextAfter)
	})
	t.Run("empty topic", func(t *testing.T) {
		t.Parallel()
		assert.JSONEq(t, `{"events":[]}`, get(t, h, "/latest?topic=none").Body.String())
	})
}

func TestLatestNeedsKeyStore(t *testing.T) {
	t.Parallel()
	_, store := newBus(t)
	h := newHandler(t, plainStore{store}, replay.Config{})
	for _, q := range []string{"topic=t&key=k", "topic=t"} {
		e := errorOf(t, get(t, h, "/latest?"+q), http.StatusNotImplemented)
		assert.Equal(t, replay.CodeNotImplemented, e.Code)
	}
	// Bad input is still bad input.
	errorOf(t, get(t, h, "/latest?key=k"), http.StatusBadRequest)
	// The other endpoints need a plain store only.
	assert.Equal(t, http.StatusOK, get(t, h, "/replay?topic=t").Code)
	assert.Equal(t, http.StatusOK, get(t, h, "/export?topic=t").Code)
}
