// Package livedash is the live dashboard example: a browser page that
// shows the latest state of each process from the topic process.state (the
// heartbeat projector's output, examples/process/heartbeat), kept current
// by a live subscription of the TypeScript client (clients/ts) running in
// the page. The hub serves it at /live/:
//
//	go run ./examples/hub -demo
//	open http://127.0.0.1:8080/live/       (with a token: /live/#token=...)
//
// The page reads the latest record of each key (GET /latest) once, then
// subscribes live after the lowest of the seqs it read, so that nothing
// published in between is missed; the client resumes the subscription
// after its position on every reconnect. A gap (records deleted by
// retention or compaction before the page saw them) makes it read the
// latest records again.
//
// static/promlib is the TypeScript client built for browsers: ES modules,
// written by `npm run build:livedash` in clients/ts, whose tests fail when
// it differs from a build of the client's sources.
package livedash

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var static embed.FS

// Element ids and attributes of the page, for tests that drive it in a
// browser: each process is a row tr[data-process] of tbody#processes with
// cells td[data-field] name, host, pid, status, cpu_pct, mem_mb,
// last_seen and seq. The body's data-state is the client's connection
// state ("connecting", "open", "reconnecting", "closed") or "error";
// data-position is the live subscription's position, data-connections the
// connections the client opened, data-gaps the seqs told by gaps and
// data-recoveries the resumptions the server answered.
const (
	ProcessesID = "processes" // tbody of the processes table
	StatusID    = "status"    // a line saying what the page is doing
)

// Handler serves the page (index.html at the root), its script and the
// client's modules. Mount it under a prefix with [http.StripPrefix]:
//
//	mux.Handle("GET /live/", http.StripPrefix("/live", livedash.Handler()))
func Handler() http.Handler {
	root, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree has it
	}
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p != "/" && strings.HasSuffix(p, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		h := w.Header()
		// The page's own scripts and style, and the gateway and /latest on
		// this origin ('self' covers ws:// and wss:// to it).
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "+
			"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
