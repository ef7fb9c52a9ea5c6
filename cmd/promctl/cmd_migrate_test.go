package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/storetest"
	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/internal/testpg"
	"github.com/promethean/promlib/mongodb"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/pgdb"
	"github.com/promethean/promlib/storeurl"
)

// migrateRun runs promctl with args and returns its exit status, stdout and
// stderr.
func migrateRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// migrateOpenDB opens the database at s, closed when the test ends.
func migrateOpenDB(t *testing.T, s string) storeurl.Database {
	t.Helper()
	return migrateOpenIn(t, s, storeurl.Config{})
}

// migrateOpenIn opens the database at s with cfg (a schema, a database),
// closed when the test ends.
func migrateOpenIn(t *testing.T, s string, cfg storeurl.Config) storeurl.Database {
	t.Helper()
	db, err := storeurl.Open(context.Background(), s, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close(context.Background())) })
	return db
}

// TestMigrateSQLiteToSQLite copies one SQLite file into another with
// promctl migrate: the copy holds the source record for record with its
// groups, consumers continue there, the outbox row not sent moves too; a
// second run copies nothing.
func TestMigrateSQLiteToSQLite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	from, to := "sqlite:"+filepath.Join(dir, "a.db"), "sqlite:"+filepath.Join(dir, "b.db")
	src := migrateOpenDB(t, from)
	sc := storetest.FillForCopy(t, src.Store())
	require.NoError(t, src.Outbox().Add(ctx, outbox.Message{ID: "unsent", Topic: "orders", Payload: []byte(`{"o":1}`)}))

	code, out, errOut := migrateRun(t, "migrate", "-from", from, "-to", to)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "records copied")
	assert.Contains(t, out, "outbox: 1 rows copied")
	assert.Contains(t, out, "orders")

	dst := migrateOpenDB(t, to)
	storetest.CheckCopied(t, dst.Store(), src.Store())
	rows, err := dst.Outbox().(outbox.PendingLister).PendingRows(ctx)
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, "unsent", rows[0].ID)

	code, out, errOut = migrateRun(t, "migrate", "--from", from, "--to", to, "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var res migrateResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Zero(t, res.Events.Records, "a second run copies no record")
	assert.Positive(t, res.Events.Verified)
	assert.Equal(t, outbox.CopyReport{Present: 1}, res.Outbox)
	storetest.CheckContinues(t, dst.Store(), sc)
}

func TestMigrateBadArguments(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := "sqlite:" + filepath.Join(dir, "a.db")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no from", []string{"migrate", "-to", a}, exitUsage, "-from: required"},
		{"no to", []string{"migrate", "-from", a}, exitUsage, "-to: required"},
		{"bad store", []string{"migrate", "-from", "mysql://x", "-to", a}, exitUsage, "-from: "},
		{"memory", []string{"migrate", "-from", "memory", "-to", a}, exitUsage, "memory is a store of one process"},
		{"same", []string{"migrate", "-from", a, "-to", a}, exitUsage, "the same store"},
		{"batch", []string{"migrate", "-from", a, "-to", a + "2", "-batch", "0"}, exitUsage, "-batch: 0"},
		{"argument", []string{"migrate", "-from", a, "-to", a + "2", "extra"}, exitUsage, `unexpected argument "extra"`},
		{"no source file", []string{"migrate", "-from", a, "-to", a + "2"}, exitError, "no SQLite file"},
		{"schema of SQLite", []string{"migrate", "-from", a, "-from-schema", "s", "-to", "postgres://h/d"}, exitUsage, "-from-schema: the -from store is SQLite; a schema is for a PostgreSQL store"},
		{"schema of MongoDB", []string{"migrate", "-from", a, "-to", "mongodb://h", "-to-schema", "s"}, exitUsage, "-to-schema: the -to store is MongoDB; a schema is for a PostgreSQL store"},
		{"database of PostgreSQL", []string{"migrate", "-from", "postgres://h/d", "-from-db", "x", "-to", a}, exitUsage, "-from-db: the -from store is PostgreSQL; a database is for a MongoDB store"},
		{"database of SQLite", []string{"migrate", "-from", "mongodb://h", "-to", a, "-to-db", "x"}, exitUsage, "-to-db: the -to store is SQLite; a database is for a MongoDB store"},
		{"empty schema", []string{"migrate", "-from", a, "-to", "postgres://h/d", "-to-schema", ""}, exitUsage, "-to-schema: empty"},
		{"long schema", []string{"migrate", "-from", "postgres://h/d", "-from-schema", strings.Repeat("s", 64), "-to", a}, exitUsage, "-from-schema: 64 bytes, more than PostgreSQL's 63"},
		{"bad database", []string{"migrate", "-from", a, "-to", "mongodb://h", "-to-db", "a.b"}, exitUsage, `-to-db: "a.b" contains '.'`},
		{"empty database", []string{"migrate", "-from", "mongodb://h", "-from-db", "", "-to", a}, exitUsage, "-from-db: empty"},
		{"same schema", []string{"migrate", "-from", "postgres://h/d", "-to", "postgres://h/d", "-to-schema", "public"}, exitUsage, "the same store (postgres://h/d (schema public))"},
		{"same database", []string{"migrate", "-from", "mongodb://h", "-from-db", "x", "-to", "mongodb://h", "-to-db", "x"}, exitUsage, "the same store (mongodb://h (database x))"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := migrateRun(t, tc.args...)
			assert.Equal(t, tc.code, code, errOut)
			assert.Contains(t, errOut, tc.want)
			assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
		})
	}
}

// A source with a consumer running is refused, saying what to stop.
func TestMigrateRefusesALiveSource(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	from := "sqlite:" + filepath.Join(dir, "a.db")
	src := migrateOpenDB(t, from)
	bus, err := event.NewBus(src.Store(), event.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, bus.Close(ctx)) }()
	_, err = bus.Publish(ctx, "orders", []byte(`{}`))
	require.NoError(t, err)
	_, err = bus.Subscribe(ctx, "orders", "billing", func(context.Context, *event.Delivery) error { return nil })
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		gs, err := src.Store().(event.Lister).ListGroups(ctx, "orders")
		return err == nil && len(gs) == 1 && len(gs[0].Members) == 1
	}, 10*time.Second, 5*time.Millisecond)
	code, _, errOut := migrateRun(t, "migrate", "-from", from, "-to", "sqlite:"+filepath.Join(dir, "b.db"))
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, `group "billing" on topic "orders" has live members`)
	assert.Contains(t, errOut, "stop its consumers")
}

// PG_SCHEMA and MONGO_DB, the hub's, are the defaults of the schema and
// database flags, for both sides; a bad value names the variable. (Not
// parallel: it sets the environment.)
func TestMigrateNamesFromTheEnvironment(t *testing.T) {
	a := "sqlite:" + filepath.Join(t.TempDir(), "a.db")
	t.Setenv(envPGSchema, "hub_a")
	t.Setenv(envMongoDB, "hub.a")
	code, _, errOut := migrateRun(t, "migrate", "-from", "postgres://h/d", "-to", "postgres://h/d")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "the same store (postgres://h/d (schema hub_a))")
	code, _, errOut = migrateRun(t, "migrate", "-from", a, "-to", "mongodb://h")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `MONGO_DB (the default of -to-db): "hub.a" contains '.'`)
	code, _, errOut = migrateRun(t, "migrate", "-from", a, "-to", "mongodb://h", "-to-db", "hub.a")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `-to-db: "hub.a" contains '.'`, "a flag given is named, not the variable")
	code, _, errOut = migrateRun(t, "migrate", "-h")
	assert.Equal(t, exitOK, code, errOut)

	t.Setenv(envMongoDB, "hub_a")
	code, _, errOut = migrateRun(t, "migrate", "-from", "mongodb://h", "-to", "mongodb://h")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "the same store (mongodb://h (database hub_a))")
	// MONGO_DB is not read for a store of another kind; PG_SCHEMA empty
	// is public.
	t.Setenv(envMongoDB, "bad.name")
	t.Setenv(envPGSchema, "")
	code, _, errOut = migrateRun(t, "migrate", "-from", a, "-to", "postgres://h/d", "-from", a)
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "no SQLite file", "got past the names")
}

// TestMigratePostgresSchemas moves a SQLite file into a schema of the
// PostgreSQL server (-to-schema), then that schema into another of the
// same database (-from-schema, -to-schema, one URL): the last holds the
// first record for record (so the first schema did: the copy out of it
// reads there), and its consumers continue where they were.
func TestMigratePostgresSchemas(t *testing.T) {
	t.Parallel()
	pg := testpg.URL(t)
	s1, s2 := testpg.Schema(t), testpg.Schema(t)
	from := "sqlite:" + filepath.Join(t.TempDir(), "a.db")
	src := migrateOpenDB(t, from)
	sc := storetest.FillForCopy(t, src.Store())
	require.NoError(t, src.Outbox().Add(context.Background(), outbox.Message{ID: "unsent", Topic: "orders", Payload: []byte(`{"o":1}`)}))

	code, out, errOut := migrateRun(t, "migrate", "-from", from, "-to", pg, "-to-schema", s1, "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var res migrateResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, s1, res.ToSchema)
	assert.Empty(t, res.FromSchema)
	assert.Equal(t, outbox.CopyReport{Copied: 1}, res.Outbox)

	code, out, errOut = migrateRun(t, "migrate", "-from", pg, "-from-schema", s1, "-to", pg, "-to-schema", s2)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "(schema "+s1+") -> ")
	assert.Contains(t, out, "(schema "+s2+"): ")
	dst := migrateOpenIn(t, pg, storeurl.Config{Postgres: pgdb.Config{Schema: s2}})
	storetest.CheckCopied(t, dst.Store(), src.Store())
	rows, err := dst.Outbox().(outbox.PendingLister).PendingRows(context.Background())
	require.NoError(t, err)
	require.Len(t, rows, 1)
	assert.Equal(t, "unsent", rows[0].ID)
	storetest.CheckContinues(t, dst.Store(), sc)
}

// TestMigrateMongoDatabases moves a SQLite file into a database of the
// MongoDB server (-to-db), then that database into another on the same
// server (-from-db, -to-db, one URL): the last holds the first record for
// record (so the first database did: the copy out of it reads there), and
// its consumers continue where they were.
func TestMigrateMongoDatabases(t *testing.T) {
	t.Parallel()
	mongo := testmongo.URL(t)
	d1, d2 := migrateMongoDB(t, mongo), migrateMongoDB(t, mongo)
	from := "sqlite:" + filepath.Join(t.TempDir(), "a.db")
	src := migrateOpenDB(t, from)
	sc := storetest.FillForCopy(t, src.Store())

	code, out, errOut := migrateRun(t, "migrate", "-from", from, "-to", mongo, "-to-db", d1.name, "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var res migrateResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, d1.name, res.ToDatabase)

	code, out, errOut = migrateRun(t, "migrate", "-from", mongo, "-from-db", d1.name, "-to", mongo, "-to-db", d2.name)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "(database "+d1.name+") -> ")
	assert.Contains(t, out, "(database "+d2.name+"): ")
	dst := d2.open(t)
	storetest.CheckCopied(t, dst.Store(), src.Store())
	storetest.CheckContinues(t, dst.Store(), sc)
}

// mongoTestDB is a database of the MongoDB server for one test.
type mongoTestDB struct {
	url, name string
}

// migrateMongoDB names a new database on the server at url, dropped when
// the test ends.
func migrateMongoDB(t *testing.T, url string) mongoTestDB {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	d := mongoTestDB{url: url, name: "promctl_test_" + hex.EncodeToString(b)}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		db, err := storeurl.Open(ctx, url, storeurl.Config{MongoDB: mongodb.Config{Database: d.name}})
		if err != nil {
			t.Errorf("drop database %s: %v", d.name, err)
			return
		}
		defer db.Close(ctx)
		m, _ := storeurl.MongoDB(db)
		if err := m.Database().Drop(ctx); err != nil {
			t.Errorf("drop database %s: %v", d.name, err)
		}
	})
	return d
}

// open opens the database, closed when the test ends.
func (d mongoTestDB) open(t *testing.T) storeurl.Database {
	t.Helper()
	return migrateOpenIn(t, d.url, storeurl.Config{MongoDB: mongodb.Config{Database: d.name}})
}
