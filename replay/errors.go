package replay

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by the errors of [Config.Validate] and [New]; the
// message names the field.
var ErrInvalid = errors.New("replay: invalid argument")

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

// paramError is a bad query parameter, answered 400 with the message
// "<param>: <msg>".
type paramError struct {
	// param is the name of the parameter, as in the query string ("limit",
	// "fromTs"), or "query" when the query string itself cannot be parsed.
	param string
	msg   string
}

func (e *paramError) Error() string { return "replay: " + e.param + ": " + e.msg }

// Is reports whether target is [ErrInvalid].
func (e *paramError) Is(target error) bool { return target == ErrInvalid }

// paramErr builds a [*paramError].
func paramErr(param, format string, args ...any) *paramError {
	return &paramError{param: param, msg: fmt.Sprintf(format, args...)}
}

// invalid builds an error about a Config field that wraps ErrInvalid.
func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}
