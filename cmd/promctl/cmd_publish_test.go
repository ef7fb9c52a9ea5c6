package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// publish stores a PAYLOAD argument, or each line of stdin in order, with
// the key and headers given, and prints the seq and id of each.
func TestPublish(t *testing.T) {
	t.Parallel()
	const topic = "t.publish"
	r := promctl(t, "", "publish", topic, `{"n":1}`, "-key", "k1", "-header", "src=cli", "-header", "trace=a=b").ok(t)
	assert.Regexp(t, `^t\.publish seq 1 id \S+\n$`, r.stdout)

	r = promctl(t, "{\"n\":2}\n\n  {\"n\":3}  \n\"four\"\n", "publish", topic, "-o", "json").ok(t)
	out := lines(r.stdout)
	require.Len(t, out, 3)
	for i, l := range out {
		var res wsproto.Published
		require.NoError(t, json.Unmarshal([]byte(l), &res))
		assert.Equal(t, uint64(i+2), res.Seq)
		assert.NotEmpty(t, res.ID)
	}

	recs := exported(t, hubs.open.url, topic)
	require.Len(t, recs, 4)
	assert.Equal(t, "k1", recs[0].Key)
	assert.Equal(t, map[string]string{"src": "cli", "trace": "a=b"}, recs[0].Headers)
	for i, want := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `"four"`} {
		assert.JSONEq(t, want, string(recs[i].Payload))
		assert.Equal(t, uint64(i+1), recs[i].Seq)
	}
	assert.Empty(t, recs[1].Key)
	assert.Nil(t, recs[1].Headers)
}

// A line of stdin that is not JSON stops publish with its line number;
// the events of the batch it was in are not sent.
func TestPublishBadLine(t *testing.T) {
	t.Parallel()
	const topic = "t.publish.bad"
	promctl(t, "{\"n\":1}\n\n{oops\n{\"n\":3}\n", "publish", topic).fails(t, 1, "publish: stdin line 3: not JSON", "0 events published")
	assert.Empty(t, exported(t, hubs.open.url, topic))

	promctl(t, "\n \n", "publish", topic).fails(t, 1, "no events")
}

// An event the hub refuses is one line with the hub's code and message
// and the line it came from; the events before it are stored.
func TestPublishRefused(t *testing.T) {
	t.Parallel()
	const topic = "t.publish.refused"
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	r := promctl(t, "{\"n\":1}\n"+deep+"\n", "publish", topic)
	r.fails(t, 1, "publish: stdin line 2: bad_json:", "1 events published in all")
	assert.Equal(t, 1, strings.Count(r.stdout, "seq"), r.stdout)
	assert.Len(t, exported(t, hubs.open.url, topic), 1)
}
