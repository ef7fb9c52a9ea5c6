package mongostore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/event"
)

// Summaries for [event.Lister]. The topics document of a topic (see
// topicDoc) also counts what was appended:
//
//	{_id: "<topic>", events, bytes: int64, firstSeq, firstTs, lastSeq, lastTs: int64, ...}
//
// (bytes: the payloads, keys and header names and values of the records;
// each record document holds its own share as sz, so that Prune lowers
// bytes by what it deletes; documents written before sz count 0)
// raised after the inserts ($inc events and bytes, $min first*, $max last*) off the
// writers' path: the batches inserted meanwhile are added up and written
// by one update, at most one round of updates every summaryEvery (the
// first at once), so a busy topic costs a few updates a second, not one
// per batch. Prune lowers events and bytes. ListTopics first has the
// updates of this Store's appends written, and Close writes them before
// it returns. A crash before an update leaves the counts short by what it
// held: at most the appends of the last summaryEvery.
//
// The counts are not written in the same write as the records: the
// records and the topics document are in different collections, and
// MongoDB writes two collections at once only in a multi-document
// transaction (a replica set, and a transaction per batch). Updating the
// document in the writer's path before the append returns adds a round
// trip per batch that the next batch's insert waits for: with
// synchronous publishers, whose batches hold a few records, as many
// commands again. Rounds of the bench alternating both builds could not
// show that cost to be under the 5% allowed (one build's rate varied by
// more than a third between rounds; see docs/PERFORMANCE.md), so the
// update stays off the writers' path. The groups
// collection holds one document per topic that has groups:
//
//	{_id: "<topic>", groups: ["<group>", ...]}
//
// a group added ($addToSet) by the first cursor write of it that a Store
// makes, removed ($pull) by DeleteGroup and ExpireGroup. Every read and
// write of both goes by _id. A group's settings and the activity they
// record are in a document of their own (groupsettings.go).

const (
	fEvents   = "events"
	fFirstSeq = "firstSeq"
	fFirstTS  = "firstTs"
	fLastSeq  = "lastSeq"
	fLastTS   = "lastTs"
	fBytes    = "bytes"
	fGroups   = "groups"
)

// summaryEvery spaces the rounds of summary updates. With waiting
// publishers a batch holds a few records, and an update per batch was
// as many commands again as the inserts (on the bundled test server, which
// runs one command at a time, 589 updates for 624 inserts, a sixth of its
// time; see docs/PERFORMANCE.md). It paces writes and means nothing
// else, so it is read on the real clock, not Config.Clock: a test with a
// fake clock still gets its summaries written.
const summaryEvery = 50 * time.Millisecond

// summaryDelta is what a batch adds to its topic's summary.
type summaryDelta struct {
	events, bytes     int64
	firstSeq, lastSeq uint64
	firstTS, lastTS   int64
}

// add counts the records just inserted at seqs after head.
func (d *summaryDelta) add(inserted []*slot, head uint64) {
	for i, sl := range inserted {
		seq := head + 1 + uint64(i)
		ts := sl.rec.TS
		if d.events == 0 || seq < d.firstSeq {
			d.firstSeq = seq
		}
		if d.events == 0 || ts < d.firstTS {
			d.firstTS = ts
		}
		if seq > d.lastSeq {
			d.lastSeq, d.lastTS = seq, ts
		}
		d.events++
		d.bytes += recordBytes(sl.rec)
	}
}

// merge adds o to d.
func (d *summaryDelta) merge(o *summaryDelta) {
	if o.events == 0 {
		return
	}
	if d.events == 0 {
		*d = *o
		return
	}
	d.firstSeq, d.firstTS = min(d.firstSeq, o.firstSeq), min(d.firstTS, o.firstTS)
	if o.lastSeq > d.lastSeq {
		d.lastSeq, d.lastTS = o.lastSeq, o.lastTS
	}
	d.events += o.events
	d.bytes += o.bytes
}

// summarise queues d (and zeroes it) for the summary of topic; one
// goroutine at a time writes what is queued.
func (s *Store) summarise(topic string, d *summaryDelta) {
	if d.events == 0 {
		return
	}
	s.sumMu.Lock()
	if s.sumPending == nil {
		s.sumPending = make(map[string]*summaryDelta)
	}
	p := s.sumPending[topic]
	if p == nil {
		p = new(summaryDelta)
		s.sumPending[topic] = p
	}
	p.merge(d)
	*d = summaryDelta{}
	if s.sumNext == nil {
		s.sumNext = make(chan struct{})
		s.wg.Add(1)
		go s.summaryLoop()
	}
	s.sumMu.Unlock()
}

// summaryLoop writes the queued summaries in rounds until a round finds
// none, then ends. Each round closes the sumNext it started with once its
// updates are written. After a round it waits summaryEvery for the next,
// unless the store is closing or a flush asks for it (sumKick).
func (s *Store) summaryLoop() {
	defer s.wg.Done()
	pause := time.NewTimer(summaryEvery)
	defer pause.Stop()
	for {
		s.sumMu.Lock()
		pending, done := s.sumPending, s.sumNext
		s.sumPending = nil
		if len(pending) == 0 {
			s.sumNext = nil
			close(done)
			s.sumMu.Unlock()
			return
		}
		s.sumNext = make(chan struct{})
		s.sumMu.Unlock()
		for topic, d := range pending {
			ctx, cancel := context.WithTimeout(s.ctx, s.cfg.WriteTimeout)
			s.writeSummary(ctx, topic, *d)
			cancel()
		}
		close(done)
		pause.Reset(summaryEvery)
		select {
		case <-pause.C:
		case <-s.sumKick:
		case <-s.quit:
		}
	}
}

// flushSummaries has what is queued for the summaries now written at once,
// and waits until it is: the round the summary writer starts next takes
// all of it (appends made meanwhile may go with it, or wait for the
// round after).
func (s *Store) flushSummaries(ctx context.Context) error {
	s.sumMu.Lock()
	next := s.sumNext
	s.sumMu.Unlock()
	if next == nil {
		return nil
	}
	select {
	case s.sumKick <- struct{}{}:
	default: // a kick is waiting already
	}
	select {
	case <-next:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeSummary adds d to the summary of topic.
func (s *Store) writeSummary(ctx context.Context, topic string, d summaryDelta) {
	if d.events == 0 {
		return
	}
	update := bson.D{
		{Key: "$inc", Value: bson.D{{Key: fEvents, Value: d.events}, {Key: fBytes, Value: d.bytes}}},
		{Key: "$min", Value: bson.D{{Key: fFirstSeq, Value: int64(d.firstSeq)}, {Key: fFirstTS, Value: d.firstTS}}},
		{Key: "$max", Value: bson.D{{Key: fLastSeq, Value: int64(d.lastSeq)}, {Key: fLastTS, Value: d.lastTS}}},
	}
	if err := upsert(ctx, s.topics, bson.D{{Key: fID, Value: topic}}, update); err != nil {
		s.log.Warn("mongostore: update the summary of a topic failed", "topic", topic, "err", err)
	}
}

// pruned lowers the counts of topic by the n records Prune deleted and
// their bytes.
func (s *Store) pruned(ctx context.Context, topic string, n int, bytes int64) error {
	if n == 0 {
		return nil
	}
	_, err := s.topics.UpdateOne(ctx, bson.D{{Key: fID, Value: topic}}, bson.D{{Key: "$inc", Value: bson.D{{Key: fEvents, Value: -int64(n)}, {Key: fBytes, Value: -bytes}}}})
	if err != nil {
		return fmt.Errorf("mongostore: prune %q: count: %w", topic, err)
	}
	return nil
}

// knowGroup adds group to the groups of topic, once per Store.
func (s *Store) knowGroup(ctx context.Context, topic, group string) error {
	k := topic + "/" + group
	s.groupsMu.Lock()
	known := s.groupsKnown[k]
	s.groupsMu.Unlock()
	if known {
		return nil
	}
	err := upsert(ctx, s.groups, bson.D{{Key: fID, Value: topic}}, bson.D{{Key: "$addToSet", Value: bson.D{{Key: fGroups, Value: group}}}})
	if err != nil {
		return fmt.Errorf("mongostore: record group %q of %q: %w", group, topic, err)
	}
	s.groupsMu.Lock()
	s.groupsKnown[k] = true
	s.groupsMu.Unlock()
	return nil
}

type summaryDoc struct {
	ID       string `bson:"_id"`
	Floor    int64  `bson:"floor"`
	Events   int64  `bson:"events"`
	FirstSeq int64  `bson:"firstSeq"`
	FirstTS  int64  `bson:"firstTs"`
	LastSeq  int64  `bson:"lastSeq"`
	LastTS   int64  `bson:"lastTs"`
	Bytes    int64  `bson:"bytes"`
}

// ListTopics implements [event.Lister] from the topics documents.
func (s *Store) ListTopics(ctx context.Context) ([]event.TopicInfo, error) {
	if err := s.flushSummaries(ctx); err != nil {
		return nil, fmt.Errorf("mongostore: list topics: %w", err)
	}
	cur, err := s.topics.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: fID, Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("mongostore: list topics: %w", err)
	}
	var docs []summaryDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongostore: list topics: %w", err)
	}
	out := make([]event.TopicInfo, 0, len(docs))
	for _, d := range docs {
		if d.LastSeq <= 0 {
			continue // pruned before anything was counted
		}
		ti := event.TopicInfo{Topic: d.ID, Events: max(d.Events, 0), LastSeq: uint64(d.LastSeq), LastTS: d.LastTS, Bytes: max(d.Bytes, 0)}
		if ti.Events > 0 {
			ti.FirstSeq, ti.FirstTS = uint64(max(d.FirstSeq, 1)), d.FirstTS
			if d.Floor > d.FirstSeq {
				// Retention deleted the first records: the oldest one left
				// is at the floor.
				ti.FirstSeq = uint64(d.Floor)
				if r, ok, err := s.recordAt(ctx, d.ID, int64(ti.FirstSeq)); err != nil {
					return nil, err
				} else if ok {
					ti.FirstTS = r.TS
				}
			}
		}
		out = append(out, ti)
	}
	slices.SortFunc(out, func(a, b event.TopicInfo) int { return strings.Compare(a.Topic, b.Topic) })
	return out, nil
}

// groupNames returns the groups of topic, sorted.
func (s *Store) groupNames(ctx context.Context, topic string) ([]string, error) {
	var d struct {
		Groups []string `bson:"groups"`
	}
	err := s.groups.FindOne(ctx, bson.D{{Key: fID, Value: topic}}).Decode(&d)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return nil, fmt.Errorf("mongostore: groups of %q: %w", topic, err)
	}
	slices.Sort(d.Groups)
	return slices.Compact(d.Groups), nil
}

// ListGroups implements [event.Lister]: the groups document of topic and
// the settings documents of its groups (groupsettings.go), then the
// topic's cursor documents (cursors and leases) and members (one query
// each) and the group state of each partition by _id. A group is listed
// when its name is in the groups document or it has settings; a
// partition when it has a cursor or a lease that was not released.
func (s *Store) ListGroups(ctx context.Context, topic string) ([]event.GroupInfo, error) {
	names, err := s.groupNames(ctx, topic)
	if err != nil {
		return nil, err
	}
	settings, err := s.groupSettings(ctx, topic)
	if err != nil {
		return nil, err
	}
	for g := range settings {
		names = append(names, g)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if len(names) == 0 {
		return []event.GroupInfo{}, nil
	}
	head, err := s.head(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("mongostore: head of %q: %w", topic, err)
	}
	now := s.cfg.Clock.Now()
	byName := make(map[string]*event.GroupInfo, len(names))
	parts := make(map[string]map[int32]*event.PartitionInfo, len(names))
	out := make([]event.GroupInfo, len(names))
	for i, n := range names {
		out[i] = event.GroupInfo{Topic: topic, Group: n, Head: head}
		byName[n] = &out[i]
		parts[n] = make(map[int32]*event.PartitionInfo)
		if d := settings[n]; d != nil {
			cfg, err := d.decode()
			if err != nil {
				return nil, err
			}
			out[i].Config = &cfg
			later(&out[i].LastActive, d.Active)
		}
	}
	part := func(g string, p int32) *event.PartitionInfo {
		m := parts[g]
		if m == nil {
			return nil
		}
		if m[p] == nil {
			m[p] = &event.PartitionInfo{Partition: int(p)}
		}
		return m[p]
	}
	topicF := bson.D{{Key: "topic", Value: topic}}
	var cursors []cursorDoc
	if err := findAll(ctx, s.cursors, topicF, &cursors, options.Find().SetProjection(bson.D{
		{Key: "group", Value: 1}, {Key: "partition", Value: 1}, {Key: "seq", Value: 1},
		{Key: fMember, Value: 1}, {Key: fExpiresAt, Value: 1}, {Key: fCommittedAt, Value: 1}, {Key: fID, Value: 0},
	})); err != nil {
		return nil, fmt.Errorf("mongostore: cursors of %q: %w", topic, err)
	}
	for _, c := range cursors {
		if g := byName[c.Group]; g != nil {
			later(&g.LastActive, c.CommittedAt)
		}
		if c.Seq == nil && c.Member == "" {
			continue // neither a cursor nor a lease: a released lease of a partition without cursor
		}
		p := part(c.Group, c.Partition)
		if p == nil {
			continue
		}
		if c.Seq != nil {
			p.Cursor = uint64(max(*c.Seq, 0))
		}
		if c.Member != "" && c.ExpiresAt.After(now) {
			p.Owner = c.Member
		}
	}
	var members []activeMember
	if err := findAll(ctx, s.members, topicF, &members); err != nil {
		return nil, fmt.Errorf("mongostore: members of %q: %w", topic, err)
	}
	for _, m := range members {
		g := byName[m.Group]
		if g == nil {
			continue
		}
		if m.live(now) {
			g.Members = append(g.Members, m.Member)
		}
		m.activity(&g.LastActive)
	}
	for _, n := range names {
		g := byName[n]
		for _, p := range parts[n] {
			st, err := s.GroupState(ctx, event.PartitionRef{Topic: topic, Group: n, Partition: p.Partition})
			if err != nil {
				return nil, err
			}
			p.InFlight = len(st.Attempts)
			g.Partitions = append(g.Partitions, *p)
		}
		g.Summarise()
	}
	return out, nil
}

func findAll(ctx context.Context, c *mongo.Collection, filter bson.D, into any, opts ...options.Lister[options.FindOptions]) error {
	cur, err := c.Find(ctx, filter, opts...)
	if err != nil {
		return err
	}
	return cur.All(ctx, into)
}

// DeleteGroup implements [event.Lister]: the group's settings document,
// its group-state documents, its cursor documents (cursors and leases:
// tokens start over), its members and its name in the groups document.
func (s *Store) DeleteGroup(ctx context.Context, topic, group string) error {
	if _, err := s.gsettings.DeleteOne(ctx, bson.D{{Key: fID, Value: groupID(topic, group)}}); err != nil {
		return fmt.Errorf("mongostore: delete group %q of %q: %w", group, topic, err)
	}
	return s.deleteGroupData(ctx, topic, group)
}

// deleteGroupData deletes what DeleteGroup does but the settings.
func (s *Store) deleteGroupData(ctx context.Context, topic, group string) error {
	gf := bson.D{{Key: "topic", Value: topic}, {Key: "group", Value: group}}
	for _, c := range []*mongo.Collection{s.gstate, s.cursors, s.members} {
		if _, err := c.DeleteMany(ctx, gf); err != nil {
			return fmt.Errorf("mongostore: delete group %q of %q: %w", group, topic, err)
		}
	}
	_, err := s.groups.UpdateOne(ctx, bson.D{{Key: fID, Value: topic}}, bson.D{{Key: "$pull", Value: bson.D{{Key: fGroups, Value: group}}}})
	if err != nil {
		return fmt.Errorf("mongostore: delete group %q of %q: %w", group, topic, err)
	}
	s.groupsMu.Lock()
	delete(s.groupsKnown, topic+"/"+group)
	s.groupsMu.Unlock()
	return nil
}

// activeMember is a members document as ListGroups and ExpireGroup read
// it.
type activeMember struct {
	Group     string    `bson:"group"`
	Member    string    `bson:"member"`
	ExpiresAt time.Time `bson:"expiresAt"`
	Left      bool      `bson:"left"`
	LeftAt    time.Time `bson:"leftAt"`
}

func (m *activeMember) live(now time.Time) bool { return !m.Left && m.ExpiresAt.After(now) }

// activity raises *ms to the member's share of its group's LastActive:
// the end of its heartbeat, or the time it left (a tombstone's expiresAt
// is when the tombstone goes, not activity).
func (m *activeMember) activity(ms *int64) {
	if !m.Left {
		later(ms, m.ExpiresAt)
	}
	later(ms, m.LeftAt)
}

// ExpireGroup implements [event.Lister]. MongoDB changes several
// documents in one step only in a multi-document transaction, which needs
// a replica set (the bundled test server has none), so the check and the
// delete are several steps, ordered to leave the smallest window:
//
//  1. The group's members (one query): a live one keeps the group.
//  2. Its settings document by _id, and its cursor documents (one query):
//     LastActive is the latest of the settings' active field, the
//     cursors' commit times and the members' heartbeat ends and leaving
//     times (as ListGroups computes it). A group that is neither in the
//     topic's groups document nor has settings is not known: kept. A
//     LastActive at or after before keeps it.
//  3. The settings document is deleted on condition that its active
//     field is still before the cut-off. A Subscribe raises it when it
//     reads the settings (CreateGroup), and a member that joins when it
//     heartbeats, so a member that joins after step 1 read the members
//     makes this delete match nothing, and the group is kept. A group
//     without settings (only an older release subscribed it) has no such
//     document: settings created meanwhile keep the group too.
//  4. The rest, as DeleteGroup: group state, cursors, members, the name.
//
// What remains: a cursor commit that lands between step 2's read of the
// cursors and step 3 (an operator's SetCursor, or a fenced commit of a
// member whose heartbeat ran out before its lease) is not seen, and the
// group is expired with it. A member that joins after step 1 but raises
// the settings' active field only after step 3 (its heartbeat writes its
// member document first), or that joins after step 3 (its Subscribe then
// creates the group's settings afresh), may have its member document,
// cursors or state deleted under it by step 4: it goes on as after a
// DeleteGroup of a live group (its next heartbeat joins again, its fenced
// writes are refused until it takes its partitions again, and a partition
// without a cursor starts at its start position). Steps 3 and 4 take
// five round trips (six for a group without settings), so the window is
// that wide, and it opens only for a group idle for its whole expiry
// period.
func (s *Store) ExpireGroup(ctx context.Context, topic, group string, before int64) (bool, error) {
	fail := func(err error) (bool, error) {
		return false, fmt.Errorf("mongostore: expire group %q of %q: %w", group, topic, err)
	}
	now := s.cfg.Clock.Now()
	gf := bson.D{{Key: "topic", Value: topic}, {Key: "group", Value: group}}
	var last int64
	var members []activeMember
	if err := findAll(ctx, s.members, gf, &members); err != nil {
		return fail(err)
	}
	for _, m := range members {
		if m.live(now) {
			return false, nil
		}
		m.activity(&last)
	}
	id := bson.D{{Key: fID, Value: groupID(topic, group)}}
	var sd groupSettingsDoc
	err := s.gsettings.FindOne(ctx, id, options.FindOne().SetProjection(bson.D{{Key: fActive, Value: 1}})).Decode(&sd)
	hadSettings := err == nil
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return fail(err)
	}
	if !hadSettings {
		names, err := s.groupNames(ctx, topic)
		if err != nil {
			return false, err
		}
		if _, known := slices.BinarySearch(names, group); !known {
			return false, nil
		}
	}
	later(&last, sd.Active)
	var cursors []cursorDoc
	if err := findAll(ctx, s.cursors, gf, &cursors, options.Find().SetProjection(bson.D{{Key: fCommittedAt, Value: 1}, {Key: fID, Value: 0}})); err != nil {
		return fail(err)
	}
	for _, c := range cursors {
		later(&last, c.CommittedAt)
	}
	if last >= before {
		return false, nil
	}
	if s.afterExpireCheck != nil {
		s.afterExpireCheck()
	}
	r, err := s.gsettings.DeleteOne(ctx, append(id, bson.E{Key: fActive, Value: bson.D{{Key: "$lt", Value: time.UnixMilli(before)}}}))
	if err != nil {
		return fail(err)
	}
	if r.DeletedCount == 0 {
		if hadSettings {
			return false, nil // active since step 2, or deleted by another call
		}
		err := s.gsettings.FindOne(ctx, id, options.FindOne().SetProjection(bson.D{{Key: fID, Value: 1}})).Err()
		if err == nil {
			return false, nil // settings created since step 2
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return fail(err)
		}
	}
	if err := s.deleteGroupData(ctx, topic, group); err != nil {
		return false, err
	}
	return true, nil
}
