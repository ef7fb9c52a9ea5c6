package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/promethean/promlib/event"
)

// Topic settings for [event.TopicStore] are the partitions column of the
// topic's counter row in promlib_topics: 0 (the column's default) until
// the topic has settings, the partition count after. So the row an append
// makes has no settings, CreateTopic may make the row of a topic without
// records (its head stays 0: Head reads 0, ListTopics skips it, the first
// append takes it on), and a database of an older release gets the column
// with 0 in every row: its topics get their count from CreateTopic, which
// infers it from their records and cursors.

// createTopic stores the settings of a topic unless it has some, in one
// statement. The count inserted is the greatest of the asked one ($2) and
// one more than the highest partition of the topic's records and of its
// cursors (rows written before settings existed; for a new topic both are
// NULL, which MAX skips). An existing row is updated only while it has no
// settings (partitions = 0), so the count is set once: the statement that
// sets it returns it, every other returns no row. SQLite runs the
// statement alone (one writer); in PostgreSQL two statements that meet on
// the row (a concurrent insert, or an update of it) wait for each other
// and the second evaluates the WHERE against the row the first committed:
// it finds the settings and returns no row. The part of a record or
// cursor is an INTEGER, cast before adding 1 so that the highest partition
// (2^31-1) does not overflow PostgreSQL's.
const createTopic = `INSERT INTO promlib_topics (topic, head, floor, partitions) VALUES ($1, 0, 1, (
		SELECT MAX(n) FROM (
			SELECT CAST($2 AS BIGINT) AS n
			UNION ALL SELECT CAST(MAX(part) AS BIGINT) + 1 FROM promlib_events WHERE topic = $1
			UNION ALL SELECT CAST(MAX(part) AS BIGINT) + 1 FROM promlib_cursors WHERE topic = $1
		) AS shown))
	ON CONFLICT (topic) DO UPDATE SET partitions = excluded.partitions
	WHERE promlib_topics.partitions = 0
	RETURNING partitions`

// CreateTopic implements [event.TopicStore]. A topic with settings is
// answered by a read; otherwise the settings are created by one upsert
// (see createTopic) in a write transaction which, when the upsert finds
// that another call created them first, reads the count that call stored.
// Of concurrent calls for a topic, in this process or others, exactly one
// reports that it created the settings, and all return the same count
// (or a greater one that AddPartitions set since).
//
// The count of a topic of an older release is computed from its records
// in the statement: a scan of the topic's records, once. On SQLite it
// holds the write lock while it runs.
func (s *Store) CreateTopic(ctx context.Context, topic string, cfg event.TopicConfig) (event.TopicConfig, bool, error) {
	if err := event.ValidateTopic(topic); err != nil {
		return event.TopicConfig{}, false, s.errorf("create topic: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return event.TopicConfig{}, false, s.errorf("create topic %q: %w", topic, err)
	}
	n, err := s.partitions(ctx, s.r, topic)
	if err != nil {
		return event.TopicConfig{}, false, s.errorf("create topic %q: %w", topic, err)
	}
	if n > 0 {
		return event.TopicConfig{Partitions: n}, false, nil
	}
	created := false
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		var p int64
		err := tx.QueryRowContext(ctx, createTopic, topic, int64(cfg.Partitions)).Scan(&p)
		if err == nil {
			n, created = int(p), true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// Created by another call, which committed: the upsert waited
		// for it (PostgreSQL) or ran after it (SQLite).
		n, err = s.partitions(ctx, tx, topic)
		if err == nil && n <= 0 {
			err = errors.New("the topic's settings vanished") // never: a count is never set back to 0
		}
		return err
	})
	if err != nil {
		return event.TopicConfig{}, false, s.errorf("create topic %q: %w", topic, err)
	}
	return event.TopicConfig{Partitions: n}, created, nil
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// partitions returns the stored partition count of topic, 0 when it has
// no settings.
func (s *Store) partitions(ctx context.Context, q querier, topic string) (int, error) {
	var n int64
	err := q.QueryRowContext(ctx, `SELECT partitions FROM promlib_topics WHERE topic = $1`, topic).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return int(n), nil
}

// Topic implements [event.TopicStore].
func (s *Store) Topic(ctx context.Context, topic string) (event.TopicConfig, error) {
	n, err := s.partitions(ctx, s.r, topic)
	if err != nil {
		return event.TopicConfig{}, s.errorf("settings of topic %q: %w", topic, err)
	}
	if n <= 0 {
		return event.TopicConfig{}, s.errorf("settings of topic %q: %w", topic, event.ErrNotFound)
	}
	return event.TopicConfig{Partitions: n}, nil
}

// AddPartitions implements [event.TopicStore] with one UPDATE that raises
// the count of a topic with settings to n if it is lower and returns the
// count it leaves, max(stored, n): a count greater than n is one the
// topic had, and the call is refused (the statement rewrote the row with
// its own value: nothing changed). No row returned: the topic has no
// settings.
func (s *Store) AddPartitions(ctx context.Context, topic string, n int) error {
	if err := event.ValidateTopic(topic); err != nil {
		return s.errorf("add partitions: %w", err)
	}
	if err := (event.TopicConfig{Partitions: n}).Validate(); err != nil {
		return s.errorf("add partitions to %q: %w", topic, err)
	}
	var now int64
	err := s.w.QueryRowContext(ctx, `UPDATE promlib_topics SET partitions = CASE WHEN partitions < $2 THEN $2 ELSE partitions END
		WHERE topic = $1 AND partitions > 0
		RETURNING partitions`, topic, int64(n)).Scan(&now)
	if errors.Is(err, sql.ErrNoRows) {
		return s.errorf("add partitions to %q: %w: the topic has no settings", topic, event.ErrNotFound)
	}
	if err != nil {
		return s.errorf("add partitions to %q: %w", topic, err)
	}
	if now > int64(n) {
		return s.errorf("add partitions to %q: %w: partitions: topic %q has %d, asked for %d: partitions cannot be removed (records keep the partition they were stored in), only added",
			topic, event.ErrInvalid, topic, now, n)
	}
	return nil
}
