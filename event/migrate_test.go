package event_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/storetest"
)

func TestCopyMemory(t *testing.T) {
	t.Parallel()
	storetest.RunCopy(t, func(t *testing.T) event.Store { return event.NewMemoryStore() })
}

func TestCopyArguments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := event.NewMemoryStore()
	tests := []struct {
		name     string
		dst, src event.Store
		cfg      event.CopyConfig
		want     string
	}{
		{"same store", s, s, event.CopyConfig{}, "dst: the same store as the source"},
		{"batch", event.NewMemoryStore(), s, event.CopyConfig{Batch: -1}, "Batch: -1"},
		{"destination without import", appendOnly{s}, event.NewMemoryStore(), event.CopyConfig{}, "dst: "},
		{"source without listing", event.NewMemoryStore(), appendOnly{s}, event.CopyConfig{}, "src: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := event.Copy(ctx, tc.dst, tc.src, tc.cfg)
			require.ErrorIs(t, err, event.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// appendOnly is a store that is only an event.Store.
type appendOnly struct{ event.Store }

func TestMemoryImportRefusesBadRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := event.NewMemoryStore()
	rec := func(id string, seq uint64) event.Record {
		return event.Record{ID: id, Seq: seq, Topic: "t", Payload: []byte(`1`)}
	}
	require.NoError(t, s.ImportRecords(ctx, "t", []event.Record{rec("a", 2), rec("b", 5)}))
	tests := []struct {
		name string
		recs []event.Record
		want string
	}{
		{"seq at the head", []event.Record{rec("c", 5)}, "seq 5, not above 5"},
		{"seqs not growing", []event.Record{rec("c", 7), rec("d", 6)}, "seq 6, not above 7"},
		{"id held", []event.Record{rec("a", 9)}, `holds id "a" already`},
		{"id twice", []event.Record{rec("c", 9), rec("c", 10)}, `holds id "c" already`},
		{"other topic", []event.Record{{ID: "c", Seq: 9, Topic: "u"}}, `topic "u" in an import to "t"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.ImportRecords(ctx, "t", tc.recs)
			require.ErrorIs(t, err, event.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	got, err := s.Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 2, "nothing of a refused import is stored")
	assert.Equal(t, []uint64{2, 5}, []uint64{got[0].Seq, got[1].Seq})
	require.NoError(t, s.ImportHead(ctx, "t", 8, 3))
	r, err := s.Append(ctx, "t", []event.Record{rec("z", 0)})
	require.NoError(t, err)
	assert.Equal(t, uint64(9), r[0].Seq, "the seqs up to the imported head are never given")
	floor, err := s.Floor(ctx, "t")
	require.NoError(t, err)
	assert.Equal(t, uint64(3), floor)
}
