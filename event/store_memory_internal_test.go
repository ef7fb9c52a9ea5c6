package event

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
)

// The id index keeps UUIDs that arrive in order in a sorted run, others in
// maps; every id must be found again and read back exactly as given.
func TestMemoryStoreIDIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewMemoryStore()
	var ids []string
	for range 50 {
		ids = append(ids, uuid.Must(uuid.NewV7()).String())
	}
	older := ids[10]
	mixed := []string{
		ids[0], ids[1], ids[2],
		uuid.NewString(),                       // random v4: probably out of order
		"not-a-uuid",                           // plain string
		"0190A2B4-C3D2-7E10-8A5B-0123456789AB", // upper case: kept as a string
		ids[20], ids[30],
		"{" + ids[40] + "}",
	}
	for _, id := range mixed {
		_, err := s.Append(ctx, "t", []Record{{ID: id, Topic: "t", Payload: []byte(`1`)}})
		require.NoError(t, err)
	}
	// An id below the run's end that was never stored.
	_, err := s.FindByID(ctx, "t", older)
	assert.ErrorIs(t, err, ErrNotFound)
	for i, id := range mixed {
		r, err := s.FindByID(ctx, "t", id)
		require.NoError(t, err, id)
		assert.Equal(t, uint64(i+1), r.Seq, id)
		assert.Equal(t, id, r.ID, "an id reads back as given")
		out, err := s.Append(ctx, "t", []Record{{ID: id, Topic: "t", Payload: []byte(`2`)}})
		require.NoError(t, err)
		assert.Equal(t, uint64(i+1), out[0].Seq, "a repeated id is not stored again: %s", id)
	}
	head, _ := s.Head(ctx, "t")
	assert.Equal(t, uint64(len(mixed)), head)
	// The older UUID now goes to the map and is found.
	out, err := s.Append(ctx, "t", []Record{{ID: older, Topic: "t", Payload: []byte(`3`)}})
	require.NoError(t, err)
	r, err := s.FindByID(ctx, "t", older)
	require.NoError(t, err)
	assert.Equal(t, out[0].Seq, r.Seq)
}

func TestParseUUIDRoundTrip(t *testing.T) {
	t.Parallel()
	for range 100 {
		id := uuid.NewString()
		u, ok := parseUUID(id)
		require.True(t, ok)
		assert.Equal(t, id, uuidString(&u))
	}
	for _, bad := range []string{"", "x", "0190a2b4c3d27e108a5b0123456789ab0000", "0190a2b4-c3d2-7e10-8a5b-0123456789aG"} {
		_, ok := parseUUID(bad)
		assert.False(t, ok, bad)
	}
}

func BenchmarkMemoryStoreAppend(b *testing.B) {
	s := NewMemoryStore()
	ctx := context.Background()
	payload := []byte(`{"i":1}`)
	i := 0
	for b.Loop() {
		i++
		_, _ = s.Append(ctx, "t", []Record{{ID: strconv.Itoa(i), Topic: "t", Payload: payload}})
	}
}

// Payloads of every size read back as stored, and a slab whose payloads
// were all deleted is freed.
func TestMemoryStoreSlabs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewMemoryStore()
	var want [][]byte
	for i, size := range []int{1, 100, maxSlabPayload, maxSlabPayload + 1, 3 << 20, 7, slabSize - 10, 50} {
		p := make([]byte, size)
		for j := range p {
			p[j] = byte('a' + (i+j)%26)
		}
		p[0], p[len(p)-1] = '"', '"'
		if size == 1 {
			p = []byte("1")
		}
		want = append(want, p)
		_, err := s.Append(ctx, "t", []Record{{ID: strconv.Itoa(i), TS: 1, Topic: "t", Payload: p}})
		require.NoError(t, err)
	}
	got, err := s.Read(ctx, "t", 0, 100)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i], []byte(got[i].Payload), "record %d", i)
		assert.Equal(t, len(want[i]), cap(got[i].Payload), "a payload is capped at its length")
	}
	n, err := s.Prune(ctx, "t", 2, false)
	require.NoError(t, err)
	assert.Equal(t, len(want), n)
	top := s.topics["t"]
	for k, slab := range top.slabs {
		if k != top.fill {
			assert.Nil(t, slab, "slab %d freed", k)
		}
	}
}

// A topic keeps the strings of its latest UUIDs (recentID): a read of the
// tail gets the very string that was appended, an older read one formatted
// anew, and both read back as appended whatever mix of id forms and
// out-of-order UUIDs came before, on either side of the ring's start and
// its wrap-around.
func TestMemoryStoreRecentIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := NewMemoryStore()
	n := 3*memRecentIDs + 17
	ids := make([]string, n)
	for i := range ids {
		switch {
		case i%97 == 5:
			ids[i] = "plain-" + strconv.Itoa(i) // kept in exts
		case i%89 == 7:
			ids[i] = uuid.NewString() // v4: out of the sorted run
		default:
			ids[i] = uuid.Must(uuid.NewV7()).String()
		}
	}
	for lo := 0; lo < n; lo += 300 {
		batch := make([]Record, 0, 300)
		for _, id := range ids[lo:min(lo+300, n)] {
			batch = append(batch, Record{ID: id, Topic: "t", Payload: []byte(`1`)})
		}
		_, err := s.Append(ctx, "t", batch)
		require.NoError(t, err)
	}
	recs, err := s.Read(ctx, "t", 0, n)
	require.NoError(t, err)
	require.Len(t, recs, n)
	for i, r := range recs {
		require.Equal(t, ids[i], r.ID, "seq %d", r.Seq)
		shared := unsafe.StringData(r.ID) == unsafe.StringData(ids[i])
		if i >= n-memRecentIDs && ids[i][0] != 'p' {
			assert.True(t, shared, "seq %d: the tail reads the appended string", r.Seq)
		} else if ids[i][0] != 'p' {
			assert.False(t, shared, "seq %d: older ids are formatted from their bytes", r.Seq)
		}
	}
}

// A member's tombstone refuses the heartbeats and renewals stamped no
// later than its Leave, and no others; the tombstones are bounded, by
// count and by age.
func TestMemoryStoreTombstones(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := NewMemoryStoreWith(MemoryStoreConfig{Clock: clk})
	const ttl = time.Minute
	_, err := s.Heartbeat(ctx, "t", "g", "m", ttl)
	require.NoError(t, err)
	require.NoError(t, s.Leave(ctx, "t", "g", "m"))
	_, err = s.Heartbeat(ctx, "t", "g", "m", ttl)
	assert.ErrorContains(t, err, "has left the group", "a heartbeat stamped when the member left")
	_, _, err = s.Renew(ctx, "t", "g", "m", ttl, []int{0})
	assert.Error(t, err, "a renewal stamped when the member left")
	_, err = s.heartbeat("t", "g", "m", ttl, clk.Now().Add(-time.Second))
	assert.Error(t, err, "a heartbeat that began before the Leave and took the lock after it")
	clk.Advance(time.Nanosecond)
	members, err := s.Heartbeat(ctx, "t", "g", "m", ttl)
	require.NoError(t, err, "a heartbeat begun after the Leave joins again")
	assert.Equal(t, []string{"m"}, members)

	// memMaxTombs newer tombstones push the oldest out.
	require.NoError(t, s.Leave(ctx, "t", "g", "m"))
	for i := range memMaxTombs {
		require.NoError(t, s.Leave(ctx, "t", "g", fmt.Sprint("x", i)))
	}
	assert.Len(t, s.left.at, memMaxTombs)
	_, err = s.Heartbeat(ctx, "t", "g", "m", ttl)
	assert.NoError(t, err, "the oldest tombstone went")
	_, err = s.Heartbeat(ctx, "t", "g", fmt.Sprint("x", memMaxTombs-1), ttl)
	assert.Error(t, err, "the newest is kept")

	// Tombstones older than memLeftKeep go at the next Leave.
	clk.Advance(memLeftKeep + time.Second)
	require.NoError(t, s.Leave(ctx, "t", "g", "late"))
	assert.Len(t, s.left.at, 1)
	assert.LessOrEqual(t, len(s.left.queue), 2*memMaxTombs, "the queue is compacted")
}
