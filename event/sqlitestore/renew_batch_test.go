package sqlitestore_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/sqlitestore"
)

// renewal is what one Renew answered.
type renewal struct {
	Members []string
	Leases  []event.LeaseGrant
	Err     bool
}

const (
	renewGroups  = 50
	renewMembers = 4 // per group: 200 members
	renewTTL     = 10 * time.Second
)

func renewMember(m int) string { return fmt.Sprintf("m%d", m) }
func renewGroup(g int) string  { return fmt.Sprintf("g%d", g) }

// leaves reports whether member m of group g leaves before the renewals:
// one member in every third group, two in every fifth.
func leaves(g, m int) bool { return (g%3 == 0 && m == 1) || (g%5 == 0 && m == 2) }

// renewRound sets up renewGroups groups of renewMembers members, each
// holding the partition of its number, lets the members of leaves Leave
// half a ttl later, then renews every member, asking for its partition
// and the next member's: concurrently, or one at a time. It returns each
// renewal's answer, by group and member.
func renewRound(t *testing.T, s *sqlitestore.Store, clk *clock.Fake, concurrent bool) [][]renewal {
	t.Helper()
	ctx := context.Background()
	for g := range renewGroups {
		for m := range renewMembers {
			_, leases, err := s.Renew(ctx, "t", renewGroup(g), renewMember(m), renewTTL, []int{m})
			require.NoError(t, err)
			require.True(t, leases[0].Held)
		}
	}
	// The Leaves are stamped with the renewals' time: a renewal stamped no
	// later than its member's Leave (one begun before it) is refused.
	clk.Advance(renewTTL / 2)
	for g := range renewGroups {
		for m := range renewMembers {
			if leaves(g, m) {
				require.NoError(t, s.Leave(ctx, "t", renewGroup(g), renewMember(m)))
			}
		}
	}
	out := make([][]renewal, renewGroups)
	var wg sync.WaitGroup
	for g := range renewGroups {
		out[g] = make([]renewal, renewMembers)
		for m := range renewMembers {
			renew := func() {
				members, leases, err := s.Renew(ctx, "t", renewGroup(g), renewMember(m), renewTTL, []int{m, (m + 1) % renewMembers})
				out[g][m] = renewal{Members: members, Leases: leases, Err: err != nil}
			}
			if concurrent {
				wg.Add(1)
				go func() { defer wg.Done(); renew() }()
			} else {
				renew()
			}
		}
	}
	wg.Wait()
	return out
}

func TestConcurrentRenewalsAnswerAsLoneRenewals(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	clkOne, clkAll := clock.NewFake(start), clock.NewFake(start)
	one := newStore(t, func(c *sqlitestore.Config) { c.Clock = clkOne })
	all := newStore(t, func(c *sqlitestore.Config) { c.Clock = clkAll })

	lone := renewRound(t, one, clkOne, false)
	together := renewRound(t, all, clkAll, true)
	for g := range renewGroups {
		for m := range renewMembers {
			assert.Equal(t, lone[g][m], together[g][m], "%s/%s: concurrent renewals answer as renewals one at a time",
				renewGroup(g), renewMember(m))
		}
	}

	// What a lone renewal answers: the members that stayed; a member's own
	// partition with the token of its first grant, 1; the next member's
	// partition refused, its lease live (a member that left keeps its
	// lease until it expires); a member that left refused.
	for g := range renewGroups {
		var stayed []string
		for m := range renewMembers {
			if !leaves(g, m) {
				stayed = append(stayed, renewMember(m))
			}
		}
		for m := range renewMembers {
			got := together[g][m]
			if leaves(g, m) {
				assert.True(t, got.Err, "%s/%s left: its renewal is refused", renewGroup(g), renewMember(m))
				continue
			}
			require.False(t, got.Err, "%s/%s", renewGroup(g), renewMember(m))
			assert.Equal(t, stayed, got.Members, "%s/%s", renewGroup(g), renewMember(m))
			next := (m + 1) % renewMembers
			assert.Equal(t, []event.LeaseGrant{{Partition: m, Token: 1, Held: true}, {Partition: next}}, got.Leases,
				"%s/%s", renewGroup(g), renewMember(m))
		}
	}

	// Past the first grants' ttl, the leases of the members that left have
	// expired (their renewals renewed none), the others' were renewed; and
	// the members that left were not brought back.
	clkAll.Advance(renewTTL/2 + time.Second)
	ctx := context.Background()
	for g := range renewGroups {
		for m := range renewMembers {
			ref := event.PartitionRef{Topic: "t", Group: renewGroup(g), Partition: m}
			tok, ok, err := all.AcquireLease(ctx, ref, "taker", renewTTL)
			require.NoError(t, err)
			if leaves(g, m) {
				assert.True(t, ok, "%s/%s left: its lease was not renewed", renewGroup(g), renewMember(m))
				assert.Equal(t, uint64(2), tok, "a grant after another holder gets a greater token")
			} else {
				assert.False(t, ok, "%s/%s renewed its lease", renewGroup(g), renewMember(m))
			}
		}
		members, err := all.Heartbeat(ctx, "t", renewGroup(g), "taker", renewTTL)
		require.NoError(t, err)
		for m := range renewMembers {
			if leaves(g, m) {
				assert.NotContains(t, members, renewMember(m), "%s: a member that left is not revived", renewGroup(g))
			}
		}
	}
}

// walCommits returns the commits in the write-ahead log of the SQLite file
// at path (the frames that end a transaction) and the log's salt, which
// changes when SQLite starts the log over (after a checkpoint): the count
// is of commits since then. See https://www.sqlite.org/fileformat.html#the_write_ahead_log.
func walCommits(t *testing.T, path string) (commits int, salt uint64) {
	t.Helper()
	b, err := os.ReadFile(path + "-wal")
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), 32, "the log's header")
	be := binary.BigEndian
	pageSize := int(be.Uint32(b[8:]))
	salt = be.Uint64(b[16:])
	for off := 32; off+24+pageSize <= len(b); off += 24 + pageSize {
		if be.Uint64(b[off+8:]) != salt {
			break // a frame of an earlier log
		}
		if be.Uint32(b[off+4:]) != 0 { // the file's size in pages after a commit
			commits++
		}
	}
	return commits, salt
}

func TestConcurrentRenewalsShareCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "events.db")
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := openStore(t, path, func(c *sqlitestore.Config) { c.Clock = clk })
	// No checkpoint moves the log into the file while the test counts its
	// commits: the store's one writing connection checkpoints at no commit.
	_, err := s.DB().ExecContext(ctx, `PRAGMA wal_autocheckpoint = 0`)
	require.NoError(t, err)

	const n = 100
	renew := func(i int) error {
		_, leases, err := s.Renew(ctx, "t", renewGroup(i%25), renewMember(i), renewTTL, []int{i})
		if err == nil && !leases[0].Held {
			err = fmt.Errorf("partition %d not held", i)
		}
		return err
	}
	c0, salt0 := walCommits(t, path)
	for i := range n {
		require.NoError(t, renew(i))
	}
	c1, salt1 := walCommits(t, path)
	require.Equal(t, salt0, salt1, "the log was not started over")
	require.GreaterOrEqual(t, c1-c0, n, "a renewal alone commits once: the log counts each")

	// The renewals are queued while the test holds the store's one writing
	// connection, so that most wait for the same transaction.
	clk.Advance(renewTTL / 2)
	held, err := s.DB().Conn(ctx)
	require.NoError(t, err)
	errs := make([]error, n)
	var started, done sync.WaitGroup
	for i := range n {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			errs[i] = renew(i)
		}()
	}
	started.Wait()
	require.NoError(t, held.Close())
	done.Wait()
	for i, err := range errs {
		require.NoError(t, err, "renewal %d", i)
	}
	c2, salt2 := walCommits(t, path)
	require.Equal(t, salt1, salt2, "the log was not started over")
	assert.Less(t, c2-c1, n, "%d concurrent renewals share transactions", n)
	t.Logf("%d concurrent renewals: %d commits", n, c2-c1)
}
