package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// TestAppendManyAsArrays: the store inserts records as one array per
// column. An append of more records than a multi-row INSERT could hold
// (500) stores them all at contiguous seqs, with every field as given
// (NULL and set texts, keys, partitions, binary payloads); an append that
// repeats stored ids among new ones returns the stored records for those
// and stores only the new ones, still contiguous.
func TestAppendManyAsArrays(t *testing.T) {
	t.Parallel()
	s := newStore(t)
	ctx := context.Background()
	rec := func(i int) event.Record {
		r := event.Record{ID: fmt.Sprintf("id-%04d", i), Topic: "t", TS: int64(1000 + i), Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
		if i%3 == 0 {
			r.Key, r.Partition = fmt.Sprintf("k%d", i%7), i%5
			r.Headers = map[string]string{"h": fmt.Sprint(i)}
			r.Tags = []string{"a", fmt.Sprint(i)}
			r.CausedBy = []string{fmt.Sprintf("c-%d", i)}
			r.SID = "s"
		}
		if i%10 == 0 {
			r.ContentType, r.Payload = "application/octet-stream", []byte{0, 0xff, byte(i)}
		}
		return r
	}
	first := make([]event.Record, 1200)
	for i := range first {
		first[i] = rec(i)
	}
	out, err := s.Append(ctx, "t", first)
	require.NoError(t, err)
	require.Len(t, out, len(first))
	for i, r := range out {
		assert.EqualValues(t, i+1, r.Seq)
	}

	// 600 again (every other of the first 1,200), 700 new.
	var second []event.Record
	for i := 0; i < 1200; i += 2 {
		second = append(second, rec(i))
	}
	for i := 1200; i < 1900; i++ {
		second = append(second, rec(i))
	}
	out, err = s.Append(ctx, "t", second)
	require.NoError(t, err)
	require.Len(t, out, len(second))
	for k, r := range out[:600] {
		assert.EqualValues(t, 2*k+1, r.Seq, "a stored id returns its record")
	}
	for k, r := range out[600:] {
		assert.EqualValues(t, 1201+k, r.Seq)
	}
	head, err := s.Head(ctx, "t")
	require.NoError(t, err)
	assert.EqualValues(t, 1900, head)

	var read []event.Record
	for after := uint64(0); ; {
		page, err := s.Read(ctx, "t", after, 400)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		read = append(read, page...)
		after = page[len(page)-1].Seq
	}
	require.Len(t, read, 1900)
	for i, got := range read {
		want := rec(i)
		want.Seq = uint64(i + 1)
		assert.Equal(t, want.ID, got.ID)
		assert.Equal(t, want.Seq, got.Seq)
		assert.Equal(t, want.TS, got.TS)
		assert.Equal(t, want.Key, got.Key)
		assert.Equal(t, want.Partition, got.Partition, "record %d", i)
		assert.Equal(t, []byte(want.Payload), []byte(got.Payload), "record %d", i)
		assert.Equal(t, want.ContentType, got.ContentType)
		assert.Equal(t, len(want.Headers), len(got.Headers), "record %d", i)
		assert.Equal(t, want.Tags, got.Tags, "record %d", i)
		assert.Equal(t, want.CausedBy, got.CausedBy, "record %d", i)
		assert.Equal(t, want.SID, got.SID)
		if len(want.Headers) > 0 {
			assert.Equal(t, want.Headers, got.Headers)
		}
	}
}
