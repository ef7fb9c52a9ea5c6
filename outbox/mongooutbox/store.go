package mongooutbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/txn/mongotxn"
)

// Config configures a [Store].
type Config struct {
	// Collection holds the rows (default "outbox"); the lease document
	// lives in Collection+"_lease".
	Collection string
	// Name tells several outboxes in one collection pair apart in the
	// lease (default "default").
	Name string
	// Clock tells the time of leases, retries and row timestamps; nil
	// means the system clock.
	Clock clock.Clock
	// Retention is the expiry of the TTL index EnsureIndexes puts on the
	// time rows were sent (default [outbox.DefaultRetention]; negative: no
	// TTL index). Give it the drainer's Retention: the drainer deletes
	// old sent rows itself, the index only spares it the work where the
	// server has TTL indexes.
	Retention time.Duration
}

func (c *Config) setDefaults() {
	if c.Retention == 0 {
		c.Retention = outbox.DefaultRetention
	}
	if c.Collection == "" {
		c.Collection = "outbox"
	}
	if c.Name == "" {
		c.Name = "default"
	}
	c.Clock = clock.Or(c.Clock)
}

// Store is an [outbox.Store] in MongoDB. Add writes in the caller's
// transaction when ctx carries one (see [mongotxn.Runner]); without a
// transaction Add is one InsertMany, which the server may apply in part if
// it fails half way.
//
// [mongotxn.Runner]: https://pkg.go.dev/github.com/promethean/promlib/txn/mongotxn#Runner
type Store struct {
	rows  *mongo.Collection
	lease *mongo.Collection
	cfg   Config

	mu       sync.Mutex
	watchers []chan struct{}
}

var (
	_ outbox.Store    = (*Store)(nil)
	_ outbox.Notifier = (*Store)(nil)
)

// New returns an outbox in db. It does no I/O; call EnsureIndexes once.
func New(db *mongo.Database, cfg Config) (*Store, error) {
	if db == nil {
		return nil, invalid("db", "nil")
	}
	cfg.setDefaults()
	return &Store{
		rows:  db.Collection(cfg.Collection),
		lease: db.Collection(cfg.Collection + "_lease"),
		cfg:   cfg,
	}, nil
}

// EnsureIndexes creates the index the claims use, (status, order), and
// a TTL index on sent_at, the time a row was marked sent, which makes the
// server delete sent rows after Config.Retention. It reports whether the
// server accepted the TTL index; a server without TTL indexes is no
// error: it gets a plain index on sent_at, and the drainer's retention
// deletes the rows.
func (s *Store) EnsureIndexes(ctx context.Context) (ttl bool, err error) {
	_, err = s.rows.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "status", Value: 1}, {Key: "order", Value: 1}},
		Options: options.Index().SetName("status_order"),
	})
	if err != nil {
		return false, fmt.Errorf("outbox: create index: %w", err)
	}
	if s.cfg.Retention > 0 {
		ttl, err = s.ensureTTLIndex(ctx)
		if err == nil && ttl {
			return true, nil
		}
		if err != nil && !isNotSupported(err) {
			return false, err
		}
	}
	_, err = s.rows.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "sent_at", Value: 1}},
		Options: options.Index().SetName("sent_at"),
	})
	if err != nil {
		return false, fmt.Errorf("outbox: create index: %w", err)
	}
	return false, nil
}

// ensureTTLIndex creates the TTL index on sent_at, or changes its expiry
// to Config.Retention when it exists with another.
func (s *Store) ensureTTLIndex(ctx context.Context) (bool, error) {
	secs := int32(min(s.cfg.Retention.Seconds(), math.MaxInt32))
	_, err := s.rows.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "sent_at", Value: 1}},
		Options: options.Index().SetName("sent_at_ttl").SetExpireAfterSeconds(secs),
	})
	if err == nil {
		return true, nil
	}
	var ce mongo.CommandError
	if !errors.As(err, &ce) || (ce.Code != 85 && ce.Code != 86) { // IndexOptionsConflict, IndexKeySpecsConflict
		return false, fmt.Errorf("outbox: create TTL index: %w", err)
	}
	err = s.rows.Database().RunCommand(ctx, bson.D{
		{Key: "collMod", Value: s.rows.Name()},
		{Key: "index", Value: bson.D{{Key: "name", Value: "sent_at_ttl"}, {Key: "expireAfterSeconds", Value: secs}}},
	}).Err()
	if err != nil {
		return false, fmt.Errorf("outbox: change TTL index: %w", err)
	}
	return true, nil
}

// isNotSupported reports whether err says the server lacks a feature
// (here: TTL indexes).
func isNotSupported(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) && (ce.Code == 238 || ce.Code == 115 || ce.Code == 67) { // NotImplemented, CommandNotSupported, CannotCreateIndex
		return true
	}
	return strings.Contains(strings.ToLower(err.Error()), "not implemented") ||
		strings.Contains(strings.ToLower(err.Error()), "not supported")
}

type mongoRow struct {
	ID        string            `bson:"_id"`
	Order     bson.ObjectID     `bson:"order"`
	Topic     string            `bson:"topic"`
	Key       string            `bson:"key,omitempty"`
	Headers   map[string]string `bson:"headers,omitempty"`
	Payload   string            `bson:"payload"`
	TS        int64             `bson:"ts"`
	Status    outbox.Status     `bson:"status"`
	Attempts  int               `bson:"attempts"`
	LastError string            `bson:"last_error,omitempty"`
	NextAt    time.Time         `bson:"next_at"`
	Token     int64             `bson:"token"`
	SentAt    *time.Time        `bson:"sent_at,omitempty"`
}

func (m *mongoRow) row() outbox.Row {
	var sentAt time.Time
	if m.SentAt != nil {
		sentAt = *m.SentAt
	}
	return outbox.Row{
		Message: outbox.Message{ID: m.ID, Topic: m.Topic, Key: m.Key, Headers: m.Headers, Payload: []byte(m.Payload)},
		TS:      m.TS, Status: m.Status, Attempts: m.Attempts, LastError: m.LastError,
		NextAt: m.NextAt, Token: m.Token, SentAt: sentAt,
	}
}

// Watch implements [outbox.Notifier]: Adds through this store outside a
// transaction wake the watchers.
func (s *Store) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.watchers = append(s.watchers, ch)
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		s.watchers = slices.DeleteFunc(s.watchers, func(c chan struct{}) bool { return c == ch })
		s.mu.Unlock()
	}
}

// Add implements [outbox.Store].
func (s *Store) Add(ctx context.Context, msgs ...outbox.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	now := s.cfg.Clock.Now()
	docs := make([]any, len(msgs))
	for i, m := range msgs {
		r, err := outbox.NewRow(m, now)
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		docs[i] = mongoRow{
			ID: r.ID, Order: bson.NewObjectID(), Topic: r.Topic, Key: r.Key, Headers: r.Headers,
			Payload: string(r.Payload), TS: r.TS, Status: outbox.StatusPending, NextAt: time.UnixMilli(0),
		}
	}
	// Refuse ids the outbox holds before writing anything. (Two Adds of one
	// id racing each other can still store the first of a batch; inside a
	// transaction the batch is all or nothing.)
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.(mongoRow).ID
	}
	var dup mongoRow
	err := s.rows.FindOne(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}},
		options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Decode(&dup)
	switch {
	case err == nil:
		return invalid("id", "id %q is already in the outbox", dup.ID)
	case !errors.Is(err, mongo.ErrNoDocuments):
		return fmt.Errorf("outbox: add: %w", err)
	}
	if _, err := s.rows.InsertMany(ctx, docs); err != nil {
		if mongo.IsDuplicateKeyError(err) {
			return fmt.Errorf("%w: id: a message id is already in the outbox: %v", outbox.ErrInvalid, err)
		}
		return fmt.Errorf("outbox: add: %w", err)
	}
	if !mongotxn.InTransaction(ctx) {
		s.mu.Lock()
		for _, ch := range s.watchers {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		s.mu.Unlock()
	}
	return nil
}

type leaseDoc struct {
	ID      string    `bson:"_id"`
	Worker  string    `bson:"worker"`
	Token   int64     `bson:"token"`
	Expires time.Time `bson:"expires"`
}

// AcquireLease implements [outbox.Store].
func (s *Store) AcquireLease(ctx context.Context, worker string, ttl time.Duration) (int64, bool, error) {
	if worker == "" {
		return 0, false, invalid("worker", "must not be empty")
	}
	now := s.cfg.Clock.Now()
	after := options.FindOneAndUpdate().SetReturnDocument(options.After)
	var l leaseDoc
	// Renew our own live lease.
	err := s.lease.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: s.cfg.Name}, {Key: "worker", Value: worker}, {Key: "expires", Value: bson.D{{Key: "$gt", Value: now}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "expires", Value: now.Add(ttl)}}}}, after).Decode(&l)
	if err == nil {
		return l.Token, true, nil
	}
	if !errors.Is(err, mongo.ErrNoDocuments) {
		return 0, false, fmt.Errorf("outbox: renew lease: %w", err)
	}
	// Take over a free or expired one: a new token.
	err = s.lease.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: s.cfg.Name}, {Key: "$or", Value: bson.A{
			bson.D{{Key: "worker", Value: ""}},
			bson.D{{Key: "expires", Value: bson.D{{Key: "$lte", Value: now}}}},
		}}},
		bson.D{
			{Key: "$set", Value: bson.D{{Key: "worker", Value: worker}, {Key: "expires", Value: now.Add(ttl)}}},
			{Key: "$inc", Value: bson.D{{Key: "token", Value: int64(1)}}},
		}, after).Decode(&l)
	if err == nil {
		return l.Token, true, nil
	}
	if !errors.Is(err, mongo.ErrNoDocuments) {
		return 0, false, fmt.Errorf("outbox: take lease: %w", err)
	}
	// No lease document yet.
	_, err = s.lease.InsertOne(ctx, leaseDoc{ID: s.cfg.Name, Worker: worker, Token: 1, Expires: now.Add(ttl)})
	switch {
	case err == nil:
		return 1, true, nil
	case mongo.IsDuplicateKeyError(err):
		return 0, false, nil // someone else holds it
	}
	return 0, false, fmt.Errorf("outbox: create lease: %w", err)
}

// ReleaseLease implements [outbox.Store].
func (s *Store) ReleaseLease(ctx context.Context, worker string, token int64) error {
	_, err := s.lease.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: s.cfg.Name}, {Key: "worker", Value: worker}, {Key: "token", Value: token}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "worker", Value: ""}}}})
	if err != nil {
		return fmt.Errorf("outbox: release lease: %w", err)
	}
	return nil
}

// Claim implements [outbox.Store]. It pages through pending rows in order,
// holding back the rows of ordering keys whose earlier row is not due.
func (s *Store) Claim(ctx context.Context, token int64, n int) ([]outbox.Row, error) {
	if n <= 0 {
		return nil, invalid("n", "%d, want at least 1", n)
	}
	now := s.cfg.Clock.Now()
	err := s.lease.FindOne(ctx, bson.D{
		{Key: "_id", Value: s.cfg.Name}, {Key: "token", Value: token}, {Key: "worker", Value: bson.D{{Key: "$ne", Value: ""}}},
		{Key: "expires", Value: bson.D{{Key: "$gt", Value: now}}},
	}).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, outbox.ErrNotLeader
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: check lease: %w", err)
	}
	held := make(map[string]bool)
	var out []outbox.Row
	var after bson.ObjectID
	page := int64(max(4*n, 64))
	for len(out) < n {
		filter := bson.D{{Key: "status", Value: outbox.StatusPending}}
		if !after.IsZero() {
			filter = append(filter, bson.E{Key: "order", Value: bson.D{{Key: "$gt", Value: after}}})
		}
		cur, err := s.rows.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "order", Value: 1}}).SetLimit(page))
		if err != nil {
			return nil, fmt.Errorf("outbox: claim: %w", err)
		}
		var docs []mongoRow
		if err := cur.All(ctx, &docs); err != nil {
			return nil, fmt.Errorf("outbox: claim: %w", err)
		}
		for i := range docs {
			r := docs[i].row()
			after = docs[i].Order
			k := r.OrderingKey()
			if len(out) == n || held[k] {
				continue
			}
			if r.NextAt.After(now) {
				held[k] = true
				continue
			}
			out = append(out, r)
		}
		if int64(len(docs)) < page {
			break
		}
	}
	return out, nil
}

// fence matches rows still pending that no newer drainer marked. The
// token condition sits in a one-branch $or, which means the same to any
// server and was measured cheaper on the bundled test server than a
// top-level range condition (see mongodedupe's Store).
func fence(token int64) bson.D {
	return bson.D{
		{Key: "status", Value: outbox.StatusPending},
		{Key: "$or", Value: bson.A{bson.D{{Key: "token", Value: bson.D{{Key: "$lte", Value: token}}}}}},
	}
}

// MarkSent implements [outbox.Store]. Rows that no longer carry token are left
// alone and reported as ErrStaleClaim; the others are marked.
func (s *Store) MarkSent(ctx context.Context, token int64, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	filter := append(bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, fence(token)...)
	res, err := s.rows.UpdateMany(ctx, filter,
		bson.D{{Key: "$set", Value: bson.D{
			{Key: "status", Value: outbox.StatusSent}, {Key: "token", Value: token}, {Key: "sent_at", Value: s.cfg.Clock.Now()},
		}}})
	if err != nil {
		return fmt.Errorf("outbox: mark sent: %w", err)
	}
	if int(res.MatchedCount) < len(ids) {
		return fmt.Errorf("%w: %d of %d rows", outbox.ErrStaleClaim, len(ids)-int(res.MatchedCount), len(ids))
	}
	return nil
}

// MarkRetry implements [outbox.Store].
func (s *Store) MarkRetry(ctx context.Context, token int64, r outbox.Retry) error {
	set := bson.D{{Key: "last_error", Value: r.Err}, {Key: "next_at", Value: r.Next}, {Key: "token", Value: token}}
	if r.Final {
		set = append(set, bson.E{Key: "status", Value: outbox.StatusFailed})
	}
	res, err := s.rows.UpdateOne(ctx, append(bson.D{{Key: "_id", Value: r.ID}}, fence(token)...),
		bson.D{{Key: "$set", Value: set}, {Key: "$inc", Value: bson.D{{Key: "attempts", Value: 1}}}})
	if err != nil {
		return fmt.Errorf("outbox: mark retry: %w", err)
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("%w: row %q", outbox.ErrStaleClaim, r.ID)
	}
	return nil
}

// DeleteSent implements [outbox.Store]: it finds up to limit sent rows,
// oldest first, and deletes them.
func (s *Store) DeleteSent(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit <= 0 {
		return 0, invalid("limit", "%d, want at least 1", limit)
	}
	sent := bson.D{
		{Key: "status", Value: outbox.StatusSent},
		{Key: "sent_at", Value: bson.D{{Key: "$lt", Value: before}}},
	}
	cur, err := s.rows.Find(ctx, sent, options.Find().
		SetSort(bson.D{{Key: "sent_at", Value: 1}}).SetLimit(int64(limit)).SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return 0, fmt.Errorf("outbox: delete sent: %w", err)
	}
	var docs []struct {
		ID string `bson:"_id"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return 0, fmt.Errorf("outbox: delete sent: %w", err)
	}
	if len(docs) == 0 {
		return 0, nil
	}
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	res, err := s.rows.DeleteMany(ctx, append(bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, sent...))
	if err != nil {
		return 0, fmt.Errorf("outbox: delete sent: %w", err)
	}
	return int(res.DeletedCount), nil
}

// Stats implements [outbox.Store].
func (s *Store) Stats(ctx context.Context) (outbox.Stats, error) {
	var st outbox.Stats
	for _, c := range []struct {
		status outbox.Status
		n      *int64
	}{{outbox.StatusPending, &st.Pending}, {outbox.StatusSent, &st.Sent}, {outbox.StatusFailed, &st.Failed}} {
		n, err := s.rows.CountDocuments(ctx, bson.D{{Key: "status", Value: c.status}})
		if err != nil {
			return outbox.Stats{}, fmt.Errorf("outbox: stats: %w", err)
		}
		*c.n = n
	}
	return st, nil
}

// Row returns the row with the given id.
func (s *Store) Row(ctx context.Context, id string) (outbox.Row, error) {
	var m mongoRow
	if err := s.rows.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&m); err != nil {
		return outbox.Row{}, fmt.Errorf("outbox: row %q: %w", id, err)
	}
	return m.row(), nil
}

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", outbox.ErrInvalid, field, fmt.Sprintf(format, args...))
}
