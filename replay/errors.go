package replay

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by every error about bad input: a bad query
	// parameter (a [*ParamError]) or a bad [Config] field. The message names
	// the parameter or field.
	ErrInvalid = errors.New("replay: invalid argument")
	// ErrNotFound is returned when the record a request names does not
	// exist: no record with the afterId of a replay, no latest record of a
	// key.
	ErrNotFound = errors.New("replay: not found")
	// ErrNotSupported is returned by /latest when the store is not an
	// [event.KeyStore].
	ErrNotSupported = errors.New("replay: not supported by the store")
)

// Error codes of the JSON error bodies, besides those of [auth.ErrorStatus]
// (unauthorized, auth_failed, token_expired, forbidden, auth_unavailable),
// which the handler uses for authentication and authorization.
const (
	CodeBadRequest       = "bad_request"        // a bad query parameter (400)
	CodeNotFound         = "not_found"          // no such record or endpoint (404)
	CodeMethodNotAllowed = "method_not_allowed" // not GET (405)
	CodeNotImplemented   = "not_implemented"    // the store lacks the feature (501)
	CodeInternal         = "internal"           // the store failed (500)
)

// ParamError is a bad query parameter. errors.Is(err, [ErrInvalid])
// holds for it.
type ParamError struct {
	// Param is the name of the parameter, as in the query string ("limit",
	// "fromTs"), or "query" when the query string itself cannot be parsed.
	Param string
	// Msg says what is wrong with it.
	Msg string
}

func (e *ParamError) Error() string { return "replay: " + e.Param + ": " + e.Msg }

// Is reports whether target is [ErrInvalid].
func (e *ParamError) Is(target error) bool { return target == ErrInvalid }

// paramErr builds a [*ParamError].
func paramErr(param, format string, args ...any) *ParamError {
	return &ParamError{Param: param, Msg: fmt.Sprintf(format, args...)}
}

// invalid builds an error about a Config field that wraps ErrInvalid.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
