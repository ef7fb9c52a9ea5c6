package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/promethean/promlib/event"
)

// Group settings for [event.GroupStore] are the config column of the
// group's row in promlib_groups: the settings as JSON
// ([event.GroupConfig.MarshalJSON]: durations in whole milliseconds), ''
// (the column's default) while the group has none. The row's at is the
// time the settings were created. So the row a cursor write makes (see
// [Store.knowGroup]) has no settings, CreateGroup may make the row of a
// group without cursors, and a database of an older release gets the
// columns with '' and 0 in every row: its groups get settings at their
// first CreateGroup (a Bus's Subscribe).

// createGroup stores the settings of a group unless it has some, in one
// statement: an existing row is updated only while it has none, so the
// settings are set once. The statement that sets them returns them,
// every other returns no row. SQLite runs the statement alone (one
// writer); in PostgreSQL two statements that meet on the row (a
// concurrent insert, or an update of it) wait for each other and the
// second evaluates the WHERE against the row the first committed: it
// finds the settings and returns no row.
const createGroup = `INSERT INTO promlib_groups (topic, grp, config, at) VALUES ($1, $2, $3, $4)
	ON CONFLICT (topic, grp) DO UPDATE SET config = excluded.config, at = excluded.at
	WHERE promlib_groups.config = ''
	RETURNING config`

// CreateGroup implements [event.GroupStore]. A group with settings is
// answered by a read; otherwise the settings are created by one upsert
// (see createGroup) in a write transaction which, when the upsert finds
// that another call created them first, reads the settings that call
// stored. Of concurrent calls for a group, in this process or others,
// exactly one reports that it created the settings, and all return the
// same settings (or those an UpdateGroup set since). The settings
// returned are those stored, read back from their JSON, also to the call
// that created them.
func (s *Store) CreateGroup(ctx context.Context, topic, group string, cfg event.GroupConfig) (event.GroupConfig, bool, error) {
	if err := cfg.Validate(); err != nil {
		return event.GroupConfig{}, false, s.errorf("create group %q of %q: %w", group, topic, err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return event.GroupConfig{}, false, s.errorf("create group %q of %q: %w", group, topic, err)
	}
	stored, err := s.groupConfig(ctx, s.r, topic, group)
	if err != nil {
		return event.GroupConfig{}, false, s.errorf("create group %q of %q: %w", group, topic, err)
	}
	if stored != "" {
		s.knownGroup(topic, group)
		got, err := decodeGroupConfig(stored)
		if err != nil {
			return event.GroupConfig{}, false, s.errorf("settings of group %q of %q: %w", group, topic, err)
		}
		return got, false, nil
	}
	created := false
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, createGroup, topic, group, string(js), s.cfg.Clock.Now().UnixNano()).Scan(&stored)
		if err == nil {
			created = true
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		// Created by another call, which committed: the upsert waited
		// for it (PostgreSQL) or ran after it (SQLite).
		stored, err = s.groupConfig(ctx, tx, topic, group)
		if err == nil && stored == "" {
			err = errors.New("the group's settings vanished") // never: settings are not set back to ''
		}
		return err
	})
	if err != nil {
		return event.GroupConfig{}, false, s.errorf("create group %q of %q: %w", group, topic, err)
	}
	s.knownGroup(topic, group)
	got, err := decodeGroupConfig(stored)
	if err != nil {
		return event.GroupConfig{}, false, s.errorf("settings of group %q of %q: %w", group, topic, err)
	}
	return got, created, nil
}

// GroupConfig implements [event.GroupStore].
func (s *Store) GroupConfig(ctx context.Context, topic, group string) (event.GroupConfig, error) {
	stored, err := s.groupConfig(ctx, s.r, topic, group)
	if err != nil {
		return event.GroupConfig{}, s.errorf("settings of group %q of %q: %w", group, topic, err)
	}
	if stored == "" {
		return event.GroupConfig{}, s.errorf("settings of group %q of %q: %w", group, topic, event.ErrNotFound)
	}
	cfg, err := decodeGroupConfig(stored)
	if err != nil {
		return event.GroupConfig{}, s.errorf("settings of group %q of %q: %w", group, topic, err)
	}
	return cfg, nil
}

// UpdateGroup implements [event.GroupStore] with one UPDATE of a row that
// has settings; no row changed: the group has none. Settings that fail
// [event.GroupConfig.Validate] are refused before anything is written.
func (s *Store) UpdateGroup(ctx context.Context, topic, group string, cfg event.GroupConfig) error {
	if err := cfg.Validate(); err != nil {
		return s.errorf("update group %q of %q: %w", group, topic, err)
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return s.errorf("update group %q of %q: %w", group, topic, err)
	}
	n, err := s.exec(ctx, `UPDATE promlib_groups SET config = $3 WHERE topic = $1 AND grp = $2 AND config <> ''`, topic, group, string(js))
	if err != nil {
		return s.errorf("update group %q of %q: %w", group, topic, err)
	}
	if n == 0 {
		return s.errorf("update group %q of %q: %w: the group has no settings", group, topic, event.ErrNotFound)
	}
	return nil
}

// groupConfig returns the stored settings of group on topic as JSON, ""
// when it has none.
func (s *Store) groupConfig(ctx context.Context, q querier, topic, group string) (string, error) {
	var js string
	err := q.QueryRowContext(ctx, `SELECT config FROM promlib_groups WHERE topic = $1 AND grp = $2`, topic, group).Scan(&js)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return js, err
}

// decodeGroupConfig reads settings stored as JSON.
func decodeGroupConfig(js string) (event.GroupConfig, error) {
	var cfg event.GroupConfig
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		return cfg, fmt.Errorf("stored settings %q: %w", js, err)
	}
	return cfg, nil
}
