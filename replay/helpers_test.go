package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/httpx"
	"github.com/promethean/promlib/replay"
)

// baseTS is the timestamp of the first test record.
const baseTS = int64(1_700_000_000_000)

// newBus returns a bus over a new memory store, closed with the test.
func newBus(t testing.TB) (*event.Bus, *event.MemoryStore) {
	t.Helper()
	store := event.NewMemoryStore()
	bus, err := event.NewBus(store, event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	return bus, store
}

// fill appends n records to topic in batches; record i (from 0) gets
// ts(i), key(i) (when key is not nil) and payload {"i":i}.
func fill(t testing.TB, bus *event.Bus, topic string, n int, ts func(i int) int64, key func(i int) string) {
	t.Helper()
	ctx := context.Background()
	const batch = 5000
	recs := make([]event.Record, 0, batch)
	for i := 0; i < n; i++ {
		o := event.PublishOptions{TS: ts(i)}
		if key != nil {
			o.Key = key(i)
		}
		rec, err := bus.NewRecord(topic, fmt.Appendf(nil, `{"i":%d}`, i), o)
		require.NoError(t, err)
		recs = append(recs, rec)
		if len(recs) == batch || i == n-1 {
			_, err := bus.Append(ctx, topic, recs)
			require.NoError(t, err)
			recs = recs[:0]
		}
	}
}

// sameTS gives every record one of k timestamps, in runs: records i and j
// share a ts when i/run == j/run.
func sameTS(run int) func(i int) int64 {
	return func(i int) int64 { return baseTS + int64(i/run) }
}

// newHandler returns a handler over store with cfg.
func newHandler(t testing.TB, store event.Store, cfg replay.Config) *replay.Handler {
	t.Helper()
	cfg.Store = store
	h, err := replay.NewHandler(cfg)
	require.NoError(t, err)
	return h
}

// get serves GET target with h and returns the recorded answer.
func get(t testing.TB, h http.Handler, target string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// decode decodes the JSON body of a 200 answer into v.
func decode(t testing.TB, rec *httptest.ResponseRecorder, v any) {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), v))
}

// errorOf checks that rec is a JSON error with status and returns it.
func errorOf(t testing.TB, rec *httptest.ResponseRecorder, status int) httpx.ErrorDetail {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var body httpx.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), rec.Body.String())
	assert.NotEmpty(t, body.Error.Code)
	assert.NotEmpty(t, body.Error.Msg)
	return body.Error
}

// seqs returns the seqs of recs.
func seqs(recs []event.Record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

// seqRange returns from, from+1, ..., to.
func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// plainStore hides every interface of a store but event.Store.
type plainStore struct{ event.Store }

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
