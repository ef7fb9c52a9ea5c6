package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/promethean/promlib/internal/sqlstore"
	"github.com/promethean/promlib/storeurl"
)

// openSQLite opens a new SQLite file (checked absent by parseStore) with
// the store's defaults (WAL, synchronous FULL), removed when the bench
// ends.
func openSQLite(ctx context.Context, loc storeurl.Location, cfg storeurl.Config) (Backend, error) {
	d, err := loc.Open(ctx, cfg)
	if err != nil {
		return Backend{}, err
	}
	db, _ := storeurl.SQLite(d)
	return Backend{
		Store: d.Store(),
		Raw: func(ctx context.Context, o *Options) (float64, error) {
			return rawSQLInsert(ctx, db.SQL(), sqliteRawTable, true, sqlstore.SQLiteInsertRows, o)
		},
		Close: func() {
			_ = d.Close(context.Background())
			for _, suffix := range []string{"", "-wal", "-shm"} {
				_ = os.Remove(loc.Path + suffix)
			}
		},
	}, nil
}

// openPostgres opens a pgstore in the schema cfg names (a new one),
// dropped when the bench ends.
func openPostgres(ctx context.Context, loc storeurl.Location, cfg storeurl.Config) (Backend, error) {
	d, err := loc.Open(ctx, cfg)
	if err != nil {
		return Backend{}, err
	}
	db, _ := storeurl.Postgres(d)
	return Backend{
		Store: d.Store(),
		Raw: func(ctx context.Context, o *Options) (float64, error) {
			return rawSQLInsert(ctx, db.SQL(), postgresRawTable, false, sqlstore.MaxInsertRows, o)
		},
		Close: func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _ = db.SQL().ExecContext(ctx, `DROP SCHEMA `+pgx.Identifier{db.Schema()}.Sanitize()+` CASCADE`)
			_ = d.Close(ctx)
		},
	}, nil
}

func randomHex() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// The raw baseline's tables: promlib_events' columns, types, primary key
// and indexes, in each database.
var (
	sqliteRawTable   = rawTable("INTEGER", "BLOB")
	postgresRawTable = rawTable("BIGINT", "BYTEA")
)

// rawTable returns the DDL of raw_events with the database's types of a
// seq or time and of a payload.
func rawTable(bigint, bytes string) []string {
	return []string{
		`CREATE TABLE raw_events (
			topic TEXT NOT NULL, seq ` + bigint + ` NOT NULL, id TEXT NOT NULL, ts ` + bigint + ` NOT NULL,
			rkey TEXT NOT NULL, part INTEGER NOT NULL, headers TEXT, payload ` + bytes + ` NOT NULL,
			content_type TEXT NOT NULL, caused_by TEXT, tags TEXT, sid TEXT NOT NULL,
			PRIMARY KEY (topic, seq)
		)`,
		`CREATE UNIQUE INDEX raw_events_id ON raw_events (topic, id)`,
		`CREATE INDEX raw_events_key ON raw_events (topic, rkey, seq) WHERE rkey <> ''`,
	}
}

// rawSQLInsert measures the database's ceiling through the store's own
// connection: n rows shaped like the store's (same columns, payload size
// and ids), in batches of sqlstore.DefaultMaxBatch rows, each its own
// transaction (one commit, as the store's group commit), one at a time,
// into a table with the same keys and indexes. A batch is written as
// multi-row INSERTs of perInsert rows, the statement size of the store's
// group commit on that database: on SQLite, whose driver binds parameters
// in time quadratic in their number, one INSERT of the whole batch is
// slower. Parameters are ? on SQLite (anon), bound by position, and $N on
// PostgreSQL. It returns inserts per second.
func rawSQLInsert(ctx context.Context, db *sql.DB, ddl []string, anon bool, perInsert int, o *Options) (float64, error) {
	for _, q := range ddl {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return 0, fmt.Errorf("create raw_events: %w", err)
		}
	}
	const cols = 12
	now := time.Now().UnixMilli()
	args := make([]any, 0, perInsert*cols)
	var b strings.Builder
	start := time.Now()
	for lo := 0; lo < o.N; lo += sqlstore.DefaultMaxBatch {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		batchEnd := min(lo+sqlstore.DefaultMaxBatch, o.N)
		for first := lo; first < batchEnd; first += perInsert {
			last := min(first+perInsert, batchEnd)
			b.Reset()
			b.WriteString(`INSERT INTO raw_events (topic, seq, id, ts, rkey, part, headers, payload, content_type, caused_by, tags, sid) VALUES `)
			args = args[:0]
			for i := first; i < last; i++ {
				if i > first {
					b.WriteString(", ")
				}
				b.WriteByte('(')
				for j := range cols {
					if j > 0 {
						b.WriteString(", ")
					}
					if anon {
						b.WriteByte('?')
					} else {
						b.WriteByte('$')
						b.WriteString(strconv.Itoa(len(args) + j + 1))
					}
				}
				b.WriteByte(')')
				args = append(args, benchTopic, int64(i+1), fmt.Sprintf("0192d6f0-0000-7000-8000-%012d", i), now,
					"", int64(0), nil, makePayload(i, o.Payload), "", nil, nil, "")
			}
			if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
				_ = tx.Rollback()
				return 0, fmt.Errorf("insert rows %d-%d: %w", first, last-1, err)
			}
		}
		if err := tx.Commit(); err != nil {
			return 0, err
		}
	}
	return float64(o.N) / time.Since(start).Seconds(), nil
}
