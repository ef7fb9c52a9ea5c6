package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// ErrorBody is the JSON body of every error answer:
// {"error":{"code":"...","msg":"..."}}.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of an [ErrorBody].
type ErrorDetail struct {
	Code string `json:"code"`
	Msg  string `json:"msg"`
}

// CodeUnauthorized is the code of a 401 for a request without credentials;
// its challenge names no error (RFC 6750 §3.1).
const CodeUnauthorized = "unauthorized"

// SetJSONHeaders sets the headers of a JSON answer: its content type, no
// caching, no sniffing.
func SetJSONHeaders(h http.Header) {
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
}

// WriteJSON answers with status and v as JSON. A value that cannot be
// encoded is answered 500 internal.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(ErrorBody{Error: ErrorDetail{Code: "internal", Msg: "internal error"}})
	}
	SetJSONHeaders(w.Header())
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// WriteError answers with status and an [ErrorBody]. A 401 carries a
// WWW-Authenticate: Bearer challenge (RFC 6750): without an error for
// [CodeUnauthorized] (no token), with error="invalid_token" otherwise.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	if status == http.StatusUnauthorized {
		if code == CodeUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer`)
		} else {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		}
	}
	WriteJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Msg: msg}})
}

// Errors of [ReadBody] and [DecodeJSON].
var (
	// ErrTooLarge: the body is longer than the limit.
	ErrTooLarge = errors.New("body too large")
	// ErrEmpty: the body is empty (or only white space).
	ErrEmpty = errors.New("body is empty")
	// ErrContentType: the body's content type is not application/json.
	ErrContentType = errors.New("content type is not application/json")
	// ErrBadBody: the body could not be read, or is not the JSON asked for.
	ErrBadBody = errors.New("bad body")
)

// ReadBody reads r's body, at most limit bytes. A longer body is an error
// wrapping [ErrTooLarge] (and the connection is closed after the answer, as
// [http.MaxBytesReader] does); a failed read wraps [ErrBadBody].
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
		}
		return nil, fmt.Errorf("%w: %w", ErrBadBody, err)
	}
	return b, nil
}

// DecodeJSON reads r's body within limit ([ReadBody]) and decodes it into
// v. The content type, when given, must be application/json
// ([ErrContentType]). An empty body is [ErrEmpty] and leaves v as it is;
// JSON that does not fit v wraps [ErrBadBody].
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	b, err := ReadBody(w, r, limit)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(b)) == "" {
		return ErrEmpty
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt != "application/json" {
			return fmt.Errorf("%w: %q", ErrContentType, ct)
		}
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: %w", ErrBadBody, err)
	}
	return nil
}
