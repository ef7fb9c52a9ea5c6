package changelog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/promethean/promlib/event"
)

// Consumer consumes a topic with a consumer group and writes it in
// batches; the events of a batch are acked after Write returns.
type Consumer struct {
	Bus   *event.Bus
	Topic string
	Group string
	// BatchSize bounds the events of one Write, and FlushInterval how long
	// a batch waits for more.
	BatchSize     int
	FlushInterval time.Duration
	// Subscribe are options of the group's subscription; the consumer
	// sets ManualAck, and FromEarliest and a MaxInFlight of 2*BatchSize
	// unless given.
	Subscribe []event.SubscribeOption
	// Name prefixes the nack reason and the log message of a failed write
	// ("mongotable"), and Table names the table in the log.
	Name   string
	Table  string
	Logger *slog.Logger
	// Write writes a batch to the table.
	Write func(ctx context.Context, recs []event.Record) error
}

// Run consumes the topic until ctx ends or a write fails; it returns ctx's
// error or the write's. The batch of a failed write is nacked; deliveries
// not written go back to the group when Run returns.
func (c Consumer) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in := make(chan *event.Delivery, c.BatchSize)
	opts := append([]event.SubscribeOption{event.FromEarliest(), event.WithMaxInFlight(2 * c.BatchSize)}, c.Subscribe...)
	opts = append(opts, event.WithManualAck())
	sub, err := c.Bus.Subscribe(ctx, c.Topic, c.Group, func(ctx context.Context, d *event.Delivery) error {
		select {
		case in <- d:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, opts...)
	if err != nil {
		return err
	}
	defer sub.Close()
	batch := make([]*event.Delivery, 0, c.BatchSize)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d := <-in:
			if len(batch) == 0 {
				timer.Reset(c.FlushInterval)
			}
			batch = append(batch, d)
			if len(batch) < c.BatchSize {
				continue
			}
		case <-timer.C:
		}
		timer.Stop()
		if len(batch) == 0 {
			continue
		}
		recs := make([]event.Record, len(batch))
		for i, d := range batch {
			recs[i] = d.Record
		}
		if err := c.Write(ctx, recs); err != nil {
			for _, d := range batch {
				_ = d.Nack(context.WithoutCancel(ctx), c.Name+": write failed")
			}
			c.Logger.Error(c.Name+": write failed", "table", c.Table, "err", err)
			return err
		}
		for _, d := range batch {
			if err := d.Ack(ctx); err != nil && !errors.Is(err, event.ErrStaleAck) && !errors.Is(err, event.ErrNotInFlight) {
				return err
			}
		}
		batch = batch[:0]
	}
}

// Newest returns the keys of recs, in order of first appearance, and each
// one's record of the highest seq; records without a key are left out.
func Newest(recs []event.Record) ([]string, map[string]event.Record) {
	newest := map[string]event.Record{}
	var keys []string
	for _, r := range recs {
		if r.Key == "" {
			continue
		}
		o, ok := newest[r.Key]
		if !ok {
			keys = append(keys, r.Key)
		}
		if !ok || r.Seq > o.Seq {
			newest[r.Key] = r
		}
	}
	return keys, newest
}

// IsTombstone reports whether r deletes its key: a JSON null payload.
func IsTombstone(r event.Record) bool {
	return event.IsJSONContentType(r.ContentType) && string(r.Payload) == "null"
}

// Replay reads the topic from the store after the seq after, n records at
// a time, passes each page to write, and returns the last seq read. A
// read's error is prefixed by name ("mongotable: rebuild: read: ..."),
// write's is returned as it is.
func Replay(ctx context.Context, name string, st event.Store, topic string, after uint64, n int, write func(recs []event.Record) error) (uint64, error) {
	for {
		recs, err := st.Read(ctx, topic, after, n)
		if err != nil {
			return after, fmt.Errorf("%s: rebuild: read: %w", name, err)
		}
		if len(recs) == 0 {
			return after, nil
		}
		after = recs[len(recs)-1].Seq
		if err := write(recs); err != nil {
			return after, err
		}
	}
}
