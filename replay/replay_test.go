package replay_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/replay"
)

func TestReplayPagesBySeqAcrossEqualTS(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	// 250 records over 3 timestamps: every page boundary falls inside a run
	// of equal timestamps, where paging by ts+1 would skip records.
	fill(t, bus, "orders", 250, sameTS(100), nil)
	h := newHandler(t, store, replay.Config{})

	for _, start := range []struct {
		name, query string
		first       uint64
	}{
		{"earliest", "from=earliest", 1},
		{"default", "", 1},
		{"ts", fmt.Sprintf("from=ts&ts=%d", baseTS+1), 101},
		{"seq", "from=seq&seq=42", 42},
	} {
		t.Run(start.name, func(t *testing.T) {
			t.Parallel()
			var got []uint64
			target := "/replay?topic=orders&limit=30&" + start.query
			for pages := 0; ; pages++ {
				require.Less(t, pages, 20, "paging does not end")
				var page replay.ReplayPage
				decode(t, get(t, h, target), &page)
				got = append(got, seqs(page.Events)...)
				if len(page.Events) < 30 {
					assert.Equal(t, uint64(251), page.NextSeq)
					break
				}
				assert.Equal(t, page.Events[len(page.Events)-1].Seq+1, page.NextSeq)
				target = fmt.Sprintf("/replay?topic=orders&limit=30&from=seq&seq=%d", page.NextSeq)
			}
			assert.Equal(t, seqRange(start.first, 250), got, "every record once, in seq order")
		})
	}
}

func TestReplayStarts(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	ctx := context.Background()
	// Timestamps out of seq order: a publisher may set its own.
	tss := []int64{50, 10, 70, 30, 50, 90, 20}
	var ids []string
	for i, ts := range tss {
		r, err := bus.Publish(ctx, "t", fmt.Appendf(nil, "%d", i), event.WithTS(ts), event.WithID(fmt.Sprintf("id-%d", i+1)))
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	h := newHandler(t, store, replay.Config{})

	tests := []struct {
		name     string
		query    string
		want     []uint64
		wantNext uint64
	}{
		{"earliest", "from=earliest", seqRange(1, 7), 8},
		{"limit", "from=earliest&limit=3", seqRange(1, 3), 4},
		{"latest", "from=latest", nil, 8},
		{"seq", "from=seq&seq=5", seqRange(5, 7), 8},
		{"seq past head", "from=seq&seq=100", nil, 100},
		{"ts: from the first record at or after it, then in seq order", "from=ts&ts=60", seqRange(3, 7), 8},
		{"ts exact", "from=ts&ts=50", seqRange(1, 7), 8},
		{"ts past every record", "from=ts&ts=1000", nil, 8},
		{"afterId", "from=afterId&afterId=" + ids[3], seqRange(5, 7), 8},
		{"afterId last", "from=afterId&afterId=" + ids[6], nil, 8},
		{"empty values are absent", "from=&seq=&ts=&afterId=&limit=", seqRange(1, 7), 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var page replay.ReplayPage
			decode(t, get(t, h, "/replay?topic=t&"+tt.query), &page)
			require.NotNil(t, page.Events, "events is [], never null")
			assert.Equal(t, tt.want, nilIfEmpty(seqs(page.Events)))
			assert.Equal(t, tt.wantNext, page.NextSeq)
			for _, r := range page.Events {
				assert.Equal(t, "t", r.Topic)
				assert.Equal(t, tss[r.Seq-1], r.TS)
				assert.Equal(t, ids[r.Seq-1], r.ID)
			}
		})
	}

	t.Run("unknown afterId", func(t *testing.T) {
		t.Parallel()
		e := errorOf(t, get(t, h, "/replay?topic=t&from=afterId&afterId=nope"), http.StatusNotFound)
		assert.Equal(t, replay.CodeNotFound, e.Code)
		assert.Contains(t, e.Msg, "afterId")
	})
	t.Run("empty topic", func(t *testing.T) {
		t.Parallel()
		rec := get(t, h, "/replay?topic=empty")
		assert.JSONEq(t, `{"events":[],"next_seq":1}`, rec.Body.String())
	})
}

func TestReplayRecordJSON(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	_, err := bus.Publish(context.Background(), "t", []byte(`{"a":1}`),
		event.WithID("x"), event.WithTS(5), event.WithKey("k"), event.WithCausedBy("c"),
		event.WithHeaders(map[string]string{"h": "v"}))
	require.NoError(t, err)
	rec := get(t, newHandler(t, store, replay.Config{}), "/replay?topic=t")
	assert.JSONEq(t, `{"events":[{"id":"x","seq":1,"ts":5,"topic":"t","key":"k","partition":0,
		"headers":{"h":"v"},"payload":{"a":1},"caused_by":["c"]}],"next_seq":2}`, rec.Body.String())
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
}

func nilIfEmpty(s []uint64) []uint64 {
	if len(s) == 0 {
		return nil
	}
	return s
}
