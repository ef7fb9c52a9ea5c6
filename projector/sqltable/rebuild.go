package sqltable

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/projector/internal/changelog"
)

// Rebuild replays the topic from its first event into a new table and
// swaps it in, in one transaction. The group's cursor does not move.
//
// The new table is filled page by page, then the swap transaction locks
// the table (PostgreSQL: LOCK TABLE ... IN EXCLUSIVE MODE; SQLite: the
// transaction's first statement takes the database's write lock), writes
// the events published since, drops the view and the old table, renames
// the new one and makes the view again. Readers see the old table until
// the commit and the new one after; a writer of the table in another
// process waits for the commit and then writes the new table, where its
// seq guard keeps what the rebuild wrote if newer. One Rebuild of a table
// runs at a time.
func (t *Table) Rebuild(ctx context.Context) error {
	if err := t.EnsureTable(ctx); err != nil {
		return err
	}
	err := t.inTx(ctx, func(tx *sql.Tx) error {
		for _, q := range []string{
			`DROP TABLE IF EXISTS ` + quote(t.rebuild),
			`CREATE TABLE ` + quote(t.rebuild) + ` (` + t.cfg.Dialect.columns() + `)`,
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	}, "rebuild: create "+t.rebuild)
	if err != nil {
		return err
	}
	st := t.cfg.Bus.Store()
	after, err := changelog.Replay(ctx, "sqltable", st, t.cfg.Topic, 0, t.cfg.BatchSize, func(recs []event.Record) error {
		rows := t.rowsOf(recs)
		if len(rows) == 0 {
			return nil
		}
		return t.inTx(ctx, func(tx *sql.Tx) error { return upsert(ctx, tx, t.rebuild, rows) }, "rebuild: write "+t.rebuild)
	})
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inTx(ctx, func(tx *sql.Tx) error {
		first := []string{`DROP VIEW IF EXISTS ` + quote(t.view)}
		if t.cfg.Dialect == Postgres {
			first = append([]string{`LOCK TABLE ` + quote(t.rows) + ` IN EXCLUSIVE MODE`}, first...)
		}
		for _, q := range first {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		// The table is locked: catch up with the events published since.
		_, err := changelog.Replay(ctx, "sqltable", st, t.cfg.Topic, after, t.cfg.BatchSize, func(recs []event.Record) error {
			return upsert(ctx, tx, t.rebuild, t.rowsOf(recs))
		})
		if err != nil {
			return err
		}
		for _, q := range []string{
			`DROP TABLE ` + quote(t.rows),
			`ALTER TABLE ` + quote(t.rebuild) + ` RENAME TO ` + quote(t.rows),
			t.cfg.Dialect.createView(t.view, t.rows),
		} {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("swap: %w", err)
			}
		}
		return nil
	}, "rebuild: swap "+t.rebuild+" for "+t.rows)
}
