package sqltxn

import "errors"

var (
	// ErrInvalid is wrapped by errors about bad arguments; the message
	// names the argument.
	ErrInvalid = errors.New("sqltxn: invalid argument")
	// ErrOtherDB is returned by [From] when ctx carries transactions,
	// none of them of the database asked for: a store of that database
	// cannot write in the caller's transaction.
	ErrOtherDB = errors.New("sqltxn: the context carries a transaction of another database")
)
