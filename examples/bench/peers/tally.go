package main

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// tally counts the deliveries of each event index and keeps the latency
// of each first delivery, as examples/bench does for one group.
type tally struct {
	start  time.Time
	pubAt  []atomic.Int64 // ns since start
	counts []atomic.Uint32
	lat    []float32 // ms
	total  atomic.Int64
	done   chan struct{}
	once   sync.Once
}

func newTally(n int) *tally {
	return &tally{
		start: time.Now(), pubAt: make([]atomic.Int64, n), counts: make([]atomic.Uint32, n),
		lat: make([]float32, n), done: make(chan struct{}),
	}
}

func (t *tally) published(i int) { t.pubAt[i].Store(int64(time.Since(t.start))) }

func (t *tally) delivered(i int) {
	if i < 0 || i >= len(t.counts) {
		return
	}
	if t.counts[i].Add(1) == 1 {
		t.lat[i] = float32(time.Since(t.start)-time.Duration(t.pubAt[i].Load())) / float32(time.Millisecond)
		if t.total.Add(1) == int64(len(t.counts)) {
			t.once.Do(func() { close(t.done) })
		}
	}
}

// result fills lost, duplicates and the latency percentiles (of every
// 7th event, as examples/bench samples them).
func (t *tally) result(r *Result) {
	var lats []float64
	for i := range t.counts {
		switch c := t.counts[i].Load(); {
		case c == 0:
			r.Lost++
		case c > 1:
			r.Duplicates += int(c - 1)
		}
		if t.counts[i].Load() > 0 && i%7 == 0 {
			lats = append(lats, float64(t.lat[i]))
		}
	}
	slices.Sort(lats)
	if len(lats) > 0 {
		r.P50Ms = lats[(len(lats)-1)*50/100]
		r.P99Ms = lats[(len(lats)-1)*99/100]
	}
}

// makePayload returns a JSON payload of size bytes carrying i, the same
// as examples/bench's: {"i":123,"p":"xxxx..."}.
func makePayload(i, size int) []byte {
	head := `{"i":` + strconv.Itoa(i) + `,"p":"`
	pad := max(size-len(head)-2, 0)
	return []byte(head + strings.Repeat("x", pad) + `"}`)
}

// payloadIndex reads i back from a payload of makePayload.
func payloadIndex(p []byte) int {
	const prefix = `{"i":`
	if len(p) < len(prefix) || string(p[:len(prefix)]) != prefix {
		return -1
	}
	n := 0
	for _, c := range p[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// peakRSSMB returns the peak resident set size (VmHWM) in MB, 0 where
// /proc is not there.
func peakRSSMB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024
		}
	}
	return 0
}
