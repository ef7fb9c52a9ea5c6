package mongostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/watchhub"
)

// Store is an [event.Store], [event.CursorStore], [event.LeaseStore],
// [event.GroupStateStore], [event.TopicStore], [event.GroupStore],
// [event.Notifier], [event.KeyStore], [event.Pruner] and [event.Lister]
// in MongoDB. It is safe for concurrent use, also by several processes.
type Store struct {
	client  *mongo.Client
	owned   bool // made by Connect: Close disconnects it
	cfg     Config
	log     *slog.Logger
	events  *mongo.Collection
	latest  *mongo.Collection
	topics  *mongo.Collection
	cursors *mongo.Collection
	members *mongo.Collection
	gstate  *mongo.Collection
	groups  *mongo.Collection

	gsettings *mongo.Collection // see groupsettings.go

	sumMu      sync.Mutex
	sumPending map[string]*summaryDelta // by topic; see summary.go
	sumNext    chan struct{}            // closed when the summary writer's next round is written; nil when none runs
	sumKick    chan struct{}            // (1) asks the summary writer for its next round now

	groupsMu    sync.Mutex
	groupsKnown map[string]bool // "<topic>/<group>" added to groups by this Store

	ctx    context.Context // ends on Close; bounds background writes
	cancel context.CancelFunc
	wg     sync.WaitGroup // group-commit writers
	quit   chan struct{}  // closed by Close: pollers stop
	pollWG sync.WaitGroup

	hub *watchhub.Hub // the watchers of Watch and their pollers

	mu        sync.Mutex
	closed    bool
	appenders map[string]*appender
	indexed   bool // the unique indexes of events were seen

	cacheMu sync.Mutex
	caches  map[string]*recentCache

	badMu   sync.Mutex
	badSeen map[string]bool // documents already dead-lettered, by topic and _id

	afterFenceCheck  func() // tests: runs between the check and the write of a fenced group-state write
	afterExpireCheck func() // tests: runs between ExpireGroup's check and its conditional delete
}

var (
	_ event.Store       = (*Store)(nil)
	_ event.CursorStore = (*Store)(nil)
	_ event.LeaseStore  = (*Store)(nil)
	_ event.KeyStore    = (*Store)(nil)
	_ event.Pruner      = (*Store)(nil)
	_ event.Lister      = (*Store)(nil)

	_ event.GroupStateStore = (*Store)(nil)
)

// Collection names, after Config.CollectionPrefix.
const (
	EventsCollection  = "events"
	LatestCollection  = "latest"
	TopicsCollection  = "topics"
	CursorsCollection = "cursors"
	MembersCollection = "members"
	// LeasesCollection held the partition leases of versions before
	// fenced writes.
	//
	// Deprecated: leases are kept in the cursor documents; the store does
	// not use this collection, which can be dropped once no process of
	// such a version runs.
	LeasesCollection = "leases"

	GroupStateCollection    = "groupstate"
	GroupsCollection        = "groups"
	GroupSettingsCollection = "groupsettings"
)

// New returns a Store over client. It does no I/O: call
// [Store.EnsureIndexes] once before use (the unique indexes are part of
// the store's correctness). Close does not disconnect client.
func New(client *mongo.Client, cfg Config) (*Store, error) {
	if client == nil {
		return nil, invalid("client", "nil")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	db := client.Database(cfg.Database, options.Database().
		SetWriteConcern(cfg.WriteConcern).
		SetReadConcern(cfg.ReadConcern).
		SetReadPreference(readpref.Primary()))
	s := &Store{
		client:  client,
		cfg:     cfg,
		log:     cfg.Logger,
		events:  db.Collection(cfg.CollectionPrefix + EventsCollection),
		latest:  db.Collection(cfg.CollectionPrefix + LatestCollection),
		topics:  db.Collection(cfg.CollectionPrefix + TopicsCollection),
		cursors: db.Collection(cfg.CollectionPrefix + CursorsCollection),
		members: db.Collection(cfg.CollectionPrefix + MembersCollection),
		gstate:  db.Collection(cfg.CollectionPrefix + GroupStateCollection),
		groups:  db.Collection(cfg.CollectionPrefix + GroupsCollection),

		gsettings: db.Collection(cfg.CollectionPrefix + GroupSettingsCollection),

		groupsKnown: make(map[string]bool),
		appenders:   make(map[string]*appender),
		badSeen:     make(map[string]bool),
		caches:      make(map[string]*recentCache),
		quit:        make(chan struct{}),
		sumKick:     make(chan struct{}, 1),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.hub = s.newHub()
	return s, nil
}

// Connect connects to the MongoDB server at uri and returns a Store over
// it. Connecting, server selection and a first ping are bounded by
// cfg.ConnectTimeout (and ctx): a bad URI is an error wrapping
// event.ErrInvalid, a server that does not answer is an error wrapping
// [ErrUnreachable]. Close disconnects the client.
func Connect(ctx context.Context, uri string, cfg Config) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	opts := options.Client().ApplyURI(uri).
		SetConnectTimeout(cfg.ConnectTimeout).
		SetServerSelectionTimeout(cfg.ConnectTimeout).
		SetAppName("promlib")
	if err := opts.Validate(); err != nil {
		return nil, invalid("uri", "%v", err)
	}
	client, err := mongo.Connect(opts)
	if err != nil {
		return nil, invalid("uri", "%v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.ConnectTimeout)
	defer cancel()
	if err := client.Ping(pctx, readpref.Primary()); err != nil {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Second)
		defer dcancel()
		_ = client.Disconnect(dctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("mongostore: connect: %w", ctx.Err())
		}
		return nil, fmt.Errorf("%w: no answer within %v: %v", ErrUnreachable, cfg.ConnectTimeout, err)
	}
	s, err := New(client, cfg)
	if err != nil {
		_ = client.Disconnect(context.Background())
		return nil, err
	}
	s.owned = true
	return s, nil
}

// Client returns the store's client.
func (s *Store) Client() *mongo.Client { return s.client }

// Database returns the store's database.
func (s *Store) Database() *mongo.Database { return s.events.Database() }

// Close stops the pollers of Watch, waits for running group-commit writes
// (until ctx ends; then they are cancelled) and, if the store was made by Connect, disconnects. Calls
// after Close return ErrClosed.
func (s *Store) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.quit)
	done := make(chan struct{})
	go func() { s.wg.Wait(); s.pollWG.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("mongostore: close: %w", ctx.Err())
	}
	s.cancel()
	<-done
	if s.owned {
		if derr := s.client.Disconnect(ctx); derr != nil {
			err = errors.Join(err, fmt.Errorf("mongostore: disconnect: %w", derr))
		}
	}
	return err
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Index names created by EnsureIndexes.
const (
	idxTopicSeq       = "topic_seq"
	idxTopicID        = "topic_id"
	idxTopicTS        = "topic_ts"
	idxLatestKey      = "topic_key"
	idxLatestSeq      = "topic_seq"
	idxCursors        = "topic_group_partition"
	idxMembers        = "topic_group_member"
	idxMembersExpires = "topic_group_expires"
)

// EnsureIndexes creates the indexes the store's queries use and the unique
// indexes its correctness rests on; it is idempotent. Run it once, e.g.
// at deployment or at start-up, before the first Append.
//
//   - events (topic, seq) unique: seq assignment, Read, Head, FirstSeqAtOrAfter.
//   - events (topic, id) unique: idempotent append, FindByID.
//   - events (topic, ts): the records Prune deletes, and the tombstones it
//     removes (they have no ts).
//   - latest (topic, key) unique: Latest, paged by key.
//   - latest (topic, seq): dropping the entries of records below the
//     retention floor.
//   - cursors (topic, group, partition) unique: a partition has one
//     document, holding its cursor and its lease, so two members cannot
//     both take a lease (see AcquireLease).
//   - members (topic, group, member) unique; (topic, group, expiresAt).
//
// It also migrates what a database of an older release lacks: a cursor
// document without a commit time (see groups.go) gets the time of this
// call, so the first start of this code counts as activity of the groups
// it finds (see [event.GroupInfo].LastActive) and an older group is not
// taken for one idle since the Unix epoch. Documents that processes of
// the older release write later get it at the next call.
func (s *Store) EnsureIndexes(ctx context.Context) (err error) {
	unique := func(name string) *options.IndexOptionsBuilder {
		return options.Index().SetName(name).SetUnique(true)
	}
	sets := []struct {
		coll   *mongo.Collection
		models []mongo.IndexModel
	}{
		{s.events, []mongo.IndexModel{
			{Keys: bson.D{{Key: fTopic, Value: 1}, {Key: fSeq, Value: 1}}, Options: unique(idxTopicSeq)},
			{Keys: bson.D{{Key: fTopic, Value: 1}, {Key: fRecID, Value: 1}}, Options: unique(idxTopicID)},
			{Keys: bson.D{{Key: fTopic, Value: 1}, {Key: fTS, Value: 1}}, Options: options.Index().SetName(idxTopicTS)},
		}},
		{s.latest, []mongo.IndexModel{
			{Keys: bson.D{{Key: fTopic, Value: 1}, {Key: fKey, Value: 1}}, Options: unique(idxLatestKey)},
			{Keys: bson.D{{Key: fTopic, Value: 1}, {Key: fSeq, Value: 1}}, Options: options.Index().SetName(idxLatestSeq)},
		}},
		{s.cursors, []mongo.IndexModel{
			{Keys: bson.D{{Key: "topic", Value: 1}, {Key: "group", Value: 1}, {Key: "partition", Value: 1}}, Options: unique(idxCursors)},
		}},
		{s.members, []mongo.IndexModel{
			{Keys: bson.D{{Key: "topic", Value: 1}, {Key: "group", Value: 1}, {Key: "member", Value: 1}}, Options: unique(idxMembers)},
			{Keys: bson.D{{Key: "topic", Value: 1}, {Key: "group", Value: 1}, {Key: "expiresAt", Value: 1}}, Options: options.Index().SetName(idxMembersExpires)},
		}},
	}
	// One at a time: FerretDB 1.24 fails a createIndexes of several
	// indexes when some of them exist already.
	defer func() {
		if err == nil {
			s.mu.Lock()
			s.indexed = true
			s.mu.Unlock()
		}
	}()
	for _, set := range sets {
		for _, m := range set.models {
			if _, err := set.coll.Indexes().CreateOne(ctx, m); err != nil {
				return fmt.Errorf("mongostore: create indexes of %s: %w", set.coll.Name(), err)
			}
		}
	}
	_, err = s.cursors.UpdateMany(ctx,
		bson.D{{Key: "seq", Value: bson.D{{Key: "$exists", Value: true}}}, {Key: fCommittedAt, Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: fCommittedAt, Value: s.cfg.Clock.Now()}}}})
	if err != nil {
		return fmt.Errorf("mongostore: give the cursors of an older release a commit time: %w", err)
	}
	return nil
}

// checkIndexes verifies, once per store, that the events collection has
// the unique indexes that seq assignment and idempotent append rest on.
func (s *Store) checkIndexes(ctx context.Context) error {
	s.mu.Lock()
	ok := s.indexed
	s.mu.Unlock()
	if ok {
		return nil
	}
	specs, err := s.events.Indexes().ListSpecifications(ctx)
	if err != nil {
		return fmt.Errorf("mongostore: list indexes of %s: %w", s.events.Name(), err)
	}
	found := 0
	for _, sp := range specs {
		if (sp.Name == idxTopicSeq || sp.Name == idxTopicID) && sp.Unique != nil && *sp.Unique {
			found++
		}
	}
	if found < 2 {
		return fmt.Errorf("%w: collection %s", ErrNoIndexes, s.events.Name())
	}
	s.mu.Lock()
	s.indexed = true
	s.mu.Unlock()
	return nil
}

// topicFilter returns {topic: topic} with more conditions.
func topicFilter(topic string, more ...bson.E) bson.D {
	return append(bson.D{{Key: fTopic, Value: topic}}, more...)
}

func seqValue(seq uint64) (int64, error) {
	if seq > 1<<63-1 {
		return 0, invalid("seq", "%d is beyond int64", seq)
	}
	return int64(seq), nil
}

// Read implements [event.Store]. Records come in seq order from the
// (topic, seq) index. A document that does not decode is reported (a
// warning with its _id), appended to the dead-letter topic once (see
// Config.DeadLetterTopic) and skipped, so a consumer neither stops at it
// nor loops on it. Read fails rather than skip a document it could not
// dead-letter.
func (s *Store) Read(ctx context.Context, topic string, afterSeq uint64, limit int) ([]event.Record, error) {
	if limit <= 0 {
		return nil, invalid("limit", "%d, want at least 1", limit)
	}
	if _, err := seqValue(afterSeq); err != nil {
		return nil, err
	}
	out, next, ok, complete := s.cacheRead(topic, afterSeq, limit)
	if ok && len(out) > 0 {
		// Serve cached records only as long as no Prune can have deleted
		// them (see recentCache); read the rest from the server.
		horizon, err := s.cacheHorizon(ctx, topic)
		if err != nil {
			return nil, err
		}
		for i := range out {
			if out[i].TS < horizon {
				out, complete = out[:i], false
				if i > 0 {
					next = out[i-1].Seq
				} else {
					next = afterSeq
				}
				break
			}
		}
	}
	if ok && (len(out) == limit || complete) {
		return out, nil
	}
	if !ok {
		next = afterSeq
	}
	more, err := s.readServer(ctx, topic, next, limit-len(out))
	if err != nil {
		return nil, err
	}
	return append(out, more...), nil
}

// readServer reads up to limit records after seq after from the server
// and adds what it learnt to the cache. Tombstones are skipped.
func (s *Store) readServer(ctx context.Context, topic string, after uint64, limit int) ([]event.Record, error) {
	var (
		out   []event.Record
		bound any = int64(after) // the seq the next query starts after
		last      = after        // the highest integer seq seen
	)
	defer func() {
		if last > after {
			kept := make([]event.Record, len(out))
			for i := range out {
				kept[i] = cloneRecord(&out[i])
			}
			s.cacheAdd(topic, after, last, kept)
		}
	}()
	for {
		want := limit - len(out)
		cur, err := s.events.Find(ctx,
			topicFilter(topic, bson.E{Key: fSeq, Value: bson.D{{Key: "$gt", Value: bound}}}, notGone),
			options.Find().SetSort(bson.D{{Key: fSeq, Value: 1}}).SetLimit(int64(want)).SetBatchSize(int32(min(want, 10000))))
		if err != nil {
			return nil, fmt.Errorf("mongostore: read %q after %d: %w", topic, after, err)
		}
		n, skipped := 0, 0
		for cur.Next(ctx) {
			n++
			rec, derr := decodeRecord(topic, cur.Current)
			if derr == nil {
				out = append(out, rec)
				bound, last = int64(rec.Seq), rec.Seq
				continue
			}
			var bad *badDoc
			if !errors.As(derr, &bad) {
				_ = cur.Close(ctx)
				return nil, derr
			}
			if err := s.deadLetterDoc(ctx, topic, bad, cur.Current); err != nil {
				_ = cur.Close(ctx)
				return nil, err
			}
			skipped++
			// Continue after the bad document's own seq value, whatever
			// number it is.
			if v := cur.Current.Lookup(fSeq); v.Type == bson.TypeDouble || v.Type == bson.TypeInt32 || v.Type == bson.TypeInt64 {
				bound = v
			}
			if bad.seq > last {
				last = bad.seq
			}
		}
		err = cur.Err()
		_ = cur.Close(ctx)
		if err != nil {
			return nil, fmt.Errorf("mongostore: read %q: %w", topic, err)
		}
		// Fill the page up again when bad documents took room in it.
		if skipped == 0 || n < want || len(out) >= limit {
			return out, nil
		}
	}
}

// deadLetterDoc reports a document that does not decode and appends it (as
// relaxed extended JSON) to the topic's dead-letter topic, once.
func (s *Store) deadLetterDoc(ctx context.Context, topic string, bad *badDoc, raw bson.Raw) error {
	key := topic + "\x00" + bad.docID
	s.badMu.Lock()
	seen := s.badSeen[key]
	s.badMu.Unlock()
	if seen {
		return nil
	}
	dlq := s.cfg.DeadLetterTopic(topic)
	s.log.Warn("mongostore: document does not decode; moving it to the dead-letter topic",
		"topic", topic, "_id", bad.docID, "seq", bad.seq, "id", bad.recID, "dlq", dlq, "err", bad.reason)
	if err := event.ValidateTopic(dlq); err != nil {
		return fmt.Errorf("mongostore: dead-letter topic of %q: %w", topic, err)
	}
	payload, err := bson.MarshalExtJSON(raw, false, false)
	if err != nil {
		payload = []byte("null")
	}
	h := map[string]string{
		event.HeaderDLQReason: bad.reason.Error(),
		event.HeaderDLQTopic:  topic,
		event.HeaderDLQID:     bad.recID,
		HeaderDocID:           bad.docID,
	}
	if bad.seq > 0 {
		h[event.HeaderDLQSeq] = strconv.FormatUint(bad.seq, 10)
	}
	rec := event.Record{
		ID:      uuid.NewSHA1(badDocNamespace, []byte(key)).String(),
		TS:      s.cfg.Clock.Now().UnixMilli(),
		Topic:   dlq,
		Headers: h,
		Payload: payload,
	}
	if bad.recID != "" {
		rec.CausedBy = []string{bad.recID}
	}
	if _, err := s.Append(ctx, dlq, []event.Record{rec}); err != nil {
		return fmt.Errorf("mongostore: dead-letter undecodable document %s of %q: %w", bad.docID, topic, err)
	}
	s.badMu.Lock()
	if len(s.badSeen) > 10000 {
		clear(s.badSeen)
	}
	s.badSeen[key] = true
	s.badMu.Unlock()
	return nil
}

// HeaderDocID is set on the dead-letter record of a document that does not
// decode: the document's _id as extended JSON.
const HeaderDocID = "x-dlq-doc-id"

var badDocNamespace = uuid.MustParse("0b7f3c2e-52a4-4d51-8f0e-4be1d9a3c7a2")

// Head implements [event.Store]: the last entry of the (topic, seq) index,
// a tombstone included (Prune never removes the highest document).
func (s *Store) Head(ctx context.Context, topic string) (uint64, error) {
	h, err := s.head(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("mongostore: head of %q: %w", topic, err)
	}
	return h, nil
}

func (s *Store) head(ctx context.Context, topic string) (uint64, error) {
	var doc struct {
		Seq bson.RawValue `bson:"seq"`
	}
	err := s.events.FindOne(ctx, topicFilter(topic),
		options.FindOne().SetSort(bson.D{{Key: fSeq, Value: -1}}).SetProjection(bson.D{{Key: fSeq, Value: 1}, {Key: fID, Value: 0}})).
		Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, ok := intValue(doc.Seq)
	if !ok || n < 0 {
		return 0, fmt.Errorf("%w: topic %q: highest seq is %s", ErrBadDocument, topic, extJSON(doc.Seq))
	}
	return uint64(n), nil
}

// FindByID implements [event.Store] with the (topic, id) index. A
// tombstone that still holds the id is not found.
func (s *Store) FindByID(ctx context.Context, topic, id string) (event.Record, error) {
	raw, err := s.events.FindOne(ctx, topicFilter(topic, bson.E{Key: fRecID, Value: id})).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) || err == nil && isTombstone(raw) {
		return event.Record{}, fmt.Errorf("%w: id %q in topic %q", event.ErrNotFound, id, topic)
	}
	if err != nil {
		return event.Record{}, fmt.Errorf("mongostore: find id %q in %q: %w", id, topic, err)
	}
	return decodeRecord(topic, raw)
}

// FirstSeqAtOrAfter implements [event.Store]. Timestamps need not grow with
// seq, so the server walks the (topic, seq) index from the start and checks
// ts: the cost grows with the position of the answer (it runs once, when a
// group first starts by time).
func (s *Store) FirstSeqAtOrAfter(ctx context.Context, topic string, ms int64) (uint64, bool, error) {
	var doc struct {
		Seq bson.RawValue `bson:"seq"`
	}
	err := s.events.FindOne(ctx, topicFilter(topic, bson.E{Key: fTS, Value: bson.D{{Key: "$gte", Value: ms}}}),
		options.FindOne().SetSort(bson.D{{Key: fSeq, Value: 1}}).SetProjection(bson.D{{Key: fSeq, Value: 1}, {Key: fID, Value: 0}})).
		Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("mongostore: find ts %d in %q: %w", ms, topic, err)
	}
	n, ok := intValue(doc.Seq)
	if !ok || n < 1 {
		return 0, false, fmt.Errorf("%w: topic %q: seq %s", ErrBadDocument, topic, extJSON(doc.Seq))
	}
	return uint64(n), true, nil
}
