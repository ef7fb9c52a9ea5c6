package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/storeurl"
)

func init() {
	register(&command{
		Name:     "migrate",
		Synopsis: "-from STORE -to STORE [-batch N] [-o table|json]",
		Summary:  "copy one store into another: events, groups, dead letters, outbox rows not sent",
		Help: `STORE is sqlite:PATH, postgres://... (postgresql://) or mongodb://...
(mongodb+srv://), as the hub's -store; memory, a store of one process,
is refused.

A PostgreSQL store is taken in the schema public and a MongoDB store in
the database promlib, the hub's defaults: PG_SCHEMA and MONGO_DB are not
read (a hub run with either set is moved by a program calling event.Copy
and outbox.Copy over storeurl.Open with storeurl.Config's
Postgres.Schema or MongoDB.Database).

The copy opens both stores itself (not through a hub): every topic with
its partition count, each record at its seq, the consumer groups with
their settings, cursors and state, dead-letter and redrive topics and
the marks of redriven dead letters (event.Copy), then the outbox rows
not sent yet (outbox.Copy). Consumers started on the destination
continue where they were.

Stop every process that writes to the source first: hubs, publishers,
outbox drainers, consumers; wait for the groups' leases to end. A group
with live members refuses the copy, and a topic whose head moves during
it stops it, naming the topic. An interrupted copy run again checks
what the destination holds, record for record, and copies the rest; a
destination holding other records or settings is refused, naming the
topic and seq. Schemas are not copied (schema.Copy of the schema
module copies them).`,
		Run: runMigrate,
	})
}

// migrateResult is what migrate prints with -o json.
type migrateResult struct {
	From   string            `json:"from"`
	To     string            `json:"to"`
	Events event.CopyReport  `json:"events"`
	Outbox outbox.CopyReport `json:"outbox"`
}

func runMigrate(ctx context.Context, e *env, args []string) error {
	flags := e.flags()
	e.outputFlag(flags)
	from := flags.String("from", "", "the store to copy: "+storeurl.Usage)
	to := flags.String("to", "", "the store to copy into (created if absent)")
	batch := flags.Int("batch", event.DefaultCopyBatch, "records read and written at a time (1 to 10000)")
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := argCount(pos, 0, 0); err != nil {
		return err
	}
	src, err := migrateLocation("-from", *from)
	if err != nil {
		return err
	}
	dst, err := migrateLocation("-to", *to)
	if err != nil {
		return err
	}
	if src == dst {
		return usagef("-from and -to are the same store (%s)", src)
	}
	if *batch < 1 || *batch > 10000 {
		return usagef("-batch: %d, want 1 to 10000", *batch)
	}
	if src.Kind == storeurl.KindSQLite {
		// Opening a SQLite file creates it: a source must exist.
		if _, err := os.Stat(src.Path); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("-from: no SQLite file %q", src.Path)
		}
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sdb, err := src.Open(ctx, storeurl.Config{Logger: log})
	if err != nil {
		return fmt.Errorf("open -from %s: %w", src, err)
	}
	defer sdb.Close(context.WithoutCancel(ctx))
	ddb, err := dst.Open(ctx, storeurl.Config{Logger: log})
	if err != nil {
		return fmt.Errorf("open -to %s: %w", dst, err)
	}
	defer ddb.Close(context.WithoutCancel(ctx))

	res := migrateResult{From: src.String(), To: dst.String()}
	res.Events, err = event.Copy(ctx, ddb.Store(), sdb.Store(), event.CopyConfig{Batch: *batch, Logger: log})
	if err != nil {
		return fmt.Errorf("%w (%d records copied, %d checked before it stopped)", err, res.Events.Records, res.Events.Verified)
	}
	so, ok := sdb.Outbox().(outbox.PendingLister)
	if !ok {
		return fmt.Errorf("the outbox of %s does not list its rows", src)
	}
	res.Outbox, err = outbox.Copy(ctx, ddb.Outbox(), so)
	if err != nil {
		return err
	}
	if e.json() {
		return marshalJSON(e.stdout, res)
	}
	tw := newTable(e.stdout)
	tw.row("TOPIC", "PARTITIONS", "HEAD", "COPIED", "CHECKED", "GROUPS")
	for _, t := range res.Events.Topics {
		tw.row(t.Topic, t.Partitions, t.Head, t.Records, t.Verified, t.Groups)
	}
	if err := tw.flush(); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "%s -> %s: %d records copied, %d already there and checked, %d groups; outbox: %d rows copied, %d already there\n",
		res.From, res.To, res.Events.Records, res.Events.Verified, res.Events.Groups, res.Outbox.Copied, res.Outbox.Present)
	return nil
}

// migrateLocation parses the store of flag.
func migrateLocation(flag, s string) (storeurl.Location, error) {
	if s == "" {
		return storeurl.Location{}, usagef("%s: required (%s)", flag, storeurl.Usage)
	}
	loc, err := storeurl.Parse(s)
	if err != nil {
		return storeurl.Location{}, usagef("%s: %v", flag, err)
	}
	if loc.Kind == storeurl.KindMemory {
		return storeurl.Location{}, usagef("%s: memory is a store of one process, want sqlite:PATH, postgres://... or mongodb://...", flag)
	}
	return loc, nil
}
