package replay

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/httpx"
)

// Handler serves GET /replay, /export and /latest over a store. It is an
// [http.Handler]: mount it in a host's mux, or mount its endpoints one by
// one ([Handler.Replay], [Handler.Export], [Handler.Latest]).
type Handler struct {
	cfg   Config
	store event.Store
	keys  event.KeyStore // nil when the store keeps no latest records
	log   *slog.Logger

	replay, export, latest http.Handler
}

// NewHandler returns a handler with cfg, or an error naming every bad
// field.
func NewHandler(cfg Config) (*Handler, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	h := &Handler{cfg: cfg, store: cfg.Store, log: cfg.Logger}
	h.keys, _ = cfg.Store.(event.KeyStore)
	h.replay = h.endpoint(h.serveReplay)
	h.export = h.endpoint(h.serveExport)
	h.latest = h.endpoint(h.serveLatest)
	if cfg.Verifier == nil {
		h.log.Warn("replay: no Verifier: anyone who reaches the handler may read every topic")
	}
	return h, nil
}

// ServeHTTP serves a request by the last segment of its path: ".../replay",
// ".../export" or ".../latest", so that the handler may be mounted under
// any prefix without http.StripPrefix. Other paths are answered 404.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	switch p[strings.LastIndexByte(p, '/')+1:] {
	case "replay":
		h.replay.ServeHTTP(w, r)
	case "export":
		h.export.ServeHTTP(w, r)
	case "latest":
		h.latest.ServeHTTP(w, r)
	default:
		writeError(w, http.StatusNotFound, CodeNotFound, "no endpoint at "+echo(p)+": want .../replay, .../export or .../latest")
	}
}

// Replay returns the GET /replay endpoint alone, for mounting at any path.
func (h *Handler) Replay() http.Handler { return h.replay }

// Export returns the GET /export endpoint alone, for mounting at any path.
func (h *Handler) Export() http.Handler { return h.export }

// Latest returns the GET /latest endpoint alone, for mounting at any path.
func (h *Handler) Latest() http.Handler { return h.latest }

// endpoint wraps f with the method check and the bearer token check: 401
// comes before f looks at the parameters (400) and asks [Handler.authorize]
// (403).
func (h *Handler) endpoint(f http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			httpx.WriteError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, "method "+echo(r.Method)+" is not allowed: use GET")
			return
		}
		r, _, err := auth.Authenticate(h.cfg.Verifier, r)
		if err != nil {
			auth.WriteError(w, err)
			return
		}
		f(w, r)
	})
}

// authorize asks the policy of the request's principal whether it may
// replay topic, and answers a refusal.
func (h *Handler) authorize(w http.ResponseWriter, r *http.Request, topic string) bool {
	if err := auth.Authorize(r.Context(), acl.Replay, topic, ""); err != nil {
		auth.WriteError(w, err)
		return false
	}
	return true
}

// badRequest answers 400 naming the parameter of err.
func badRequest(w http.ResponseWriter, err error) {
	var pe *paramError
	if errors.As(err, &pe) {
		writeError(w, http.StatusBadRequest, CodeBadRequest, pe.param+": "+pe.msg)
		return
	}
	writeError(w, http.StatusBadRequest, CodeBadRequest, err.Error())
}

// storeFailed answers a failed store call: 500, with no detail for the
// client. A request whose client has gone is only logged.
func (h *Handler) storeFailed(w http.ResponseWriter, r *http.Request, topic string, err error) {
	if r.Context().Err() != nil {
		h.log.Debug("replay: request ended by the client", "path", r.URL.Path, "topic", topic, "err", err)
		return
	}
	h.log.Warn("replay: store failed", "path", r.URL.Path, "topic", topic, "err", err)
	writeError(w, http.StatusInternalServerError, CodeInternal, "internal error")
}

// writeJSON answers 200 with v as JSON.
func (h *Handler) writeJSON(w http.ResponseWriter, v any) {
	httpx.SetJSONHeaders(w.Header())
	if err := json.NewEncoder(w).Encode(v); err != nil {
		h.log.Debug("replay: write response", "err", err)
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	httpx.WriteError(w, status, code, msg)
}
