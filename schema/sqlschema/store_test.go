package sqlschema_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/promethean/promlib/event/pgstore"
	"github.com/promethean/promlib/event/sqlitestore"
	"github.com/promethean/promlib/internal/testpg"
	"github.com/promethean/promlib/schema"
	"github.com/promethean/promlib/schema/schematest"
	"github.com/promethean/promlib/schema/sqlschema"
	"github.com/stretchr/testify/require"
)

func TestSQLite(t *testing.T) {
	t.Parallel()
	schematest.Run(t, func(t *testing.T) schema.Store {
		db, err := sqlitestore.OpenDB(filepath.Join(t.TempDir(), "s.db"), sqlitestore.Config{})
		require.NoError(t, err)
		w, r := db.Write, db.Read
		t.Cleanup(func() { _ = w.Close(); _ = r.Close() })
		return newStore(t, w, sqlschema.SQLite)
	})
}

var tables atomic.Int32

func TestPostgres(t *testing.T) {
	t.Parallel()
	url := testpg.URL(t)
	name := testpg.Schema(t)
	db, _, err := pgstore.OpenDB(context.Background(), url, pgstore.Config{Schema: name})
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec(`CREATE SCHEMA IF NOT EXISTS "` + name + `"`)
	require.NoError(t, err)
	schematest.Run(t, func(t *testing.T) schema.Store { return newStore(t, db, sqlschema.Postgres) })
}

func newStore(t *testing.T, db *sql.DB, d sqlschema.Dialect) schema.Store {
	t.Helper()
	st, err := sqlschema.New(db, sqlschema.Config{Dialect: d, Table: "schemas_" + strconv.Itoa(int(tables.Add(1)))})
	require.NoError(t, err)
	require.NoError(t, st.EnsureTable(context.Background()))
	return st
}

func TestConfig(t *testing.T) {
	t.Parallel()
	_, err := sqlschema.New(nil, sqlschema.Config{Dialect: sqlschema.SQLite})
	require.ErrorIs(t, err, schema.ErrInvalid)
	_, err = sqlschema.New(&sql.DB{}, sqlschema.Config{})
	require.ErrorIs(t, err, schema.ErrInvalid)
	_, err = sqlschema.New(&sql.DB{}, sqlschema.Config{Dialect: sqlschema.SQLite, Table: "x; drop"})
	require.ErrorIs(t, err, schema.ErrInvalid)
}
