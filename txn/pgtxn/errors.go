package pgtxn

import "errors"

var (
	// ErrInvalid is wrapped by errors about bad arguments; the message
	// names the argument.
	ErrInvalid = errors.New("pgtxn: invalid argument")
	// ErrOtherPool is returned by [From] when ctx carries transactions,
	// none of them of the pool asked for: a store on that pool cannot
	// write in the caller's transaction.
	ErrOtherPool = errors.New("pgtxn: the context carries a transaction of another pool")
)
