package storeurl

import (
	"fmt"
	"net/url"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/promethean/promlib/pgdb"
)

// Kind is the database of a [Location].
type Kind string

// The kinds of database.
const (
	KindMemory   Kind = "memory"
	KindSQLite   Kind = "sqlite"
	KindPostgres Kind = "postgres"
	KindMongoDB  Kind = "mongodb"
)

// Name is the kind's name for people: "memory", "SQLite", "PostgreSQL"
// or "MongoDB".
func (k Kind) Name() string {
	switch k {
	case KindSQLite:
		return "SQLite"
	case KindPostgres:
		return "PostgreSQL"
	case KindMongoDB:
		return "MongoDB"
	}
	return string(k)
}

// Usage lists the grammar in one line, for flag help and messages.
const Usage = "memory, sqlite:PATH, postgres://..., postgresql://..., mongodb://... or mongodb+srv://..."

// DefaultSQLiteFile is the file a program suggests for sqlite:PATH.
const DefaultSQLiteFile = "promlib.db"

// Location is a parsed store string.
type Location struct {
	Kind Kind
	// Path is the SQLite file (KindSQLite), as given.
	Path string
	// URL is the PostgreSQL or MongoDB URL (KindPostgres, KindMongoDB), as
	// given; it may hold a password: log [Location.String] instead.
	URL string
}

// String returns the location in the grammar, with a URL's password
// replaced by "xxxxx".
func (l Location) String() string {
	switch l.Kind {
	case KindSQLite:
		return "sqlite:" + l.Path
	case KindPostgres, KindMongoDB:
		if u, err := url.Parse(l.URL); err == nil {
			return u.Redacted()
		}
		return string(l.Kind) + "://..." // not from Parse
	}
	return string(l.Kind)
}

func parseErr(sentinel error, format string, args ...any) error {
	return &ParseError{Err: sentinel, Msg: fmt.Sprintf(format, args...)}
}

// Parse reads s in the grammar of the package documentation. A bad s is
// a [*ParseError] naming the problem. It does no I/O: a SQLite file's
// directory and a server are checked by [Location.Open].
func Parse(s string) (Location, error) {
	scheme, rest, hasScheme := strings.Cut(s, ":")
	switch {
	case s == "":
		return Location{}, parseErr(ErrEmpty, "empty, want %s", Usage)
	case s == string(KindMemory):
		return Location{Kind: KindMemory}, nil
	case !hasScheme:
		if want, ok := kindNames[strings.ToLower(s)]; ok {
			return Location{}, parseErr(ErrNoScheme, "%q names a database, not where it is: want %s", s, want)
		}
		return Location{}, parseErr(ErrNoScheme, "%q has no scheme, want %s (a SQLite file is sqlite:%s)", s, Usage, s)
	}
	switch strings.ToLower(scheme) {
	case "sqlite":
		return parseSQLite(rest)
	case "postgres", "postgresql":
		if !strings.HasPrefix(rest, "//") {
			return Location{}, parseErr(ErrPostgresURL, "a PostgreSQL store is a URL, %s://[user[:password]@]host[:port]/database", scheme)
		}
		if err := checkPostgresURL(s); err != nil {
			return Location{}, err
		}
		return Location{Kind: KindPostgres, URL: s}, nil
	case "mongodb", "mongodb+srv":
		if !strings.HasPrefix(rest, "//") || len(rest) == 2 {
			return Location{}, parseErr(ErrMongoURL, "a MongoDB store is a URL, %s://host[:port][/...]", scheme)
		}
		if strings.EqualFold(scheme, "mongodb") { // +srv: the driver looks its records up
			if err := checkMongoURL(s); err != nil {
				return Location{}, err
			}
		}
		return Location{Kind: KindMongoDB, URL: s}, nil
	}
	// The scheme alone: a URL's rest may hold a password.
	return Location{}, parseErr(ErrUnknownScheme, "unknown scheme %q, want %s", scheme, Usage)
}

// kindNames are the bare names of databases, with what to give instead.
var kindNames = map[string]string{
	"sqlite":     "sqlite:PATH such as sqlite:" + DefaultSQLiteFile,
	"postgres":   "a URL, postgres://[user[:password]@]host[:port]/database",
	"postgresql": "a URL, postgresql://[user[:password]@]host[:port]/database",
	"pg":         "a URL, postgres://[user[:password]@]host[:port]/database",
	"mongodb":    "a URL, mongodb://host[:port][/...]",
	"mongo":      "a URL, mongodb://host[:port][/...]",
}

// parseSQLite checks the PATH of sqlite:PATH.
func parseSQLite(path string) (Location, error) {
	switch {
	case path == "":
		return Location{}, parseErr(ErrSQLitePath, "sqlite: with an empty path, want sqlite:PATH such as sqlite:%s", DefaultSQLiteFile)
	case path == ":memory:":
		return Location{}, parseErr(ErrSQLitePath, "sqlite::memory: is not kept anywhere; use memory for a store in memory")
	case strings.HasPrefix(path, "//"):
		return Location{}, parseErr(ErrSQLitePath, "sqlite:%s: want sqlite:PATH, a file name (sqlite:/var/lib/hub/events.db, sqlite:%s)", path, DefaultSQLiteFile)
	case strings.ContainsAny(path, "?#"):
		return Location{}, parseErr(ErrSQLitePath, "sqlite:%s: the path may not hold '?' or '#' (SQLite's options are promlib's)", path)
	}
	return Location{Kind: KindSQLite, Path: path}, nil
}

// checkPostgresURL checks a PostgreSQL URL as the driver will read it;
// its error never repeats the URL's password.
func checkPostgresURL(v string) error {
	if err := pgdb.CheckURL(v); err != nil {
		msg := strings.TrimPrefix(err.Error(), pgdb.ErrInvalid.Error()+": URL: ")
		return parseErr(ErrPostgresURL, "bad PostgreSQL URL: %s", msg)
	}
	return nil
}

// checkMongoURL checks a mongodb:// URL as the driver will read it (a
// mongodb+srv:// one is not checked here: the driver looks its DNS records
// up as it reads it, and Parse does no I/O); its error never repeats the
// URL's password.
func checkMongoURL(v string) error {
	if err := options.Client().ApplyURI(v).Validate(); err != nil {
		msg := err.Error()
		if u, perr := url.Parse(v); perr == nil {
			if pw, ok := u.User.Password(); ok && pw != "" {
				msg = strings.ReplaceAll(msg, pw, "xxxxx")
			}
		}
		return parseErr(ErrMongoURL, "bad MongoDB URL: %s", msg)
	}
	return nil
}
