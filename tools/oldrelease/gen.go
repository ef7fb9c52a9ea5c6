//go:build ignore

// Command gen writes the databases of the "release-ccdae86" fixtures: the
// same scenario, written by the code of the release at commit ccdae86
// (before lease tokens and stored topic partition counts) into each
// durable store, so that the tests of the current code
// (event/sqlitestore, event/pgstore and event/mongostore, oldrelease_test.go)
// can open a database of that release and check that it is migrated and
// delivers what it held.
//
// It uses only that release's API and is run in a work tree of it, from
// the root of this repository (a temporary directory outside it):
//
//	tmp=$(mktemp -d)
//	git worktree add "$tmp/wt" ccdae86
//	mkdir "$tmp/wt/tools/oldrelease" && cp tools/oldrelease/gen.go "$tmp/wt/tools/oldrelease/"
//	tools/mongotest/with-mongo.sh tools/pgtest/with-postgres.sh sh -c \
//	  'cd "$0/wt/tools/oldrelease" && go run gen.go -sqlite out.db -pg "$PG_URL" -mongo "$MONGO_URL"' "$tmp"
//	cp "$tmp/wt/tools/oldrelease/out.db" event/sqlitestore/testdata/release-ccdae86.db
//	cp "$tmp/wt/tools/oldrelease/release-ccdae86.sql" event/pgstore/testdata/
//	cp "$tmp/wt/tools/oldrelease/release-ccdae86.json" event/mongostore/testdata/
//	git worktree remove --force "$tmp/wt" && rm -rf "$tmp"
//
// Each of -sqlite, -pg and -mongo is optional: only the stores named are
// written.
//
//   - -sqlite FILE: a new SQLite file, checkpointed after the store is
//     closed (no -wal file is left beside it).
//   - -pg URL: a PostgreSQL server; a new database (-pgdb) is created on
//     it and the store writes its tables in its schema public. Then
//     pg_dump (on PATH) writes its promlib_* tables to -pgdump as plain
//     SQL with INSERTs, without owners and privileges, and with the
//     schema names and session settings taken out: run in any schema (as
//     search_path), it makes the tables there, and a driver can run it
//     as one simple query.
//   - -mongo URL: a MongoDB server; the store writes to the database
//     -mongodb, which must be empty. Then every collection of it, its
//     indexes and its documents (by _id), is written to -mongojson as
//     canonical MongoDB Extended JSON in one file:
//     {"database": NAME, "collections": [{"name", "indexes", "documents"}]}.
//
// The scenario, identical on each store, with a Bus of 8 partitions:
//
//   - topic "orders": 16 records, seq n with id "orders-NN", key
//     "k((n-1)%8)" (the keys k0..k7 fall in 8 different partitions),
//     ts 1767225600000+n and payload {"n":n};
//   - group "g" (from the earliest record, manual ack) acks every record
//     but seqs 2 and 9: their first attempt fails (a nack), the second is
//     left in flight, unsettled, until the Bus closes. So "g" has stored
//     cursors below them, attempt counts of 2 for them and, in the
//     partition of seq 2, seq 10 settled above the cursor;
//   - group "dl" (from the earliest, MaxAttempts 1) fails seq 5, which is
//     dead-lettered to "orders.dlq", and acks the rest;
//   - topic "idle": 3 records (keys i0, i1, i2: partitions 4, 7 and 2),
//     and no group.
//
// The Bus is closed gracefully: cursors, group state and the release of
// leases are written.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	_ "modernc.org/sqlite"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/mongostore"
	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/event/sqlitestore"
)

func main() {
	sqlitePath := flag.String("sqlite", "", "write a new SQLite file `FILE`")
	pgURL := flag.String("pg", "", "write to a new database on the PostgreSQL server at `URL`")
	pgDB := flag.String("pgdb", "promlib_release_ccdae86", "name of the PostgreSQL database to create")
	pgDump := flag.String("pgdump", "release-ccdae86.sql", "file of the PostgreSQL dump")
	mongoURL := flag.String("mongo", "", "write to the MongoDB server at `URL`")
	mongoDB := flag.String("mongodb", "promlib_release_ccdae86", "name of the (empty) MongoDB database")
	mongoJSON := flag.String("mongojson", "release-ccdae86.json", "file of the MongoDB export")
	flag.Parse()
	if *sqlitePath == "" && *pgURL == "" && *mongoURL == "" {
		log.Fatal("nothing to do: give -sqlite, -pg and/or -mongo")
	}
	ctx := context.Background()
	if *sqlitePath != "" {
		if err := genSQLite(ctx, *sqlitePath); err != nil {
			log.Fatalf("sqlite: %v", err)
		}
		log.Printf("sqlite: wrote %s", *sqlitePath)
	}
	if *pgURL != "" {
		if err := genPG(ctx, *pgURL, *pgDB, *pgDump); err != nil {
			log.Fatalf("postgres: %v", err)
		}
		log.Printf("postgres: wrote database %s, dumped to %s", *pgDB, *pgDump)
	}
	if *mongoURL != "" {
		if err := genMongo(ctx, *mongoURL, *mongoDB, *mongoJSON); err != nil {
			log.Fatalf("mongo: %v", err)
		}
		log.Printf("mongo: wrote database %s, exported to %s", *mongoDB, *mongoJSON)
	}
}

// scenario writes the records, groups and dead letter described in the
// package comment through a Bus of 8 partitions over store, and closes the
// Bus (not the store).
func scenario(ctx context.Context, store event.Store) error {
	bus, err := event.NewBus(store, event.Config{Partitions: 8})
	if err != nil {
		return err
	}
	closed := false
	defer func() {
		if !closed {
			_ = bus.Close(context.Background())
		}
	}()
	const tsBase = 1767225600000 // 2026-01-01T00:00:00Z
	for n := 1; n <= 16; n++ {
		_, err := bus.Publish(ctx, "orders", []byte(fmt.Sprintf(`{"n":%d}`, n)),
			event.WithID(fmt.Sprintf("orders-%02d", n)),
			event.WithKey(fmt.Sprintf("k%d", (n-1)%8)),
			event.WithTS(tsBase+int64(n)))
		if err != nil {
			return fmt.Errorf("publish orders %d: %w", n, err)
		}
	}
	for n := 1; n <= 3; n++ {
		_, err := bus.Publish(ctx, "idle", []byte(fmt.Sprintf(`{"n":%d}`, n)),
			event.WithID(fmt.Sprintf("idle-%02d", n)),
			event.WithKey(fmt.Sprintf("i%d", n-1)),
			event.WithTS(tsBase+100+int64(n)))
		if err != nil {
			return fmt.Errorf("publish idle %d: %w", n, err)
		}
	}

	// Group g: acks all but seqs 2 and 9, which fail once and are then
	// held in flight.
	var mu sync.Mutex
	gAcked := map[uint64]bool{}
	gHeld := map[uint64]int{}
	gDone := make(chan struct{})
	gCheck := func() {
		if len(gAcked) == 14 && len(gHeld) == 2 {
			select {
			case <-gDone:
			default:
				close(gDone)
			}
		}
	}
	_, err = bus.Subscribe(ctx, "orders", "g", func(ctx context.Context, d *event.Delivery) error {
		if d.Seq == 2 || d.Seq == 9 {
			if d.Attempt == 1 {
				return errors.New("first attempt fails")
			}
			mu.Lock()
			gHeld[d.Seq] = d.Attempt
			gCheck()
			mu.Unlock()
			return nil // manual ack: left in flight
		}
		if err := d.Ack(ctx); err != nil {
			return err
		}
		mu.Lock()
		gAcked[d.Seq] = true
		gCheck()
		mu.Unlock()
		return nil
	}, event.FromEarliest(), event.WithManualAck(), event.WithAckTimeout(time.Hour),
		event.WithBackoff(time.Millisecond, time.Millisecond), event.WithDrainTimeout(5*time.Second))
	if err != nil {
		return fmt.Errorf("subscribe g: %w", err)
	}

	// Group dl: seq 5 is dead-lettered at its first failure.
	dlSeen := map[uint64]bool{}
	dlDone := make(chan struct{})
	_, err = bus.Subscribe(ctx, "orders", "dl", func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		dlSeen[d.Seq] = true
		if len(dlSeen) == 16 {
			select {
			case <-dlDone:
			default:
				close(dlDone)
			}
		}
		mu.Unlock()
		if d.Seq == 5 {
			return errors.New("seq 5 fails")
		}
		return nil
	}, event.FromEarliest(), event.WithMaxAttempts(1))
	if err != nil {
		return fmt.Errorf("subscribe dl: %w", err)
	}

	timeout := time.After(60 * time.Second)
	for _, c := range []chan struct{}{gDone, dlDone} {
		select {
		case <-c:
		case <-timeout:
			mu.Lock()
			defer mu.Unlock()
			return fmt.Errorf("deliveries: timed out (g acked %v, held %v; dl saw %v)", gAcked, gHeld, dlSeen)
		}
	}
	mu.Lock()
	for seq, a := range gHeld {
		if a != 2 {
			mu.Unlock()
			return fmt.Errorf("g: seq %d held at attempt %d, want 2", seq, a)
		}
	}
	mu.Unlock()
	// Wait for the dead letter to be stored and every delivery of both
	// groups to be settled (g: all but the two held).
	deadline := time.Now().Add(60 * time.Second)
	for {
		dlq, err := store.Read(ctx, "orders.dlq", 0, 10)
		if err != nil {
			return fmt.Errorf("read orders.dlq: %w", err)
		}
		settled := true
		for _, st := range bus.Stats() {
			want := 0
			if st.Group == "g" {
				want = 2
			}
			if st.InFlight != want || st.Waiting != 0 || st.Buffered != 0 {
				settled = false
			}
		}
		if len(dlq) == 1 && settled {
			break
		}
		if len(dlq) > 1 {
			return fmt.Errorf("orders.dlq holds %d records, want 1", len(dlq))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for the dead letter and settlement (dlq %d records, stats %+v)", len(dlq), bus.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	closed = true
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := bus.Close(cctx); err != nil {
		return fmt.Errorf("close bus: %w", err)
	}
	return nil
}

func genSQLite(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists: give a new file", path)
	}
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		return err
	}
	if err := scenario(ctx, s); err != nil {
		_ = s.Close(ctx)
		return err
	}
	if err := s.Close(ctx); err != nil {
		return err
	}
	// Checkpoint the WAL into the file; closing the last connection
	// removes the -wal and -shm files.
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath())
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		_ = db.Close()
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := db.Close(); err != nil {
		return err
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + suffix); err == nil {
			return fmt.Errorf("%s%s is left after the checkpoint", path, suffix)
		}
	}
	return nil
}

func genPG(ctx context.Context, serverURL, dbName, dumpPath string) error {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{dbName}.Sanitize())
	_ = conn.Close(ctx)
	if err != nil {
		return fmt.Errorf("create database %s: %w", dbName, err)
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return err
	}
	u.Path = "/" + dbName
	dbURL := u.String()
	s, err := pgstore.Open(ctx, dbURL, pgstore.Config{})
	if err != nil {
		return err
	}
	if err := scenario(ctx, s); err != nil {
		_ = s.Close(ctx)
		return err
	}
	if err := s.Close(ctx); err != nil {
		return err
	}
	out, err := exec.CommandContext(ctx, "pg_dump", "--no-owner", "--no-privileges", "--inserts",
		"--table=public.promlib_*", "--dbname="+dbURL).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("pg_dump: %w: %s", err, ee.Stderr)
		}
		return fmt.Errorf("pg_dump: %w", err)
	}
	return os.WriteFile(dumpPath, []byte(unqualify(string(out))), 0o644)
}

// unqualify takes out of a pg_dump script the session settings (among
// them the empty search_path) and psql's meta-commands, and the schema
// name public before the names of the tables and indexes, so that the
// script makes its tables in the schema of the search_path it is run
// with. The dump holds the promlib_* tables only: "public." appears
// nowhere else.
func unqualify(dump string) string {
	var b strings.Builder
	b.WriteString("-- The tables of a promlib database written by the release at commit\n" +
		"-- ccdae86 (tools/oldrelease/gen.go), dumped by pg_dump --no-owner\n" +
		"-- --no-privileges --inserts, without schema names and session settings:\n" +
		"-- run it with the search_path of the schema to fill.\n\n")
	setting := regexp.MustCompile(`^(SET |SELECT pg_catalog\.set_config\(|\\)`)
	for _, line := range strings.SplitAfter(dump, "\n") {
		if setting.MatchString(line) {
			continue
		}
		b.WriteString(strings.ReplaceAll(line, "public.promlib_", "promlib_"))
	}
	return b.String()
}

func genMongo(ctx context.Context, uri, dbName, jsonPath string) error {
	s, err := mongostore.Connect(ctx, uri, mongostore.Config{Database: dbName})
	if err != nil {
		return err
	}
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		_ = s.Close(ctx)
		return err
	}
	defer func() { _ = client.Disconnect(context.Background()) }()
	db := client.Database(dbName)
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		_ = s.Close(ctx)
		return err
	}
	if len(names) > 0 {
		_ = s.Close(ctx)
		return fmt.Errorf("database %s has collections %v: give an empty one", dbName, names)
	}
	if err := s.EnsureIndexes(ctx); err != nil {
		_ = s.Close(ctx)
		return err
	}
	if err := scenario(ctx, s); err != nil {
		_ = s.Close(ctx)
		return err
	}
	if err := s.Close(ctx); err != nil {
		return err
	}
	return exportMongo(ctx, db, jsonPath)
}

type exportedCollection struct {
	Name      string            `json:"name"`
	Indexes   []json.RawMessage `json:"indexes"`
	Documents []json.RawMessage `json:"documents"`
}

// exportMongo writes every collection of db, its index specifications
// (the _id index left out) and its documents in _id order, as canonical
// Extended JSON.
func exportMongo(ctx context.Context, db *mongo.Database, path string) error {
	names, err := db.ListCollectionNames(ctx, bson.D{})
	if err != nil {
		return err
	}
	sort.Strings(names)
	ext := func(v any) (json.RawMessage, error) {
		b, err := bson.MarshalExtJSON(v, true, false)
		return json.RawMessage(b), err
	}
	var colls []exportedCollection
	for _, name := range names {
		c := db.Collection(name)
		ec := exportedCollection{Name: name, Indexes: []json.RawMessage{}, Documents: []json.RawMessage{}}
		icur, err := c.Indexes().List(ctx)
		if err != nil {
			return fmt.Errorf("indexes of %s: %w", name, err)
		}
		var specs []bson.D
		if err := icur.All(ctx, &specs); err != nil {
			return fmt.Errorf("indexes of %s: %w", name, err)
		}
		for _, spec := range specs {
			var keep bson.D
			isID := false
			for _, e := range spec {
				switch e.Key {
				case "name":
					isID = e.Value == "_id_"
				case "v", "ns":
					continue
				}
				keep = append(keep, e)
			}
			if isID {
				continue
			}
			j, err := ext(keep)
			if err != nil {
				return err
			}
			ec.Indexes = append(ec.Indexes, j)
		}
		cur, err := c.Find(ctx, bson.D{}, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}))
		if err != nil {
			return fmt.Errorf("documents of %s: %w", name, err)
		}
		var docs []bson.D
		if err := cur.All(ctx, &docs); err != nil {
			return fmt.Errorf("documents of %s: %w", name, err)
		}
		for _, d := range docs {
			j, err := ext(d)
			if err != nil {
				return err
			}
			ec.Documents = append(ec.Documents, j)
		}
		colls = append(colls, ec)
	}
	out, err := json.MarshalIndent(struct {
		Database    string               `json:"database"`
		Collections []exportedCollection `json:"collections"`
	}{db.Name(), colls}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(out, '\n'), 0o644)
}
