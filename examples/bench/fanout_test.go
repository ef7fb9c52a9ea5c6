package main

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// The fan-out harness is one file in two modules (examples/bench and
// examples/bench/peers): both copies must stay the same, or promlib and
// centrifuge would be measured differently.
func TestFanoutHarnessSame(t *testing.T) {
	ours, err := os.ReadFile("fanout.go")
	if err != nil {
		t.Fatal(err)
	}
	peers, err := os.ReadFile("peers/fanout.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, peers) {
		t.Error("examples/bench/fanout.go and examples/bench/peers/fanout.go differ: copy one over the other")
	}
}

// A fan-out payload is JSON of at least the asked size, and fanPayload
// reads its index and time back, also from inside a frame.
func TestFanoutPayload(t *testing.T) {
	for _, size := range []int{32, 64, 200} {
		p := appendFanPayload(nil, 1234, 1764000000123456789, size)
		if !json.Valid(p) || len(p) < size {
			t.Fatalf("appendFanPayload(size %d) = %s", size, p)
		}
		frame := append(append([]byte(`{"op":"EVENT","topic":"fanout","event":{"id":"x","seq":3,"payload":`), p...), "}}"...)
		i, sent, ok := fanPayload(frame)
		if !ok || i != 1234 || sent != 1764000000123456789 {
			t.Fatalf("fanPayload(%s) = %d, %d, %v", frame, i, sent, ok)
		}
	}
	if _, _, ok := fanPayload([]byte(`{"op":"OK","seq":3}`)); ok {
		t.Error("fanPayload found a payload in an OK")
	}
	id, ok := eventID([]byte(`{"op":"EVENT","topic":"t","group":"g","event":{"id":"01ABC","seq":1}}`))
	if !ok || string(id) != "01ABC" {
		t.Errorf("eventID = %q, %v", id, ok)
	}
}
