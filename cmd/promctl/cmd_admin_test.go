package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsclient"
)

// deadLetter makes the open hub dead-letter n events of topic for group:
// a subscriber with one attempt per event nacks each.
func deadLetter(t *testing.T, topic, group string, n int) {
	t.Helper()
	publishN(t, topic, 1, n)
	c := dial(t)
	sub, err := c.Subscribe(context.Background(), topic, group, func(context.Context, *wsclient.Message) error {
		return errors.New("poison")
	}, event.FromEarliest(), event.WithMaxAttempts(1))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		r := promctl(t, "", "dlq", "list", topic, group, "-o", "json").ok(t)
		var page event.DeadLetterPage
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
		return len(page.Records) == n
	}, 10*time.Second, 50*time.Millisecond)
	require.NoError(t, sub.Close())
}

// dlq lists a group's dead letters, redrives some to that group (which
// gets them again) and purges others.
func TestDLQ(t *testing.T) {
	t.Parallel()
	const topic, group = "t.dlq", "payments"
	deadLetter(t, topic, group, 3)

	r := promctl(t, "", "dlq", "list", topic, group).ok(t)
	out := lines(r.stdout)
	require.Len(t, out, 5, r.stdout)
	assert.Regexp(t, `^SEQ +ID +ORIGINAL_SEQ +ATTEMPTS +TIME +REASON$`, out[0])
	assert.Regexp(t, `^1 +\S+ +\d +1 +\S+ +poison$`, out[1])
	assert.Equal(t, "3 dead letters of group payments in t.dlq.dlq", out[4])

	r = promctl(t, "", "dlq", "list", topic, group, "-limit", "2", "-o", "json").ok(t)
	var page event.DeadLetterPage
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	require.Len(t, page.Records, 2)
	assert.Equal(t, uint64(3), page.DeadLetters.Pending)
	assert.Contains(t, promctl(t, "", "dlq", "list", topic, group, "-limit", "2").ok(t).stdout, "more after seq 2 (-after 2)")
	r = promctl(t, "", "dlq", "list", topic, group, "-after", "2", "-o", "json").ok(t)
	var rest event.DeadLetterPage
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rest))
	require.Len(t, rest.Records, 1)
	redriven, purged := page.Records[0], rest.Records[0]

	r = promctl(t, "", "dlq", "redrive", topic, group, "-ids", redriven.ID).ok(t)
	assert.Equal(t, "1 dead letters redriven to group payments of t.dlq\n  "+redriven.ID+"\n", r.stdout)
	r = promctl(t, "", "dlq", "purge", topic, group, "-ids", purged.ID, "-o", "json").ok(t)
	var res event.DeadLetterResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, []string{purged.ID}, res.IDs)

	r = promctl(t, "", "dlq", "list", topic, group, "-o", "json").ok(t)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &page))
	require.Len(t, page.Records, 1)
	assert.Equal(t, page.Records[0].ID, page.Records[0].ID)
	assert.NotEqual(t, redriven.ID, page.Records[0].ID)
	assert.NotEqual(t, purged.ID, page.Records[0].ID)

	// The group gets the redriven record again, as it was.
	r = promctl(t, "", "tail", topic, "-group", group, "-n", "1", "-o", "json").ok(t)
	got := tailed(t, r.stdout)
	require.Len(t, got, 1)
	assert.Equal(t, redriven.Headers[event.HeaderDLQID], got[0].ID)

	promctl(t, "", "dlq", "purge", topic, group, "-ids", "no-such-id").fails(t, 1, "dlq: not_found:", "(HTTP 404)")
	r = promctl(t, "", "dlq", "purge", topic, group).ok(t)
	assert.True(t, strings.HasPrefix(r.stdout, "1 dead letters purged from group payments of t.dlq\n"), r.stdout)
}

// cursor reset moves a group; a group with live members is refused with
// the hub's conflict unless -force.
func TestCursorReset(t *testing.T) {
	t.Parallel()
	const topic, group = "t.cursor", "reports"
	publishN(t, topic, 1, 4)
	c := dial(t)
	sub, err := c.Subscribe(context.Background(), topic, group, func(context.Context, *wsclient.Message) error { return nil }, event.FromEarliest())
	require.NoError(t, err)
	require.Eventually(t, func() bool { return groupStatus(t, topic, group).Committed == 4 }, 10*time.Second, 50*time.Millisecond)

	promctl(t, "", "cursor", "reset", topic, group, "-to", "earliest").fails(t, 1, "cursor: conflict:", "(HTTP 409)")
	r := promctl(t, "", "cursor", "reset", topic, group, "-to", "seq:3", "-force").ok(t)
	assert.True(t, strings.HasPrefix(r.stdout, "group reports of t.cursor reset to seq:3: cursor 2, next record seq 3; members moved: "), r.stdout)
	require.NoError(t, sub.Close())

	r = promctl(t, "", "cursor", "reset", topic, group, "-to", "earliest", "-o", "json").ok(t)
	var res event.ResetResult
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res))
	assert.Equal(t, uint64(0), res.Seq)
	assert.Equal(t, uint64(4), groupStatus(t, topic, group).Lag)

	r = promctl(t, "", "cursor", "reset", topic, group, "-to", "latest").ok(t)
	assert.Equal(t, "group reports of t.cursor reset to latest: cursor 4, next record seq 5\n", r.stdout)
	r = promctl(t, "", "cursor", "reset", topic, group, "-to", "ts:0").ok(t)
	assert.Contains(t, r.stdout, "cursor 0, next record seq 1")
	promctl(t, "", "cursor", "reset", topic, group, "-to", "seq:99").fails(t, 1, "cursor: bad_request:", "past the head")
}

// group delete deletes a group; one with live members only with -force.
func TestGroupDelete(t *testing.T) {
	t.Parallel()
	const topic, group = "t.groupdelete", "old"
	publishN(t, topic, 1, 1)
	promctl(t, "", "tail", topic, "-group", group, "-from", "earliest", "-n", "1").ok(t)
	require.Eventually(t, func() bool { return groupStatus(t, topic, group).Committed == 1 }, 10*time.Second, 50*time.Millisecond)

	c := dial(t)
	sub, err := c.Subscribe(context.Background(), topic, group, func(context.Context, *wsclient.Message) error { return nil })
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(groupStatus(t, topic, group).Members) == 1 }, 10*time.Second, 50*time.Millisecond)
	promctl(t, "", "group", "delete", topic, group).fails(t, 1, "group: conflict:", "(HTTP 409)")
	require.NoError(t, sub.Close())

	r := promctl(t, "", "group", "delete", topic, group).ok(t)
	assert.Equal(t, "group old of t.groupdelete deleted\n", r.stdout)
	promctl(t, "", "lag", topic, group).fails(t, 1, "not_found")

	r = promctl(t, "", "group", "delete", topic, group, "-force", "-o", "json").ok(t)
	assert.JSONEq(t, `{"topic":"t.groupdelete","group":"old","deleted":true}`, r.stdout)
}
