package sqloutbox

// Types are the column types of a database, where SQLite's and
// PostgreSQL's DDL differ.
type Types struct {
	// Seq is the rows table's key, assigned increasing at insert.
	Seq string
	// Int64 holds Unix milliseconds and lease tokens; Bytes a payload.
	Int64, Bytes string
	// Lock, when set, is the first statement: one that serializes the
	// creations of processes starting together.
	Lock string
}

// Schema returns the SQL that creates the tables of an outbox whose rows
// are in table, in types t, if they are absent.
func Schema(table string, t Types) []string {
	var out []string
	if t.Lock != "" {
		out = append(out, t.Lock)
	}
	return append(out,
		`CREATE TABLE IF NOT EXISTS `+table+` (
			seq        `+t.Seq+`,
			id         TEXT NOT NULL UNIQUE,
			topic      TEXT NOT NULL,
			rkey       TEXT NOT NULL,
			headers    TEXT,
			payload    `+t.Bytes+` NOT NULL,
			ts         `+t.Int64+` NOT NULL,
			status     TEXT NOT NULL,
			attempts   INTEGER NOT NULL DEFAULT 0,
			last_error TEXT NOT NULL DEFAULT '',
			next_at    `+t.Int64+` NOT NULL DEFAULT 0,
			token      `+t.Int64+` NOT NULL DEFAULT 0,
			sent_at    `+t.Int64+` NOT NULL DEFAULT 0
		)`,
		`CREATE INDEX IF NOT EXISTS `+table+`_status ON `+table+` (status, seq)`,
		`CREATE INDEX IF NOT EXISTS `+table+`_sent ON `+table+` (sent_at) WHERE status = 'sent'`,
		`CREATE TABLE IF NOT EXISTS `+table+`_lease (
			name    TEXT PRIMARY KEY,
			worker  TEXT NOT NULL,
			token   `+t.Int64+` NOT NULL,
			expires `+t.Int64+` NOT NULL
		)`,
	)
}
