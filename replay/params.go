package replay

import (
	"errors"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/promethean/promlib/event"
)

// Query parameters of the endpoints.
const (
	paramTopic   = "topic"
	paramFrom    = "from"
	paramSeq     = "seq"
	paramTS      = "ts"
	paramAfterID = "afterId"
	paramLimit   = "limit"
	paramFromTS  = "fromTs"
	paramToTS    = "toTs"
	paramFormat  = "format"
	paramKey     = "key"
	paramAfter   = "after"
)

var (
	replayParams = []string{paramTopic, paramFrom, paramSeq, paramTS, paramAfterID, paramLimit}
	exportParams = []string{paramTopic, paramFromTS, paramToTS, paramFormat}
	latestParams = []string{paramTopic, paramKey, paramAfter, paramLimit}
)

// Export formats.
const (
	FormatNDJSON = "ndjson"
	FormatJSON   = "json"
)

// maxEcho bounds how much of a bad value an error message repeats.
const maxEcho = 64

// query holds the parameters of one request, each given at most once; an
// empty value counts as absent.
type query map[string]string

// parseQuery parses a raw query string, refusing parameters not in allowed
// and parameters given more than once.
func parseQuery(raw string, allowed []string) (query, error) {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil, paramErr("query", "not a valid URL query: %s", echo(err.Error()))
	}
	q := make(query, len(v))
	names := make([]string, 0, len(v))
	for name := range v {
		names = append(names, name)
	}
	slices.Sort(names) // the first error is the same every time
	for _, name := range names {
		if name == "" {
			return nil, paramErr("query", "a parameter without a name")
		}
		if !slices.Contains(allowed, name) {
			return nil, paramErr(paramName(name), "unknown parameter (want %s)", strings.Join(allowed, ", "))
		}
		vals := v[name]
		if len(vals) > 1 {
			return nil, paramErr(name, "given %d times, want at most once", len(vals))
		}
		if vals[0] != "" {
			q[name] = vals[0]
		}
	}
	return q, nil
}

// topic returns the required, valid topic.
func (q query) topic() (string, error) {
	t, ok := q[paramTopic]
	if !ok {
		return "", paramErr(paramTopic, "required")
	}
	if err := event.ValidateTopic(t); err != nil {
		// event's message starts with its sentinel and the field name; the
		// rest is bounded (it quotes at most MaxNameLen bytes of the topic).
		msg := strings.TrimPrefix(err.Error(), event.ErrInvalid.Error()+": topic: ")
		return "", paramErr(paramTopic, "%s", msg)
	}
	return t, nil
}

// seq parses a seq, 1 or more.
func (q query) seq(name string) (uint64, error) {
	s := q[name]
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, paramErr(name, "%q is not a seq (a whole number from 1)", echo(s))
	}
	if n == 0 {
		return 0, paramErr(name, "0: seqs start at 1")
	}
	return n, nil
}

// millis parses a timestamp in Unix milliseconds, 0 or more.
func (q query) millis(name string) (int64, error) {
	s := q[name]
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, paramErr(name, "%q is not a time in Unix milliseconds (a whole number from 0)", echo(s))
	}
	return n, nil
}

// limit parses the page size, def when absent.
func (q query) limit(def, maxLimit int) (int, error) {
	s, ok := q[paramLimit]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, paramErr(paramLimit, "%q is not a whole number from 1 to %d", echo(s), maxLimit)
	}
	switch {
	case n < 1:
		return 0, paramErr(paramLimit, "%s is below 1 (want 1 to %d)", echo(s), maxLimit)
	case n > int64(maxLimit):
		return 0, paramErr(paramLimit, "%s is over the maximum of %d", echo(s), maxLimit)
	}
	return int(n), nil
}

// only refuses the parameters of names that q holds: they do not go with
// what the request asked for (why).
func (q query) only(why string, names ...string) error {
	for _, n := range names {
		if _, ok := q[n]; ok {
			return paramErr(n, "not allowed %s", why)
		}
	}
	return nil
}

// replayRequest is a valid GET /replay query.
type replayRequest struct {
	topic   string
	from    event.StartPosition
	seq     uint64 // from=seq: the first seq wanted
	ts      int64  // from=ts
	afterID string // from=afterId
	limit   int
}

func parseReplay(raw string, defLimit, maxLimit int) (replayRequest, error) {
	var r replayRequest
	q, err := parseQuery(raw, replayParams)
	if err != nil {
		return r, err
	}
	if r.topic, err = q.topic(); err != nil {
		return r, err
	}
	r.from = event.StartEarliest
	if s, ok := q[paramFrom]; ok {
		if r.from, err = event.ParseStartPosition(s); err != nil {
			return r, paramErr(paramFrom, "unknown start %q (want earliest, latest, seq, ts or afterId)", echo(s))
		}
	}
	// Each start takes its own parameter and no other.
	var own string
	switch r.from {
	case event.StartSeq:
		own = paramSeq
	case event.StartTS:
		own = paramTS
	case event.StartAfterID:
		own = paramAfterID
	}
	for _, p := range []string{paramSeq, paramTS, paramAfterID} {
		if p == own {
			if _, ok := q[p]; !ok {
				return r, paramErr(p, "required with from=%s", r.from)
			}
			continue
		}
		if err := q.only("with from="+r.from.String()+" (it goes with from="+p+")", p); err != nil {
			return r, err
		}
	}
	switch r.from {
	case event.StartSeq:
		if r.seq, err = q.seq(paramSeq); err != nil {
			return r, err
		}
	case event.StartTS:
		if r.ts, err = q.millis(paramTS); err != nil {
			return r, err
		}
	case event.StartAfterID:
		r.afterID = q[paramAfterID]
		if len(r.afterID) > event.MaxIDLen {
			return r, paramErr(paramAfterID, "%d bytes, more than %d", len(r.afterID), event.MaxIDLen)
		}
	}
	if r.limit, err = q.limit(defLimit, maxLimit); err != nil {
		return r, err
	}
	return r, nil
}

// exportRequest is a valid GET /export query.
type exportRequest struct {
	topic  string
	fromTS int64
	toTS   int64 // inclusive
	format string
}

func parseExport(raw string) (exportRequest, error) {
	r := exportRequest{toTS: math.MaxInt64, format: FormatNDJSON}
	q, err := parseQuery(raw, exportParams)
	if err != nil {
		return r, err
	}
	if r.topic, err = q.topic(); err != nil {
		return r, err
	}
	if _, ok := q[paramFromTS]; ok {
		if r.fromTS, err = q.millis(paramFromTS); err != nil {
			return r, err
		}
	}
	if _, ok := q[paramToTS]; ok {
		if r.toTS, err = q.millis(paramToTS); err != nil {
			return r, err
		}
	}
	if r.fromTS > r.toTS {
		return r, paramErr(paramFromTS, "%d is after toTs %d", r.fromTS, r.toTS)
	}
	if f, ok := q[paramFormat]; ok {
		switch f {
		case FormatNDJSON, FormatJSON:
			r.format = f
		default:
			return r, paramErr(paramFormat, "unknown format %q (want ndjson or json)", echo(f))
		}
	}
	return r, nil
}

// latestRequest is a valid GET /latest query.
type latestRequest struct {
	topic string
	key   string // one key; empty for a page of keys
	after string // page: keys greater than this
	limit int    // page size
}

func parseLatest(raw string, defLimit, maxLimit int) (latestRequest, error) {
	var r latestRequest
	q, err := parseQuery(raw, latestParams)
	if err != nil {
		return r, err
	}
	if r.topic, err = q.topic(); err != nil {
		return r, err
	}
	if k, ok := q[paramKey]; ok {
		r.key = k
		return r, q.only("with key (after and limit page through all keys)", paramAfter, paramLimit)
	}
	r.after = q[paramAfter]
	if r.limit, err = q.limit(defLimit, maxLimit); err != nil {
		return r, err
	}
	return r, nil
}

// paramName returns an unknown parameter's name as a message shows it:
// as it is when made of letters, digits and '_', else quoted.
func paramName(name string) string {
	for i := 0; i < len(name); i++ {
		if c := name[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return quote(name)
		}
	}
	return echo(name)
}

// echo returns at most maxEcho bytes of s, for a message that repeats what
// a client sent.
func echo(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	return strings.ToValidUTF8(s[:maxEcho], "") + "..."
}
