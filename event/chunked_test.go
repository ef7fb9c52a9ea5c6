package event

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChunkedList(t *testing.T) {
	t.Parallel()
	var l chunkedList[int]
	n := 3*listChunk + 5
	ptrs := make([]*int, 0, n)
	for i := range n {
		l.append(i)
		require.Equal(t, i+1, l.len())
		require.Equal(t, i, *l.last())
		ptrs = append(ptrs, l.at(i))
	}
	for i := range n {
		require.Equal(t, i, *l.at(i))
		if i >= listChunk {
			require.Same(t, ptrs[i], l.at(i), "an element of a later chunk never moves")
		}
	}
	assert.Len(t, l.chunks, 4)
	for _, c := range l.chunks[1:] {
		assert.Equal(t, listChunk, cap(c), "later chunks are allocated whole")
	}
}

// The memory store finds every id of a topic whose sorted run of UUIDs
// and extension table span several chunks, and stores nothing twice.
func TestMemoryStoreLookupAcrossChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewMemoryStore()
	n := 2*listChunk + 100
	ids := make([]string, n)
	batch := make([]Record, 0, n)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7()).String()
		r := Record{ID: ids[i], Topic: "t", Payload: []byte(`1`)}
		if i%3 == 0 {
			r.Key = "k" // an extension entry
		}
		batch = append(batch, r)
	}
	_, err := s.Append(ctx, "t", batch)
	require.NoError(t, err)
	for i := 0; i < n; i += 97 {
		r, err := s.FindByID(ctx, "t", ids[i])
		require.NoError(t, err)
		require.Equal(t, uint64(i+1), r.Seq)
		if i%3 == 0 {
			require.Equal(t, "k", r.Key)
		}
	}
	again, err := s.Append(ctx, "t", batch[listChunk:listChunk+10])
	require.NoError(t, err)
	for i, r := range again {
		assert.Equal(t, uint64(listChunk+i+1), r.Seq, "an id stored before is not stored again")
	}
	head, err := s.Head(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(n), head)
	_, err = s.FindByID(ctx, "t", uuid.Must(uuid.NewV7()).String())
	assert.ErrorIs(t, err, ErrNotFound)
}
