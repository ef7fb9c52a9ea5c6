package pgstore_test

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/testpg"
)

// TestReaderNeverSkips appends to one topic from two stores with their own
// pools (as two processes would), many appends at a time, while a reader
// pages by seq: every page starts right after the last seq read, so no
// record committed later can be skipped.
func TestReaderNeverSkips(t *testing.T) {
	t.Parallel()
	schema := testpg.Schema(t)
	a, b := openStore(t, schema), openStore(t, schema)
	ctx := context.Background()
	const writers, per = 8, 100
	var wg sync.WaitGroup
	for w := range writers {
		s := a
		if w%2 == 1 {
			s = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				id := strconv.Itoa(w) + "-" + strconv.Itoa(i)
				_, err := s.Append(ctx, "t", []event.Record{{ID: id, Topic: "t", TS: 1, Payload: json.RawMessage(`1`)}})
				assert.NoError(t, err)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	reader := openStore(t, schema)
	var after uint64
	for finished := false; ; {
		select {
		case <-done:
			finished = true
		default:
		}
		page, err := reader.Read(ctx, "t", after, 37)
		require.NoError(t, err)
		for _, r := range page {
			require.Equal(t, after+1, r.Seq, "a reader never skips a seq")
			after = r.Seq
		}
		if finished && len(page) == 0 {
			break
		}
	}
	assert.Equal(t, uint64(writers*per), after)
}
