package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/storetest"
	"github.com/promethean/promlib/outbox"
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
	db, err := storeurl.Open(context.Background(), s, storeurl.Config{})
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
