package main

import (
	"strconv"
)

// makePayload returns a JSON payload of exactly size bytes (size >= 32)
// carrying the event's index: {"i":123,"p":"xxxx..."}.
func makePayload(i, size int) []byte {
	// One allocation of the payload's own size, as a producer encoding
	// an event would: the bench's garbage counts in the collector's
	// cycles the run pays for.
	b := make([]byte, 0, max(size, 32))
	b = append(b, `{"i":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"p":"`...)
	for len(b) < size-2 {
		b = append(b, 'x')
	}
	return append(b, `"}`...)
}

// payloadIndex reads the index back from a payload made by makePayload,
// without a JSON decoder on the hot path.
func payloadIndex(p []byte) (int, bool) {
	const prefix = `{"i":`
	if len(p) < len(prefix) || string(p[:len(prefix)]) != prefix {
		return 0, false
	}
	n, ok := 0, false
	for _, c := range p[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		n, ok = n*10+int(c-'0'), true
	}
	return n, ok
}
