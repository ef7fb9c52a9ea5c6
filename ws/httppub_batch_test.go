package ws

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/ratelimit"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// postBatch posts body to path with the content type, over real HTTP, and
// returns the status and the decoded answer.
func postBatch(t *testing.T, e *testEnv, path, ctype, body string) (int, BatchResult, map[string]any) {
	t.Helper()
	req, err := newRequest(e.srv.URL+path, testToken, body)
	require.NoError(t, err)
	req.Header.Set("Content-Type", ctype)
	resp, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var res BatchResult
	var errBody map[string]any
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.Unmarshal(data, &res), "%s", data)
	} else {
		require.NoError(t, json.Unmarshal(data, &errBody), "%s", data)
		require.Len(t, errBody, 1, "%s", data)
		errBody, _ = errBody["error"].(map[string]any)
	}
	return resp.StatusCode, res, errBody
}

// TestHTTPPublishBatch: an NDJSON batch and a JSON array batch, each with
// bad events among good ones: the good ones are stored in order, each bad
// one's error is reported at its index.
func TestHTTPPublishBatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) { c.MaxPayload = 200 })
	lines := []string{
		`{"payload":{"n":0},"key":"k0","headers":{"h":"v"},"tags":["a"],"caused_by":["c"],"sid":"s","ts":1234}`,
		`{"payload":1,"id":"fixed"}`,
		`{"payload":{"n":`,                               // 2: not JSON
		`{"payload":"` + strings.Repeat("x", 300) + `"}`, // 3: too large
		``,                           // blank lines are skipped
		`{"payload":3}`,              // 4
		`{"paylod":4}`,               // 5: unknown field
		`{"payload":"poison"}`,       // 6: the store refuses it
		`{"payload":5,"id":"fixed"}`, // 7: the stored one, idempotent
		`{"payload":6}`,              // 8
		"{\"payload\":\"\xff\"}",     // 9: not UTF-8
		`{"id":"x"}`,                 // 10: no payload
	}
	status, res, errBody := postBatch(t, e, "/publish/orders", "application/x-ndjson", strings.Join(lines, "\n")+"\n")
	require.Equal(t, 200, status, "%v", errBody)
	require.Len(t, res.Results, 11)
	wantErr := map[int]wsproto.Code{2: wsproto.CodeBadJSON, 3: wsproto.CodeTooLarge, 5: wsproto.CodeBadFrame, 6: wsproto.CodePublishFailed, 9: wsproto.CodeBadJSON, 10: wsproto.CodeBadFrame}
	seqs := map[int]uint64{0: 1, 1: 2, 4: 3, 7: 2, 8: 4}
	for i, r := range res.Results {
		if code, bad := wantErr[i]; bad {
			require.NotNil(t, r.Error, "event %d: %+v", i, r)
			assert.Equal(t, code, r.Error.Code, "event %d: %s", i, r.Error.Msg)
			assert.Contains(t, r.Error.Msg, fmt.Sprintf("event %d", i))
			continue
		}
		require.Nil(t, r.Error, "event %d", i)
		assert.Equal(t, seqs[i], r.Seq, "event %d", i)
		assert.NotEmpty(t, r.ID)
	}
	assert.Equal(t, 5, res.Stored)
	assert.Equal(t, 6, res.Failed)
	assert.Equal(t, "fixed", res.Results[1].ID)
	rec, err := e.store.FindByID(context.Background(), "orders", res.Results[0].ID)
	require.NoError(t, err)
	assert.Equal(t, "k0", rec.Key)
	assert.Equal(t, map[string]string{"h": "v"}, rec.Headers)
	assert.Equal(t, []string{"a"}, rec.Tags)
	assert.Equal(t, []string{"c"}, rec.CausedBy)
	assert.Equal(t, "s", rec.SID)
	assert.Equal(t, int64(1234), rec.TS)

	// A JSON array, with ?batch=true.
	status, res, errBody = postBatch(t, e, "/publish/orders?batch=true", "application/json",
		`[{"payload":7},{"payload":{"deep":`+strings.Repeat("[", 70)+strings.Repeat("]", 70)+`}},{"payload":8}]`)
	require.Equal(t, 200, status, "%v", errBody)
	require.Len(t, res.Results, 3)
	assert.Equal(t, uint64(5), res.Results[0].Seq)
	require.NotNil(t, res.Results[1].Error)
	assert.Equal(t, wsproto.CodeBadJSON, res.Results[1].Error.Code, "nested deeper than MaxJSONDepth")
	assert.Equal(t, uint64(6), res.Results[2].Seq)

	recs, err := e.store.Read(context.Background(), "orders", 0, 100)
	require.NoError(t, err)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Payload))
	}
	assert.Equal(t, []string{`{"n":0}`, `1`, `3`, `6`, `7`, `8`}, got)

	// The single-event form is unchanged: a JSON array body is one event.
	req, err := newRequest(e.srv.URL+"/publish/orders", testToken, `[1,2]`)
	require.NoError(t, err)
	resp, err := e.srv.Client().Do(req)
	require.NoError(t, err)
	var one wsproto.Published
	require.NoError(t, decodeJSON(resp.Body, &one))
	resp.Body.Close()
	assert.Equal(t, uint64(7), one.Seq)
}

// TestHTTPPublishBatchRefused: batches refused whole, before anything is
// stored, with a 4xx that names the limit or the problem.
func TestHTTPPublishBatchRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *Config) {
		c.MaxBatchEvents = 3
		c.MaxBatchBytes = 200
		c.RateLimits.TopicPublish = ratelimit.Limit{Rate: 0.001, Burst: 5}
	})
	nd := "application/x-ndjson"
	tests := []struct {
		name, path, ctype, body string
		status                  int
		code                    wsproto.Code
		msg                     string
	}{
		{"too many events", "/publish/t", nd, strings.Repeat(`{"payload":1}`+"\n", 4), 413, wsproto.CodeTooLarge, "MaxBatchEvents"},
		{"too many in an array", "/publish/t?batch=1", "application/json", "[" + strings.Repeat(`{"payload":1},`, 3) + `{"payload":1}]`, 413, wsproto.CodeTooLarge, "3 events"},
		{"too many bytes", "/publish/t", nd, `{"payload":"` + strings.Repeat("x", 300) + `"}`, 413, wsproto.CodeTooLarge, "MaxBatchBytes"},
		{"endless line", "/publish/t", nd, strings.Repeat("[", 1000), 413, wsproto.CodeTooLarge, "200 bytes"},
		{"not an array", "/publish/t?batch=true", "application/json", `{"payload":1}`, 400, wsproto.CodeBadJSON, "JSON array"},
		{"broken array", "/publish/t?batch=true", "application/json", `[{"payload":1},{"payl`, 400, wsproto.CodeBadJSON, "event 1"},
		{"data after the array", "/publish/t?batch=true", "application/json", `[{"payload":1}] [`, 400, wsproto.CodeBadJSON, "after the array"},
		{"empty", "/publish/t", nd, "\n\n", 400, wsproto.CodeBadFrame, "no events"},
		{"record option in the query", "/publish/t?key=k", nd, `{"payload":1}`, 400, wsproto.CodeBadFrame, "key"},
		{"bad batch flag", "/publish/t?batch=maybe", "application/json", `[]`, 400, wsproto.CodeBadFrame, "batch"},
		{"bad topic first", "/publish/a..b", nd, strings.Repeat(`{"payload":1}`+"\n", 4), 400, wsproto.CodeBadFrame, "topic"},
	}
	for _, tt := range tests {
		status, _, errBody := postBatch(t, e, tt.path, tt.ctype, tt.body)
		assert.Equal(t, tt.status, status, tt.name)
		assert.Equal(t, string(tt.code), errBody["code"], tt.name)
		assert.Contains(t, errBody["msg"], tt.msg, tt.name)
	}
	head, err := e.store.Head(context.Background(), "t")
	require.NoError(t, err)
	assert.Zero(t, head, "nothing stored")

	// The topic bucket (burst 5) pays for every event of a batch: 3 pass,
	// then a batch of 3 does not, and stores none.
	status, res, _ := postBatch(t, e, "/publish/t", nd, strings.Repeat(`{"payload":1}`+"\n", 3))
	require.Equal(t, 200, status)
	assert.Equal(t, 3, res.Stored)
	status, _, errBody := postBatch(t, e, "/publish/t", nd, strings.Repeat(`{"payload":1}`+"\n", 3))
	assert.Equal(t, 429, status)
	assert.Equal(t, string(wsproto.CodeRateLimited), errBody["code"])
	head, err = e.store.Head(context.Background(), "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), head)
}
