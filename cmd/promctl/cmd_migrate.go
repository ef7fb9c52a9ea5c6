package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/storeurl"
)

func init() {
	register(&command{
		Name:     "migrate",
		Synopsis: "-from STORE -to STORE [-from-schema S] [-to-schema S] [-from-db D] [-to-db D] [-batch N] [-o table|json]",
		Summary:  "copy one store into another: events, groups, dead letters, outbox rows not sent",
		Help: `STORE is sqlite:PATH, postgres://... (postgresql://) or mongodb://...
(mongodb+srv://), as the hub's -store; memory, a store of one process,
is refused.

A PostgreSQL store is taken in a schema and a MongoDB store in a
database, as the hub takes them: PG_SCHEMA (default public) and MONGO_DB
(default promlib), the hub's environment variables, name them for both
sides; -from-schema and -to-schema (PostgreSQL), -from-db and -to-db
(MongoDB) name one side's. So one PostgreSQL database's schema is moved
into another schema of it with -from and -to the same URL:

  promctl migrate -from postgres://db/events -from-schema hub_a \
    -to postgres://db/events -to-schema hub_b

A schema or database flag for a side of another kind is refused.

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

// Environment variables of the hub that name where a store's data is:
// migrate reads them as the defaults of its flags.
const (
	envPGSchema = "PG_SCHEMA"
	envMongoDB  = "MONGO_DB"
)

// migrateResult is what migrate prints with -o json.
type migrateResult struct {
	From string `json:"from"`
	// FromSchema is the PostgreSQL schema of From, FromDatabase the
	// MongoDB database; empty for another kind. So for To.
	FromSchema   string            `json:"from_schema,omitempty"`
	FromDatabase string            `json:"from_database,omitempty"`
	To           string            `json:"to"`
	ToSchema     string            `json:"to_schema,omitempty"`
	ToDatabase   string            `json:"to_database,omitempty"`
	Events       event.CopyReport  `json:"events"`
	Outbox       outbox.CopyReport `json:"outbox"`
}

// migrateSide is one store of a migrate: where it is, and the schema or
// database its data is in.
type migrateSide struct {
	loc    storeurl.Location
	schema string // of a PostgreSQL store
	db     string // of a MongoDB store
}

// String names the side for people, without a URL's password.
func (s migrateSide) String() string {
	switch s.loc.Kind {
	case storeurl.KindPostgres:
		return fmt.Sprintf("%s (schema %s)", s.loc, s.schema)
	case storeurl.KindMongoDB:
		return fmt.Sprintf("%s (database %s)", s.loc, s.db)
	}
	return s.loc.String()
}

// config is the storeurl.Config that opens the side.
func (s migrateSide) config(log *slog.Logger) storeurl.Config {
	cfg := storeurl.Config{Logger: log}
	cfg.Postgres.Schema = s.schema
	cfg.MongoDB.Database = s.db
	return cfg
}

func runMigrate(ctx context.Context, e *env, args []string) error {
	flags := e.flags()
	e.outputFlag(flags)
	from := flags.String("from", "", "the store to copy: "+storeurl.Usage)
	to := flags.String("to", "", "the store to copy into (created if absent)")
	schema, db := os.Getenv(envPGSchema), os.Getenv(envMongoDB)
	names := map[string]*string{}
	for _, side := range []string{"from", "to"} {
		names[side+"-schema"] = flags.String(side+"-schema", cmp.Or(schema, pgstore.DefaultSchema), "the PostgreSQL schema of -"+side+" (env "+envPGSchema+")")
		names[side+"-db"] = flags.String(side+"-db", cmp.Or(db, mongostore.DefaultDatabase), "the MongoDB database of -"+side+" (env "+envMongoDB+")")
	}
	batch := flags.Int("batch", event.DefaultCopyBatch, "records read and written at a time (1 to 10000)")
	pos, err := e.parse(flags, args)
	if err != nil {
		return err
	}
	if err := argCount(pos, 0, 0); err != nil {
		return err
	}
	given := map[string]bool{}
	flags.Visit(func(f *flag.Flag) { given[f.Name] = true })
	side := func(name, s string) (migrateSide, error) {
		loc, err := migrateLocation("-"+name, s)
		if err != nil {
			return migrateSide{}, err
		}
		return migrateNames(name, loc, given, *names[name+"-schema"], *names[name+"-db"])
	}
	src, err := side("from", *from)
	if err != nil {
		return err
	}
	dst, err := side("to", *to)
	if err != nil {
		return err
	}
	if src == dst {
		return usagef("-from and -to are the same store (%s)", src)
	}
	if *batch < 1 || *batch > 10000 {
		return usagef("-batch: %d, want 1 to 10000", *batch)
	}
	if src.loc.Kind == storeurl.KindSQLite {
		// Opening a SQLite file creates it: a source must exist.
		if _, err := os.Stat(src.loc.Path); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("-from: no SQLite file %q", src.loc.Path)
		}
	}
	log := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sdb, err := src.loc.Open(ctx, src.config(log))
	if err != nil {
		return fmt.Errorf("open -from %s: %w", src, err)
	}
	defer sdb.Close(context.WithoutCancel(ctx))
	ddb, err := dst.loc.Open(ctx, dst.config(log))
	if err != nil {
		return fmt.Errorf("open -to %s: %w", dst, err)
	}
	defer ddb.Close(context.WithoutCancel(ctx))

	res := migrateResult{
		From: src.loc.String(), FromSchema: src.schema, FromDatabase: src.db,
		To: dst.loc.String(), ToSchema: dst.schema, ToDatabase: dst.db,
	}
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
		src, dst, res.Events.Records, res.Events.Verified, res.Events.Groups, res.Outbox.Copied, res.Outbox.Present)
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

// migrateNames gives the side of flag -name at loc its PostgreSQL schema
// or MongoDB database: the value of -name-schema or -name-db (whose
// defaults are PG_SCHEMA and MONGO_DB, else the hub's). One of them given
// for a store of another kind is refused.
func migrateNames(name string, loc storeurl.Location, given map[string]bool, schema, db string) (migrateSide, error) {
	s := migrateSide{loc: loc}
	schemaFlag, dbFlag := name+"-schema", name+"-db"
	if loc.Kind != storeurl.KindPostgres && given[schemaFlag] {
		return s, usagef("-%s: the -%s store is %s; a schema is for a PostgreSQL store", schemaFlag, name, loc.Kind.Name())
	}
	if loc.Kind != storeurl.KindMongoDB && given[dbFlag] {
		return s, usagef("-%s: the -%s store is %s; a database is for a MongoDB store", dbFlag, name, loc.Kind.Name())
	}
	switch loc.Kind {
	case storeurl.KindPostgres:
		if msg := schemaProblem(schema); msg != "" {
			return s, usagef("%s: %s", flagOrEnv(schemaFlag, envPGSchema, given), msg)
		}
		s.schema = schema
	case storeurl.KindMongoDB:
		if msg := databaseProblem(db); msg != "" {
			return s, usagef("%s: %s", flagOrEnv(dbFlag, envMongoDB, given), msg)
		}
		s.db = db
	}
	return s, nil
}

// flagOrEnv names where the value of flag came from: the flag when it
// was given, else the environment variable its default was read from.
func flagOrEnv(flag, env string, given map[string]bool) string {
	if given[flag] {
		return "-" + flag
	}
	return env + " (the default of -" + flag + ")"
}

// maxPGIdent is the longest name PostgreSQL keeps (NAMEDATALEN-1 bytes);
// a longer one would be cut short, silently.
const maxPGIdent = 63

// schemaProblem says what is wrong with a PostgreSQL schema name, "" for
// nothing.
func schemaProblem(s string) string {
	switch {
	case s == "":
		return "empty, want a schema name such as " + pgstore.DefaultSchema
	case len(s) > maxPGIdent:
		return fmt.Sprintf("%d bytes, more than PostgreSQL's %d", len(s), maxPGIdent)
	case !utf8.ValidString(s) || strings.ContainsRune(s, 0):
		return fmt.Sprintf("%q is not a name PostgreSQL takes (not UTF-8, or a NUL)", s)
	}
	return ""
}

// databaseProblem says what is wrong with a MongoDB database name, ""
// for nothing, by the MongoDB store's own check.
func databaseProblem(db string) string {
	if db == "" {
		return "empty, want a database name such as " + mongostore.DefaultDatabase
	}
	err := (&mongostore.Config{Database: db}).Validate()
	if err == nil {
		return ""
	}
	msg := oneLine(err.Error())
	if _, rest, ok := strings.Cut(msg, "Database: "); ok {
		return rest
	}
	return msg
}
