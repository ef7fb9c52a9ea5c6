package main

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// export writes every record of a topic; import publishes them to a
// topic with their ids, so that a second import, or an import into the
// topic they came from, stores nothing.
func TestExportImport(t *testing.T) {
	t.Parallel()
	const src, dst = "t.export", "t.import"
	promctl(t, "", "publish", src, `{"n":1}`, "-key", "k1", "-header", "a=b").ok(t)
	promctl(t, "{\"n\":2}\n{\"n\":3}\n", "publish", src).ok(t)
	// A binary record with tags, caused_by and sid, by HTTP publish.
	req, err := http.NewRequest(http.MethodPost, hubs.open.url+"/publish/"+src+"?id=bin-1&tag=x&tag=y&caused_by=c1&sid=s1&key=k2",
		bytes.NewReader([]byte{0, 1, 2, 0xff}))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	r := promctl(t, "", "export", src).ok(t)
	file := r.stdout
	want := exported(t, hubs.open.url, src)
	require.Len(t, want, 4)
	assert.Equal(t, []byte{0, 1, 2, 0xff}, []byte(want[3].Payload))

	r = promctl(t, file, "import", dst).ok(t)
	assert.Equal(t, "imported 4 records into t.import: 4 new, 0 held already\n", r.stdout)
	r = promctl(t, file, "import", dst).ok(t)
	assert.Equal(t, "imported 4 records into t.import: 0 new, 4 held already\n", r.stdout)
	r = promctl(t, file, "import", src).ok(t)
	assert.Equal(t, "imported 4 records into t.export: 0 new, 4 held already\n", r.stdout)

	got := exported(t, hubs.open.url, dst)
	require.Len(t, got, 4, "an import run twice stores each record once")
	for i := range want {
		w := want[i]
		w.Topic = dst
		assert.Equal(t, w, got[i], "record %d: all but the topic as exported", i)
	}
	assert.Len(t, exported(t, hubs.open.url, src), 4)

	// -from-ts and -to-ts keep the records of a time range.
	ts := strconv.FormatInt(want[3].TS, 10)
	r = promctl(t, "", "export", src, "-from-ts", ts, "-to-ts", ts).ok(t)
	assert.Contains(t, r.stdout, `"id":"bin-1"`)
	for _, rec := range want[:3] {
		if rec.TS != want[3].TS {
			assert.NotContains(t, r.stdout, `"id":"`+rec.ID+`"`)
		}
	}
	r = promctl(t, "", "export", src, "-from-ts", strconv.FormatInt(want[3].TS+1, 10)).ok(t)
	assert.Empty(t, r.stdout)
}

// A line import cannot read stops it with the line's number; the lines
// before it are stored.
func TestImportBadInput(t *testing.T) {
	t.Parallel()
	const topic = "t.import.bad"
	in := `{"id":"a","seq":1,"ts":1,"topic":"x","partition":0,"payload":{"n":1}}` + "\n\n" + `{"id":"b","payload":` + "\n"
	promctl(t, in, "import", topic).fails(t, 1, "import: stdin line 3: not a record", "1 records imported before it")
	recs := exported(t, hubs.open.url, topic)
	require.Len(t, recs, 1)
	assert.Equal(t, "a", recs[0].ID)
	assert.Equal(t, int64(1), recs[0].TS)

	promctl(t, `{"seq":1,"payload":{}}`+"\n", "import", topic).fails(t, 1, "stdin line 1: the record has no id")
	promctl(t, `{"id":"c","payload":"AAE=","content_type":"application/octet-stream"}`+"\n", "import", topic).
		fails(t, 1, "stdin line 1: not a record", "payload_encoding")
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	promctl(t, `{"id":"d","payload":`+deep+`}`+"\n", "import", topic).fails(t, 1, "stdin line 1 (id d):")
	assert.Len(t, exported(t, hubs.open.url, topic), 1)
}

// An export of a topic nobody may read answers the hub's error.
func TestExportRefused(t *testing.T) {
	t.Parallel()
	promctlAt(t, hubs.secured.url, "", "export", "t.export.refused", "-token", "wrong").fails(t, 1, "export: auth_failed:", "(HTTP 401)")
}
