package replay_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/replay"
)

// exported is what a test reads of an exported record.
type exported struct {
	ID  string `json:"id"`
	Seq uint64 `json:"seq"`
	TS  int64  `json:"ts"`
}

// readNDJSON parses an NDJSON body, one record a line.
func readNDJSON(t testing.TB, body io.Reader) []exported {
	t.Helper()
	var out []exported
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		var r exported
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), "line %d: %s", len(out)+1, sc.Text())
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	return out
}

// readArray parses a JSON array body as a stream, element by element.
func readArray(t testing.TB, body io.Reader) []exported {
	t.Helper()
	dec := json.NewDecoder(body)
	tok, err := dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim('['), tok)
	var out []exported
	for dec.More() {
		var r exported
		require.NoError(t, dec.Decode(&r))
		out = append(out, r)
	}
	tok, err = dec.Token()
	require.NoError(t, err)
	require.Equal(t, json.Delim(']'), tok)
	_, err = dec.Token()
	require.ErrorIs(t, err, io.EOF, "nothing after the array")
	return out
}

// export GETs /export with query from srv and parses the answer.
func export(t testing.TB, srv *httptest.Server, query, format string) []exported {
	t.Helper()
	res, err := srv.Client().Get(srv.URL + "/export?format=" + format + "&" + query)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	if format == replay.FormatJSON {
		assert.Equal(t, "application/json", res.Header.Get("Content-Type"))
		return readArray(t, res.Body)
	}
	assert.Equal(t, "application/x-ndjson", res.Header.Get("Content-Type"))
	return readNDJSON(t, res.Body)
}

// TestExportSharedTimestamps exports 50,000 records of 50 timestamps (1,000
// records each) over HTTP, in pages of 300 records that end inside runs of
// equal timestamps: every record comes exactly once, in seq order.
func TestExportSharedTimestamps(t *testing.T) {
	t.Parallel()
	const n = 50_000
	bus, store := newBus(t)
	fill(t, bus, "metrics", n, sameTS(1000), nil)
	srv := httptest.NewServer(newHandler(t, store, replay.Config{ExportPageSize: 300}))
	t.Cleanup(srv.Close)

	for _, format := range []string{replay.FormatNDJSON, replay.FormatJSON} {
		t.Run(format, func(t *testing.T) {
			t.Run("everything", func(t *testing.T) {
				got := export(t, srv, "topic=metrics", format)
				require.Len(t, got, n)
				for i, r := range got {
					require.Equal(t, uint64(i+1), r.Seq, "record %d", i)
					require.Equal(t, sameTS(1000)(i), r.TS)
				}
				assert.Len(t, uniqueIDs(got), n)
			})
			t.Run("range", func(t *testing.T) {
				// ts 10..19: records 10,000..19,999 (seq 10,001..20,000).
				got := export(t, srv, fmt.Sprintf("topic=metrics&fromTs=%d&toTs=%d", baseTS+10, baseTS+19), format)
				require.Len(t, got, 10_000)
				for i, r := range got {
					require.Equal(t, uint64(10_001+i), r.Seq)
				}
			})
			t.Run("one timestamp", func(t *testing.T) {
				got := export(t, srv, fmt.Sprintf("topic=metrics&fromTs=%d&toTs=%d", baseTS+49, baseTS+49), format)
				require.Len(t, got, 1000)
				assert.Equal(t, uint64(49_001), got[0].Seq)
				assert.Equal(t, uint64(n), got[len(got)-1].Seq)
			})
		})
	}
}

func uniqueIDs(recs []exported) map[string]bool {
	ids := make(map[string]bool, len(recs))
	for _, r := range recs {
		ids[r.ID] = true
	}
	return ids
}

func TestExportTimestampsOutOfOrder(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	tss := []int64{5, 1, 7, 3, 5, 9, 2, 4, 6}
	fill(t, bus, "t", len(tss), func(i int) int64 { return tss[i] }, nil)
	srv := httptest.NewServer(newHandler(t, store, replay.Config{ExportPageSize: 2}))
	t.Cleanup(srv.Close)

	tests := []struct {
		query string
		want  []uint64
	}{
		{"fromTs=3&toTs=5", []uint64{1, 4, 5, 8}},
		{"fromTs=6", []uint64{3, 6, 9}},
		{"toTs=2", []uint64{2, 7}},
		{"fromTs=10", nil},
		{"fromTs=8&toTs=8", nil},
	}
	for _, tt := range tests {
		for _, format := range []string{replay.FormatNDJSON, replay.FormatJSON} {
			var got []uint64
			for _, r := range export(t, srv, "topic=t&"+tt.query, format) {
				got = append(got, r.Seq)
			}
			assert.Equal(t, tt.want, got, "%s %s", tt.query, format)
		}
	}
}

func TestExportEmpty(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	fill(t, bus, "t", 3, sameTS(1), nil)
	h := newHandler(t, store, replay.Config{})
	past := fmt.Sprint(baseTS + 3)
	for _, target := range []string{"/export?topic=none", "/export?topic=t&fromTs=" + past, "/export?topic=t&toTs=1"} {
		rec := get(t, h, target)
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.Empty(t, rec.Body.String())
		rec = get(t, h, target+"&format=json")
		assert.Equal(t, http.StatusOK, rec.Code)
		assert.Equal(t, "[]\n", rec.Body.String())
	}
	// The shape of a short array.
	rec := get(t, h, "/export?topic=t&format=json&toTs="+fmt.Sprint(baseTS+1))
	var arr []event.Record
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &arr), rec.Body.String())
	assert.Len(t, arr, 2)
}

// growingStore appends records to its topic during the export's first
// read, as publishers would.
type growingStore struct {
	event.Store
	bus   *event.Bus
	grown bool
}

func (s *growingStore) Read(ctx context.Context, topic string, afterSeq uint64, limit int) ([]event.Record, error) {
	if !s.grown {
		s.grown = true
		for i := 0; i < 5; i++ {
			if _, err := s.bus.Publish(ctx, topic, []byte(`"late"`), event.WithTS(baseTS)); err != nil {
				return nil, err
			}
		}
	}
	return s.Store.Read(ctx, topic, afterSeq, limit)
}

func TestExportEndsAtHeadOfRequest(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	fill(t, bus, "t", 10, sameTS(100), nil)
	h := newHandler(t, &growingStore{Store: store, bus: bus}, replay.Config{ExportPageSize: 3})
	got := readNDJSON(t, get(t, h, "/export?topic=t").Body)
	assert.Len(t, got, 10, "records published during the export are not in it")
	head, err := store.Head(context.Background(), "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(15), head)
}

// failingStore fails Read from its nth call on.
type failingStore struct {
	event.Store
	n, calls int
}

func (s *failingStore) Read(ctx context.Context, topic string, afterSeq uint64, limit int) ([]event.Record, error) {
	s.calls++
	if s.calls >= s.n {
		return nil, errors.New("disk on fire")
	}
	return s.Store.Read(ctx, topic, afterSeq, limit)
}

func TestExportStoreFailure(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	fill(t, bus, "t", 100, sameTS(1), nil)

	t.Run("before the first byte: 500", func(t *testing.T) {
		t.Parallel()
		h := newHandler(t, &failingStore{Store: store, n: 1}, replay.Config{})
		e := errorOf(t, get(t, h, "/export?topic=t&format=json"), http.StatusInternalServerError)
		assert.Equal(t, replay.CodeInternal, e.Code)
		assert.NotContains(t, e.Msg, "disk", "no internal detail leaks")
	})
	t.Run("after: the response is aborted", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(newHandler(t, &failingStore{Store: store, n: 3}, replay.Config{ExportPageSize: 10}))
		t.Cleanup(srv.Close)
		res, err := srv.Client().Get(srv.URL + "/export?topic=t")
		require.NoError(t, err)
		defer res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode)
		body, err := io.ReadAll(res.Body)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "a broken transfer, not a short export that looks complete")
		assert.Len(t, readNDJSON(t, bytesReader(body)), 20, "the pages read before the failure")
	})
}

func TestExportFlushesEveryPage(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	fill(t, bus, "t", 1000, sameTS(10), nil)
	h := newHandler(t, store, replay.Config{ExportPageSize: 100})
	w := &discardWriter{header: make(http.Header)}
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/export?topic=t", nil))
	assert.Equal(t, 1000, w.lines)
	assert.GreaterOrEqual(t, w.flushes, 10)
}

// discardWriter is a ResponseWriter and Flusher that keeps nothing but
// counts.
type discardWriter struct {
	header         http.Header
	status         int
	bytes          int64
	lines, flushes int
}

func (w *discardWriter) Header() http.Header { return w.header }
func (w *discardWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}

func (w *discardWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.bytes += int64(len(p))
	for _, c := range p {
		if c == '\n' {
			w.lines++
		}
	}
	return len(p), nil
}

func (w *discardWriter) Flush() { w.flushes++ }
