package sqlitestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// TestAppendGivenUpKeepsItsRecords: an Append whose ctx ends while the
// store's writer waits returns at once, and its caller may reuse its
// records and payloads (a Publisher reuses its batch): the writer stores
// what was appended, from a copy of its own.
func TestAppendGivenUpKeepsItsRecords(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	bg := context.Background()
	tx, err := s.DB().BeginTx(bg, nil) // the write connection: the writer waits for it
	require.NoError(t, err)
	payload := []byte(`"a"`)
	recs := []event.Record{{ID: "a", Topic: "t", Payload: payload}}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, "t", recs)
		done <- err
	}()
	require.Eventually(t, func() bool { return s.DB().Stats().WaitCount > 0 }, 10*time.Second, time.Millisecond,
		"the writer took the append and waits for the connection")
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	recs[0] = event.Record{ID: "b", Topic: "t", Payload: []byte(`"b"`)}
	payload[1] = 'z'
	require.NoError(t, tx.Rollback())

	require.Eventually(t, func() bool {
		head, err := s.Head(bg, "t")
		return err == nil && head == 1
	}, 10*time.Second, time.Millisecond)
	got, err := s.Read(bg, "t", 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "a", got[0].ID)
	assert.JSONEq(t, `"a"`, string(got[0].Payload))
}
