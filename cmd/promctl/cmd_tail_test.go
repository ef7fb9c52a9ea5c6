package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// publishN publishes n events {"n":i} to topic with promctl publish.
func publishN(t *testing.T, topic string, from, n int) {
	t.Helper()
	in := ""
	for i := from; i < from+n; i++ {
		in += fmt.Sprintf("{\"n\":%d}\n", i)
	}
	promctl(t, in, "publish", topic).ok(t)
}

// tailed decodes the records of promctl tail -o json.
func tailed(t *testing.T, out string) []event.Record {
	t.Helper()
	var recs []event.Record
	for _, l := range lines(out) {
		var r event.Record
		require.NoError(t, json.Unmarshal([]byte(l), &r), l)
		recs = append(recs, r)
	}
	return recs
}

func seqs(recs []event.Record) []uint64 {
	out := []uint64{}
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

// Without -group, tail is a live viewer: it starts where -from says and
// creates no group and moves no cursor.
func TestTailLive(t *testing.T) {
	t.Parallel()
	const topic = "t.tail.live"
	publishN(t, topic, 1, 3)
	recs := exported(t, hubs.open.url, topic)

	r := promctl(t, "", "tail", topic, "-from", "earliest", "-n", "3").ok(t)
	out := lines(r.stdout)
	require.Len(t, out, 3)
	assert.Regexp(t, `^#1 \d{4}-\d\d-\d\dT\S+Z \{"n":1\}$`, out[0])

	r = promctl(t, "", "tail", topic, "-from", "seq:2", "-n", "2", "-o", "json").ok(t)
	assert.Equal(t, []uint64{2, 3}, seqs(tailed(t, r.stdout)))
	assert.Equal(t, recs[1:], tailed(t, r.stdout))

	r = promctl(t, "", "tail", topic, "-from", "ts:"+strconv.FormatInt(recs[2].TS, 10), "-n", "1", "-o", "json").ok(t)
	got := tailed(t, r.stdout)
	require.NotEmpty(t, got)
	assert.LessOrEqual(t, got[0].Seq, uint64(3))
	assert.GreaterOrEqual(t, got[0].TS, recs[2].TS)

	// From latest: only what is published once it follows.
	wait := background(t, "tail", topic, "-n", "1", "-o", "json")
	require.Eventually(t, func() bool { return liveViewers(t, topic) == 1 }, 10*time.Second, 20*time.Millisecond)
	publishN(t, topic, 4, 1)
	r = wait().ok(t)
	assert.Equal(t, []uint64{4}, seqs(tailed(t, r.stdout)))

	r = promctl(t, "", "groups", topic, "-o", "json").ok(t)
	assert.JSONEq(t, `{"topic":"`+topic+`","groups":[]}`, r.stdout, "a live tail makes no group")
}

// With -group, tail joins the group and acks what it prints: the
// group's cursor moves past it, and events delivered beyond -n go back
// to the group.
func TestTailGroup(t *testing.T) {
	t.Parallel()
	const topic, group = "t.tail.group", "viewers"
	publishN(t, topic, 1, 3)

	r := promctl(t, "", "tail", topic, "-group", group, "-from", "earliest", "-n", "2", "-o", "json").ok(t)
	assert.Equal(t, []uint64{1, 2}, seqs(tailed(t, r.stdout)))
	require.Eventually(t, func() bool {
		st := groupStatus(t, topic, group)
		return st.Committed == 2 && st.Lag == 1
	}, 10*time.Second, 50*time.Millisecond, "the acks of tail settle seqs 1 and 2")

	// The group goes on from its cursor, whatever -from says.
	r = promctl(t, "", "tail", topic, "-group", group, "-from", "earliest", "-n", "1").ok(t)
	assert.Regexp(t, `^#3 \S+ \{"n":3\}\n$`, r.stdout)
	require.Eventually(t, func() bool { return groupStatus(t, topic, group).Committed == 3 }, 10*time.Second, 50*time.Millisecond)
}
