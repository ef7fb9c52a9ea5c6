// Package heartbeat is the seed's example projector: heartbeats from
// processes become one state record per process on process.state, alive
// while the process beats and stale once it stops.
package heartbeat

import (
	"context"
	"fmt"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/projector"
)

// Topics of the example.
const (
	TopicHeartbeat = "heartbeat.received"
	TopicState     = "process.state"
)

// Heartbeat is what a process publishes periodically.
type Heartbeat struct {
	PID    int     `json:"pid"`
	Name   string  `json:"name"`
	Host   string  `json:"host"`
	CPUPct float64 `json:"cpu_pct"`
	MemMB  float64 `json:"mem_mb"`
	SID    string  `json:"sid,omitempty"`
}

// Status of a process.
const (
	Alive = "alive"
	Stale = "stale"
)

// ProcessState is the projected state of one process.
type ProcessState struct {
	ProcessID  string  `json:"processId"`
	Name       string  `json:"name"`
	Host       string  `json:"host"`
	PID        int     `json:"pid"`
	SID        string  `json:"sid,omitempty"`
	CPUPct     float64 `json:"cpu_pct"`
	MemMB      float64 `json:"mem_mb"`
	LastSeenTS int64   `json:"last_seen_ts"`
	Status     string  `json:"status"`
}

// ProcessID is the key of a process: host:name:pid.
func ProcessID(h Heartbeat) string { return fmt.Sprintf("%s:%s:%d", h.Host, h.Name, h.PID) }

// NewProjector returns the heartbeat -> process.state projector; a process
// that has not beaten for staleAfter turns stale.
func NewProjector(bus *event.Bus, staleAfter time.Duration) (*projector.Projector[Heartbeat, ProcessState], error) {
	return projector.NewProjector(projector.Config[Heartbeat, ProcessState]{
		Bus:    bus,
		Input:  TopicHeartbeat,
		Output: TopicState,
		Key: func(_ *event.Record, h Heartbeat) (string, error) {
			if h.Name == "" || h.Host == "" {
				return "", fmt.Errorf("heartbeat without name or host")
			}
			return ProcessID(h), nil
		},
		Reduce: func(key string, _ ProcessState, _ bool, h Heartbeat, r *event.Record) (ProcessState, error) {
			return ProcessState{
				ProcessID: key, Name: h.Name, Host: h.Host, PID: h.PID, SID: h.SID,
				CPUPct: h.CPUPct, MemMB: h.MemMB, LastSeenTS: r.TS, Status: Alive,
			}, nil
		},
		Stale: func(_ string, s ProcessState, now time.Time) (ProcessState, bool) {
			if s.Status == Alive && now.Sub(time.UnixMilli(s.LastSeenTS)) > staleAfter {
				s.Status = Stale
				return s, true
			}
			return s, false
		},
		StaleCheck: max(staleAfter/4, 10*time.Millisecond),
	})
}

// Beat publishes one heartbeat.
func Beat(ctx context.Context, bus *event.Bus, h Heartbeat) error {
	_, err := event.PublishJSON(ctx, bus, TopicHeartbeat, h, event.WithKey(ProcessID(h)))
	return err
}

// Simulate beats for the given processes every interval, on the Bus's
// clock, until ctx ends; a process with a non-zero StopAfter stops beating
// after that long.
func Simulate(ctx context.Context, bus *event.Bus, interval time.Duration, procs []SimProcess) {
	clk := bus.Clock()
	t := clk.NewTimer(interval)
	defer t.Stop()
	start := clk.Now()
	for n := 0; ; n++ {
		for _, p := range procs {
			if p.StopAfter > 0 && clk.Now().Sub(start) > p.StopAfter {
				continue
			}
			h := p.Heartbeat
			h.CPUPct = float64((n*7+h.PID)%100) / 2
			h.MemMB = 100 + float64(n%50)
			_ = Beat(ctx, bus, h)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			t.Reset(interval)
		}
	}
}

// SimProcess is a simulated process for Simulate.
type SimProcess struct {
	Heartbeat
	StopAfter time.Duration
}
