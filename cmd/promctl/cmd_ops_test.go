package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
	"github.com/promethean/promlib/ws/wsclient"
)

// topics, groups and lag show the hub's topics and groups as tables, and
// as the hub's JSON with -o json.
func TestTopicsGroupsLag(t *testing.T) {
	t.Parallel()
	const topic, group = "t.listing", "billing"
	publishN(t, topic, 1, 3)
	promctl(t, "", "tail", topic, "-group", group, "-from", "earliest", "-n", "1").ok(t)
	require.Eventually(t, func() bool { return groupStatus(t, topic, group).Committed == 1 }, 10*time.Second, 50*time.Millisecond)

	r := promctl(t, "", "topics").ok(t)
	out := lines(r.stdout)
	require.NotEmpty(t, out)
	assert.Regexp(t, `^TOPIC +PARTITIONS +EVENTS +FIRST +LAST +LAST_TS +BYTES +GROUPS +DEAD_LETTERS$`, out[0])
	assert.Regexp(t, `(?m)^t\.listing +8 +3 +1 +3 +\S+ +\d+ B +1 +0$`, r.stdout)

	r = promctl(t, "", "topics", topic, "-o", "json").ok(t)
	var tr ops.TopicsResponse
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &tr))
	require.Len(t, tr.Topics, 1)
	assert.Equal(t, int64(3), tr.Topics[0].Events)
	assert.Equal(t, uint64(3), tr.Topics[0].Head)

	for _, args := range [][]string{{"groups"}, {"groups", topic}} {
		r = promctl(t, "", args...).ok(t)
		assert.Regexp(t, `^TOPIC +GROUP +MEMBERS +COMMITTED +HEAD +LAG +OLDEST +UNSETTLED +DEAD_LETTERS\n`, r.stdout)
		assert.Regexp(t, `(?m)^t\.listing +billing +- +1 +3 +2 +\S+ +\d+ +0$`, r.stdout)
	}
	r = promctl(t, "", "groups", "-o", "json").ok(t)
	var gr struct{ Groups []event.GroupStatus }
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &gr))
	assert.True(t, hasGroup(gr.Groups, topic, group), r.stdout)

	for _, args := range [][]string{{"lag"}, {"lag", topic}, {"lag", topic, group}} {
		r = promctl(t, "", args...).ok(t)
		assert.Regexp(t, `^TOPIC +GROUP +LAG +OLDEST +OLDEST_SEQ +COMMITTED +HEAD\n`, r.stdout)
		assert.Regexp(t, `(?m)^t\.listing +billing +2 +\S+ +2 +1 +3$`, r.stdout)
	}
	r = promctl(t, "", "lag", topic, "-o", "json").ok(t)
	var lr ops.GroupsResponse
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &lr))
	assert.True(t, hasGroup(lr.Groups, topic, group), r.stdout)

	promctl(t, "", "lag", topic, "nobody").fails(t, 1, "lag: not_found:", `"nobody"`, "(HTTP 404)")
}

func hasGroup(gs []event.GroupStatus, topic, group string) bool {
	for _, g := range gs {
		if g.Topic == topic && g.Group == group {
			return true
		}
	}
	return false
}

// inflight shows what the hub's gateway subscribers hold unsettled: per
// group, and with GROUP each record.
func TestInflight(t *testing.T) {
	t.Parallel()
	const topic, group = "t.inflight", "slow"
	publishN(t, topic, 1, 1)
	c := dial(t)
	got := make(chan *wsclient.Message, 1)
	sub, err := c.Subscribe(context.Background(), topic, group, func(_ context.Context, m *wsclient.Message) error {
		got <- m // held: never acked while the test looks
		return nil
	}, event.FromEarliest(), event.WithManualAck())
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}

	r := promctl(t, "", "inflight").ok(t)
	assert.Regexp(t, `^TOPIC +GROUP +SUBSCRIBERS +IN_FLIGHT +WAITING +HELD +BUFFERED +COMMITTED +PARTITIONS\n`, r.stdout)
	assert.Regexp(t, `(?m)^t\.inflight +slow +1 +1 +0 +0 +0 +0 +8$`, r.stdout)

	r = promctl(t, "", "inflight", topic, group).ok(t)
	out := lines(r.stdout)
	require.Len(t, out, 2, r.stdout)
	assert.Regexp(t, `^SEQ +ID +PARTITION +STATE +ATTEMPT +UNTIL +REASON$`, out[0])
	assert.Regexp(t, `^1 +\S+ +\d +in_flight +1 +\S+ +-$`, out[1])

	r = promctl(t, "", "inflight", topic, group, "-o", "json").ok(t)
	var ir ops.InflightResponse
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &ir))
	require.Len(t, ir.Deliveries, 1)
	assert.Equal(t, "in_flight", ir.Deliveries[0].State)
	assert.Equal(t, 1, ir.InFlight)
	assert.False(t, strings.Contains(r.stdout, "\t"))
}
