package event_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// failFirst subscribes group on topic with a handler that records every
// delivery and fails each record the first time (it is dead-lettered at
// once), acking its redrive.
func failFirst(t *testing.T, b *event.Bus, topic, group string, opts ...event.SubscribeOption) *seen {
	t.Helper()
	var got seen
	_, err := b.Subscribe(context.Background(), topic, group, func(_ context.Context, d *event.Delivery) error {
		got.add(d.Record)
		if d.Headers[event.HeaderRedriveID] == "" {
			return assert.AnError
		}
		return nil
	}, append([]event.SubscribeOption{event.WithMaxAttempts(1)}, opts...)...)
	require.NoError(t, err)
	return &got
}

// waitDeadLetters waits until group on topic has n pending dead letters
// and returns them.
func waitDeadLetters(t *testing.T, b *event.Bus, topic, group string, n int) event.DeadLetterPage {
	t.Helper()
	var page event.DeadLetterPage
	require.Eventually(t, func() bool {
		var err error
		page, err = b.DeadLetters(context.Background(), topic, group, 0, 100)
		require.NoError(t, err)
		return len(page.Records) == n
	}, 10*time.Second, 5*time.Millisecond, "dead letters of %s/%s: %+v", topic, group, page.DeadLetters)
	return page
}

// A group's dead letters are its own: they are listed for it (paged,
// oldest first), redriven to it only (the other group, which acked
// them, never sees them again), each once; a purge drops them
// unredriven.
func TestDeadLettersRedriveAndPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, b := redriveBus(t)
	billing := failFirst(t, b, "orders", "billing")
	var audit seen
	_, err := b.Subscribe(ctx, "orders", "audit", func(_ context.Context, d *event.Delivery) error {
		audit.add(d.Record)
		return nil
	})
	require.NoError(t, err)
	var originals []event.Record
	for i := range 4 {
		r, err := b.Publish(ctx, "orders", []byte(strconv.Itoa(i)), event.WithKey("k"+strconv.Itoa(i)))
		require.NoError(t, err)
		originals = append(originals, r)
	}

	page := waitDeadLetters(t, b, "orders", "billing", 4)
	assert.Equal(t, event.DeadLetterSummary{Topic: "orders.dlq", Head: 4, Pending: 4}, page.DeadLetters)
	assert.Zero(t, page.Next, "the whole topic was read")
	for i, r := range page.Records {
		assert.Equal(t, originals[i].ID, r.Headers[event.HeaderDLQID])
		assert.Equal(t, "billing", r.Headers[event.HeaderDLQGroup])
	}
	none, err := b.DeadLetters(ctx, "orders", "audit", 0, 100)
	require.NoError(t, err)
	assert.Empty(t, none.Records, "audit failed nothing")
	assert.Zero(t, none.DeadLetters.Pending)

	first, err := b.DeadLetters(ctx, "orders", "billing", 0, 2)
	require.NoError(t, err)
	require.Len(t, first.Records, 2)
	assert.Equal(t, uint64(2), first.Next)
	second, err := b.DeadLetters(ctx, "orders", "billing", first.Next, 2)
	require.NoError(t, err)
	assert.Equal(t, page.Records[2:], second.Records)
	assert.Zero(t, second.Next)
	require.Eventually(t, func() bool { return len(audit.get()) == 4 }, 10*time.Second, time.Millisecond)

	_, err = b.PurgeDeadLetters(ctx, "orders", "audit", []string{page.Records[0].ID}, 0)
	assert.ErrorIs(t, err, event.ErrNotFound, "billing's dead letter is not audit's")

	// Redrive one chosen record.
	res, err := b.RedriveDeadLetters(ctx, "orders", "billing", []string{page.Records[1].ID}, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{page.Records[1].ID}, res.IDs)
	require.Len(t, res.Records, 1)
	assert.Equal(t, event.RedriveTopic("orders", "billing"), res.Records[0].Topic)
	require.Eventually(t, func() bool { return len(billing.get()) == 5 }, 10*time.Second, time.Millisecond)
	got := billing.get()[4]
	assert.Equal(t, "orders", got.Topic)
	assert.Equal(t, originals[1].ID, got.ID)
	assert.Equal(t, originals[1].Seq, got.Seq)

	// Purge one, redrive the rest.
	res, err = b.PurgeDeadLetters(ctx, "orders", "billing", []string{page.Records[0].ID}, 0)
	require.NoError(t, err)
	assert.Equal(t, []string{page.Records[0].ID}, res.IDs)
	assert.Empty(t, res.Records)
	res, err = b.RedriveDeadLetters(ctx, "orders", "billing", nil, 100)
	require.NoError(t, err)
	assert.Equal(t, []string{page.Records[2].ID, page.Records[3].ID}, res.IDs)
	require.Eventually(t, func() bool { return len(billing.get()) == 7 }, 10*time.Second, time.Millisecond)
	ids := map[string]bool{}
	for _, r := range billing.get()[4:] {
		ids[r.ID] = true
	}
	assert.Equal(t, map[string]bool{originals[1].ID: true, originals[2].ID: true, originals[3].ID: true}, ids)

	page, err = b.DeadLetters(ctx, "orders", "billing", 0, 100)
	require.NoError(t, err)
	assert.Empty(t, page.Records)
	assert.Zero(t, page.DeadLetters.Pending)
	res, err = b.RedriveDeadLetters(ctx, "orders", "billing", nil, 100)
	require.NoError(t, err)
	assert.Empty(t, res.IDs, "each record is redriven once")
	_, err = b.RedriveDeadLetters(ctx, "orders", "billing", []string{originals[0].ID}, 100)
	assert.ErrorIs(t, err, event.ErrNotFound, "not an id of the dead-letter topic")

	// The other group got every record once; a last publish shows it is
	// alive and caught up.
	_, err = b.Publish(ctx, "orders", []byte(`9`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(audit.get()) == 5 }, 10*time.Second, time.Millisecond)
	for _, r := range audit.get() {
		assert.Empty(t, r.Headers[event.HeaderRedriveID])
	}

	_, err = b.RedriveDeadLetters(ctx, "orders", "billing", nil, 0)
	assert.ErrorIs(t, err, event.ErrInvalid, "no ids and no limit")
	_, err = b.DeadLetters(ctx, "orders", "billing", 0, 0)
	assert.ErrorIs(t, err, event.ErrInvalid)
	_, err = b.RedriveDeadLetters(ctx, "a b", "billing", nil, 1)
	assert.ErrorIs(t, err, event.ErrInvalid)
	_, err = b.PurgeDeadLetters(ctx, "orders", "a b", nil, 1)
	assert.ErrorIs(t, err, event.ErrInvalid)
}

// A group's dead-letter topic is a setting of the group, stored with it
// (GroupConfig.DeadLetterTopic): the dead letters of a group stored with
// one of its own are read, redriven and purged there, not in the
// topic's default "<topic>.dlq".
func TestDeadLettersOfAGroupWithItsOwnTopic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := redriveBus(t)
	billing := failFirst(t, b, "orders", "billing", event.WithDeadLetterTopic("billing-failed"))
	var originals []event.Record
	for i := range 3 {
		r, err := b.Publish(ctx, "orders", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
		originals = append(originals, r)
	}
	page := waitDeadLetters(t, b, "orders", "billing", 3)
	assert.Equal(t, event.DeadLetterSummary{Topic: "billing-failed", Head: 3, Pending: 3}, page.DeadLetters)
	for i, r := range page.Records {
		assert.Equal(t, "billing-failed", r.Topic)
		assert.Equal(t, originals[i].ID, r.Headers[event.HeaderDLQID])
	}
	head, err := st.Head(ctx, event.DeadLetterTopic("orders"))
	require.NoError(t, err)
	assert.Zero(t, head, "nothing in the topic's default dead-letter topic")

	res, err := b.PurgeDeadLetters(ctx, "orders", "billing", []string{page.Records[0].ID}, 100)
	require.NoError(t, err)
	assert.Equal(t, []string{page.Records[0].ID}, res.IDs)
	res, err = b.RedriveDeadLetters(ctx, "orders", "billing", nil, 100)
	require.NoError(t, err)
	assert.Equal(t, []string{page.Records[1].ID, page.Records[2].ID}, res.IDs)
	require.Eventually(t, func() bool { return len(billing.get()) == 5 }, 10*time.Second, time.Millisecond)
	page, err = b.DeadLetters(ctx, "orders", "billing", 0, 100)
	require.NoError(t, err)
	assert.Empty(t, page.Records)
	assert.Zero(t, page.DeadLetters.Pending)
	status, err := b.GroupStatus(ctx, "orders", "billing")
	require.NoError(t, err)
	assert.Equal(t, event.DeadLetterSummary{Topic: "billing-failed", Head: 3}, status.DeadLetters)
}

// The marks of a dead-letter topic are kept where package ops kept them
// (the cursor and settled set of DeadLetterMarksGroup on the dead-letter
// topic, partition 0), so the marks of an existing database stay valid:
// every dead letter at or below the cursor, and each one settled above
// it, is done.
func TestDeadLetterMarksOfAnEarlierRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := redriveBus(t)
	failFirst(t, b, "orders", "billing")
	for i := range 5 {
		_, err := b.Publish(ctx, "orders", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	page := waitDeadLetters(t, b, "orders", "billing", 5)
	assert.Equal(t, "ops.redrive", event.DeadLetterMarksGroup)

	// What ops wrote: seqs 1 and 2 redriven (its cursor), 4 purged.
	ref := event.PartitionRef{Topic: "orders.dlq", Group: "ops.redrive", Partition: 0}
	require.NoError(t, st.CommitCursor(ctx, ref, 2, event.Fence{}))
	require.NoError(t, st.UpdateGroupState(ctx, ref, event.GroupStateUpdate{Settled: []uint64{4}}, event.Fence{}))
	left, err := b.DeadLetters(ctx, "orders", "billing", 0, 100)
	require.NoError(t, err)
	assert.Equal(t, []event.Record{page.Records[2], page.Records[4]}, left.Records)
	assert.Equal(t, uint64(2), left.DeadLetters.Pending)

	// A purge of 3 moves the cursor over 3 and 4.
	_, err = b.PurgeDeadLetters(ctx, "orders", "billing", []string{page.Records[2].ID}, 0)
	require.NoError(t, err)
	cur, err := st.Cursors(ctx, "orders.dlq", "ops.redrive")
	require.NoError(t, err)
	assert.Equal(t, map[int]uint64{0: 4}, cur)
	gs, err := st.GroupState(ctx, ref)
	require.NoError(t, err)
	assert.Empty(t, gs.Settled, "the marks the cursor passed are forgotten")
}

// The count of a group's dead letters stops after 1,024 records that are
// not done, and says so (More); a page reads on and continues with Next.
func TestDeadLetterCountIsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, b := redriveBus(t)
	const n = 1100
	recs := make([]event.Record, 0, n)
	for i := range n {
		r, err := b.NewRecord("orders.dlq", []byte(`1`), event.PublishOptions{Headers: map[string]string{
			event.HeaderDLQTopic: "orders", event.HeaderDLQGroup: "billing",
			event.HeaderDLQID: "r" + strconv.Itoa(i), event.HeaderDLQSeq: strconv.Itoa(i + 1)}})
		require.NoError(t, err)
		recs = append(recs, r)
	}
	_, err := b.Append(ctx, "orders.dlq", recs)
	require.NoError(t, err)
	page, err := b.DeadLetters(ctx, "orders", "billing", 0, 10)
	require.NoError(t, err)
	assert.Equal(t, event.DeadLetterSummary{Topic: "orders.dlq", Head: 1100, Pending: 1024, More: true}, page.DeadLetters)
	require.Len(t, page.Records, 10)
	assert.Equal(t, uint64(10), page.Next)
	page, err = b.DeadLetters(ctx, "orders", "billing", 1090, 100)
	require.NoError(t, err)
	assert.Len(t, page.Records, 10)
	assert.Zero(t, page.Next)
	res, err := b.PurgeDeadLetters(ctx, "orders", "billing", nil, 1000)
	require.NoError(t, err)
	assert.Len(t, res.IDs, 1000)
	page, err = b.DeadLetters(ctx, "orders", "billing", 0, 10)
	require.NoError(t, err)
	assert.Equal(t, event.DeadLetterSummary{Topic: "orders.dlq", Head: 1100, Pending: 100}, page.DeadLetters)
}
