package sqlitestore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// TestBackupUnderLoad backs the store up while publishers and a consumer
// group run, opens the backup as a new store under a new Bus, and finds
// there every record whose publish returned before the backup began, and
// the group continuing from its cursor: it gets the records above its
// cursor that it had not settled, once, and nothing it had.
func TestBackupUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, filepath.Join(dir, "events.db"))
	b, err := event.NewBus(s, event.Config{Partitions: 2, PollInterval: 10 * time.Millisecond, CommitInterval: 5 * time.Millisecond, LeaseTTL: 2 * time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Close(ctx)) }()

	var mu sync.Mutex
	var acked []string
	consumed := 0
	_, err = b.Subscribe(ctx, "jobs", "workers", func(ctx context.Context, d *event.Delivery) error {
		mu.Lock()
		consumed++
		mu.Unlock()
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r, err := b.Publish(ctx, "jobs", fmt.Appendf(nil, `{"p":%d,"i":%d}`, p, i), event.WithKey(fmt.Sprintf("k%d", i%5)))
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				acked = append(acked, r.ID)
				mu.Unlock()
			}
		}()
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 150 && consumed >= 50
	}, 60*time.Second, 5*time.Millisecond, "publishers and the group run")

	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()
	path := filepath.Join(dir, "backup.db")
	require.NoError(t, s.Backup(ctx, path))
	mu.Lock()
	during := len(acked) - len(before)
	mu.Unlock()
	close(stop)
	wg.Wait()
	t.Logf("%d publishes returned before the backup, %d during it", len(before), during)
	_, err = os.Stat(path + ".partial")
	assert.ErrorIs(t, err, os.ErrNotExist, "no partial file is left")

	bk := openStore(t, path)
	for _, id := range before {
		_, err := bk.FindByID(ctx, "jobs", id)
		require.NoError(t, err, "record %q, acked before the backup, is in it", id)
	}
	n, err := bk.Topic(ctx, "jobs")
	require.NoError(t, err)
	assert.Equal(t, 2, n.Partitions)

	// What the group has left in the backup: the records above its
	// cursor of each partition, without those settled above it.
	cur, err := bk.Cursors(ctx, "jobs", "workers")
	require.NoError(t, err)
	require.Len(t, cur, 2)
	settled := map[uint64]bool{}
	for p := range 2 {
		st, err := bk.GroupState(ctx, event.PartitionRef{Topic: "jobs", Group: "workers", Partition: p})
		require.NoError(t, err)
		for _, seq := range st.Settled {
			settled[seq] = true
		}
	}
	assert.Positive(t, cur[0]+cur[1], "the group had committed progress")
	want := map[uint64]bool{}
	var all []event.Record
	for after := uint64(0); ; {
		recs, err := bk.Read(ctx, "jobs", after, 500)
		require.NoError(t, err)
		if len(recs) == 0 {
			break
		}
		all = append(all, recs...)
		after = recs[len(recs)-1].Seq
	}
	for _, r := range all {
		if r.Seq > cur[r.Partition] && !settled[r.Seq] {
			want[r.Seq] = true
		}
	}

	t.Logf("cursors %v in the backup, %d records above them unsettled", cur, len(want))

	b2, err := event.NewBus(bk, event.Config{Partitions: 2, PollInterval: 10 * time.Millisecond, CommitInterval: 5 * time.Millisecond, LeaseTTL: 2 * time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, b2.Close(ctx)) }()
	var gmu sync.Mutex
	got := map[uint64]int{}
	_, err = b2.Subscribe(ctx, "jobs", "workers", func(ctx context.Context, d *event.Delivery) error {
		gmu.Lock()
		got[d.Seq]++
		gmu.Unlock()
		return nil
	})
	require.NoError(t, err)
	// One record more per partition: once each is delivered, so was
	// every record before it in its partition.
	last := map[uint64]bool{}
	for _, key := range []string{"s0", "s1", "s2", "s3", "s4", "s5"} {
		r, err := b2.Publish(ctx, "jobs", []byte(`{}`), event.WithKey(key))
		require.NoError(t, err)
		last[r.Seq] = true
	}
	require.Eventually(t, func() bool {
		gmu.Lock()
		defer gmu.Unlock()
		for seq := range want {
			if got[seq] == 0 {
				return false
			}
		}
		for seq := range last {
			if got[seq] == 0 {
				return false
			}
		}
		return true
	}, 60*time.Second, 5*time.Millisecond, "the group gets what it had left, then the new records")
	gmu.Lock()
	defer gmu.Unlock()
	for seq, n := range got {
		if last[seq] {
			continue
		}
		assert.True(t, want[seq], "seq %d was settled before the backup: not delivered again", seq)
		assert.Equal(t, 1, n, "seq %d delivered once", seq)
	}
}

func TestBackupRefusesBadPaths(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, filepath.Join(dir, "events.db"))
	exists := filepath.Join(dir, "exists.db")
	require.NoError(t, os.WriteFile(exists, []byte("keep"), 0o600))
	tests := []struct {
		name, path, want string
	}{
		{"empty", "", `backup path ""`},
		{"uri", "file:x.db", "without '?' or '#'"},
		{"own file", filepath.Join(dir, "events.db"), "is the store's own file"},
		{"exists", exists, "exists: back up into a new file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Backup(ctx, tc.path)
			require.ErrorIs(t, err, event.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	b, err := os.ReadFile(exists)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b), "an existing file is left alone")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, s.Backup(cctx, filepath.Join(dir, "new.db")), context.Canceled)
}
