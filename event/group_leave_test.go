package event_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
)

// leaveOrder is a MemoryStore whose Renew waits at a gate, and which
// records every way a member's calls could break the order a Leave needs:
// a Leave while a renewal of the member is in flight, and a renewal of a
// member that has left.
type leaveOrder struct {
	*event.MemoryStore
	// late makes a held Renew go on when its ctx ends, and renew once the
	// gate opens (a store whose write was under way); otherwise it
	// returns ctx's error, renewing nothing.
	late bool

	mu       sync.Mutex
	gate     chan struct{} // a Renew waits for it to close; nil: no wait
	held     chan string   // a Renew's member, when it starts waiting at the gate
	ended    chan string   // a held Renew's member, when its ctx ends
	inflight map[string]int
	left     map[string]bool
	broken   []string
}

func newLeaveOrder(clk clock.Clock, late bool) *leaveOrder {
	return &leaveOrder{
		MemoryStore: event.NewMemoryStoreWith(event.MemoryStoreConfig{Clock: clk}),
		late:        late,
		held:        make(chan string, 16),
		ended:       make(chan string, 16),
		inflight:    map[string]int{},
		left:        map[string]bool{},
	}
}

// shut makes the next Renew wait until open.
func (s *leaveOrder) shut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = make(chan struct{})
}

// open lets the held Renew and the ones after it go on.
func (s *leaveOrder) open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.gate)
	s.gate = nil
}

func (s *leaveOrder) begin(call, member string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.left[member] {
		s.broken = append(s.broken, fmt.Sprintf("%s of %s after its Leave", call, member))
	}
	s.inflight[member]++
	return s.gate
}

func (s *leaveOrder) end(member string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight[member]--
}

func (s *leaveOrder) Renew(ctx context.Context, topic, group, member string, ttl time.Duration, parts []int) ([]string, []event.LeaseGrant, error) {
	gate := s.begin("Renew", member)
	defer s.end(member)
	if gate != nil {
		s.held <- member
		select {
		case <-gate:
		case <-ctx.Done():
			s.ended <- member
			if !s.late {
				return nil, nil, ctx.Err()
			}
			<-gate
			ctx = context.WithoutCancel(ctx)
		}
	}
	return s.MemoryStore.Renew(ctx, topic, group, member, ttl, parts)
}

func (s *leaveOrder) Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error) {
	s.begin("Heartbeat", member)
	defer s.end(member)
	return s.MemoryStore.Heartbeat(ctx, topic, group, member, ttl)
}

func (s *leaveOrder) Leave(ctx context.Context, topic, group, member string) error {
	s.mu.Lock()
	if n := s.inflight[member]; n > 0 {
		s.broken = append(s.broken, fmt.Sprintf("Leave of %s with %d renewals in flight", member, n))
	}
	s.left[member] = true
	s.mu.Unlock()
	return s.MemoryStore.Leave(ctx, topic, group, member)
}

func (s *leaveOrder) violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.broken...)
}

// A subscription that closes while its group's renewal is in flight
// leaves the group only after that renewal returned, and its member
// stays gone: the Bus calls Leave after the group's last Heartbeat or
// Renew, never beside one (a store's Leave cannot keep out a renewal that
// is applied after it; see LeaseStore.Leave). Both ways a held renewal
// can end are run: refused when the group's ctx ends, and applied late by
// a store whose write was under way.
func TestGroupLeavesAfterItsLastRenewal(t *testing.T) {
	t.Parallel()
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("late=%v", late), func(t *testing.T) {
			t.Parallel()
			const ttl = 3 * time.Second
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			st := newLeaveOrder(clk, late)
			b, err := event.NewBus(st, event.Config{Clock: clk, LeaseTTL: ttl})
			require.NoError(t, err)
			ctx := context.Background()
			defer func() { assert.NoError(t, b.Close(ctx)) }()
			for round := range 5 {
				group := fmt.Sprintf("g%d", round)
				sub, err := b.Subscribe(ctx, "t", group, func(context.Context, *event.Delivery) error { return nil })
				require.NoError(t, err)
				require.Eventually(t, func() bool {
					s := b.Stats()
					for _, g := range s {
						if g.Group == group && len(g.Partitions) == 1 {
							return true
						}
					}
					return false
				}, 10*time.Second, time.Millisecond, "the member takes the partition")

				st.shut()
				clk.Advance(ttl / 3) // the next renewal, which waits at the gate
				member := <-st.held
				closed := make(chan error, 1)
				go func() { closed <- sub.Close() }()
				require.Equal(t, member, <-st.ended, "Close ends the ctx of the group's store calls")
				if late {
					select {
					case err := <-closed:
						t.Fatalf("round %d: Close returned (%v) while the renewal was under way", round, err)
					default:
					}
				}
				st.open()
				require.NoError(t, <-closed)

				members, err := st.MemoryStore.Heartbeat(ctx, "t", group, "observer", ttl)
				require.NoError(t, err)
				assert.NotContains(t, members, member, "round %d: the member left", round)
				require.Empty(t, st.violations(), "round %d", round)
			}
		})
	}
}
