// Package mongotable keeps a changelog table: a MongoDB collection equal
// to the latest value per key of a topic, as Kafka Streams' KTable or a
// compacted topic materialised.
//
// A [Table] consumes its topic with a consumer group and, per batch of
// events, writes each key's newest event: an upsert of the row {_id: key,
// seq, value} for a payload, a delete for a tombstone (a null payload).
// Only a higher seq wins: an upsert or a delete applies only to a row with
// a lower seq, and the seq of every delete is kept in a companion
// collection (<table>_tombstones) that puts at or below it skip, so that
// redeliveries, replays and batches applied out of order change nothing.
// The batch's events are acked after the batch is written; a crash before
// leaves them to be delivered again.
//
// Rows are keyed by _id (the record's key), the one filter the bundled
// test server pushes down. A JSON payload is stored decoded (objects as
// documents, numbers as doubles) in value; a binary one as bytes with its
// content_type. Events without a key are acked and ignored.
//
// [Table.Rebuild] replays the topic from its first event into new
// collections and swaps them in with renameCollection (dropTarget; on a
// server without it, such as the bundled test server, a drop then a
// rename). The lag of the
// table is its group's ([Table.Lag]; the ops endpoints show it as the lag
// of group [Config.Group]).
//
// One Table writes a collection at a time per key: several processes may
// run Tables of one table, as members of its group, since a key's events
// belong to one partition and a partition to one member.
package mongotable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/projector/internal/changelog"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Defaults of [Config].
const (
	DefaultBatchSize     = 256
	DefaultFlushInterval = 20 * time.Millisecond
)

// ErrInvalid is wrapped by every error about a bad setting; the message
// names the field.
var ErrInvalid = errors.New("mongotable: invalid argument")

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// Config configures a [Table]. The zero value of every field but Bus,
// Topic, DB and Collection means its default.
type Config struct {
	Bus   *event.Bus
	Topic string
	// DB and Collection name the table.
	DB         *mongo.Database
	Collection string
	// Group is the consumer group (default "changelog.<Collection>").
	Group string
	// BatchSize bounds the events of one write (default 256), and
	// FlushInterval how long a batch waits for more (default 20ms).
	BatchSize     int
	FlushInterval time.Duration
	// Subscribe are options of the group's subscription (the table sets
	// ManualAck, FromEarliest and a MaxInFlight of 2*BatchSize unless
	// given).
	Subscribe []event.SubscribeOption
	// Logger receives write errors; nil discards them.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Group == "" {
		c.Group = "changelog." + c.Collection
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem of c, joined.
func (c Config) Validate() error {
	var errs []error
	if c.Bus == nil {
		errs = append(errs, invalid("Bus", "nil"))
	}
	if err := event.ValidateTopic(c.Topic); err != nil {
		errs = append(errs, err)
	}
	if c.DB == nil {
		errs = append(errs, invalid("DB", "nil"))
	}
	if c.Collection == "" {
		errs = append(errs, invalid("Collection", "empty"))
	}
	if c.Group != "" {
		if err := event.ValidateGroup(c.Group); err != nil {
			errs = append(errs, err)
		}
	}
	if c.BatchSize < 0 {
		errs = append(errs, invalid("BatchSize", "negative"))
	}
	if c.FlushInterval < 0 {
		errs = append(errs, invalid("FlushInterval", "negative"))
	}
	return errors.Join(errs...)
}

// Table keeps a collection equal to the latest value per key of a topic.
type Table struct {
	cfg Config
	// mu is held while a batch is written and while Rebuild swaps, so a
	// batch never straddles a swap.
	mu sync.Mutex
	// fail, set by tests, is called at points of each write of a batch
	// (0 before it, 1 after the tombstones, 2 after half the rows); an
	// error stops the write there, as a crash would.
	fail func(point int) error
}

// New returns a Table for cfg; Run starts it.
func New(cfg Config) (*Table, error) {
	cfg.Subscribe = append([]event.SubscribeOption(nil), cfg.Subscribe...)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	if err := event.ValidateGroup(cfg.Group); err != nil {
		return nil, err
	}
	return &Table{cfg: cfg}, nil
}

// Group returns the consumer group of the table.
func (t *Table) Group() string { return t.cfg.Group }

// Lag returns the status of the table's group ([event.Bus.GroupStatus]):
// its lag (Lag, LagMs), cursors and members.
func (t *Table) Lag(ctx context.Context) (event.GroupStatus, error) {
	return t.cfg.Bus.GroupStatus(ctx, t.cfg.Topic, t.cfg.Group)
}

func (t *Table) rows() *mongo.Collection { return t.cfg.DB.Collection(t.cfg.Collection) }
func (t *Table) tombs() *mongo.Collection {
	return t.cfg.DB.Collection(t.cfg.Collection + "_tombstones")
}

// Run consumes the topic and writes the table until ctx ends or a write
// fails; it returns ctx's error or the write's. Deliveries not written
// go back to the group when Run returns.
func (t *Table) Run(ctx context.Context) error {
	return changelog.Consumer{
		Bus: t.cfg.Bus, Topic: t.cfg.Topic, Group: t.cfg.Group,
		BatchSize: t.cfg.BatchSize, FlushInterval: t.cfg.FlushInterval, Subscribe: t.cfg.Subscribe,
		Name: "mongotable", Table: t.cfg.Collection, Logger: t.cfg.Logger,
		Write: func(ctx context.Context, recs []event.Record) error {
			return t.write(ctx, t.rows(), t.tombs(), recs)
		},
	}.Run(ctx)
}

// write applies recs to the table: for each key its newest record, unless
// a row or a tombstone of a higher seq is already there.
func (t *Table) write(ctx context.Context, rows, tombs *mongo.Collection, recs []event.Record) error {
	keys, newest := changelog.Newest(recs)
	if len(keys) == 0 {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.writeLocked(ctx, rows, tombs, keys, newest)
}

func (t *Table) crash(point int) error {
	if t.fail == nil {
		return nil
	}
	return t.fail(point)
}

func (t *Table) writeLocked(ctx context.Context, rows, tombs *mongo.Collection, keys []string, newest map[string]event.Record) error {
	if err := t.crash(0); err != nil {
		return err
	}
	deleted, err := tombSeqs(ctx, tombs, keys)
	if err != nil {
		return err
	}
	var rowOps, tombOps []mongo.WriteModel
	for _, k := range keys {
		r := newest[k]
		if r.Seq <= deleted[k] {
			continue
		}
		older := bson.D{{Key: "_id", Value: k}, {Key: "seq", Value: bson.D{{Key: "$lt", Value: int64(r.Seq)}}}}
		if changelog.IsTombstone(r) {
			tombOps = append(tombOps, mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: k}}).
				SetUpdate(bson.D{{Key: "$max", Value: bson.D{{Key: "seq", Value: int64(r.Seq)}}}}).SetUpsert(true))
			rowOps = append(rowOps, mongo.NewDeleteOneModel().SetFilter(older))
			continue
		}
		update, err := rowUpdate(r)
		if err != nil {
			return err
		}
		rowOps = append(rowOps, mongo.NewUpdateOneModel().SetFilter(older).SetUpdate(update).SetUpsert(true))
	}
	// Tombstones first: a put they cover is then refused by a later batch.
	if err := bulk(ctx, tombs, tombOps); err != nil {
		return err
	}
	if err := t.crash(1); err != nil {
		return err
	}
	half := len(rowOps) / 2
	if err := bulk(ctx, rows, rowOps[:half]); err != nil {
		return err
	}
	if err := t.crash(2); err != nil {
		return err
	}
	return bulk(ctx, rows, rowOps[half:])
}

// bulk runs ops unordered; a duplicate key (an upsert whose row has a
// higher seq already) is the rule working, not an error.
func bulk(ctx context.Context, c *mongo.Collection, ops []mongo.WriteModel) error {
	if len(ops) == 0 {
		return nil
	}
	_, err := c.BulkWrite(ctx, ops, options.BulkWrite().SetOrdered(false))
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) && bwe.WriteConcernError == nil {
		for _, we := range bwe.WriteErrors {
			if we.Code != 11000 {
				return fmt.Errorf("mongotable: write %s: %w", c.Name(), err)
			}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("mongotable: write %s: %w", c.Name(), err)
	}
	return nil
}

func tombSeqs(ctx context.Context, tombs *mongo.Collection, keys []string) (map[string]uint64, error) {
	cur, err := tombs.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: keys}}}})
	if err != nil {
		return nil, fmt.Errorf("mongotable: read tombstones: %w", err)
	}
	var docs []struct {
		ID  string `bson:"_id"`
		Seq int64  `bson:"seq"`
	}
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("mongotable: read tombstones: %w", err)
	}
	out := make(map[string]uint64, len(docs))
	for _, d := range docs {
		out[d.ID] = uint64(d.Seq)
	}
	return out, nil
}

// rowUpdate is the update that makes r's row.
func rowUpdate(r event.Record) (bson.D, error) {
	d := bson.D{{Key: "seq", Value: int64(r.Seq)}, {Key: "ts", Value: r.TS}}
	if r.IsBinary() {
		d = append(d, bson.E{Key: "value", Value: bson.Binary{Data: r.Payload}}, bson.E{Key: "content_type", Value: r.ContentType})
		return bson.D{{Key: "$set", Value: d}}, nil
	}
	var v any
	if err := json.Unmarshal(r.Payload, &v); err != nil {
		return nil, fmt.Errorf("mongotable: record %s: payload: %w", r.ID, err)
	}
	d = append(d, bson.E{Key: "value", Value: v})
	return bson.D{{Key: "$set", Value: d}, {Key: "$unset", Value: bson.D{{Key: "content_type", Value: ""}}}}, nil
}

// Rebuild replays the topic from its first event into new collections and
// swaps them in for the table (renameCollection with dropTarget). A
// running Table of this process pauses its writes for the swap; its
// group's cursor does not move.
func (t *Table) Rebuild(ctx context.Context) error {
	name := t.cfg.Collection + "_rebuild"
	rows, tombs := t.cfg.DB.Collection(name), t.cfg.DB.Collection(name+"_tombstones")
	for _, c := range []*mongo.Collection{rows, tombs} {
		if err := c.Drop(ctx); err != nil {
			return fmt.Errorf("mongotable: rebuild: drop %s: %w", c.Name(), err)
		}
		// Created even if empty, so that the swap always has a source.
		if err := t.cfg.DB.CreateCollection(ctx, c.Name()); err != nil {
			return fmt.Errorf("mongotable: rebuild: create %s: %w", c.Name(), err)
		}
	}
	var after uint64
	catchUp := func(locked bool) error {
		var err error
		after, err = changelog.Replay(ctx, "mongotable", t.cfg.Bus.Store(), t.cfg.Topic, after, t.cfg.BatchSize, func(recs []event.Record) error {
			keys, newest := changelog.Newest(recs)
			if len(keys) == 0 {
				return nil
			}
			if !locked {
				t.mu.Lock()
				defer t.mu.Unlock()
			}
			return t.writeLocked(ctx, rows, tombs, keys, newest)
		})
		return err
	}
	if err := catchUp(false); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := catchUp(true); err != nil {
		return err
	}
	admin := t.cfg.DB.Client().Database("admin")
	db := t.cfg.DB.Name()
	for from, to := range map[string]string{name: t.cfg.Collection, name + "_tombstones": t.cfg.Collection + "_tombstones"} {
		rename := bson.D{{Key: "renameCollection", Value: db + "." + from}, {Key: "to", Value: db + "." + to}, {Key: "dropTarget", Value: true}}
		err := admin.RunCommand(ctx, rename).Err()
		if isNotImplemented(err) {
			// A server without dropTarget (the bundled test server): the
			// table is missing between the drop and the rename.
			if err = t.cfg.DB.Collection(to).Drop(ctx); err == nil {
				err = admin.RunCommand(ctx, rename[:2]).Err()
			}
		}
		if err != nil {
			return fmt.Errorf("mongotable: rebuild: rename %s to %s: %w", from, to, err)
		}
	}
	return nil
}

// isNotImplemented reports a command the server does not implement.
func isNotImplemented(err error) bool {
	var ce mongo.CommandError
	return errors.As(err, &ce) && (ce.Code == 238 || ce.Name == "NotImplemented")
}
