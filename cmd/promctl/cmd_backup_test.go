package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

// TestBackupCommand backs a hub's SQLite store up with promctl backup, through
// the hub's ops endpoints, and opens the backup: the record published
// before it is there.
func TestBackupCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db := migrateOpenDB(t, "sqlite:"+filepath.Join(dir, "hub.db"))
	bus, err := event.NewBus(db.Store(), event.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, bus.Close(ctx)) }()
	rec, err := bus.Publish(ctx, "orders", []byte(`{"n":1}`))
	require.NoError(t, err)
	h, err := ops.NewHandler(ops.Config{Bus: bus})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ops/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	code, out, errOut := migrateRun(t, "backup", "-url", srv.URL, "-name", "nightly.db", "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var res ops.BackupResponse
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, filepath.Join(dir, "nightly.db"), res.File)
	fi, err := os.Stat(res.File)
	require.NoError(t, err)
	assert.Equal(t, fi.Size(), res.Bytes)
	bk := migrateOpenDB(t, "sqlite:"+res.File)
	got, err := bk.Store().FindByID(ctx, "orders", rec.ID)
	require.NoError(t, err)
	assert.Equal(t, rec.Seq, got.Seq)

	code, _, errOut = migrateRun(t, "backup", "-url", srv.URL, "-name", "nightly.db")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "exists")
	code, out, errOut = migrateRun(t, "backup", "-url", srv.URL)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "backed up to "+filepath.Join(dir, "hub-backup-"))
	code, _, errOut = migrateRun(t, "backup", "-url", srv.URL, "-name", "../x.db")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "bad_request")
	code, _, errOut = migrateRun(t, "backup", "-url", srv.URL, "extra")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `unexpected argument "extra"`)
}
