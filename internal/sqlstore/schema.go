package sqlstore

// Types are the column types of a database, where SQLite's and
// PostgreSQL's DDL differ.
type Types struct {
	// Int64 holds seqs, heads, counts, Unix times and lease tokens; Bytes
	// a payload.
	Int64, Bytes string
}

// Tables returns the SQL that creates the store's tables and indexes, in
// types t, if they are absent: the [Dialect.Schema] of a new database,
// before the migrations of older ones.
func Tables(t Types) []string {
	i, b := t.Int64, t.Bytes
	return []string{
		`CREATE TABLE IF NOT EXISTS promlib_topics (
		topic TEXT PRIMARY KEY,
		head  ` + i + ` NOT NULL,
		floor ` + i + ` NOT NULL,
		events ` + i + ` NOT NULL DEFAULT 0,
		bytes ` + i + ` NOT NULL DEFAULT 0,
		partitions ` + i + ` NOT NULL DEFAULT 0
	)`,
		`CREATE TABLE IF NOT EXISTS promlib_events (
		topic        TEXT NOT NULL,
		seq          ` + i + ` NOT NULL,
		id           TEXT NOT NULL,
		ts           ` + i + ` NOT NULL,
		rkey         TEXT NOT NULL,
		part         INTEGER NOT NULL,
		headers      TEXT,
		payload      ` + b + ` NOT NULL,
		content_type TEXT NOT NULL,
		caused_by    TEXT,
		tags         TEXT,
		sid          TEXT NOT NULL,
		PRIMARY KEY (topic, seq)
	)`,
		`CREATE UNIQUE INDEX IF NOT EXISTS promlib_events_id ON promlib_events (topic, id)`,
		`CREATE INDEX IF NOT EXISTS promlib_events_key ON promlib_events (topic, rkey, seq) WHERE rkey <> ''`,
		`CREATE TABLE IF NOT EXISTS promlib_cursors (
		topic TEXT NOT NULL, grp TEXT NOT NULL, part INTEGER NOT NULL, seq ` + i + ` NOT NULL,
		at ` + i + ` NOT NULL DEFAULT 0,
		PRIMARY KEY (topic, grp, part)
	)`,
		`CREATE TABLE IF NOT EXISTS promlib_members (
		topic TEXT NOT NULL, grp TEXT NOT NULL, member TEXT NOT NULL,
		expires ` + i + ` NOT NULL, left_at ` + i + ` NOT NULL,
		PRIMARY KEY (topic, grp, member)
	)`,
		`CREATE TABLE IF NOT EXISTS promlib_leases (
		topic TEXT NOT NULL, grp TEXT NOT NULL, part INTEGER NOT NULL,
		member TEXT NOT NULL, expires ` + i + ` NOT NULL, token ` + i + ` NOT NULL DEFAULT 0,
		PRIMARY KEY (topic, grp, part)
	)`,
		`CREATE TABLE IF NOT EXISTS promlib_groups (
		topic TEXT NOT NULL, grp TEXT NOT NULL,
		config TEXT NOT NULL DEFAULT '', at ` + i + ` NOT NULL DEFAULT 0,
		PRIMARY KEY (topic, grp)
	)`,
		`CREATE TABLE IF NOT EXISTS promlib_group_state (
		topic TEXT NOT NULL, grp TEXT NOT NULL, part INTEGER NOT NULL,
		seq ` + i + ` NOT NULL, v INTEGER NOT NULL,
		PRIMARY KEY (topic, grp, part, seq)
	)`,
	}
}
