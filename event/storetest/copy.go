package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// The topics and groups of the copy scenario (FillForCopy).
const (
	copyOrders     = "orders"
	copyGroup      = "billing"
	copyIdleGroup  = "reports"
	copyAudit      = "audit"
	copyState      = "state"
	copyGone       = "gone"
	copyPartitions = 4
	copyRecords    = 24
)

// CopyScenario is what [FillForCopy] left in a store: what a consumer
// group that moves with the store must find.
type CopyScenario struct {
	// Pending are the ids of the records of "orders" that group "billing"
	// had delivered once and not settled: delivered again, with attempt 2.
	Pending []string
	// Settled are the ids of the records of "orders" that "billing"
	// acked or dead-lettered: never delivered again.
	Settled []string
	// DeadLetters are the ids of the pending dead letters of "billing"
	// (records of "orders.dlq"); one more was redriven and one purged.
	DeadLetters []string
}

// RunCopy checks [event.Copy] into and out of stores made by newStore
// (which must implement [event.Importer]), with the memory store on the
// other side: the copy is equal record for record with the same settings,
// cursors and group state; consumers continue where they were; a second
// copy writes nothing; an interrupted copy resumed ends the same; a
// conflicting destination and a source being written are refused.
func RunCopy(t *testing.T, newStore Factory, opts ...Options) {
	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"IntoStore", func(t *testing.T) {
			src := event.NewMemoryStore()
			sc := FillForCopy(t, src)
			dst := newStore(t)
			CopyAndCheck(t, dst, src)
			CheckContinues(t, dst, sc)
		}},
		{"OutOfStore", func(t *testing.T) {
			src := newStore(t)
			sc := FillForCopy(t, src)
			dst := event.NewMemoryStore()
			CopyAndCheck(t, dst, src)
			CheckContinues(t, dst, sc)
		}},
		{"ResumesAfterInterruption", func(t *testing.T) { testCopyResumes(t, newStore(t)) }},
		{"RefusesAConflict", func(t *testing.T) { testCopyConflict(t, newStore(t)) }},
		{"RefusesASourceBeingWritten", func(t *testing.T) { testCopySourceWritten(t, newStore(t)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t)
		})
	}
}

// copyBus returns a Bus over s for the copy scenario: topics it creates
// get 4 partitions.
func copyBus(t *testing.T, s event.Store) *event.Bus {
	t.Helper()
	return newBus(t, s, func(c *event.Config) { c.Partitions = copyPartitions })
}

// closeBus closes b now (its cleanup then does nothing more).
func closeBus(t *testing.T, b *event.Bus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, b.Close(ctx))
}

// FillForCopy writes into s, through a Bus it closes before returning,
// what a copy must carry: topic "orders" (4 partitions) with keys,
// headers, tags and a binary payload; group "billing" that acked most of
// its records, holds some delivered once and unsettled, dead-lettered
// others, one of them redriven (and acked) and one purged; group "reports"
// with settings only; topic "audit" whose oldest records retention
// deleted, "state" compacted (gaps in the middle) and "gone" whose records
// were all deleted, head included.
func FillForCopy(t *testing.T, s event.Store) CopyScenario {
	t.Helper()
	ctx := context.Background()
	b := copyBus(t, s)
	var sc CopyScenario
	var recs []event.Record
	for i := range copyRecords {
		opts := []event.PublishOption{
			event.WithKey(fmt.Sprintf("k%d", i%6)), event.WithHeaders(map[string]string{"n": fmt.Sprint(i), "x-trace": "t"}),
			event.WithTS(int64(1_000 + i)),
		}
		payload := []byte(fmt.Sprintf(`{"i":%d,"s":"é"}`, i))
		switch i {
		case 5:
			opts = append(opts, event.WithContentType("application/octet-stream"))
			payload = []byte{0xff, 0x00, 0xfe, byte(i)}
		case 7:
			opts = append(opts, event.WithTags("#a", "#b"), event.WithCausedBy("c1"), event.WithSID("s"))
		}
		r, err := b.Publish(ctx, copyOrders, payload, opts...)
		require.NoError(t, err)
		recs = append(recs, r)
	}
	fail, hold := map[string]bool{}, map[string]bool{}
	for i, r := range recs {
		switch i % 8 {
		case 1:
			fail[r.ID] = true
			sc.Settled = append(sc.Settled, r.ID)
		case 3:
			hold[r.ID] = true
			sc.Pending = append(sc.Pending, r.ID)
		default:
			sc.Settled = append(sc.Settled, r.ID)
		}
	}
	var mu sync.Mutex
	acked, delivered := 0, map[string]bool{}
	h := func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		delivered[d.ID] = true
		mu.Unlock()
		switch {
		case d.Headers[event.HeaderRedriveID] != "":
		case fail[d.ID]:
			return d.Nack(ctx, "poison")
		case hold[d.ID]:
			return nil // delivered, never settled
		}
		if err := d.Ack(ctx); err != nil {
			return err
		}
		mu.Lock()
		acked++
		mu.Unlock()
		return nil
	}
	sub := subscribe(t, b, copyOrders, copyGroup, h, event.FromEarliest(), event.WithManualAck(), event.WithMaxAttempts(2),
		event.WithBackoff(time.Millisecond, time.Millisecond), event.WithAckTimeout(10*time.Minute), event.WithMaxInFlight(100))
	wantAcked := copyRecords - len(fail) - len(hold)
	require.Eventually(t, func() bool {
		page, err := b.DeadLetters(ctx, copyOrders, copyGroup, 0, 100)
		mu.Lock()
		defer mu.Unlock()
		return err == nil && len(page.Records) == len(fail) && acked == wantAcked && len(delivered) == copyRecords
	}, wait, tick, "billing acks, holds and dead-letters its records")
	page, err := b.DeadLetters(ctx, copyOrders, copyGroup, 0, 100)
	require.NoError(t, err)
	_, err = b.RedriveDeadLetters(ctx, copyOrders, copyGroup, []string{page.Records[0].ID}, 0)
	require.NoError(t, err)
	_, err = b.PurgeDeadLetters(ctx, copyOrders, copyGroup, []string{page.Records[1].ID}, 0)
	require.NoError(t, err)
	for _, d := range page.Records[2:] {
		sc.DeadLetters = append(sc.DeadLetters, d.ID)
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return acked == wantAcked+1
	}, wait, tick, "the redriven record is acked")
	require.Eventually(t, func() bool {
		c, err := b.Cursor(ctx, event.RedriveTopic(copyOrders, copyGroup), copyGroup)
		return err == nil && c.Seq == 1
	}, wait, tick, "the redrive is committed")
	require.NoError(t, sub.Close())
	_, err = b.CreateGroup(ctx, copyOrders, copyIdleGroup, event.GroupConfig{Start: event.Earliest(), MaxAttempts: 7})
	require.NoError(t, err)

	for i := range 10 {
		_, err := b.Publish(ctx, copyAudit, []byte(fmt.Sprint(i)), event.WithTS(int64(100*(i+1))))
		require.NoError(t, err)
	}
	for i, k := range []string{"a", "b", "a", "c", "a", "b"} {
		_, err := b.Publish(ctx, copyState, []byte(fmt.Sprint(i)), event.WithKey(k), event.WithTS(int64(10+i)))
		require.NoError(t, err)
	}
	for i := range 3 {
		_, err := b.Publish(ctx, copyGone, []byte(fmt.Sprint(i)), event.WithTS(int64(1+i)))
		require.NoError(t, err)
	}
	closeBus(t, b)
	if gs, ok := s.(event.GroupStateStore); ok {
		settled, attempts := 0, 0
		for p := range copyPartitions {
			st, err := gs.GroupState(ctx, event.PartitionRef{Topic: copyOrders, Group: copyGroup, Partition: p})
			require.NoError(t, err)
			settled += len(st.Settled)
			attempts += len(st.Attempts)
		}
		require.Positive(t, settled, "billing has records settled above its cursor")
		require.Equal(t, len(hold), attempts, "billing has attempts of its unsettled records")
	}
	if pr, ok := s.(event.Pruner); ok {
		n, err := pr.Prune(ctx, copyAudit, 550, false)
		require.NoError(t, err)
		require.Equal(t, 5, n)
		n, err = pr.Prune(ctx, copyState, 1000, true)
		require.NoError(t, err)
		require.Equal(t, 3, n)
		n, err = pr.Prune(ctx, copyGone, 1000, false)
		require.NoError(t, err)
		require.Equal(t, 3, n)
	}
	return sc
}

// CopyAndCheck copies src into dst, checks that dst holds what src holds
// (CheckCopied), then copies again and checks that nothing was written.
func CopyAndCheck(t *testing.T, dst, src event.Store) event.CopyReport {
	t.Helper()
	ctx := context.Background()
	rep, err := event.Copy(ctx, dst, src, event.CopyConfig{Batch: 7})
	require.NoError(t, err)
	assert.Positive(t, rep.Records)
	CheckCopied(t, dst, src)
	again, err := event.Copy(ctx, dst, src, event.CopyConfig{})
	require.NoError(t, err)
	assert.Zero(t, again.Records, "a second copy writes no record")
	assert.Equal(t, rep.Records+rep.Verified, again.Verified, "a second copy checks every record")
	CheckCopied(t, dst, src)
	return rep
}

// CheckCopied checks that dst holds what src holds: the same topics with
// the same heads, floors, partition counts and records, field for field;
// the same groups with the same settings, cursors and state.
func CheckCopied(t *testing.T, dst, src event.Store) {
	t.Helper()
	ctx := context.Background()
	sl, dl := src.(event.Lister), dst.(event.Lister)
	stopics, err := sl.ListTopics(ctx)
	require.NoError(t, err)
	dtopics, err := dl.ListTopics(ctx)
	require.NoError(t, err)
	byName := make(map[string]event.TopicInfo)
	for _, ti := range dtopics {
		byName[ti.Topic] = ti
	}
	require.NotEmpty(t, stopics)
	for _, st := range stopics {
		dt, ok := byName[st.Topic]
		require.True(t, ok, "topic %q is listed in the destination", st.Topic)
		assert.Equal(t, st.LastSeq, dt.LastSeq, "head of %q", st.Topic)
		assert.Equal(t, st.Events, dt.Events, "records of %q", st.Topic)
		for _, s := range []event.Store{src, dst} {
			h, err := s.Head(ctx, st.Topic)
			require.NoError(t, err)
			assert.Equal(t, st.LastSeq, h, "Head of %q", st.Topic)
		}
		assert.Equal(t, readAll(t, src, st.Topic), readAll(t, dst, st.Topic), "records of %q", st.Topic)
		if sp, ok := src.(event.Pruner); ok {
			sf, err := sp.Floor(ctx, st.Topic)
			require.NoError(t, err)
			df, err := dst.(event.Pruner).Floor(ctx, st.Topic)
			require.NoError(t, err)
			assert.Equal(t, sf, df, "floor of %q", st.Topic)
		}
		scfg, serr := src.(event.TopicStore).Topic(ctx, st.Topic)
		dcfg, derr := dst.(event.TopicStore).Topic(ctx, st.Topic)
		assert.Equal(t, serr == nil, derr == nil, "settings of %q", st.Topic)
		assert.Equal(t, scfg, dcfg, "settings of %q", st.Topic)
		parts := max(scfg.Partitions, 1)

		sgroups, err := sl.ListGroups(ctx, st.Topic)
		require.NoError(t, err)
		dgroups, err := dl.ListGroups(ctx, st.Topic)
		require.NoError(t, err)
		assert.Equal(t, groupNames(sgroups), groupNames(dgroups), "groups of %q", st.Topic)
		for _, g := range append(groupNames(sgroups), event.DeadLetterMarksGroup) {
			checkGroupCopied(t, dst, src, st.Topic, g, parts)
		}
	}
}

func groupNames(gs []event.GroupInfo) []string {
	out := []string{}
	for _, g := range gs {
		out = append(out, g.Group)
	}
	return out
}

// checkGroupCopied checks the settings, cursors and state of group on
// topic in dst against src.
func checkGroupCopied(t *testing.T, dst, src event.Store, topic, group string, parts int) {
	t.Helper()
	ctx := context.Background()
	scfg, serr := src.(event.GroupStore).GroupConfig(ctx, topic, group)
	dcfg, derr := dst.(event.GroupStore).GroupConfig(ctx, topic, group)
	assert.Equal(t, serr == nil, derr == nil, "settings of group %q on %q", group, topic)
	assert.Equal(t, scfg, dcfg, "settings of group %q on %q", group, topic)
	scur, err := src.(event.CursorStore).Cursors(ctx, topic, group)
	require.NoError(t, err)
	dcur, err := dst.(event.CursorStore).Cursors(ctx, topic, group)
	require.NoError(t, err)
	assert.Equal(t, scur, dcur, "cursors of group %q on %q", group, topic)
	for p := range parts {
		ref := event.PartitionRef{Topic: topic, Group: group, Partition: p}
		ss, err := src.(event.GroupStateStore).GroupState(ctx, ref)
		require.NoError(t, err)
		ds, err := dst.(event.GroupStateStore).GroupState(ctx, ref)
		require.NoError(t, err)
		assert.Equal(t, normState(ss), normState(ds), "state of group %q on %q partition %d", group, topic, p)
	}
}

func normState(s event.GroupState) event.GroupState {
	if len(s.Attempts) == 0 {
		s.Attempts = nil
	}
	if len(s.Settled) == 0 {
		s.Settled = nil
	}
	return s
}

// readAll reads every record of topic, each with empty fields as nil.
func readAll(t *testing.T, s event.Store, topic string) []event.Record {
	t.Helper()
	var out []event.Record
	after := uint64(0)
	for {
		recs, err := s.Read(context.Background(), topic, after, 100)
		require.NoError(t, err)
		if len(recs) == 0 {
			return out
		}
		for _, r := range recs {
			if len(r.Headers) == 0 {
				r.Headers = nil
			}
			if len(r.CausedBy) == 0 {
				r.CausedBy = nil
			}
			if len(r.Tags) == 0 {
				r.Tags = nil
			}
			out = append(out, r)
		}
		after = recs[len(recs)-1].Seq
	}
}

// CheckContinues checks that the consumers of the scenario that sc
// describes continue in s where they were: group "billing" gets its
// pending records again (attempt 2) and nothing it settled, its dead
// letters are listed, group "reports" starts at the earliest record with
// its settings, and the next record of a topic whose records were all
// deleted gets the seq after its head.
func CheckContinues(t *testing.T, s event.Store, sc CopyScenario) {
	t.Helper()
	ctx := context.Background()
	b := copyBus(t, s)

	page, err := b.DeadLetters(ctx, copyOrders, copyGroup, 0, 100)
	require.NoError(t, err)
	var dl []string
	for _, d := range page.Records {
		dl = append(dl, d.ID)
	}
	assert.Equal(t, sc.DeadLetters, dl, "the dead letters of billing are listed")

	c := newCollector()
	subscribe(t, b, copyOrders, copyGroup, c.handler)
	// One record more per partition: once each is delivered, every
	// record before it in its partition was.
	sentinels := map[string]bool{}
	for p := range copyPartitions {
		key := ""
		for i := 0; key == ""; i++ {
			if k := fmt.Sprintf("s%d", i); event.PartitionOf(k, "", copyPartitions) == p {
				key = k
			}
		}
		r, err := b.Publish(ctx, copyOrders, []byte(`{"sentinel":true}`), event.WithKey(key))
		require.NoError(t, err)
		assert.Equal(t, uint64(copyRecords+1+p), r.Seq, "the next publish takes the seq after the head")
		sentinels[r.ID] = true
	}
	pending := map[string]bool{}
	for _, id := range sc.Pending {
		pending[id] = true
	}
	require.Eventually(t, func() bool {
		n := 0
		for _, d := range c.snapshot() {
			if sentinels[d.ID] || pending[d.ID] {
				n++
			}
		}
		return n >= len(sentinels)+len(pending)
	}, wait, tick, "billing gets its pending records and the new ones")
	got := map[string]int{}
	for _, d := range c.snapshot() {
		if sentinels[d.ID] {
			continue
		}
		got[d.ID]++
		if pending[d.ID] {
			assert.Equal(t, 2, d.Attempt, "the attempts of %q count on", d.ID)
		}
	}
	want := map[string]int{}
	for _, id := range sc.Pending {
		want[id] = 1
	}
	assert.Equal(t, want, got, "billing gets its pending records once, none it settled")

	cfg, err := b.GroupConfig(ctx, copyOrders, copyIdleGroup)
	require.NoError(t, err)
	assert.Equal(t, 7, cfg.MaxAttempts, "the settings of reports")
	all := newCollector()
	subscribe(t, b, copyOrders, copyIdleGroup, all.handler)
	require.Eventually(t, func() bool { return all.distinct() == copyRecords+len(sentinels) }, wait, tick, "reports starts at the earliest record")

	if _, ok := s.(event.Pruner); ok {
		r, err := b.Publish(ctx, copyGone, []byte(`1`))
		require.NoError(t, err)
		assert.Equal(t, uint64(4), r.Seq, "a topic whose records were all deleted goes on after its head")
	}
}

// copyCanceller is a destination that cancels the copy's context after
// a number of imports.
type copyCanceller struct {
	copyTarget
	imports int
	cancel  context.CancelFunc
}

// copyTarget is what a copy destination is.
type copyTarget interface {
	event.Store
	event.Lister
	event.TopicStore
	event.CursorStore
	event.GroupStateStore
	event.GroupStore
	event.Importer
}

func (c *copyCanceller) ImportRecords(ctx context.Context, topic string, recs []event.Record) error {
	c.imports--
	if c.imports == 0 {
		c.cancel()
	}
	return c.copyTarget.ImportRecords(ctx, topic, recs)
}

// testCopyResumes: a copy cancelled midway and run again ends as a
// copy that was not interrupted.
func testCopyResumes(t *testing.T, dst event.Store) {
	src := event.NewMemoryStore()
	sc := FillForCopy(t, src)
	target, ok := dst.(copyTarget)
	require.True(t, ok, "%T implements event.Importer and the store interfaces", dst)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := event.Copy(ctx, &copyCanceller{copyTarget: target, imports: 2, cancel: cancel}, src, event.CopyConfig{Batch: 5})
	require.ErrorIs(t, err, context.Canceled)
	h, err := dst.Head(context.Background(), copyOrders)
	require.NoError(t, err)
	assert.Less(t, h, uint64(copyRecords), "the copy stopped midway")
	rep, err := event.Copy(context.Background(), dst, src, event.CopyConfig{Batch: 5})
	require.NoError(t, err)
	assert.Positive(t, rep.Verified, "the records copied before are checked")
	CheckCopied(t, dst, src)
	CheckContinues(t, dst, sc)
}

// testCopyConflict: a destination holding another record at a seq, or
// other settings, is refused, naming what differs.
func testCopyConflict(t *testing.T, dst event.Store) {
	ctx := context.Background()
	src := event.NewMemoryStore()
	FillForCopy(t, src)
	first, err := src.Read(ctx, copyOrders, 0, 3)
	require.NoError(t, err)
	other := first[2]
	other.ID = "another-" + other.ID
	other.Seq = 0
	_, err = dst.Append(ctx, copyOrders, []event.Record{first[0], first[1], other})
	require.NoError(t, err)
	_, err = event.Copy(ctx, dst, src, event.CopyConfig{})
	require.ErrorIs(t, err, event.ErrCopyConflict)
	assert.Contains(t, err.Error(), `topic "orders": seq 3 differs in id`)
	recs, err := dst.Read(ctx, copyOrders, 0, 10)
	require.NoError(t, err)
	assert.Len(t, recs, 3, "nothing written over, nothing added")

	dst2 := event.NewMemoryStore()
	_, _, err = dst2.CreateTopic(ctx, copyOrders, event.TopicConfig{Partitions: 2})
	require.NoError(t, err)
	_, err = event.Copy(ctx, dst2, src, event.CopyConfig{})
	require.ErrorIs(t, err, event.ErrCopyConflict)
	assert.Contains(t, err.Error(), `topic "orders" has 2 partitions in the destination, 4 in the source`)
}

// copySource is a source that publishes a record to "audit" when the copy
// reads "orders": a writer the copy does not know of.
type copySource struct {
	*event.MemoryStore
	once sync.Once
}

func (s *copySource) Read(ctx context.Context, topic string, after uint64, limit int) ([]event.Record, error) {
	if topic == copyOrders {
		s.once.Do(func() {
			_, _ = s.MemoryStore.Append(ctx, copyAudit, []event.Record{{ID: "late", Topic: copyAudit, Payload: []byte(`1`)}})
			_, _ = s.MemoryStore.Append(ctx, copyOrders, []event.Record{{ID: "late", Topic: copyOrders, Payload: []byte(`1`)}})
		})
	}
	return s.MemoryStore.Read(ctx, topic, after, limit)
}

// testCopySourceWritten: a source with live members is refused before
// anything is copied; one whose heads move stops the copy, naming the
// topic.
func testCopySourceWritten(t *testing.T, dst event.Store) {
	ctx := context.Background()
	mem := event.NewMemoryStore()
	FillForCopy(t, mem)
	b := copyBus(t, mem)
	subscribe(t, b, copyOrders, copyIdleGroup, nopHandler)
	require.Eventually(t, func() bool {
		gs, err := mem.ListGroups(ctx, copyOrders)
		return err == nil && slices.ContainsFunc(gs, func(g event.GroupInfo) bool { return len(g.Members) > 0 })
	}, wait, tick)
	_, err := event.Copy(ctx, dst, mem, event.CopyConfig{})
	require.ErrorIs(t, err, event.ErrSourceActive)
	assert.Contains(t, err.Error(), `group "reports" on topic "orders" has live members`)
	h, err := dst.Head(ctx, copyOrders)
	require.NoError(t, err)
	assert.Zero(t, h, "nothing copied")
	closeBus(t, b)

	_, err = event.Copy(ctx, dst, &copySource{MemoryStore: mem}, event.CopyConfig{})
	require.ErrorIs(t, err, event.ErrSourceActive)
	assert.True(t, strings.Contains(err.Error(), `topic "orders" moved from 24 to 25`) || strings.Contains(err.Error(), `topic "audit" moved`), err.Error())
	assert.False(t, errors.Is(err, event.ErrCopyConflict))
}
