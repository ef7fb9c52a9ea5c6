package replay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/httpx"
)

// exportBufferSize is the size of the buffer between the encoder and the
// response; it is flushed at the end of every page.
const exportBufferSize = 32 << 10

func (h *Handler) serveExport(w http.ResponseWriter, r *http.Request) {
	req, err := parseExport(r.URL.RawQuery)
	if err != nil {
		badRequest(w, err)
		return
	}
	if !h.authorize(w, r, req.topic) {
		return
	}
	ctx := r.Context()
	// The export ends at the head of the topic as the request arrives, so
	// that it ends although publishing goes on.
	head, err := h.store.Head(ctx, req.topic)
	if err != nil {
		h.storeFailed(w, r, req.topic, err)
		return
	}
	first, found, err := h.store.FirstSeqAtOrAfter(ctx, req.topic, req.fromTS)
	if err != nil {
		h.storeFailed(w, r, req.topic, err)
		return
	}
	contentType := "application/x-ndjson"
	if req.format == FormatJSON {
		contentType = "application/json"
	}
	httpx.SetJSONHeaders(w.Header())
	w.Header().Set("Content-Type", contentType)

	x := newExporter(w, req.format == FormatJSON, h.cfg.ExportWriteTimeout)
	if found && first <= head {
		// Pages by seq, never by ts: many records share a ts, and ts need
		// not grow with seq, so every record from first to head is looked
		// at once and those within [fromTs, toTs] are written.
		after := first - 1
	pages:
		for after < head {
			if err := x.extendDeadline(); err != nil {
				h.exportFailed(w, r, x, req.topic, err)
				return
			}
			recs, err := h.store.Read(ctx, req.topic, after, int(min(uint64(h.cfg.ExportPageSize), head-after)))
			if err != nil {
				h.exportFailed(w, r, x, req.topic, err)
				return
			}
			if len(recs) == 0 {
				break // the rest was pruned meanwhile
			}
			for i := range recs {
				rec := &recs[i]
				if rec.Seq > head {
					break pages
				}
				if rec.TS < req.fromTS || rec.TS > req.toTS {
					continue
				}
				if err := x.write(rec); err != nil {
					h.exportFailed(w, r, x, req.topic, err)
					return
				}
			}
			after = recs[len(recs)-1].Seq
			if err := x.flush(); err != nil {
				h.exportFailed(w, r, x, req.topic, err)
				return
			}
		}
	}
	if err := x.finish(); err != nil {
		h.exportFailed(w, r, x, req.topic, err)
	}
}

// exportFailed ends an export that failed. Before the first byte went out
// it answers 500 with a JSON error; after, it aborts the response
// (http.ErrAbortHandler), so that the client sees a broken transfer rather
// than a short export that looks complete.
func (h *Handler) exportFailed(w http.ResponseWriter, r *http.Request, x *exporter, topic string, err error) {
	if r.Context().Err() != nil || errors.Is(err, errClientWrite) {
		h.log.Debug("replay: export ended by the client", "topic", topic, "records", x.n, "err", err)
		return
	}
	if !x.out.started {
		h.storeFailed(w, r, topic, err)
		return
	}
	h.log.Warn("replay: export failed; aborting the response", "topic", topic, "records", x.n, "err", err)
	panic(http.ErrAbortHandler)
}

// errClientWrite marks a failed write to the client.
var errClientWrite = errors.New("replay: write to the client")

// exporter writes records as NDJSON or as one JSON array, through a buffer
// of fixed size: its memory does not grow with the export.
type exporter struct {
	out   *startWriter
	bw    *bufio.Writer
	rc    *http.ResponseController
	buf   bytes.Buffer
	tmp   bytes.Buffer
	array bool
	n     int           // records written
	page  time.Duration // write deadline of each page
}

func newExporter(w http.ResponseWriter, array bool, page time.Duration) *exporter {
	x := &exporter{out: &startWriter{w: w}, rc: http.NewResponseController(w), array: array, page: page}
	x.bw = bufio.NewWriterSize(x.out, exportBufferSize)
	if array {
		_ = x.bw.WriteByte('[') // into the empty buffer: cannot fail
	}
	return x
}

func (x *exporter) write(rec *event.Record) error {
	if x.array {
		sep := ",\n"
		if x.n == 0 {
			sep = "\n"
		}
		if _, err := x.bw.WriteString(sep); err != nil {
			return errClientWrite
		}
	}
	// The record is written into the writer's free space when it fits
	// there, so that it is copied once.
	b := event.AppendRecordJSON(x.bw.AvailableBuffer(), rec)
	if !compactJSON(b) {
		// A payload with white space or HTML characters: written as
		// encoding/json writes it, compact and escaped.
		x.tmp.Reset()
		if err := json.Compact(&x.tmp, b); err != nil {
			return err // a record from the store that is not JSON
		}
		x.buf.Reset()
		json.HTMLEscape(&x.buf, x.tmp.Bytes())
		b = x.buf.Bytes()
	}
	if !x.array {
		b = append(b, '\n')
	}
	if _, err := x.bw.Write(b); err != nil {
		return errClientWrite
	}
	x.n++
	return nil
}

// compactJSON reports whether b holds no byte that encoding/json would
// write otherwise: no white space (outside strings it goes, inside it
// stays, so any is a reason to look closer) and no HTML character or
// U+2028/U+2029 (whose UTF-8 starts with 0xE2) to escape.
func compactJSON(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r', '<', '>', '&', 0xE2:
			return false
		}
	}
	return true
}

// extendDeadline gives the next page its own write deadline, so that an
// export as long as the topic outlives the server's WriteTimeout while a
// client that stops reading is still cut off.
func (x *exporter) extendDeadline() error {
	err := x.rc.SetWriteDeadline(time.Now().Add(x.page))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return errClientWrite
	}
	return nil
}

// flush sends what is buffered to the client now.
func (x *exporter) flush() error {
	if err := x.bw.Flush(); err != nil {
		return errClientWrite
	}
	if err := x.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return errClientWrite
	}
	return nil
}

// finish closes the array and flushes.
func (x *exporter) finish() error {
	if x.array {
		end := "\n]\n"
		if x.n == 0 {
			end = "]\n"
		}
		if _, err := x.bw.WriteString(end); err != nil {
			return errClientWrite
		}
	}
	return x.flush()
}

// startWriter records whether anything was written to the response.
type startWriter struct {
	w       http.ResponseWriter
	started bool
}

func (s *startWriter) Write(p []byte) (int, error) {
	s.started = true
	return s.w.Write(p)
}
