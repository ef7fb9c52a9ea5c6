package sqltable

import (
	"fmt"
	"regexp"
	"strings"
)

// Dialect is the SQL database of a table.
type Dialect int

// The dialects.
const (
	// Postgres is PostgreSQL 12 or later: value is jsonb.
	Postgres Dialect = iota + 1
	// SQLite is SQLite 3.35 or later: value is TEXT holding JSON.
	SQLite
)

func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "postgres"
	case SQLite:
		return "sqlite"
	}
	return fmt.Sprintf("Dialect(%d)", int(d))
}

// MaxTableLen is the longest table name: with the suffix of the rebuild
// table ("_changelog_rebuild") it stays within PostgreSQL's 63 bytes.
const MaxTableLen = 45

// tableName is what a table name may be: lower-case letters, digits and _,
// not starting with a digit. Names are quoted in every statement as well,
// so a name that is a keyword ("order") works.
var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// validateTable reports why name cannot name a table, or nil.
func validateTable(name string) error {
	switch {
	case name == "":
		return invalid("Table", "empty")
	case len(name) > MaxTableLen:
		return invalid("Table", "%q is %d bytes, more than %d", name, len(name), MaxTableLen)
	case !tableName.MatchString(name):
		return invalid("Table", "%q: want lower-case letters, digits and _, not starting with a digit", name)
	}
	return nil
}

// quote returns name as a quoted identifier; name is valid.
func quote(name string) string { return `"` + name + `"` }

// columns returns the DDL of the columns of a table's rows in d.
func (d Dialect) columns() string {
	if d == Postgres {
		return `key TEXT PRIMARY KEY,
			seq BIGINT NOT NULL,
			ts BIGINT NOT NULL,
			deleted BOOLEAN NOT NULL,
			value JSONB,
			data BYTEA,
			content_type TEXT NOT NULL`
	}
	return `key TEXT NOT NULL PRIMARY KEY,
			seq INTEGER NOT NULL,
			ts INTEGER NOT NULL,
			deleted BOOLEAN NOT NULL,
			value TEXT,
			data BLOB,
			content_type TEXT NOT NULL`
}

// createView returns the statement that makes the view of the live rows
// of rows.
func (d Dialect) createView(view, rows string) string {
	verb := "CREATE VIEW IF NOT EXISTS"
	if d == Postgres {
		verb = "CREATE OR REPLACE VIEW"
	}
	return verb + " " + quote(view) + " AS SELECT key, seq, ts, value, data, content_type FROM " + quote(rows) + " WHERE NOT deleted"
}

// jsonOK reports whether d can hold p, a JSON value, as JSON: PostgreSQL's
// jsonb refuses the escape \u0000.
func (d Dialect) jsonOK(p []byte) bool {
	return d != Postgres || !hasNULEscape(p)
}

// keyOK reports whether d can hold key as TEXT: PostgreSQL's text refuses
// the byte 0.
func (d Dialect) keyOK(key string) bool {
	return d != Postgres || !strings.ContainsRune(key, 0)
}

// hasNULEscape reports whether the JSON text p holds the escape \u0000: a
// backslash that is not itself escaped, then u0000.
func hasNULEscape(p []byte) bool {
	s := string(p)
	for {
		i := strings.Index(s, `\u0000`)
		if i < 0 {
			return false
		}
		n := 0
		for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		s = s[i+1:]
	}
}
