package event

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/promethean/promlib/clock"
)

var _ InProcessStore = (*MemoryStore)(nil)

// MemoryStore is an in-process [Store], [CursorStore], [LeaseStore],
// [GroupStateStore], [Notifier] and [InProcessStore]. Records live in
// fixed-size chunks indexed by seq, so reads, head and lookups by id cost
// the same however long the topic grows. Group state is kept as long as
// the store lives.
type MemoryStore struct {
	mu       sync.RWMutex
	topics   map[string]*memTopic
	watchers map[string][]*memWatcher // by topic; a topic without any has no entry
	cursors  map[PartitionRef]uint64
	members  map[groupKey]map[string]time.Time // a group without members has no entry
	left     memTombs                          // members that left, see Leave
	leases   map[PartitionRef]memLease
	leaseTok uint64                            // the last lease token granted, of any partition
	gstate   map[PartitionRef]map[uint64]int32 // see store_memory_groupstate.go
	groups   map[string]map[string]*memGroup   // by topic and group; see store_memory_list.go
	topicCfg map[string]TopicConfig            // see store_memory_topics.go
	clock    clock.Clock
	limits   MemoryStoreConfig
	bytes    int64 // of the live records of every topic
}

var (
	_ Store        = (*MemoryStore)(nil)
	_ CursorStore  = (*MemoryStore)(nil)
	_ LeaseStore   = (*MemoryStore)(nil)
	_ LeaseRenewer = (*MemoryStore)(nil)
	_ Notifier     = (*MemoryStore)(nil)
	_ KeyStore     = (*MemoryStore)(nil)
	_ Pruner       = (*MemoryStore)(nil)
	_ Lister       = (*MemoryStore)(nil)

	_ GroupStateStore = (*MemoryStore)(nil)
	_ GroupStore      = (*MemoryStore)(nil)
)

const memChunk = 4096

// memTopic indexes ids three ways. UUIDs that arrive in increasing order
// (UUIDv7s from one process do) form the run: their seqs, in a slice that
// is sorted by UUID too, so a lookup is a binary search and a new id greater
// than every one before needs no lookup at all. Other UUIDs go to byUID,
// ids in other forms to byID.
type memTopic struct {
	chunks   [][]memRecord
	head     uint64
	run      chunkedList[uint64]
	slabs    [][]byte // payloads; the last one is being filled
	slabLive []uint32 // live payloads per slab: a slab with none is freed
	fill     int      // the slab being filled, -1 for none
	exts     chunkedList[memExt]
	byUID    map[[16]byte]uint64
	byID     map[string]uint64
	events   int   // live records
	bytes    int64 // of the live records (see recordBytes)

	recentIDs []string // see recentID

	latest     map[string]uint64 // key -> seq of its latest record
	sortedKeys []string          // the keys of latest, sorted; nil when stale
	floor      uint64            // every record below it was deleted by retention
	first      uint64            // the lowest live seq, 0 for none
}

// lookup returns the seq of the live record with the given id.
func (t *memTopic) lookup(id string, u [16]byte, isUUID bool) (uint64, bool) {
	if !isUUID {
		seq, ok := t.byID[id]
		return seq, ok
	}
	if n := t.run.len(); n > 0 && bytes.Compare(u[:], t.at(*t.run.last()).uid[:]) <= 0 {
		i := sort.Search(n, func(i int) bool { return bytes.Compare(t.at(*t.run.at(i)).uid[:], u[:]) >= 0 })
		if i < n {
			if seq := *t.run.at(i); t.at(seq).uid == u && !t.at(seq).deleted {
				return seq, true
			}
		}
	}
	seq, ok := t.byUID[u] // out of order, or stored again after a deletion
	return seq, ok
}

type memWatcher struct{ ch chan struct{} }

// memRecord is the compact form of a Record, and holds no pointer, so the
// garbage collector never scans the chunks: the topic and seq are implied
// by where it is kept, an id in canonical UUID form is kept as its 16
// bytes, the payload lives in a slab, and the rarely used fields (and ids
// of other forms) sit in the topic's exts table.
type memRecord struct {
	uid       [16]byte
	ts        int64
	partition int32
	deleted   bool
	slab      uint32 // payload = slabs[slab][off : off+n]
	off, n    uint32
	ext       uint32 // exts[ext-1]; 0 for none
}

type memExt struct {
	id       string // an id not in canonical UUID form
	key      string
	headers  map[string]string
	causedBy []string
	tags     []string
	sid      string
	ctype    string // content type
}

func (t *memTopic) extOf(m *memRecord) *memExt {
	if m.ext == 0 {
		return nil
	}
	return t.exts.at(int(m.ext) - 1)
}

func (t *memTopic) keyOf(m *memRecord) string {
	if e := t.extOf(m); e != nil {
		return e.key
	}
	return ""
}

func (t *memTopic) idOf(seq uint64, m *memRecord) string {
	if e := t.extOf(m); e != nil && e.id != "" {
		return e.id
	}
	if id, ok := t.recentID(seq); ok {
		return id
	}
	return uuidString(&m.uid)
}

// memRecentIDs is how many of a topic's latest UUIDs it keeps as the
// strings they were published as, once it holds that many records.
const memRecentIDs = 1024

// recentID returns the id of record seq as it was appended, when seq is
// among the latest memRecentIDs: consumers that keep up read the tail, and
// get the publisher's string instead of one formatted anew from the 16
// bytes kept (a string that lives as long as their delivery). A topic
// keeps memRecentIDs strings at most, and none before it has that many
// records.
func (t *memTopic) recentID(seq uint64) (string, bool) {
	if t.recentIDs == nil || seq+memRecentIDs <= t.head {
		return "", false
	}
	id := t.recentIDs[seq%memRecentIDs]
	return id, id != ""
}

// noteID keeps id, the UUID of record seq (see recentID).
func (t *memTopic) noteID(seq uint64, id string) {
	if t.recentIDs == nil {
		if seq < memRecentIDs {
			return
		}
		t.recentIDs = make([]string, memRecentIDs)
	}
	t.recentIDs[seq%memRecentIDs] = id
}

func (t *memTopic) payloadOf(m *memRecord) []byte {
	b := t.slabs[m.slab]
	return b[m.off : m.off+m.n : m.off+m.n]
}

type groupKey struct{ topic, group string }

type memLease struct {
	member  string
	expires time.Time
	token   uint64
}

// MemoryStoreConfig configures a [MemoryStore]. The zero value of every
// field means its default.
type MemoryStoreConfig struct {
	// Clock tells the time of membership heartbeats and partition leases;
	// nil means the system clock. Give it the Bus's clock.
	Clock clock.Clock
	// MaxTopicEvents bounds the live records of each topic; 0 (or less)
	// means no limit. The bytes of a record are its payload, key, header names and
	// header values. An append over any limit is refused whole with
	// ErrStoreFull naming the limit; nothing stored is evicted (retention
	// and compaction delete records, and make room).
	MaxTopicEvents int
	// MaxTopicBytes bounds the bytes of the live records of each topic; 0
	// (or less) means no limit.
	MaxTopicBytes int64
	// MaxBytes bounds the bytes of the live records of all topics; 0 (or
	// less) means no limit.
	MaxBytes int64
}

// recordBytes is what a record counts against the byte limits.
func recordBytes(r *Record) int64 {
	return int64(len(r.Payload)) + extBytes(r.Key, r.Headers)
}

func extBytes(key string, headers map[string]string) int64 {
	n := int64(len(key))
	for k, v := range headers {
		n += int64(len(k) + len(v))
	}
	return n
}

// NewMemoryStore returns an empty in-memory store on the system clock.
func NewMemoryStore() *MemoryStore { return NewMemoryStoreWith(MemoryStoreConfig{}) }

// NewMemoryStoreWith returns an empty in-memory store configured by cfg.
func NewMemoryStoreWith(cfg MemoryStoreConfig) *MemoryStore {
	return &MemoryStore{
		topics:   make(map[string]*memTopic),
		watchers: make(map[string][]*memWatcher),
		cursors:  make(map[PartitionRef]uint64),
		members:  make(map[groupKey]map[string]time.Time),
		leases:   make(map[PartitionRef]memLease),
		groups:   make(map[string]map[string]*memGroup),
		clock:    clock.Or(cfg.Clock),
		limits:   cfg,
	}
}

func (t *memTopic) at(seq uint64) *memRecord {
	i := seq - 1
	return &t.chunks[i/memChunk][i%memChunk]
}

func (t *memTopic) record(topic string, seq uint64) Record {
	m := t.at(seq)
	r := Record{ID: t.idOf(seq, m), Seq: seq, TS: m.ts, Topic: topic, Partition: int(m.partition), Payload: t.payloadOf(m)}
	if e := t.extOf(m); e != nil {
		r.Key, r.Headers, r.CausedBy, r.Tags, r.SID, r.ContentType = e.key, e.headers, e.causedBy, e.tags, e.sid, e.ctype
	}
	return r
}

// append stores r as the next record and points r's payload and slices at
// the stored copies.
func (t *memTopic) append(r *Record, u [16]byte, isUUID bool) uint64 {
	t.head++
	i := t.head - 1
	if i%memChunk == 0 {
		// The first chunk grows as the topic does: a small topic stays small.
		n := memChunk
		if i == 0 {
			n = 16
		}
		t.chunks = append(t.chunks, make([]memRecord, 0, n))
	}
	m := memRecord{ts: r.TS, partition: int32(r.Partition), uid: u}
	t.copyPayload(&m, r.Payload)
	r.Payload = t.payloadOf(&m)
	var e memExt
	switch {
	case !isUUID:
		e.id = r.ID
		t.byID[r.ID] = t.head
		t.noteID(t.head, "") // read from exts
	case t.run.len() == 0 || bytes.Compare(u[:], t.at(*t.run.last()).uid[:]) > 0:
		// Greater than every UUID before: it extends the sorted run.
		t.run.append(t.head)
		t.noteID(t.head, r.ID)
	default:
		t.byUID[u] = t.head
		t.noteID(t.head, r.ID)
	}
	if e.id != "" || r.Key != "" || len(r.Headers) > 0 || len(r.CausedBy) > 0 || len(r.Tags) > 0 || r.SID != "" || r.ContentType != "" {
		e.key, e.headers, e.causedBy, e.tags, e.sid, e.ctype = r.Key, maps.Clone(r.Headers), slices.Clone(r.CausedBy), slices.Clone(r.Tags), r.SID, r.ContentType
		t.exts.append(e)
		m.ext = uint32(t.exts.len())
		r.Headers, r.CausedBy, r.Tags = e.headers, e.causedBy, e.tags
	}
	c := &t.chunks[len(t.chunks)-1]
	*c = append(*c, m)
	t.events++
	if t.first == 0 {
		t.first = t.head
	}
	t.bytes += recordBytes(r)
	if r.Key != "" {
		if _, ok := t.latest[r.Key]; !ok {
			t.sortedKeys = nil
		}
		t.latest[r.Key] = t.head
	}
	return t.head
}

const (
	slabSize       = 1 << 20
	maxSlabPayload = 8 << 10
)

// copyPayload copies p into the slab being filled (a large payload gets a
// slab of its own) and records where in m.
func (t *memTopic) copyPayload(m *memRecord, p []byte) {
	var k int
	switch {
	case len(p) > maxSlabPayload:
		t.slabs = append(t.slabs, bytes.Clone(p))
		t.slabLive = append(t.slabLive, 0)
		k = len(t.slabs) - 1
		m.off = 0
	default:
		if t.fill < 0 || cap(t.slabs[t.fill])-len(t.slabs[t.fill]) < len(p) {
			// Slabs grow from 1 KiB to slabSize: a small topic stays small.
			size := slabSize
			if n := len(t.slabs); n < 10 {
				size = slabSize >> (10 - n)
			}
			t.slabs = append(t.slabs, make([]byte, 0, size))
			t.slabLive = append(t.slabLive, 0)
			t.fill = len(t.slabs) - 1
		}
		k = t.fill
		m.off = uint32(len(t.slabs[k]))
		t.slabs[k] = append(t.slabs[k], p...)
	}
	m.slab, m.n = uint32(k), uint32(len(p))
	t.slabLive[k]++
}

// releasePayload drops m's payload; a slab with no live payload left (and
// not being filled) is freed.
func (t *memTopic) releasePayload(m *memRecord) {
	k := m.slab
	t.slabLive[k]--
	if t.slabLive[k] == 0 && int(k) != t.fill {
		t.slabs[k] = nil
	}
}

func (s *MemoryStore) topic(name string) *memTopic {
	t := s.topics[name]
	if t == nil {
		t = &memTopic{byUID: make(map[[16]byte]uint64), byID: make(map[string]uint64), latest: make(map[string]uint64), floor: 1, fill: -1}
		s.topics[name] = t
	}
	return t
}

// Append implements [Store].
func (s *MemoryStore) Append(ctx context.Context, topic string, recs []Record) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i := range recs {
		if recs[i].Topic != topic {
			return nil, invalid("topic", "record %d has topic %q in an append to %q", i, recs[i].Topic, topic)
		}
		if recs[i].ID == "" {
			return nil, invalid("id", "record %d has no id", i)
		}
	}
	out := make([]Record, len(recs))
	s.mu.Lock()
	if err := s.checkLimits(topic, recs); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	t := s.topic(topic)
	added := false
	for i := range recs {
		u, isUUID := parseUUID(recs[i].ID)
		if seq, ok := t.lookup(recs[i].ID, u, isUUID); ok {
			out[i] = t.record(topic, seq)
			continue
		}
		out[i] = recs[i]
		out[i].Seq = t.append(&out[i], u, isUUID)
		s.bytes += recordBytes(&out[i])
		added = true
	}
	if added {
		for _, w := range s.watchers[topic] {
			select {
			case w.ch <- struct{}{}:
			default:
			}
		}
	}
	s.mu.Unlock()
	return out, nil
}

// checkLimits returns an error wrapping ErrStoreFull, naming the limit, if
// storing the records of recs that topic does not hold yet would go over a
// limit. Called with s.mu held.
func (s *MemoryStore) checkLimits(topic string, recs []Record) error {
	l := &s.limits
	if l.MaxTopicEvents <= 0 && l.MaxTopicBytes <= 0 && l.MaxBytes <= 0 {
		return nil
	}
	t := s.topics[topic]
	events, bytes := 0, int64(0)
	for i := range recs {
		if t != nil {
			u, isUUID := parseUUID(recs[i].ID)
			if _, ok := t.lookup(recs[i].ID, u, isUUID); ok {
				continue
			}
		}
		events++
		bytes += recordBytes(&recs[i])
	}
	if events == 0 {
		return nil
	}
	var tEvents int
	var tBytes int64
	if t != nil {
		tEvents, tBytes = t.events, t.bytes
	}
	switch {
	case l.MaxTopicEvents > 0 && tEvents+events > l.MaxTopicEvents:
		return fmt.Errorf("%w: topic %q holds %d records, %d more would pass MaxTopicEvents (%d)", ErrStoreFull, topic, tEvents, events, l.MaxTopicEvents)
	case l.MaxTopicBytes > 0 && tBytes+bytes > l.MaxTopicBytes:
		return fmt.Errorf("%w: topic %q holds %d bytes, %d more would pass MaxTopicBytes (%d)", ErrStoreFull, topic, tBytes, bytes, l.MaxTopicBytes)
	case l.MaxBytes > 0 && s.bytes+bytes > l.MaxBytes:
		return fmt.Errorf("%w: the store holds %d bytes, %d more would pass MaxBytes (%d)", ErrStoreFull, s.bytes, bytes, l.MaxBytes)
	}
	return nil
}

// Read implements [Store]. Deleted records are skipped.
func (s *MemoryStore) Read(ctx context.Context, topic string, afterSeq uint64, limit int) ([]Record, error) {
	return s.ReadInto(ctx, topic, afterSeq, limit, nil)
}

// ReadInto implements [InProcessStore]: Read appending to dst, so that a
// consumer can read into the same buffer again and again.
func (s *MemoryStore) ReadInto(ctx context.Context, topic string, afterSeq uint64, limit int, dst []Record) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, invalid("limit", "%d, want at least 1", limit)
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.topics[topic]
	if t == nil || afterSeq >= t.head {
		return dst, nil
	}
	out := dst
	if out == nil {
		out = make([]Record, 0, min(uint64(limit), t.head-afterSeq))
	}
	for seq := max(afterSeq+1, t.floor); seq <= t.head && len(out) < limit; seq++ {
		if !t.at(seq).deleted {
			out = append(out, t.record(topic, seq))
		}
	}
	return out, nil
}

// Head implements [Store].
func (s *MemoryStore) Head(ctx context.Context, topic string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if t := s.topics[topic]; t != nil {
		return t.head, nil
	}
	return 0, nil
}

// FindByID implements [Store].
func (s *MemoryStore) FindByID(ctx context.Context, topic, id string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if t := s.topics[topic]; t != nil {
		u, isUUID := parseUUID(id)
		if seq, ok := t.lookup(id, u, isUUID); ok {
			return t.record(topic, seq), nil
		}
	}
	return Record{}, fmt.Errorf("%w: id %q in topic %q", ErrNotFound, id, topic)
}

// FirstSeqAtOrAfter implements [Store]. Timestamps need not grow with seq,
// so this scans; it is used once, when a group starts by time.
func (s *MemoryStore) FirstSeqAtOrAfter(ctx context.Context, topic string, ms int64) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.topics[topic]
	if t == nil {
		return 0, false, nil
	}
	for seq := t.floor; seq <= t.head; seq++ {
		if m := t.at(seq); !m.deleted && m.ts >= ms {
			return seq, true, nil
		}
	}
	return 0, false, nil
}

// Watch implements [Notifier]. A watch holds no state of the topic: once
// stopped, nothing of it is left.
func (s *MemoryStore) Watch(topic string) (<-chan struct{}, func()) {
	w := &memWatcher{ch: make(chan struct{}, 1)}
	s.mu.Lock()
	s.watchers[topic] = append(s.watchers[topic], w)
	s.mu.Unlock()
	return w.ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		ws := slices.DeleteFunc(s.watchers[topic], func(x *memWatcher) bool { return x == w })
		if len(ws) == 0 {
			delete(s.watchers, topic)
		} else {
			s.watchers[topic] = ws
		}
	}
}

// Cursors implements [CursorStore].
func (s *MemoryStore) Cursors(ctx context.Context, topic, group string) (map[int]uint64, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	// The group's partitions, not every cursor of the store: a topic of
	// 10,000 groups would read 10,000 cursors for each.
	out := make(map[int]uint64)
	if g := s.groups[topic][group]; g != nil {
		for p := range g.parts {
			if v, ok := s.cursors[PartitionRef{Topic: topic, Group: group, Partition: p}]; ok {
				out[p] = v
			}
		}
	}
	return out, nil
}

// CommitCursor implements [CursorStore].
func (s *MemoryStore) CommitCursor(ctx context.Context, p PartitionRef, seq uint64, f Fence) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.checkFence(p, f); err != nil {
		return err
	}
	k := p
	cur, ok := s.cursors[k]
	g := s.group(p.Topic, p.Group)
	if !ok {
		g.parts[p.Partition] = struct{}{}
	}
	if !ok || seq > cur {
		s.cursors[k] = seq
		g.touch(s.clock.Now())
	}
	return nil
}

// checkFence returns an error wrapping ErrLeaseLost unless f is zero or
// its lease on p is live. Called with s.mu held.
func (s *MemoryStore) checkFence(p PartitionRef, f Fence) error {
	if f.IsZero() {
		return nil
	}
	if l, ok := s.leases[p]; ok && l.member == f.Member && l.token == f.Token && l.expires.After(s.clock.Now()) {
		return nil
	}
	return FenceError(p, f)
}

// SetCursor implements [CursorStore].
func (s *MemoryStore) SetCursor(ctx context.Context, p PartitionRef, seq uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.group(p.Topic, p.Group)
	g.parts[p.Partition] = struct{}{}
	g.touch(s.clock.Now())
	s.cursors[p] = seq
	return nil
}

// Heartbeat implements [LeaseStore].
func (s *MemoryStore) Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	stamp := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heartbeat(topic, group, member, ttl, stamp)
}

// memTombs are the tombstones of members that left: when each left, for
// memLeftKeep or until memMaxTombs newer ones are kept, the oldest going
// first. A heartbeat of the memory store waits only for the store's lock,
// so a tombstone is needed for as long as a call can wait there; bounded,
// a store whose groups come and go keeps no more than memMaxTombs.
type memTombs struct {
	at    map[memberKey]time.Time
	queue []memTomb // oldest first from head
	head  int
}

type memberKey struct {
	groupKey
	member string
}

type memTomb struct {
	m  memberKey
	at time.Time
}

const (
	memLeftKeep = 10 * time.Minute
	memMaxTombs = 1024
)

// add keeps the tombstone of m, which left at now.
func (t *memTombs) add(m memberKey, now time.Time) {
	if t.at == nil {
		t.at = make(map[memberKey]time.Time)
	}
	for t.head < len(t.queue) && (len(t.queue)-t.head >= memMaxTombs || now.Sub(t.queue[t.head].at) > memLeftKeep) {
		old := t.queue[t.head]
		if t.at[old.m].Equal(old.at) { // not left again since
			delete(t.at, old.m)
		}
		t.queue[t.head] = memTomb{}
		t.head++
	}
	if t.head > len(t.queue)/2 {
		t.queue = append(t.queue[:0], t.queue[t.head:]...)
		t.head = 0
	}
	t.queue = append(t.queue, memTomb{m, now})
	t.at[m] = now
}

// refuses reports whether m left at or after stamp.
func (t *memTombs) refuses(m memberKey, stamp time.Time) bool {
	at, ok := t.at[m]
	return ok && !at.Before(stamp)
}

// heartbeat is Heartbeat with s.mu held, stamped with the time the call
// began. A member whose tombstone is not older than stamp left after the
// heartbeat began: it is refused, and nothing changes.
func (s *MemoryStore) heartbeat(topic, group, member string, ttl time.Duration, stamp time.Time) ([]string, error) {
	now := s.clock.Now()
	k := groupKey{topic, group}
	if s.left.refuses(memberKey{k, member}, stamp) {
		return nil, fmt.Errorf("event: heartbeat of %q in %q/%q: the member has left the group", member, topic, group)
	}
	ms := s.members[k]
	if ms == nil {
		ms = make(map[string]time.Time)
		s.members[k] = ms
	}
	ms[member] = stamp.Add(ttl)
	if g := s.groups[topic][group]; g != nil {
		g.touch(stamp.Add(ttl))
	}
	live := make([]string, 0, len(ms))
	for m, exp := range ms {
		if exp.After(now) {
			live = append(live, m)
		} else {
			delete(ms, m)
		}
	}
	slices.Sort(live)
	return live, nil
}

// Leave implements [LeaseStore]. The member's tombstone, kept
// memLeftKeep, refuses a Heartbeat or Renew of it that began before the
// Leave and took the store's lock after it.
func (s *MemoryStore) Leave(ctx context.Context, topic, group, member string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	k := groupKey{topic, group}
	delete(s.members[k], member)
	s.left.add(memberKey{k, member}, now)
	if g := s.groups[topic][group]; g != nil {
		g.touch(now)
	}
	if len(s.members[k]) == 0 {
		delete(s.members, k)
	}
	return nil
}

// AcquireLease implements [LeaseStore].
func (s *MemoryStore) AcquireLease(ctx context.Context, p PartitionRef, member string, ttl time.Duration) (uint64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	tok, ok := s.acquire(p, member, ttl)
	return tok, ok, nil
}

// acquire is AcquireLease with s.mu held.
func (s *MemoryStore) acquire(p PartitionRef, member string, ttl time.Duration) (uint64, bool) {
	now := s.clock.Now()
	l, ok := s.leases[p]
	live := ok && l.expires.After(now)
	if live && l.member != member {
		return 0, false
	}
	if !ok || l.member != member {
		s.leaseTok++
		l.token = s.leaseTok
	}
	l.member, l.expires = member, now.Add(ttl)
	s.leases[p] = l
	return l.token, true
}

// Renew implements [LeaseRenewer]: the heartbeat and the leases under one
// hold of the store's lock.
func (s *MemoryStore) Renew(ctx context.Context, topic, group, member string, ttl time.Duration, parts []int) ([]string, []LeaseGrant, error) {
	if err := CheckRenewParts(parts); err != nil {
		return nil, nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	stamp := s.clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	members, err := s.heartbeat(topic, group, member, ttl, stamp)
	if err != nil {
		return nil, nil, err // refused: no lease renewed
	}
	grants := make([]LeaseGrant, len(parts))
	for i, p := range parts {
		tok, ok := s.acquire(PartitionRef{Topic: topic, Group: group, Partition: p}, member, ttl)
		grants[i] = LeaseGrant{Partition: p, Token: tok, Held: ok}
	}
	return members, grants, nil
}

// ReleaseLease implements [LeaseStore].
func (s *MemoryStore) ReleaseLease(ctx context.Context, p PartitionRef, member string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[p]; ok && l.member == member {
		delete(s.leases, p)
	}
	return nil
}
