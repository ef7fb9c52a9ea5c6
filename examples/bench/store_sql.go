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
	"github.com/jackc/pgx/v5/pgtype"

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
		DB:    d,
		Raw: func(ctx context.Context, o *Options) (float64, error) {
			return rawSQLInsert(ctx, db.SQL(), sqliteRawTable, true, sqlstore.SQLiteInsertRows, o)
		},
		RawEach: func(ctx context.Context, o *Options) (RawEach, error) {
			return rawSQLCommitEach(ctx, db.SQL(), sqliteRawTable, true, o)
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
		DB:    d,
		Raw: func(ctx context.Context, o *Options) (float64, error) {
			return rawSQLInsert(ctx, db.SQL(), postgresRawTable, false, sqlstore.MaxInsertRows, o)
		},
		RawArrays: func(ctx context.Context, o *Options) (float64, error) {
			return rawPGArrayInsert(ctx, db.SQL(), o)
		},
		RawEach: func(ctx context.Context, o *Options) (RawEach, error) {
			return rawSQLCommitEach(ctx, db.SQL(), postgresRawTable, false, o)
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

// The raw baselines' tables: promlib_events' columns, types, primary key
// and indexes, in each database.
var (
	sqliteRawTable   = rawTable("INTEGER", "BLOB")
	postgresRawTable = rawTable("BIGINT", "BYTEA")
)

// rawTable returns the DDL of a table named by its argument, with the
// database's types of a seq or time and of a payload.
func rawTable(bigint, bytes string) func(name string) []string {
	return func(name string) []string {
		return []string{
			`CREATE TABLE ` + name + ` (
				topic TEXT NOT NULL, seq ` + bigint + ` NOT NULL, id TEXT NOT NULL, ts ` + bigint + ` NOT NULL,
				rkey TEXT NOT NULL, part INTEGER NOT NULL, headers TEXT, payload ` + bytes + ` NOT NULL,
				content_type TEXT NOT NULL, caused_by TEXT, tags TEXT, sid TEXT NOT NULL,
				PRIMARY KEY (topic, seq)
			)`,
			`CREATE UNIQUE INDEX ` + name + `_id ON ` + name + ` (topic, id)`,
			`CREATE INDEX ` + name + `_key ON ` + name + ` (topic, rkey, seq) WHERE rkey <> ''`,
		}
	}
}

// createRawTable creates the table name with the DDL of table.
func createRawTable(ctx context.Context, db *sql.DB, table func(string) []string, name string) error {
	for _, q := range table(name) {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
	}
	return nil
}

// rawArgs returns the values of row i of a raw baseline (the columns of
// rawInsertCols), shaped like the store's: seq i+1, a UUID-shaped id,
// the payload of event i.
func rawArgs(args []any, i int, now int64, o *Options) []any {
	return append(args, benchTopic, int64(i+1), fmt.Sprintf("0192d6f0-0000-7000-8000-%012d", i), now,
		"", int64(0), nil, makePayload(i, o.Payload), "", nil, nil, "")
}

const rawInsertCols = `(topic, seq, id, ts, rkey, part, headers, payload, content_type, caused_by, tags, sid)`

// rawSQLCommitEach measures what the -publishers goroutines of a -sync run
// reach without the store: each inserts its share of the n rows (split as
// publishAll splits the events) one row per statement, each statement its
// own transaction (autocommit: one round trip and one commit per row), into
// a table with the store's keys and indexes, through the store's own
// connection pool (one connection on SQLite, as its writes take; the
// pool's size on PostgreSQL). It returns inserts per second: the
// baseline of a service whose request handlers each commit their own row
// (raw_commit_each_per_s).
func rawSQLCommitEach(ctx context.Context, db *sql.DB, table func(string) []string, anon bool, o *Options) (RawEach, error) {
	const name = "raw_each"
	if err := createRawTable(ctx, db, table, name); err != nil {
		return RawEach{}, err
	}
	var b strings.Builder
	b.WriteString(`INSERT INTO ` + name + ` ` + rawInsertCols + ` VALUES (`)
	for j := range nRawCols {
		if j > 0 {
			b.WriteString(", ")
		}
		if anon {
			b.WriteByte('?')
		} else {
			b.WriteString("$" + strconv.Itoa(j+1))
		}
	}
	b.WriteByte(')')
	q := b.String()
	now := time.Now().UnixMilli()
	return commitEach(o, func(i int) error {
		_, err := db.ExecContext(ctx, q, rawArgs(make([]any, 0, nRawCols), i, now, o)...)
		return err
	})
}

// nRawCols is the number of columns of rawInsertCols.
const nRawCols = 12

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
func rawSQLInsert(ctx context.Context, db *sql.DB, table func(string) []string, anon bool, perInsert int, o *Options) (float64, error) {
	if err := createRawTable(ctx, db, table, "raw_events"); err != nil {
		return 0, err
	}
	const cols = nRawCols
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
			b.WriteString(`INSERT INTO raw_events ` + rawInsertCols + ` VALUES `)
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
				args = rawArgs(args, i, now, o)
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

// rawPGArrayInsert measures, as rawSQLInsert does, the same rows inserted
// into PostgreSQL as one array per column: one INSERT ... SELECT FROM
// unnest(...) per batch of sqlstore.DefaultMaxBatch rows, each its own
// transaction (a statement run on its own, as the store's), one at a
// time. It returns inserts per second.
func rawPGArrayInsert(ctx context.Context, db *sql.DB, o *Options) (float64, error) {
	if err := createRawTable(ctx, db, postgresRawTable, "raw_arrays"); err != nil {
		return 0, err
	}
	const q = `INSERT INTO raw_arrays ` + rawInsertCols + ` SELECT * FROM unnest($1::text[], $2::bigint[],
		$3::text[], $4::bigint[], $5::text[], $6::integer[], $7::text[], $8::bytea[], $9::text[], $10::text[],
		$11::text[], $12::text[])`
	now := time.Now().UnixMilli()
	start := time.Now()
	for lo := 0; lo < o.N; lo += sqlstore.DefaultMaxBatch {
		n := min(sqlstore.DefaultMaxBatch, o.N-lo)
		var (
			topics, ids, keys, types, sids = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			seqs, tss                      = make([]int64, n), make([]int64, n)
			parts                          = make([]int32, n)
			nulls                          = make([]pgtype.Text, n)
			payloads                       = make([][]byte, n)
		)
		for k := range n {
			row := rawArgs(nil, lo+k, now, o)
			topics[k], seqs[k], ids[k], tss[k], keys[k] = row[0].(string), row[1].(int64), row[2].(string), row[3].(int64), row[4].(string)
			parts[k], payloads[k], types[k], sids[k] = int32(row[5].(int64)), row[7].([]byte), row[8].(string), row[11].(string)
		}
		if _, err := db.ExecContext(ctx, q, topics, seqs, ids, tss, keys, parts, nulls, payloads, types, nulls, nulls, sids); err != nil {
			return 0, fmt.Errorf("insert rows %d-%d: %w", lo, lo+n-1, err)
		}
	}
	return float64(o.N) / time.Since(start).Seconds(), nil
}
