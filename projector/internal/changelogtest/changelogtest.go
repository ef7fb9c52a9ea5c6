// Package changelogtest is the test that every changelog table of promlib
// passes (projector/mongotable, projector/sqltable): random puts and
// tombstones, crashes at random points of random batches, and a rebuild;
// the table equals the model, the latest value per key, every time.
package changelogtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Topic is the topic the tables of the test consume.
const Topic = "accounts"

// Table is what the test needs of a changelog table.
type Table interface {
	Run(ctx context.Context) error
	Lag(ctx context.Context) (event.GroupStatus, error)
	Rebuild(ctx context.Context) error
}

// Harness makes the tables of one test; all of them are the same table.
type Harness struct {
	// New returns a Table of Topic on bus with the given batch size and
	// subscribe options, and fail as its crash hook (nil: none). The hook
	// is called at points 0, 1 and 2 of each write of a batch; an error
	// stops the write there, as a crash would, and Run returns it.
	New func(t *testing.T, bus *event.Bus, batch int, fail func(point int) error, opts ...event.SubscribeOption) Table
	// Read returns the table's rows as key -> compact JSON of the value.
	Read func(t *testing.T) map[string]string
	// AddStray adds a row of a key never published, with a seq above any
	// of the test's; a rebuild must drop it.
	AddStray func(t *testing.T)
}

var errCrash = errors.New("crash")

// model is the latest payload per key; a tombstone removes the key.
type model map[string]string

func (m model) apply(key, payload string) {
	if payload == "null" {
		delete(m, key)
	} else {
		m[key] = payload
	}
}

// publishRandom publishes n random puts and tombstones over keys and
// applies them to m.
func publishRandom(t *testing.T, rng *rand.Rand, bus *event.Bus, keys, n int, m model) {
	t.Helper()
	for i := range n {
		key := fmt.Sprintf("k%d", rng.IntN(keys))
		payload := fmt.Sprintf(`{"i":%d}`, i)
		if rng.IntN(4) == 0 {
			payload = "null"
		}
		_, err := bus.Publish(context.Background(), Topic, []byte(payload), event.WithKey(key))
		require.NoError(t, err)
		m.apply(key, payload)
	}
}

// Run publishes random puts and tombstones while the table's writer
// crashes at random points of random batches; each crash leaves the batch
// unacked, a new Table of the same group takes over and gets the batch
// again. After every round the table equals the latest value per key.
// Then a stray row is added and Rebuild gives the model again.
func Run(t *testing.T, bus *event.Bus, h Harness) {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(2, 19))
	m := model{}
	totalCrashes := 0
	for round := range 4 {
		publishRandom(t, rng, bus, 12, 60, m)
		crashes := 0
		for {
			var writes atomic.Int32
			crashAt := int32(rng.IntN(6))
			point := rng.IntN(3)
			if crashes >= 3 {
				crashAt = -1
			}
			tbl := h.New(t, bus, 8, func(p int) error {
				if p == point && writes.Add(1)-1 == crashAt {
					return errCrash
				}
				return nil
			}, event.WithBackoff(time.Millisecond, time.Millisecond))
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- tbl.Run(rctx) }()
			var runErr error
			caught := func() bool {
				select {
				case runErr = <-done:
					return true
				default:
				}
				lag, err := tbl.Lag(ctx)
				return err == nil && lag.Lag == 0
			}
			require.Eventually(t, caught, 60*time.Second, 5*time.Millisecond, "round %d", round)
			cancel()
			if runErr == nil {
				runErr = <-done
			}
			if errors.Is(runErr, errCrash) {
				crashes++
				totalCrashes++
				continue
			}
			require.ErrorIs(t, runErr, context.Canceled)
			break
		}
		assert.Equal(t, map[string]string(m), h.Read(t), "round %d after %d crashes", round, crashes)
	}

	assert.Positive(t, totalCrashes, "no batch crashed: the test proved nothing about redeliveries")

	// Rebuild from the first event gives the same table.
	tbl := h.New(t, bus, 0, nil)
	h.AddStray(t)
	require.NoError(t, tbl.Rebuild(ctx))
	assert.Equal(t, map[string]string(m), h.Read(t), "rebuilt")
}
