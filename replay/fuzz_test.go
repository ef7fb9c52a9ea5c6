package replay_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/httpx"
	"github.com/promethean/promlib/replay"
)

// FuzzQuery sends arbitrary query strings to every endpoint: each answer
// is 200 with a well-formed body, or a JSON error (400 naming a parameter,
// or 404), and never a panic.
func FuzzQuery(f *testing.F) {
	for _, q := range []string{
		"topic=t", "topic=t&from=earliest&limit=5", "topic=t&from=latest", "topic=t&from=seq&seq=3",
		"topic=t&from=ts&ts=1700000000005", "topic=t&from=afterId&afterId=id-4", "topic=t&from=afterId&afterId=x",
		"topic=t&from=seq&seq=0", "topic=t&limit=0", "topic=t&limit=1001", "topic=t&seq=1", "topic=a..b",
		"topic=t&limit=%zz", "topic=t;limit=1", "topic=t&topic=u", "topic=t&from=yesterday", "from=seq&seq=1",
		"topic=t&fromTs=1700000000003&toTs=1700000000010&format=json", "topic=t&fromTs=5&toTs=4", "topic=t&format=csv",
		"topic=t&key=k1", "topic=t&key=zz", "topic=t&after=k2&limit=2", "topic=t&key=k&after=a", "topic=%00",
		"topic=t&from=seq&seq=18446744073709551615", "topic=t&limit=-9223372036854775808", "", "&&&", "=",
	} {
		for ep := range 3 {
			f.Add(uint8(ep), q)
		}
	}
	store := event.NewMemoryStore()
	bus, err := event.NewBus(store, event.Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = bus.Close(f.Context()) })
	fill(f, bus, "t", 20, sameTS(3), func(i int) string { return fmt.Sprintf("k%d", i%4) })
	h, err := replay.NewHandler(replay.Config{Store: store, MaxLimit: 10, ExportPageSize: 3})
	if err != nil {
		f.Fatal(err)
	}
	endpoints := []string{"replay", "export", "latest"}

	f.Fuzz(func(t *testing.T, ep uint8, raw string) {
		endpoint := endpoints[int(ep)%len(endpoints)]
		req := httptest.NewRequest(http.MethodGet, "/"+endpoint, nil)
		req.URL.RawQuery = raw
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		switch rec.Code {
		case http.StatusOK:
			checkOK(t, endpoint, rec)
		case http.StatusBadRequest, http.StatusNotFound:
			var body httpx.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("%d with a body that is not JSON: %q", rec.Code, rec.Body)
			}
			want := replay.CodeBadRequest
			if rec.Code == http.StatusNotFound {
				want = replay.CodeNotFound
			}
			if body.Error.Code != want {
				t.Fatalf("%d with code %q", rec.Code, body.Error.Code)
			}
			if param, _, ok := strings.Cut(body.Error.Msg, ": "); !ok || param == "" {
				t.Fatalf("message %q names no parameter", body.Error.Msg)
			}
		default:
			t.Fatalf("%s?%s: status %d: %s", endpoint, raw, rec.Code, rec.Body)
		}
	})
}

// checkOK checks the body of a 200 answer of endpoint.
func checkOK(t *testing.T, endpoint string, rec *httptest.ResponseRecorder) {
	t.Helper()
	increasing := func(recs []event.Record) {
		for i := 1; i < len(recs); i++ {
			if recs[i].Seq <= recs[i-1].Seq {
				t.Fatalf("seq %d after %d", recs[i].Seq, recs[i-1].Seq)
			}
		}
	}
	switch endpoint {
	case "replay":
		var page replay.ReplayPage
		if err := json.Unmarshal(rec.Body.Bytes(), &page); err != nil {
			t.Fatalf("replay page: %v: %q", err, rec.Body)
		}
		if page.Events == nil || len(page.Events) > 10 {
			t.Fatalf("replay page of %d events (nil: %v)", len(page.Events), page.Events == nil)
		}
		increasing(page.Events)
		if n := len(page.Events); n > 0 && page.NextSeq != page.Events[n-1].Seq+1 {
			t.Fatalf("next_seq %d after seq %d", page.NextSeq, page.Events[n-1].Seq)
		}
	case "export":
		var recs []event.Record
		if rec.Header().Get("Content-Type") == "application/json" {
			if err := json.Unmarshal(rec.Body.Bytes(), &recs); err != nil {
				t.Fatalf("export array: %v: %q", err, rec.Body)
			}
		} else {
			sc := bufio.NewScanner(bytes.NewReader(rec.Body.Bytes()))
			for sc.Scan() {
				var r event.Record
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
					t.Fatalf("export line: %v: %q", err, sc.Text())
				}
				recs = append(recs, r)
			}
		}
		increasing(recs)
	case "latest":
		var v map[string]json.RawMessage
		if err := json.Unmarshal(rec.Body.Bytes(), &v); err != nil {
			t.Fatalf("latest: %v: %q", err, rec.Body)
		}
		if _, ok := v["event"]; !ok {
			if _, ok := v["events"]; !ok {
				t.Fatalf("latest: neither event nor events: %q", rec.Body)
			}
		}
	}
}
