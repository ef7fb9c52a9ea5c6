package ops

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/httpx"
)

// Error codes of the JSON error bodies, besides those of [auth.WriteError]
// for authentication and authorization errors.
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
	mux  *http.ServeMux // routes the path below the prefix

	metric actionMetric
	charts *charts
	paths  []string // the routes below the prefix, for tests
}

// NewHandler returns a Handler for cfg.
func NewHandler(cfg Config) (*Handler, error) {
	cfg.Topics = slices.Clone(cfg.Topics)
	cfg.ChartGroups = slices.Clone(cfg.ChartGroups)
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
	m, err := newActionMetric(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, bus: cfg.Bus, page: newDashboardPage(), metric: m, charts: newCharts(cfg.ChartWindow, cfg.ChartInterval)}
	h.mux = h.routes()
	return h, nil
}

// Prefix returns the path the handler serves under.
func (h *Handler) Prefix() string { return h.cfg.Prefix }

// routes maps the paths below the prefix to the endpoints. Each path has a
// pattern with its methods (GET also serves HEAD) and one without, which
// answers any other method 405 with an Allow header; "/" answers 404.
func (h *Handler) routes() *http.ServeMux {
	mux := http.NewServeMux()
	route := func(method, path string, serve http.HandlerFunc) {
		h.paths = append(h.paths, method+" "+path)
		allowed := []string{method}
		if method == http.MethodGet {
			allowed = append(allowed, http.MethodHead)
		}
		mux.HandleFunc(method+" "+path, serve)
		mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			httpx.WriteError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed,
				fmt.Sprintf("method %s not allowed; use %s", r.Method, strings.Join(allowed, " or ")))
		})
	}
	route(http.MethodGet, "/{$}", h.page.serve)
	route(http.MethodGet, "/topics", h.serveJSON(h.topicsEndpoint))
	route(http.MethodGet, "/cursors", h.serveJSON(h.cursorsEndpoint))
	route(http.MethodGet, "/lag", h.serveJSON(h.lagEndpoint))
	route(http.MethodGet, "/inflight", h.serveJSON(h.inflightEndpoint))
	route(http.MethodGet, "/latest", h.serveJSON(h.latestEndpoint))
	route(http.MethodGet, "/dlq", h.serveJSON(h.dlqEndpoint))
	route(http.MethodPost, "/dlq/redrive", h.serveJSON(h.dlqActionEndpoint(true)))
	route(http.MethodPost, "/dlq/purge", h.serveJSON(h.dlqActionEndpoint(false)))
	route(http.MethodGet, "/groups", h.serveJSON(h.groupsEndpoint))
	route(http.MethodGet, "/events", h.serveJSON(h.eventsEndpoint))
	route(http.MethodGet, "/connections", h.serveJSON(h.connectionsEndpoint))
	route(http.MethodGet, "/settings", h.serveJSON(h.settingsEndpoint))
	route(http.MethodGet, "/charts", h.serveJSON(h.chartsEndpoint))
	route(http.MethodPost, "/cursor", h.serveJSON(h.cursorEndpoint))
	route(http.MethodPost, "/groups/delete", h.serveJSON(h.deleteGroupEndpoint))
	route(http.MethodPost, "/topics/partitions", h.serveJSON(h.addPartitionsEndpoint))
	route(http.MethodPost, "/backup", h.serveJSON(h.backupEndpoint))
	mux.HandleFunc(http.MethodPost+" /schemas", h.serveJSON(h.registerSchemaEndpoint))
	h.paths = append(h.paths, http.MethodPost+" /schemas")
	route(http.MethodGet, "/schemas", h.serveJSON(h.schemasEndpoint)) // its 405 names GET only
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		notFound(w, h.cfg.Prefix+r.URL.Path)
	})
	return mux
}

// ServeHTTP implements http.Handler: Prefix redirects to Prefix+"/", the
// paths below it are routed, anything else is 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, h.cfg.Prefix)
	switch {
	case !ok || (rest != "" && rest[0] != '/'):
		notFound(w, r.URL.Path)
		return
	case rest == "":
		u := *r.URL
		u.Path = h.cfg.Prefix + "/"
		http.Redirect(w, r, u.String(), http.StatusMovedPermanently)
		return
	case rest != "/" && path.Clean(rest) != rest:
		// ServeMux would redirect to the clean path, without the prefix.
		notFound(w, r.URL.Path)
		return
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.URL = new(url.URL)
	*r2.URL = *r.URL
	r2.URL.Path, r2.URL.RawPath = rest, ""
	h.mux.ServeHTTP(w, r2)
}

func notFound(w http.ResponseWriter, p string) {
	httpx.WriteError(w, http.StatusNotFound, CodeNotFound, "no such path: "+p)
}

type endpoint func(r *http.Request, p params) (any, error)

// serveJSON serves a JSON endpoint in the order of every HTTP edge: the
// bearer token first (401), then the parameters (400), then the
// principal's policy on the topic they name (403, by the endpoint's
// [Handler.check]).
func (h *Handler) serveJSON(ep endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		r, _, err := auth.Authenticate(h.cfg.Verifier, r)
		if err != nil {
			auth.WriteError(w, err)
			return
		}
		p, err := readParams(w, r)
		if err == nil {
			var v any
			if v, err = ep(r, p); err == nil {
				httpx.WriteJSON(w, http.StatusOK, v)
				return
			}
		}
		h.writeErr(w, r, err)
	}
}

// check asks the policy of the request's principal about action on topic
// (and group). A request about no topic needs a principal whose policy
// allows inspect on some topic (see [operator]), and shows only what is
// [inspectable]. Its error is answered as auth.WriteError does.
func (h *Handler) check(r *http.Request, action acl.Action, topic, group string) error {
	if topic == "" {
		return operator(r.Context())
	}
	if err := auth.Authorize(r.Context(), action, topic, group); err != nil {
		return &authError{err}
	}
	return nil
}

// operator refuses a principal whose policy allows inspect (or every
// action) on no topic at all: it has no business with the listings of
// ops, even empty ones.
func operator(ctx context.Context) error {
	p, ok := auth.PrincipalFromContext(ctx)
	if !ok {
		return nil // open access: no Verifier
	}
	for _, rule := range p.Policy.Rules() {
		if rule.Effect == acl.Allow && (rule.Action == acl.Inspect || rule.Action == acl.AnyAction) {
			return nil
		}
	}
	return &authError{fmt.Errorf("%w: inspect: the principal may inspect no topic", acl.ErrForbidden)}
}

// visible says which topics (group "") and groups a listing shows.
type visible func(topic, group string) bool

// everything is the host's view, through the Handler's methods.
func everything(string, string) bool { return true }

// inspectable is the view of the principal in ctx: what it may inspect.
func inspectable(ctx context.Context) visible {
	return func(topic, group string) bool {
		return auth.Authorize(ctx, acl.Inspect, topic, group) == nil
	}
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
		httpx.WriteError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
	case errors.Is(err, ErrNotFound), errors.Is(err, event.ErrNotFound):
		httpx.WriteError(w, http.StatusNotFound, CodeNotFound, err.Error())
	case errors.Is(err, event.ErrGroupActive):
		httpx.WriteError(w, http.StatusConflict, CodeConflict, err.Error())
	case errors.Is(err, ErrReadOnly):
		httpx.WriteError(w, http.StatusForbidden, CodeReadOnly, err.Error())
	case errors.Is(err, ErrNotSupported), errors.Is(err, event.ErrNotSupported):
		httpx.WriteError(w, http.StatusNotImplemented, CodeNotSupported, err.Error())
	default:
		if r.Context().Err() == nil {
			h.cfg.Logger.Error("ops: request failed", "path", r.URL.Path, "err", err)
		}
		httpx.WriteError(w, http.StatusInternalServerError, CodeInternal, "internal error")
	}
}

// params are a request's parameters: its query, and for a POST the fields
// of a JSON object body. Each may be given once.
type params struct {
	v    url.Values
	used map[string]bool
}

func readParams(w http.ResponseWriter, r *http.Request) (params, error) {
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
		if err := readBody(w, r, q); err != nil {
			return params{}, err
		}
	}
	return params{v: q, used: make(map[string]bool)}, nil
}

// readBody adds the fields of a JSON object body to q. An empty body is
// none; another content type than JSON is refused.
func readBody(w http.ResponseWriter, r *http.Request, q url.Values) error {
	var obj map[string]any
	switch err := httpx.DecodeJSON(w, r, maxBody, &obj); {
	case errors.Is(err, httpx.ErrEmpty):
		return nil
	case errors.Is(err, httpx.ErrBadBody):
		return invalid("body", "not a JSON object: %v", err)
	case err != nil:
		return invalid("body", "%v", err)
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

// topicAndGroup returns the required parameters topic and group.
func (p params) topicAndGroup() (string, string, error) {
	topic, err := p.topic("topic", true)
	if err != nil {
		return "", "", err
	}
	group, err := p.group("group", true)
	return topic, group, err
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
