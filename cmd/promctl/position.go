package main

import (
	"strconv"
	"strings"
	"time"
)

// position is a place in a topic given on the command line: earliest,
// latest, seq:N (the record of seq N first) or ts:T (the first record
// with ts >= T; T in Unix ms or RFC 3339).
type position struct {
	kind string // "earliest", "latest", "seq" or "ts"
	seq  uint64
	ts   int64
}

// parsePosition reads the position of flag name.
func parsePosition(name, s string) (position, error) {
	kind, v, hasV := strings.Cut(s, ":")
	want := "want earliest, latest, seq:N or ts:MS (Unix ms, or an RFC 3339 time)"
	switch kind {
	case "earliest", "latest":
		if hasV {
			return position{}, usagef("-%s: %q, %s", name, s, want)
		}
		return position{kind: kind}, nil
	case "seq":
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 {
			return position{}, usagef("-%s: %q, want seq:N with N a seq from 1", name, s)
		}
		return position{kind: kind, seq: n}, nil
	case "ts":
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms >= 0 {
			return position{kind: kind, ts: ms}, nil
		}
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil && t.UnixMilli() >= 0 {
			return position{kind: kind, ts: t.UnixMilli()}, nil
		}
		return position{}, usagef("-%s: %q, want ts:MS (Unix ms) or ts:TIME (RFC 3339, such as 2026-01-02T15:04:05Z)", name, s)
	}
	return position{}, usagef("-%s: %q, %s", name, s, want)
}
