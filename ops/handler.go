package ops

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/httpx"
)

// Error codes of the JSON error bodies, besides those of [auth.WriteError]
// for authorization errors.
const (
	CodeBadRequest       = "bad_request"        // a bad or missing parameter (400)
	CodeNotFound         = "not_found"          // no such path, group cursor or key (404)
	CodeMethodNotAllowed = "method_not_allowed" // e.g. GET on /ops/dlq/redrive (405)
	CodeNotSupported     = "not_supported"      // the store cannot do it (501)
	CodeInternal         = "internal"           // a store error (500)
)

// maxBody bounds the JSON body of a POST.
const maxBody = 64 << 10

// Handler serves the ops endpoints and the dashboard; see the package
// documentation for the paths.
type Handler struct {
	cfg  Config
	bus  *event.Bus
	page dashboardPage

	redriveMu sync.Mutex
}

// NewHandler returns a Handler for cfg.
func NewHandler(cfg Config) (*Handler, error) {
	cfg.Topics = slices.Clone(cfg.Topics)
	if cfg.Groups != nil {
		gs := make(map[string][]string, len(cfg.Groups))
		for t, g := range cfg.Groups {
			gs[t] = slices.Clone(g)
		}
		cfg.Groups = gs
	}
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Handler{cfg: cfg, bus: cfg.Bus, page: newDashboardPage()}, nil
}

// Prefix returns the path the handler serves under.
func (h *Handler) Prefix() string { return h.cfg.Prefix }

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, h.cfg.Prefix)
	if !ok {
		writeError(w, http.StatusNotFound, CodeNotFound, "no such path: "+r.URL.Path)
		return
	}
	switch rest {
	case "":
		u := *r.URL
		u.Path = h.cfg.Prefix + "/"
		http.Redirect(w, r, u.String(), http.StatusMovedPermanently)
	case "/":
		if !allow(w, r, http.MethodGet, http.MethodHead) {
			return
		}
		h.page.serve(w, r)
	case "/topics":
		h.serveJSON(w, r, http.MethodGet, h.topicsEndpoint)
	case "/cursors":
		h.serveJSON(w, r, http.MethodGet, h.cursorsEndpoint)
	case "/lag":
		h.serveJSON(w, r, http.MethodGet, h.lagEndpoint)
	case "/inflight":
		h.serveJSON(w, r, http.MethodGet, h.inflightEndpoint)
	case "/latest":
		h.serveJSON(w, r, http.MethodGet, h.latestEndpoint)
	case "/dlq":
		h.serveJSON(w, r, http.MethodGet, h.dlqEndpoint)
	case "/dlq/redrive":
		h.serveJSON(w, r, http.MethodPost, h.redriveEndpoint)
	default:
		writeError(w, http.StatusNotFound, CodeNotFound, "no such path: "+r.URL.Path)
	}
}

// allow answers 405 unless r's method is one of methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	if slices.Contains(methods, r.Method) {
		return true
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed,
		fmt.Sprintf("method %s not allowed; use %s", r.Method, strings.Join(methods, " or ")))
	return false
}

type endpoint func(r *http.Request, p params) (any, error)

func (h *Handler) serveJSON(w http.ResponseWriter, r *http.Request, method string, ep endpoint) {
	methods := []string{method}
	if method == http.MethodGet {
		methods = append(methods, http.MethodHead)
	}
	if !allow(w, r, methods...) {
		return
	}
	p, err := readParams(r)
	if err == nil {
		var v any
		if v, err = ep(r, p); err == nil {
			writeJSON(w, http.StatusOK, v)
			return
		}
	}
	h.writeErr(w, r, err)
}

// authorize asks Config.Authorize about a; its error is answered as
// auth.WriteError does.
func (h *Handler) authorize(r *http.Request, a Access) error {
	if h.cfg.Authorize == nil {
		return nil
	}
	if err := h.cfg.Authorize(r, a); err != nil {
		return &authError{err}
	}
	return nil
}

type authError struct{ err error }

func (e *authError) Error() string { return e.err.Error() }
func (e *authError) Unwrap() error { return e.err }

func (h *Handler) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	var ae *authError
	switch {
	case errors.As(err, &ae):
		auth.WriteError(w, ae.err)
	case errors.Is(err, ErrInvalid), errors.Is(err, event.ErrInvalid):
		writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, err.Error())
	case errors.Is(err, ErrNotSupported):
		writeError(w, http.StatusNotImplemented, CodeNotSupported, err.Error())
	default:
		if r.Context().Err() == nil {
			h.cfg.Logger.Error("ops: request failed", "path", r.URL.Path, "err", err)
		}
		writeError(w, http.StatusInternalServerError, CodeInternal, "internal error")
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, httpx.ErrorBody{Error: httpx.ErrorDetail{Code: code, Msg: msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(httpx.ErrorBody{Error: httpx.ErrorDetail{Code: CodeInternal, Msg: "internal error"}})
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// params are a request's parameters: its query, and for a POST the fields
// of a JSON object body. Each may be given once.
type params struct {
	v    url.Values
	used map[string]bool
}

func readParams(r *http.Request) (params, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return params{}, invalid("query", "%v", err)
	}
	for k, vs := range q {
		if len(vs) > 1 {
			return params{}, invalid(k, "given %d times", len(vs))
		}
	}
	if r.Method == http.MethodPost && r.Body != nil {
		if err := readBody(r, q); err != nil {
			return params{}, err
		}
	}
	return params{v: q, used: make(map[string]bool)}, nil
}

// readBody adds the fields of a JSON object body to q. An empty body is
// none; another content type than JSON is refused.
func readBody(r *http.Request, q url.Values) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return invalid("body", "%v", err)
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil
	}
	if len(b) > maxBody {
		return invalid("body", "more than %d bytes", maxBody)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, _ := mime.ParseMediaType(ct); mt != "application/json" {
			return invalid("body", "content type %q, want application/json", ct)
		}
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		return invalid("body", "not a JSON object: %v", err)
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if q.Has(k) {
			return invalid(k, "given both in the query and in the body")
		}
		switch v := obj[k].(type) {
		case string:
			q.Set(k, v)
		case float64:
			q.Set(k, strconv.FormatFloat(v, 'f', -1, 64))
		default:
			return invalid(k, "want a string or a number in the body")
		}
	}
	return nil
}

// str returns parameter name, or "" when it is absent.
func (p params) str(name string) string {
	p.used[name] = true
	return p.v.Get(name)
}

func (p params) topic(name string, required bool) (string, error) {
	t := p.str(name)
	if t == "" && !required {
		return "", nil
	}
	if !p.v.Has(name) {
		return "", invalid(name, "required")
	}
	if err := event.ValidateTopic(t); err != nil {
		return "", invalid(name, "%s", fieldMsg(err))
	}
	return t, nil
}

func (p params) group(name string, required bool) (string, error) {
	g := p.str(name)
	if g == "" && !required {
		return "", nil
	}
	if !p.v.Has(name) {
		return "", invalid(name, "required")
	}
	if err := event.ValidateGroup(g); err != nil {
		return "", invalid(name, "%s", fieldMsg(err))
	}
	return g, nil
}

// uint returns parameter name as an unsigned integer in [lo, hi], or def
// when it is absent.
func (p params) uint(name string, def, lo, hi uint64) (uint64, error) {
	s := p.str(name)
	if !p.v.Has(name) {
		return def, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, invalid(name, "%q, want an integer from %d to %d", s, lo, hi)
	}
	return n, nil
}

// done reports parameters the endpoint did not read.
func (p params) done() error {
	var unknown []string
	for k := range p.v {
		if !p.used[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	known := slices.Sorted(maps.Keys(p.used))
	return invalid(unknown[0], "unknown parameter (this endpoint takes %s)", orNone(known))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// fieldMsg strips the package and field prefix of an event.ErrInvalid
// error, whose field the caller names again.
func fieldMsg(err error) string {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, event.ErrInvalid.Error()+": "); ok {
		if _, tail, ok := strings.Cut(rest, ": "); ok {
			return tail
		}
		return rest
	}
	return msg
}
