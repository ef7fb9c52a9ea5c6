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

// The status of a group holds everything about it in one place: its
// settings, cursors and lag, members and partition owners, unsettled
// records, dead letters, and the counts of this Bus's member.
func TestGroupStatus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, b := redriveBus(t)
	start := time.Now().Add(-time.Minute).UnixMilli()
	for i := range 3 {
		_, err := b.Publish(ctx, "orders", []byte(strconv.Itoa(i)), event.WithTS(start+int64(i)*10_000))
		require.NoError(t, err)
	}
	held := make(chan *event.Delivery, 3)
	_, err := b.Subscribe(ctx, "orders", "billing", func(_ context.Context, d *event.Delivery) error {
		held <- d
		return nil
	}, event.FromEarliest(), event.WithManualAck(), event.WithMaxAttempts(2), event.WithMaxInFlight(1))
	require.NoError(t, err)
	d := <-held

	var s event.GroupStatus
	require.Eventually(t, func() bool {
		s, err = b.GroupStatus(ctx, "orders", "billing")
		require.NoError(t, err)
		return len(s.Members) == 1
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, "orders", s.Topic)
	assert.Equal(t, "billing", s.Group)
	require.NotNil(t, s.Config)
	assert.Equal(t, 2, s.Config.MaxAttempts)
	assert.Equal(t, event.Earliest(), s.Config.Start)
	assert.Equal(t, "orders.dlq", s.Config.DeadLetterTopic, "the defaults filled in")
	assert.Equal(t, uint64(3), s.Head)
	assert.Zero(t, s.Committed)
	assert.Equal(t, uint64(3), s.Lag)
	assert.InDelta(t, 60_000, s.LagMs, 10_000, "the age of the oldest record")
	assert.Equal(t, &event.RecordRef{Seq: 1, ID: d.ID, TS: start}, s.Oldest)
	require.Len(t, s.Partitions, 1)
	assert.Equal(t, s.Members[0], s.Partitions[0].Owner)
	assert.Equal(t, event.DeadLetterSummary{Topic: "orders.dlq"}, s.DeadLetters)
	require.NotNil(t, s.Local)
	assert.Equal(t, 1, s.Local.InFlight)
	assert.Equal(t, 1, s.Local.Subscribers)
	assert.Equal(t, []int{0}, s.Local.Partitions)
	assert.Positive(t, s.LastActive)

	require.NoError(t, d.Ack(ctx))
	require.Eventually(t, func() bool {
		s, err = b.GroupStatus(ctx, "orders", "billing")
		require.NoError(t, err)
		return s.Committed == 1
	}, 10*time.Second, time.Millisecond)
	assert.Equal(t, uint64(2), s.Lag)
	require.NotNil(t, s.Oldest)
	assert.Equal(t, uint64(2), s.Oldest.Seq, "the oldest unsettled record now is the second")
}

// The statuses of a topic's groups: those the store lists, with or
// without subscribers here, sorted; a group only of another topic is not
// among them.
func TestGroupStatuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, b := redriveBus(t)
	_, err := b.CreateGroup(ctx, "orders", "audit", event.GroupConfig{})
	require.NoError(t, err)
	failFirst(t, b, "orders", "billing")
	_, err = b.CreateGroup(ctx, "payments", "audit", event.GroupConfig{})
	require.NoError(t, err)
	_, err = b.Publish(ctx, "orders", []byte(`1`))
	require.NoError(t, err)
	waitDeadLetters(t, b, "orders", "billing", 1)

	all, err := b.GroupStatuses(ctx, "orders")
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, "audit", all[0].Group)
	assert.Nil(t, all[0].Local, "no subscribers here")
	assert.Empty(t, all[0].Members)
	assert.Equal(t, uint64(1), all[0].Lag)
	assert.Zero(t, all[0].DeadLetters.Pending)
	assert.Equal(t, "billing", all[1].Group)
	assert.NotNil(t, all[1].Local)
	assert.Equal(t, uint64(1), all[1].DeadLetters.Pending)

	none, err := b.GroupStatuses(ctx, "nothing")
	require.NoError(t, err)
	assert.Empty(t, none)
	_, err = b.GroupStatuses(ctx, "a b")
	assert.ErrorIs(t, err, event.ErrInvalid)
	_, err = b.GroupStatus(ctx, "orders", "a b")
	assert.ErrorIs(t, err, event.ErrInvalid)
}

// plainStore is a memory store seen only as a Store and a CursorStore:
// no Lister, LeaseStore, GroupStateStore nor GroupStore.
type plainStore struct {
	event.Store
	event.CursorStore
}

// Over a store that is not a Lister, the statuses are those of the
// groups with subscribers in this Bus, this Bus's member their only
// member; a group with only a cursor has its status too; deleting a group
// is not supported.
func TestGroupStatusWithoutALister(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := event.NewMemoryStore()
	b, err := event.NewBus(plainStore{mem, mem}, event.Config{CommitInterval: time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	_, err = b.Publish(ctx, "orders", []byte(`1`))
	require.NoError(t, err)
	_, err = b.Subscribe(ctx, "orders", "billing", nopHandler, event.FromEarliest())
	require.NoError(t, err)
	require.NoError(t, mem.SetCursor(ctx, event.PartitionRef{Topic: "orders", Group: "old"}, 0))

	all, err := b.GroupStatuses(ctx, "orders")
	require.NoError(t, err)
	require.Len(t, all, 1)
	s := all[0]
	assert.Equal(t, "billing", s.Group)
	require.Len(t, s.Members, 1)
	require.NotNil(t, s.Local)
	assert.NotNil(t, s.Config, "settings kept by the Bus")
	old, err := b.GroupStatus(ctx, "orders", "old")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), old.Lag)
	assert.Empty(t, old.Members)
	assert.Nil(t, old.Local)
	assert.ErrorIs(t, b.DeleteGroup(ctx, "orders", "old", false), event.ErrNotSupported)
}

// A group with live members is deleted only with force: the delete takes
// its partitions from the members first. Deleting takes its cursors,
// settings and redrive cursors; an unknown group is no error.
func TestDeleteGroup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, b := redriveBus(t)
	_, err := b.Publish(ctx, "orders", []byte(`1`))
	require.NoError(t, err)
	sub, err := b.Subscribe(ctx, "orders", "billing", nopHandler, event.FromEarliest())
	require.NoError(t, err)
	var s event.GroupStatus
	require.Eventually(t, func() bool {
		s, err = b.GroupStatus(ctx, "orders", "billing")
		require.NoError(t, err)
		return s.Committed == 1
	}, 10*time.Second, time.Millisecond)
	require.Len(t, s.Members, 1)

	err = b.DeleteGroup(ctx, "orders", "billing", false)
	require.ErrorIs(t, err, event.ErrGroupActive)
	assert.Contains(t, err.Error(), s.Members[0], "the error names the members")
	require.NoError(t, b.DeleteGroup(ctx, "orders", "billing", true))
	require.NoError(t, sub.Close())
	require.NoError(t, b.DeleteGroup(ctx, "orders", "billing", false), "no member left: the member that came back is gone too")
	_, err = b.GroupStatus(ctx, "orders", "billing")
	assert.ErrorIs(t, err, event.ErrNotFound)
	_, err = b.GroupConfig(ctx, "orders", "billing")
	assert.ErrorIs(t, err, event.ErrNotFound)

	// The redrive topic's cursors go with the group.
	require.NoError(t, st.SetCursor(ctx, event.PartitionRef{Topic: event.RedriveTopic("orders", "audit"), Group: "audit"}, 3))
	_, err = b.CreateGroup(ctx, "orders", "audit", event.GroupConfig{})
	require.NoError(t, err)
	require.NoError(t, b.DeleteGroup(ctx, "orders", "audit", false))
	cur, err := st.Cursors(ctx, event.RedriveTopic("orders", "audit"), "audit")
	require.NoError(t, err)
	assert.Empty(t, cur)

	require.NoError(t, b.DeleteGroup(ctx, "orders", "never", false))
	assert.ErrorIs(t, b.DeleteGroup(ctx, "orders", "a b", false), event.ErrInvalid)
}
