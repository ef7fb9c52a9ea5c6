package sqlitedb

import "errors"

var (
	// ErrInvalid is wrapped by every error about a bad setting; the
	// message names the field.
	ErrInvalid = errors.New("sqlitedb: invalid argument")
	// ErrNoDirectory is wrapped by the error of [Open] when the file's
	// directory does not exist (SQLite's own message for it is "unable to
	// open database file").
	ErrNoDirectory = errors.New("sqlitedb: directory does not exist")
	// ErrIsDirectory is wrapped by the error of [Open] when the path names
	// a directory.
	ErrIsDirectory = errors.New("sqlitedb: is a directory")
)
