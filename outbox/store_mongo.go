package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// MongoConfig configures a [MongoStore].
type MongoConfig struct {
	// Collection holds the rows (default "outbox"); the lease document
	// lives in Collection+"_lease".
	Collection string
	// Name tells several outboxes in one collection pair apart in the
	// lease (default "default").
	Name string
}

func (c *MongoConfig) setDefaults() {
	if c.Collection == "" {
		c.Collection = "outbox"
	}
	if c.Name == "" {
		c.Name = "default"
	}
}

// MongoStore is a [Store] in MongoDB.
//
// # Transactions
//
// Add takes the caller's context: when it carries a session in a
// transaction, the rows are written in that transaction and become
// visible, to drainers too, only when it commits.
//
//	sess, _ := client.StartSession()
//	defer sess.EndSession(ctx)
//	_, err := sess.WithTransaction(ctx, func(ctx context.Context) (any, error) {
//		if _, err := orders.InsertOne(ctx, order); err != nil {
//			return nil, err
//		}
//		return nil, ob.Add(ctx, outbox.Message{Topic: "order.created", Payload: p})
//	})
//	drainer.Notify() // publish now rather than at the next poll
//
// Without a transaction Add is one InsertMany, which the server may apply
// in part if it fails half way.
type MongoStore struct {
	rows  *mongo.Collection
	lease *mongo.Collection
	cfg   MongoConfig

	mu       sync.Mutex
	watchers []chan struct{}
}

var (
	_ Store    = (*MongoStore)(nil)
	_ Notifier = (*MongoStore)(nil)
)

// NewMongoStore returns an outbox in db. It does no I/O; call
// EnsureIndexes once.
func NewMongoStore(db *mongo.Database, cfg MongoConfig) (*MongoStore, error) {
	if db == nil {
		return nil, invalid("db", "nil")
	}
	cfg.setDefaults()
	return &MongoStore{
		rows:  db.Collection(cfg.Collection),
		lease: db.Collection(cfg.Collection + "_lease"),
		cfg:   cfg,
	}, nil
}

// EnsureIndexes creates the index the claims use: (status, order).
func (s *MongoStore) EnsureIndexes(ctx context.Context) error {
	_, err := s.rows.Indexes().CreateOne(ctx, mongo.IndexModel{
		Keys:    bson.D{{Key: "status", Value: 1}, {Key: "order", Value: 1}},
		Options: options.Index().SetName("status_order"),
	})
	if err != nil {
		return fmt.Errorf("outbox: create index: %w", err)
	}
	return nil
}

type mongoRow struct {
	ID        string            `bson:"_id"`
	Order     bson.ObjectID     `bson:"order"`
	Topic     string            `bson:"topic"`
	Key       string            `bson:"key,omitempty"`
	Headers   map[string]string `bson:"headers,omitempty"`
	Payload   string            `bson:"payload"`
	TS        int64             `bson:"ts"`
	Status    Status            `bson:"status"`
	Attempts  int               `bson:"attempts"`
	LastError string            `bson:"last_error,omitempty"`
	NextAt    time.Time         `bson:"next_at"`
	Token     int64             `bson:"token"`
}

func (m *mongoRow) row() Row {
	return Row{
		Message: Message{ID: m.ID, Topic: m.Topic, Key: m.Key, Headers: m.Headers, Payload: []byte(m.Payload)},
		TS:      m.TS, Status: m.Status, Attempts: m.Attempts, LastError: m.LastError,
		NextAt: m.NextAt, Token: m.Token,
	}
}

// Watch implements [Notifier]: Adds through this store outside a
// transaction wake the watchers.
func (s *MongoStore) Watch() (<-chan struct{}, func()) {
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

// Add implements [Store].
func (s *MongoStore) Add(ctx context.Context, msgs ...Message) error {
	if len(msgs) == 0 {
		return nil
	}
	now := time.Now()
	docs := make([]any, len(msgs))
	for i, m := range msgs {
		r, err := newRow(m, 0, now)
		if err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
		docs[i] = mongoRow{
			ID: r.ID, Order: bson.NewObjectID(), Topic: r.Topic, Key: r.Key, Headers: r.Headers,
			Payload: string(r.Payload), TS: r.TS, Status: StatusPending, NextAt: time.UnixMilli(0),
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
			return fmt.Errorf("%w: id: a message id is already in the outbox: %v", ErrInvalid, err)
		}
		return fmt.Errorf("outbox: add: %w", err)
	}
	if mongo.SessionFromContext(ctx) == nil {
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

// AcquireLease implements [Store].
func (s *MongoStore) AcquireLease(ctx context.Context, worker string, ttl time.Duration) (int64, bool, error) {
	if worker == "" {
		return 0, false, invalid("worker", "must not be empty")
	}
	now := time.Now()
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

// ReleaseLease implements [Store].
func (s *MongoStore) ReleaseLease(ctx context.Context, worker string, token int64) error {
	_, err := s.lease.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: s.cfg.Name}, {Key: "worker", Value: worker}, {Key: "token", Value: token}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "worker", Value: ""}}}})
	if err != nil {
		return fmt.Errorf("outbox: release lease: %w", err)
	}
	return nil
}

// Claim implements [Store]. It pages through pending rows in order,
// holding back the rows of ordering keys whose earlier row is not due.
func (s *MongoStore) Claim(ctx context.Context, token int64, n int) ([]Row, error) {
	if n <= 0 {
		return nil, invalid("n", "%d, want at least 1", n)
	}
	now := time.Now()
	err := s.lease.FindOne(ctx, bson.D{
		{Key: "_id", Value: s.cfg.Name}, {Key: "token", Value: token}, {Key: "worker", Value: bson.D{{Key: "$ne", Value: ""}}},
		{Key: "expires", Value: bson.D{{Key: "$gt", Value: now}}},
	}).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, ErrNotLeader
	}
	if err != nil {
		return nil, fmt.Errorf("outbox: check lease: %w", err)
	}
	held := make(map[string]bool)
	var out []Row
	var after bson.ObjectID
	page := int64(max(4*n, 64))
	for len(out) < n {
		filter := bson.D{{Key: "status", Value: StatusPending}}
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
// top-level range condition (see dedupe's MongoStore).
func fence(token int64) bson.D {
	return bson.D{
		{Key: "status", Value: StatusPending},
		{Key: "$or", Value: bson.A{bson.D{{Key: "token", Value: bson.D{{Key: "$lte", Value: token}}}}}},
	}
}

// MarkSent implements [Store]. Rows that no longer carry token are left
// alone and reported as ErrStaleClaim; the others are marked.
func (s *MongoStore) MarkSent(ctx context.Context, token int64, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	filter := append(bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, fence(token)...)
	res, err := s.rows.UpdateMany(ctx, filter,
		bson.D{{Key: "$set", Value: bson.D{{Key: "status", Value: StatusSent}, {Key: "token", Value: token}}}})
	if err != nil {
		return fmt.Errorf("outbox: mark sent: %w", err)
	}
	if int(res.MatchedCount) < len(ids) {
		return fmt.Errorf("%w: %d of %d rows", ErrStaleClaim, len(ids)-int(res.MatchedCount), len(ids))
	}
	return nil
}

// MarkRetry implements [Store].
func (s *MongoStore) MarkRetry(ctx context.Context, token int64, id, errMsg string, next time.Time, final bool) error {
	set := bson.D{{Key: "last_error", Value: errMsg}, {Key: "next_at", Value: next}, {Key: "token", Value: token}}
	if final {
		set = append(set, bson.E{Key: "status", Value: StatusFailed})
	}
	res, err := s.rows.UpdateOne(ctx, append(bson.D{{Key: "_id", Value: id}}, fence(token)...),
		bson.D{{Key: "$set", Value: set}, {Key: "$inc", Value: bson.D{{Key: "attempts", Value: 1}}}})
	if err != nil {
		return fmt.Errorf("outbox: mark retry: %w", err)
	}
	if res.MatchedCount == 0 {
		return fmt.Errorf("%w: row %q", ErrStaleClaim, id)
	}
	return nil
}

// Stats implements [Store].
func (s *MongoStore) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	for _, c := range []struct {
		status Status
		n      *int64
	}{{StatusPending, &st.Pending}, {StatusSent, &st.Sent}, {StatusFailed, &st.Failed}} {
		n, err := s.rows.CountDocuments(ctx, bson.D{{Key: "status", Value: c.status}})
		if err != nil {
			return Stats{}, fmt.Errorf("outbox: stats: %w", err)
		}
		*c.n = n
	}
	return st, nil
}

// Row returns the row with the given id.
func (s *MongoStore) Row(ctx context.Context, id string) (Row, error) {
	var m mongoRow
	if err := s.rows.FindOne(ctx, bson.D{{Key: "_id", Value: id}}).Decode(&m); err != nil {
		return Row{}, fmt.Errorf("outbox: row %q: %w", id, err)
	}
	return m.row(), nil
}
