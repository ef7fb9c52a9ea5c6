package storeurl

import "errors"

// Sentinels of [ParseError], for errors.Is.
var (
	// ErrEmpty: the string is empty.
	ErrEmpty = errors.New("storeurl: empty")
	// ErrNoScheme: the string is not memory and has no scheme (a bare
	// file name, say).
	ErrNoScheme = errors.New("storeurl: no scheme")
	// ErrUnknownScheme: a scheme other than sqlite, postgres, postgresql,
	// mongodb and mongodb+srv.
	ErrUnknownScheme = errors.New("storeurl: unknown scheme")
	// ErrSQLitePath: sqlite: with a path that is not a file name.
	ErrSQLitePath = errors.New("storeurl: bad SQLite path")
	// ErrPostgresURL: a postgres: string that is not a URL pgx reads.
	ErrPostgresURL = errors.New("storeurl: bad PostgreSQL URL")
	// ErrMongoURL: a mongodb: string that is not a URL with a host.
	ErrMongoURL = errors.New("storeurl: bad MongoDB URL")
)

// ErrInvalid is wrapped by the error of [Open] for a bad [Config]; the
// message names the field.
var ErrInvalid = errors.New("storeurl: invalid argument")

// ParseError is a string that is no store: Msg names the problem and what
// is allowed, in one line without the package's prefix (a program puts its
// flag's name there instead: "-store: " + Msg), and never holds a URL's
// password. Err is one of the sentinels above.
type ParseError struct {
	Err error
	Msg string
}

func (e *ParseError) Error() string { return "storeurl: " + e.Msg }

// Unwrap returns the sentinel.
func (e *ParseError) Unwrap() error { return e.Err }
