package pgstore

import (
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestColumns: records' arguments become one array per column, a nil
// text a NULL, and an argument of another type than its column's is
// refused by record and column.
func TestColumns(t *testing.T) {
	t.Parallel()
	row := func(topic string, seq int64, headers any, part int64, payload []byte) []any {
		return []any{topic, seq, "id-" + topic, int64(1700), "k", part, headers, payload, "application/json", nil, nil, "s"}
	}
	args := append(row("a", 1, `{"h":"v"}`, 3, []byte(`{}`)), row("b", 2, nil, 0, []byte{})...)
	cols, err := columns(args)
	require.NoError(t, err)
	require.Len(t, cols, len(recordTypes))
	assert.Equal(t, []pgtype.Text{{String: "a", Valid: true}, {String: "b", Valid: true}}, cols[0])
	assert.Equal(t, []int64{1, 2}, cols[1])
	assert.Equal(t, []int32{3, 0}, cols[5])
	assert.Equal(t, []pgtype.Text{{String: `{"h":"v"}`, Valid: true}, {}}, cols[6], "nil is NULL")
	assert.Equal(t, [][]byte{[]byte(`{}`), {}}, cols[7])
	assert.Equal(t, []pgtype.Text{{}, {}}, cols[9])

	empty, err := columns(nil)
	require.NoError(t, err)
	assert.Equal(t, []int64{}, empty[1])

	_, err = columns(args[:5])
	assert.ErrorContains(t, err, "not a multiple of 12")
	bad := row("a", 1, nil, 1<<40, nil)
	_, err = columns(bad)
	assert.ErrorContains(t, err, "record 0, column 5 (integer)")
	bad = row("a", 1, nil, 1, []byte{})
	bad[1] = "1"
	_, err = columns(bad)
	assert.ErrorContains(t, err, "record 0, column 1 (bigint): string is not a bigint")
}
