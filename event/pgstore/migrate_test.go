package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/testpg"
)

// A database made before promlib_topics counted bytes gets the column on
// open, counted once from the records it holds, and counts on from there.
func TestOpenCountsBytesOfAnOlderDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	schema := testpg.Schema(t)
	s := openStore(t, schema)
	_, err := s.Append(ctx, "t", []event.Record{
		{ID: "a", Topic: "t", Payload: []byte(`1`)},
		{ID: "b", Topic: "t", Key: "k", Headers: map[string]string{"h": "v"}, Payload: []byte(`22`)},
	})
	require.NoError(t, err)
	before, err := s.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, before, 1)
	_, err = s.DB().ExecContext(ctx, `ALTER TABLE promlib_topics DROP COLUMN bytes`)
	require.NoError(t, err)

	s2 := openStore(t, schema)
	ts, err := s2.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	assert.Equal(t, before[0].Bytes, ts[0].Bytes, "counted again from the records, as the appends counted them")
	_, err = s2.Append(ctx, "t", []event.Record{{ID: "c", Topic: "t", Payload: []byte(`333`)}})
	require.NoError(t, err)
	ts, err = s2.ListTopics(ctx)
	require.NoError(t, err)
	assert.Equal(t, before[0].Bytes+3, ts[0].Bytes)
	assert.Equal(t, int64(3), ts[0].Events)
}
