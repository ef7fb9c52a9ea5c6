package main

import (
	"strconv"
	"strings"
)

// makePayload returns a JSON payload of exactly size bytes (size >= 32)
// carrying the event's index: {"i":123,"p":"xxxx..."}.
func makePayload(i, size int) []byte {
	head := `{"i":` + strconv.Itoa(i) + `,"p":"`
	pad := size - len(head) - 2
	if pad < 0 {
		pad = 0
	}
	return []byte(head + strings.Repeat("x", pad) + `"}`)
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
