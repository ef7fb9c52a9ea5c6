package sqldedupe

// Types are the column types of a database, where SQLite's and
// PostgreSQL's DDL differ.
type Types struct {
	// Int64 holds Unix milliseconds.
	Int64 string
	// Lock, when set, is the first statement: one that serializes the
	// creations of processes starting together.
	Lock string
}

// Schema returns the SQL that creates the table of a store in table, in
// types t, if it is absent.
func Schema(table string, t Types) []string {
	var out []string
	if t.Lock != "" {
		out = append(out, t.Lock)
	}
	return append(out,
		`CREATE TABLE IF NOT EXISTS `+table+` (
			k       TEXT PRIMARY KEY,
			owner   TEXT NOT NULL,
			done    INTEGER NOT NULL,
			expires `+t.Int64+` NOT NULL
		)`,
		`CREATE INDEX IF NOT EXISTS `+table+`_expires ON `+table+` (expires)`,
	)
}
