package replay_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/promethean/promlib/replay"
)

func TestBadInput(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	fill(t, bus, "t", 3, sameTS(1), nil)
	h := newHandler(t, store, replay.Config{})
	long := strings.Repeat("a", 300)

	tests := []struct {
		name      string
		target    string
		wantParam string // the message starts with it
		wantIn    string // and holds this
	}{
		// every endpoint
		{"replay: no topic", "/replay", "topic", "required"},
		{"export: no topic", "/export?fromTs=1", "topic", "required"},
		{"latest: no topic", "/latest?key=k", "topic", "required"},
		{"replay: empty topic", "/replay?topic=", "topic", "required"},
		{"replay: bad topic", "/replay?topic=a..b", "topic", "empty segment"},
		{"export: bad topic", "/export?topic=a%2Fb", "topic", "contains"},
		{"latest: bad topic", "/latest?topic=orders.*", "topic", "reserved"},
		{"replay: long topic", "/replay?topic=" + long, "topic", "more than 255"},
		{"replay: unknown parameter", "/replay?topic=t&limt=5", "limt", "unknown parameter"},
		{"export: misspelt fromTs", "/export?topic=t&fromTS=5", "fromTS", "unknown parameter"},
		{"latest: unknown parameter", "/latest?topic=t&seq=1", "seq", "unknown parameter"},
		{"replay: repeated parameter", "/replay?topic=t&topic=u", "topic", "given 2 times"},
		{"export: repeated parameter", "/export?topic=t&toTs=1&toTs=2", "toTs", "given 2 times"},
		{"replay: bad query", "/replay?topic=t&limit=%zz", "query", "not a valid URL query"},
		{"export: bad query", "/export?topic=t;format=json", "query", "not a valid URL query"},
		{"latest: nameless parameter", "/latest?topic=t&=5", "query", "without a name"},
		{"replay: odd parameter name", "/replay?topic=t&%3A+=1", `": "`, "unknown parameter"},

		// /replay
		{"unknown from", "/replay?topic=t&from=yesterday", "from", `"yesterday"`},
		{"from=seq without seq", "/replay?topic=t&from=seq", "seq", "required with from=seq"},
		{"from=ts without ts", "/replay?topic=t&from=ts", "ts", "required with from=ts"},
		{"from=afterId without afterId", "/replay?topic=t&from=afterId", "afterId", "required with from=afterId"},
		{"seq without from=seq", "/replay?topic=t&seq=3", "seq", "not allowed with from=earliest"},
		{"ts with from=seq", "/replay?topic=t&from=seq&seq=1&ts=5", "ts", "not allowed with from=seq"},
		{"afterId with from=latest", "/replay?topic=t&from=latest&afterId=x", "afterId", "not allowed with from=latest"},
		{"non-numeric seq", "/replay?topic=t&from=seq&seq=abc", "seq", `"abc" is not a seq`},
		{"negative seq", "/replay?topic=t&from=seq&seq=-1", "seq", "is not a seq"},
		{"seq 0", "/replay?topic=t&from=seq&seq=0", "seq", "seqs start at 1"},
		{"seq over uint64", "/replay?topic=t&from=seq&seq=18446744073709551616", "seq", "is not a seq"},
		{"non-numeric ts", "/replay?topic=t&from=ts&ts=yesterday", "ts", "not a time in Unix milliseconds"},
		{"fractional ts", "/replay?topic=t&from=ts&ts=1.5", "ts", "not a time"},
		{"negative ts", "/replay?topic=t&from=ts&ts=-5", "ts", "not a time"},
		{"long afterId", "/replay?topic=t&from=afterId&afterId=" + long, "afterId", "more than 255"},
		{"limit 0", "/replay?topic=t&limit=0", "limit", "below 1"},
		{"negative limit", "/replay?topic=t&limit=-3", "limit", "below 1"},
		{"limit over the maximum", "/replay?topic=t&limit=1001", "limit", "over the maximum of 1000"},
		{"huge limit", "/replay?topic=t&limit=99999999999999999999999", "limit", "over the maximum"},
		{"non-numeric limit", "/replay?topic=t&limit=ten", "limit", "not a whole number"},

		// /export
		{"non-numeric fromTs", "/export?topic=t&fromTs=now", "fromTs", "not a time"},
		{"non-numeric toTs", "/export?topic=t&toTs=2024-01-01", "toTs", "not a time"},
		{"negative fromTs", "/export?topic=t&fromTs=-1", "fromTs", "not a time"},
		{"fromTs after toTs", "/export?topic=t&fromTs=10&toTs=9", "fromTs", "after toTs 9"},
		{"unknown format", "/export?topic=t&format=csv", "format", `"csv"`},
		{"ndjson=1 of the seed", "/export?topic=t&ndjson=1", "ndjson", "unknown parameter"},

		// /latest
		{"latest: limit 0", "/latest?topic=t&limit=0", "limit", "below 1"},
		{"latest: huge limit", "/latest?topic=t&limit=5000", "limit", "over the maximum"},
		{"latest: key with after", "/latest?topic=t&key=k&after=a", "after", "not allowed with key"},
		{"latest: key with limit", "/latest?topic=t&key=k&limit=5", "limit", "not allowed with key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := errorOf(t, get(t, h, tt.target), http.StatusBadRequest)
			assert.Equal(t, replay.CodeBadRequest, e.Code)
			assert.True(t, strings.HasPrefix(e.Msg, tt.wantParam+": "), "message %q names %q", e.Msg, tt.wantParam)
			assert.Contains(t, e.Msg, tt.wantIn)
			assert.Less(t, len(e.Msg), 600, "messages echo bounded input")
		})
	}
}

func TestMethodAndPath(t *testing.T) {
	t.Parallel()
	_, store := newBus(t)
	h := newHandler(t, store, replay.Config{})
	for _, path := range []string{"/replay", "/export", "/latest"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path+"?topic=t", nil))
		e := errorOf(t, rec, http.StatusMethodNotAllowed)
		assert.Equal(t, replay.CodeMethodNotAllowed, e.Code)
		assert.Equal(t, http.MethodGet, rec.Header().Get("Allow"))
	}
	e := errorOf(t, get(t, h, "/replays?topic=t"), http.StatusNotFound)
	assert.Equal(t, replay.CodeNotFound, e.Code)

	// Any prefix: the last segment of the path picks the endpoint.
	assert.Equal(t, http.StatusOK, get(t, h, "/api/v1/replay?topic=t").Code)
	// Endpoints mount alone at any path.
	assert.Equal(t, http.StatusOK, get(t, h.Export(), "/dump?topic=t").Code)
	assert.Equal(t, http.StatusOK, get(t, h.Replay(), "/r?topic=t").Code)
	assert.Equal(t, http.StatusOK, get(t, h.Latest(), "/l?topic=t").Code)
}
