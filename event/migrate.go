package event

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// Moving between stores: [Copy] copies what one store holds into another
// (SQLite into PostgreSQL, PostgreSQL into MongoDB, any store into any),
// with every record at its seq, so that consumer groups that move with
// the records continue where they were. The destination must implement
// [Importer]; every store of this module does.

var (
	// ErrCopyConflict is wrapped by the error of a [Copy] whose
	// destination holds something else than the source at the same place:
	// another record at a seq, another partition count, another cursor.
	// The message names the topic, and the seq or group. Nothing of the
	// source was written over.
	ErrCopyConflict = errors.New("event: copy: the destination differs from the source")
	// ErrSourceActive is wrapped by the error of a [Copy] whose source
	// changed while it was copied (a topic's head or a group's cursor
	// moved) or has live group members when it starts: something still
	// writes to it. The message names what moved and how to stop it.
	ErrSourceActive = errors.New("event: copy: the source is being written")
)

// Importer is implemented by stores that can take records as another
// store holds them: at their seqs, not at the next ones. [Copy] needs it
// of its destination. Cursors, group state and settings are written
// through [CursorStore.SetCursor], [GroupStateStore.UpdateGroupState]
// and [GroupStore.CreateGroup].
type Importer interface {
	// ImportRecords stores recs, all of topic, each at its Seq, in one
	// step where the store allows it. Seqs must grow and the first be above
	// the topic's head; the seqs skipped (records the source deleted)
	// stay empty and are never given to an appended record. A record
	// whose id the topic holds, or whose seq is not above the head, is
	// refused with an error wrapping ErrInvalid that names it, and
	// nothing is stored. The topic's counts ([Lister]) and latest
	// records by key ([KeyStore]) take the records in.
	ImportRecords(ctx context.Context, topic string, recs []Record) error
	// ImportHead raises the head of topic to head and its retention floor
	// ([Pruner]) to floor, where they are lower: the records the source
	// deleted below its head keep their seqs taken, so that the next
	// record appended gets the seq it would have had in the source.
	ImportHead(ctx context.Context, topic string, head, floor uint64) error
}

// DefaultCopyBatch is how many records [Copy] reads and writes at a time.
const DefaultCopyBatch = 500

// CopyConfig configures a [Copy]. The zero value means the defaults.
type CopyConfig struct {
	// Batch is how many records are read from the source and imported at
	// a time (default 500, at most 10,000).
	Batch int
	// Logger receives a line per topic copied; nil discards them.
	Logger *slog.Logger
}

// Validate reports what is wrong with c, naming the field.
func (c *CopyConfig) Validate() error {
	if c.Batch < 0 || c.Batch > 10000 {
		return invalid("Batch", "%d, want 0 (the default) to 10000", c.Batch)
	}
	return nil
}

func (c *CopyConfig) setDefaults() {
	if c.Batch == 0 {
		c.Batch = DefaultCopyBatch
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// CopyReport is what a [Copy] did.
type CopyReport struct {
	Topics []TopicCopy `json:"topics"`
	// Records counts the records written to the destination, Verified
	// those found there already and checked equal to the source's.
	Records  int64 `json:"records"`
	Verified int64 `json:"verified"`
	// Groups counts the consumer groups copied (settings, cursors and
	// state), the dead-letter marks of dead-letter topics among them.
	Groups int `json:"groups"`
}

// TopicCopy is what a [Copy] did with one topic.
type TopicCopy struct {
	Topic string `json:"topic"`
	// Partitions is the topic's partition count, 0 for a topic without
	// settings (written by an older release: the destination infers it
	// from the records, as the source would).
	Partitions int    `json:"partitions"`
	Head       uint64 `json:"head"`
	Floor      uint64 `json:"floor"`
	Records    int64  `json:"records"`
	Verified   int64  `json:"verified"`
	Groups     int    `json:"groups"`
}

// copyStore is what Copy needs of both stores.
type copyStore interface {
	Store
	Lister
	TopicStore
	CursorStore
	GroupStateStore
	GroupStore
}

// Copy copies what src holds into dst: every topic the source lists
// ([Lister.ListTopics]) with its partition count, its records with their
// ids, seqs, timestamps, keys, headers, partitions and payloads, its head
// and retention floor; the consumer groups of each topic with their
// settings, committed cursors and state (attempts, settled records); so
// dead-letter topics and redrive topics, which are topics, and the marks
// of redriven and purged dead letters, which are the group
// [DeadLetterMarksGroup] of a dead-letter topic. Members and leases are
// not copied: they belong to running processes, and a group's members
// take its partitions again in the destination.
//
// The source must not be written while it is copied: Copy refuses a
// source with a live group member, and stops with an error wrapping
// [ErrSourceActive] when a topic's head or a group's cursor moved during
// the copy. Stop every process that writes to the source first (hubs,
// publishers, outbox drainers, consumers), and wait for the members'
// leases to end.
//
// Copy resumes: it copies what dst lacks and checks what dst holds,
// record for record, against the source, so a copy that was interrupted
// (its context cancelled, a crash) and run again ends as one that was
// not, and a second run writes nothing. A destination that holds another
// record at a seq, another partition count, cursor or settings is refused
// with an error wrapping [ErrCopyConflict] naming the topic and the seq
// or group; nothing of it is written over.
//
// Topics that never held a record (a group subscribed to a topic nobody
// published to) are not listed by stores and not copied: their groups
// start again at their first subscribe, at the same (empty) place.
func Copy(ctx context.Context, dst, src Store, cfg CopyConfig) (CopyReport, error) {
	var rep CopyReport
	if err := cfg.Validate(); err != nil {
		return rep, err
	}
	cfg.setDefaults()
	s, ok := src.(copyStore)
	if !ok {
		return rep, invalid("src", "%T does not keep topics, groups and cursors (Lister, TopicStore, CursorStore, GroupStateStore, GroupStore)", src)
	}
	d, ok := dst.(copyStore)
	if !ok {
		return rep, invalid("dst", "%T does not keep topics, groups and cursors (Lister, TopicStore, CursorStore, GroupStateStore, GroupStore)", dst)
	}
	imp, ok := dst.(Importer)
	if !ok {
		return rep, invalid("dst", "%T cannot take records at their seqs (it does not implement event.Importer)", dst)
	}
	if sameStore(src, dst) {
		return rep, invalid("dst", "the same store as the source")
	}
	c := &copier{src: s, dst: d, imp: imp, cfg: cfg, rep: &rep}
	topics, err := s.ListTopics(ctx)
	if err != nil {
		return rep, fmt.Errorf("event: copy: list the source's topics: %w", err)
	}
	groups := make(map[string][]GroupInfo, len(topics))
	for _, ti := range topics {
		gs, err := s.ListGroups(ctx, ti.Topic)
		if err != nil {
			return rep, fmt.Errorf("event: copy: list the groups of %q: %w", ti.Topic, err)
		}
		if err := checkNoMembers(ti.Topic, gs); err != nil {
			return rep, err
		}
		groups[ti.Topic] = gs
	}
	for _, ti := range topics {
		tc, err := c.topic(ctx, ti, groups[ti.Topic])
		if tc.Topic != "" {
			rep.Topics = append(rep.Topics, tc)
		}
		if err != nil {
			return rep, err
		}
		cfg.Logger.Info("event: topic copied", "topic", ti.Topic, "head", tc.Head, "records", tc.Records, "verified", tc.Verified, "groups", tc.Groups)
	}
	return rep, c.checkUnchanged(ctx, topics, groups)
}

// sameStore reports whether a and b are one store (pointers to one value).
func sameStore(a, b Store) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	return va.Kind() == reflect.Pointer && vb.Kind() == reflect.Pointer && va.Pointer() == vb.Pointer()
}

// checkNoMembers returns an error wrapping ErrSourceActive if a group of
// gs has live members.
func checkNoMembers(topic string, gs []GroupInfo) error {
	for _, g := range gs {
		if len(g.Members) > 0 {
			return fmt.Errorf("%w: group %q on topic %q has live members (%s): stop its consumers (every hub and process subscribed) and wait for their leases to end, then copy",
				ErrSourceActive, g.Group, topic, strings.Join(g.Members, ", "))
		}
	}
	return nil
}

type copier struct {
	src, dst copyStore
	imp      Importer
	cfg      CopyConfig
	rep      *CopyReport
}

// topic copies one topic: settings, records, head and floor, groups.
func (c *copier) topic(ctx context.Context, ti TopicInfo, groups []GroupInfo) (TopicCopy, error) {
	tc := TopicCopy{Topic: ti.Topic, Head: ti.LastSeq, Floor: 1}
	topic := ti.Topic
	cfg, err := c.src.Topic(ctx, topic)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return tc, fmt.Errorf("event: copy: settings of %q: %w", topic, err)
	default:
		got, _, err := c.dst.CreateTopic(ctx, topic, cfg)
		if err != nil {
			return tc, fmt.Errorf("event: copy: create topic %q in the destination: %w", topic, err)
		}
		if got.Partitions != cfg.Partitions {
			return tc, fmt.Errorf("%w: topic %q has %d partitions in the destination, %d in the source", ErrCopyConflict, topic, got.Partitions, cfg.Partitions)
		}
		tc.Partitions = cfg.Partitions
	}
	if p, ok := c.src.(Pruner); ok {
		if tc.Floor, err = p.Floor(ctx, topic); err != nil {
			return tc, fmt.Errorf("event: copy: floor of %q: %w", topic, err)
		}
	}
	if err := c.records(ctx, &tc); err != nil {
		return tc, err
	}
	if err := c.imp.ImportHead(ctx, topic, tc.Head, tc.Floor); err != nil {
		return tc, fmt.Errorf("event: copy: head of %q in the destination: %w", topic, err)
	}
	if err := c.checkHead(ctx, topic, tc.Head); err != nil {
		return tc, err
	}
	names := make([]string, 0, len(groups)+1)
	for _, g := range groups {
		names = append(names, g.Group)
	}
	parts := make([]int, len(names))
	for i := range parts {
		parts[i] = max(tc.Partitions, 1)
	}
	if !slices.Contains(names, DeadLetterMarksGroup) {
		// The marks of a dead-letter topic may be group state alone
		// (settled above a cursor never written), which no listing shows.
		names, parts = append(names, DeadLetterMarksGroup), append(parts, 1)
	}
	for i, g := range names {
		copied, err := c.group(ctx, topic, g, parts[i])
		if err != nil {
			return tc, err
		}
		if copied {
			tc.Groups++
			c.rep.Groups++
		}
	}
	return tc, nil
}

// checkHead returns an error wrapping ErrSourceActive if the head of
// topic in the source is no longer head.
func (c *copier) checkHead(ctx context.Context, topic string, head uint64) error {
	now, err := c.src.Head(ctx, topic)
	if err != nil {
		return fmt.Errorf("event: copy: head of %q: %w", topic, err)
	}
	if now != head {
		return fmt.Errorf("%w: the head of topic %q moved from %d to %d during the copy: stop every process that publishes to the source (hubs, publishers, outbox drainers), then run the copy again: it resumes",
			ErrSourceActive, topic, head, now)
	}
	return nil
}

// records checks the records the destination holds of tc's topic against
// the source's, and imports those it lacks, up to the head.
func (c *copier) records(ctx context.Context, tc *TopicCopy) error {
	topic := tc.Topic
	dhead, err := c.dst.Head(ctx, topic)
	if err != nil {
		return fmt.Errorf("event: copy: head of %q in the destination: %w", topic, err)
	}
	if dhead > tc.Head {
		return fmt.Errorf("%w: topic %q: the destination's head is %d, above the source's %d", ErrCopyConflict, topic, dhead, tc.Head)
	}
	after := uint64(0)
	if dhead > 0 {
		if after, err = c.verify(ctx, tc, dhead); err != nil {
			return err
		}
	}
	for after < tc.Head {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("event: copy %q after seq %d: %w (run the copy again: it resumes)", topic, after, err)
		}
		recs, err := c.src.Read(ctx, topic, after, c.cfg.Batch)
		if err != nil {
			return fmt.Errorf("event: copy: read %q after %d: %w", topic, after, err)
		}
		recs = upTo(recs, tc.Head)
		if len(recs) == 0 {
			break // the records up to the head were deleted
		}
		if err := c.imp.ImportRecords(ctx, topic, recs); err != nil {
			return fmt.Errorf("event: copy: import %d records of %q from seq %d: %w", len(recs), topic, recs[0].Seq, err)
		}
		after = recs[len(recs)-1].Seq
		tc.Records += int64(len(recs))
		c.rep.Records += int64(len(recs))
	}
	return nil
}

// upTo returns the records of recs (in seq order) with seq <= head.
func upTo(recs []Record, head uint64) []Record {
	n, _ := slices.BinarySearchFunc(recs, head+1, func(r Record, seq uint64) int {
		switch {
		case r.Seq < seq:
			return -1
		case r.Seq > seq:
			return 1
		}
		return 0
	})
	return recs[:n]
}

// verify reads the records of tc's topic up to seq upto from both stores
// and checks that they are the same, and returns the seq to copy after:
// upto.
func (c *copier) verify(ctx context.Context, tc *TopicCopy, upto uint64) (uint64, error) {
	topic := tc.Topic
	var sp, dp []Record // what is read and not compared yet
	var safter, dafter uint64
	sdone, ddone := false, false
	for {
		if len(sp) == 0 && !sdone {
			recs, err := c.src.Read(ctx, topic, safter, c.cfg.Batch)
			if err != nil {
				return 0, fmt.Errorf("event: copy: read %q after %d: %w", topic, safter, err)
			}
			recs = upTo(recs, upto)
			sdone = len(recs) == 0
			if !sdone {
				safter, sp = recs[len(recs)-1].Seq, recs
			}
		}
		if len(dp) == 0 && !ddone {
			recs, err := c.dst.Read(ctx, topic, dafter, c.cfg.Batch)
			if err != nil {
				return 0, fmt.Errorf("event: copy: read %q after %d in the destination: %w", topic, dafter, err)
			}
			recs = upTo(recs, upto)
			ddone = len(recs) == 0
			if !ddone {
				dafter, dp = recs[len(recs)-1].Seq, recs
			}
		}
		switch {
		case len(sp) == 0 && len(dp) == 0:
			return upto, nil
		case len(dp) == 0:
			return 0, fmt.Errorf("%w: topic %q: seq %d (id %q) of the source is missing from the destination, which holds records up to %d", ErrCopyConflict, topic, sp[0].Seq, sp[0].ID, upto)
		case len(sp) == 0:
			return 0, fmt.Errorf("%w: topic %q: seq %d (id %q) of the destination is not in the source", ErrCopyConflict, topic, dp[0].Seq, dp[0].ID)
		}
		s, d := &sp[0], &dp[0]
		switch {
		case s.Seq < d.Seq:
			return 0, fmt.Errorf("%w: topic %q: seq %d (id %q) of the source is missing from the destination, which holds records up to %d", ErrCopyConflict, topic, s.Seq, s.ID, upto)
		case s.Seq > d.Seq:
			return 0, fmt.Errorf("%w: topic %q: seq %d (id %q) of the destination is not in the source", ErrCopyConflict, topic, d.Seq, d.ID)
		}
		if field := recordDiff(s, d); field != "" {
			return 0, fmt.Errorf("%w: topic %q: seq %d differs in %s (source id %q, destination id %q)", ErrCopyConflict, topic, s.Seq, field, s.ID, d.ID)
		}
		sp, dp = sp[1:], dp[1:]
		tc.Verified++
		c.rep.Verified++
	}
}

// recordDiff returns the first field in which a and b differ, "" if none.
func recordDiff(a, b *Record) string {
	switch {
	case a.ID != b.ID:
		return "id"
	case a.TS != b.TS:
		return "ts"
	case a.Key != b.Key:
		return "key"
	case a.Partition != b.Partition:
		return "partition"
	case !maps.Equal(a.Headers, b.Headers):
		return "headers"
	case !bytes.Equal(a.Payload, b.Payload):
		return "payload"
	case a.ContentType != b.ContentType:
		return "content_type"
	case !slices.Equal(a.CausedBy, b.CausedBy):
		return "caused_by"
	case !slices.Equal(a.Tags, b.Tags):
		return "tags"
	case a.SID != b.SID:
		return "sid"
	}
	return ""
}

// group copies the settings, cursors and state of group on topic, whose
// partitions are 0..parts-1 (and any the group has a cursor on), and
// reports whether the source had any of them.
func (c *copier) group(ctx context.Context, topic, group string, parts int) (bool, error) {
	found := false
	cfg, err := c.src.GroupConfig(ctx, topic, group)
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return false, fmt.Errorf("event: copy: settings of group %q on %q: %w", group, topic, err)
	default:
		found = true
		got, _, err := c.dst.CreateGroup(ctx, topic, group, cfg)
		if err != nil {
			return false, fmt.Errorf("event: copy: create group %q on %q in the destination: %w", group, topic, err)
		}
		if got != cfg {
			return false, fmt.Errorf("%w: group %q on topic %q has other settings in the destination (%+v) than in the source (%+v)", ErrCopyConflict, group, topic, got, cfg)
		}
	}
	scur, err := c.src.Cursors(ctx, topic, group)
	if err != nil {
		return false, fmt.Errorf("event: copy: cursors of group %q on %q: %w", group, topic, err)
	}
	dcur, err := c.dst.Cursors(ctx, topic, group)
	if err != nil {
		return false, fmt.Errorf("event: copy: cursors of group %q on %q in the destination: %w", group, topic, err)
	}
	for p, seq := range dcur {
		if s, ok := scur[p]; !ok || s != seq {
			return false, fmt.Errorf("%w: group %q on topic %q: partition %d has cursor %d in the destination, %s in the source", ErrCopyConflict, group, topic, p, seq, cursorText(s, ok))
		}
	}
	// State first, then cursors: a copy interrupted between them leaves
	// a group whose cursor is missing, which the next run writes.
	seen := make(map[int]bool)
	for p := range parts {
		seen[p] = true
	}
	for p := range scur {
		seen[p] = true
	}
	for _, p := range slices.Sorted(maps.Keys(seen)) {
		had, err := c.groupState(ctx, PartitionRef{Topic: topic, Group: group, Partition: p})
		if err != nil {
			return false, err
		}
		found = found || had
	}
	for _, p := range slices.Sorted(maps.Keys(scur)) {
		found = true
		if _, ok := dcur[p]; ok {
			continue
		}
		if err := c.dst.SetCursor(ctx, PartitionRef{Topic: topic, Group: group, Partition: p}, scur[p]); err != nil {
			return false, fmt.Errorf("event: copy: cursor of group %q on %q partition %d in the destination: %w", group, topic, p, err)
		}
	}
	return found, nil
}

func cursorText(seq uint64, ok bool) string {
	if !ok {
		return "none"
	}
	return fmt.Sprint(seq)
}

// groupState copies the state of p, and reports whether the source had
// any. The destination's must be part of the source's.
func (c *copier) groupState(ctx context.Context, p PartitionRef) (bool, error) {
	ss, err := c.src.GroupState(ctx, p)
	if err != nil {
		return false, fmt.Errorf("event: copy: state of group %q on %q partition %d: %w", p.Group, p.Topic, p.Partition, err)
	}
	ds, err := c.dst.GroupState(ctx, p)
	if err != nil {
		return false, fmt.Errorf("event: copy: state of group %q on %q partition %d in the destination: %w", p.Group, p.Topic, p.Partition, err)
	}
	settled := make(map[uint64]bool, len(ss.Settled))
	for _, seq := range ss.Settled {
		settled[seq] = true
	}
	conflict := func(seq uint64, what string) error {
		return fmt.Errorf("%w: group %q on topic %q partition %d: seq %d %s", ErrCopyConflict, p.Group, p.Topic, p.Partition, seq, what)
	}
	for _, seq := range ds.Settled {
		if !settled[seq] {
			return false, conflict(seq, "is settled in the destination, not in the source")
		}
	}
	for seq, n := range ds.Attempts {
		if settled[seq] {
			continue // settled since: the update below settles it
		}
		if m, ok := ss.Attempts[seq]; !ok || m < n {
			return false, conflict(seq, fmt.Sprintf("has %d attempts in the destination, %d in the source", n, m))
		}
	}
	u := GroupStateUpdate{Attempts: ss.Attempts, Settled: ss.Settled}
	if u.IsZero() {
		return false, nil
	}
	if err := c.dst.UpdateGroupState(ctx, p, u, Fence{}); err != nil {
		return false, fmt.Errorf("event: copy: state of group %q on %q partition %d in the destination: %w", p.Group, p.Topic, p.Partition, err)
	}
	return true, nil
}

// checkUnchanged returns an error wrapping ErrSourceActive if a topic's
// head or a group's cursor in the source moved since they were listed,
// or a topic or group appeared.
func (c *copier) checkUnchanged(ctx context.Context, topics []TopicInfo, groups map[string][]GroupInfo) error {
	now, err := c.src.ListTopics(ctx)
	if err != nil {
		return fmt.Errorf("event: copy: list the source's topics: %w", err)
	}
	before := make(map[string]uint64, len(topics))
	for _, ti := range topics {
		before[ti.Topic] = ti.LastSeq
	}
	for _, ti := range now {
		h, ok := before[ti.Topic]
		if !ok {
			return fmt.Errorf("%w: topic %q appeared in the source during the copy: stop every process that publishes to it, then run the copy again: it resumes", ErrSourceActive, ti.Topic)
		}
		if h != ti.LastSeq {
			return fmt.Errorf("%w: the head of topic %q moved from %d to %d during the copy: stop every process that publishes to the source (hubs, publishers, outbox drainers), then run the copy again: it resumes",
				ErrSourceActive, ti.Topic, h, ti.LastSeq)
		}
		gs, err := c.src.ListGroups(ctx, ti.Topic)
		if err != nil {
			return fmt.Errorf("event: copy: list the groups of %q: %w", ti.Topic, err)
		}
		if err := checkNoMembers(ti.Topic, gs); err != nil {
			return err
		}
		old := make(map[string]GroupInfo, len(groups[ti.Topic]))
		for _, g := range groups[ti.Topic] {
			old[g.Group] = g
		}
		for _, g := range gs {
			o, ok := old[g.Group]
			if !ok {
				return fmt.Errorf("%w: group %q on topic %q appeared in the source during the copy: stop its consumers, then run the copy again", ErrSourceActive, g.Group, ti.Topic)
			}
			if !slices.EqualFunc(o.Partitions, g.Partitions, func(a, b PartitionInfo) bool { return a.Partition == b.Partition && a.Cursor == b.Cursor }) {
				return fmt.Errorf("%w: the cursors of group %q on topic %q moved during the copy: stop its consumers, then run the copy again: it resumes", ErrSourceActive, g.Group, ti.Topic)
			}
		}
	}
	return nil
}
