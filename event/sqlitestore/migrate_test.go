package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"
)

// A file made before promlib_topics counted records and their bytes gets
// its counts on open, and counts on from there.
func TestOpenCountsAnOlderFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	s := openStore(t, path)
	_, err := s.Append(ctx, "t", []event.Record{{ID: "a", Topic: "t", Payload: []byte(`1`)}, {ID: "b", Topic: "t", Payload: []byte(`2`)}})
	require.NoError(t, err)
	require.NoError(t, s.Close(ctx))
	w, r, err := sqlitestore.OpenDB(path, sqlitestore.Config{})
	require.NoError(t, err)
	_, err = w.ExecContext(ctx, `ALTER TABLE promlib_topics DROP COLUMN events`)
	require.NoError(t, err)
	_, err = w.ExecContext(ctx, `ALTER TABLE promlib_topics DROP COLUMN bytes`)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.NoError(t, r.Close())

	s = openStore(t, path)
	_, err = s.Append(ctx, "t", []event.Record{{ID: "c", Topic: "t", Payload: []byte(`3`)}})
	require.NoError(t, err)
	ts, err := s.ListTopics(ctx)
	require.NoError(t, err)
	require.Len(t, ts, 1)
	assert.Equal(t, int64(3), ts[0].Events)
	assert.Equal(t, int64(3), ts[0].Bytes, "the payloads' bytes")
}
