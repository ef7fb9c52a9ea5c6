package testpg

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// URL returns PG_URL, or skips (fails under CI=true) without it.
func URL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("PG_URL")
	if u == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("PG_URL not set: the PostgreSQL tests need a server (make test starts one)")
		}
		t.Skip("PG_URL not set: run the tests with make test, or tools/pgtest/with-postgres.sh, or set PG_URL")
	}
	return u
}

var seq atomic.Int64

// Schema returns the name of a new schema for the test (created by
// whoever opens a store in it), dropped with everything in it when the
// test ends.
func Schema(t testing.TB) string {
	t.Helper()
	u := URL(t)
	name := fmt.Sprintf("t_%d_%d_%s", os.Getpid(), seq.Add(1), strings.ToLower(sanitize(t.Name())))
	if len(name) > 60 {
		name = name[:60]
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Pool returns a pool on PG_URL whose connections use a new schema of
// the test ([Schema]), created here, closed and dropped when the test
// ends.
func Pool(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	schema := Schema(t)
	pool := PoolIn(t, schema)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	return pool, schema
}

// PoolIn returns a pool on PG_URL whose connections use schema, closed
// when the test ends.
func PoolIn(t testing.TB, schema string) *pgxpool.Pool {
	t.Helper()
	pool, err := OpenPool(context.Background(), URL(t), schema)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // before the schema's drop, registered earlier
	return pool
}

// OpenPool opens a small pool on url whose connections use schema.
func OpenPool(ctx context.Context, url, schema string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("testpg: PG_URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("testpg: pool: %w", err)
	}
	return pool, nil
}
