package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

// A payload is one JSON object of exactly the asked size (when the index
// fits) that payloadIndex reads the index back from.
func TestPayload(t *testing.T) {
	for _, size := range []int{32, 33, 64, 1000} {
		for _, i := range []int{0, 7, 123456, 999999999} {
			p := makePayload(i, size)
			want := `{"i":` + strconv.Itoa(i) + `,"p":"`
			want += strings.Repeat("x", max(size-len(want)-2, 0)) + `"}`
			if string(p) != want {
				t.Fatalf("makePayload(%d, %d) = %s, want %s", i, size, p, want)
			}
			if !json.Valid(p) {
				t.Fatalf("makePayload(%d, %d) = %s: not JSON", i, size, p)
			}
			if got, ok := payloadIndex(p); !ok || got != i {
				t.Fatalf("payloadIndex(%s) = %d, %v; want %d", p, got, ok, i)
			}
		}
	}
	if n := testing.AllocsPerRun(100, func() { makePayload(12345, 64) }); n != 1 {
		t.Errorf("makePayload allocates %v times, want 1", n)
	}
}
