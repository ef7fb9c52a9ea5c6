package storetest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/proctest"
)

// Shared makes stores that several processes share, for [RunProcesses].
// The tests run the test binary again as helper processes (see
// [HelperMain]), which open the store from the settings New returned.
type Shared struct {
	// New prepares a new, empty shared store for the test and returns the
	// settings a process needs to open it, as environment variables.
	New func(t *testing.T) map[string]string
	// Open opens the store the settings name (read with getenv), in a
	// helper process or in the test itself, and returns it with a function
	// that closes it.
	Open OpenShared
	// Fewer has ConsumerKilled's publishers publish 100 records each
	// instead of 300, for a store on a slow server: the victim still gets
	// 40 deliveries or more before it is killed, and the others take its
	// partitions over.
	Fewer bool
}

// OpenShared opens a shared store from its settings.
type OpenShared func(ctx context.Context, getenv func(string) string) (event.Store, func(), error)

// helperEnv names the role of a helper process.
const helperEnv = "STORETEST_HELPER"

// HelperMain runs this process as a helper of [RunProcesses] and exits, if
// it was started as one; otherwise it returns at once. Call it first in
// TestMain:
//
//	func TestMain(m *testing.M) {
//		storetest.HelperMain(openShared)
//		os.Exit(m.Run())
//	}
func HelperMain(open OpenShared) {
	role := os.Getenv(helperEnv)
	if role == "" {
		return
	}
	os.Exit(runHelper(role, open))
}

// RunProcesses runs the tests of a store shared by processes, each with
// its own store from sh.New: a consumer process killed with SIGKILL in a
// group of three (nothing acknowledged is lost, duplicates only for
// records in flight at the killed process), a publisher killed mid-burst
// (every acknowledged publish is stored, seqs without a hole), and a
// killed publisher re-publishing its last ids while others append, and a
// key-ordered consumer killed while it holds keys behind failed records
// (the records held are delivered by the member that takes over, in
// order).
func RunProcesses(t *testing.T, sh Shared) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Run("ConsumerKilled", func(t *testing.T) { t.Parallel(); testConsumerKilled(t, sh) })
	t.Run("PublisherKilled", func(t *testing.T) { t.Parallel(); testPublisherKilled(t, sh) })
	t.Run("KilledPublisherRepublishes", func(t *testing.T) { t.Parallel(); testRepublish(t, sh) })
	t.Run("KeyOrderedConsumerKilled", func(t *testing.T) { t.Parallel(); testKeyOrderedKilled(t, sh) })
	t.Run("GroupUpdateReachesProcess", func(t *testing.T) { t.Parallel(); testGroupUpdateReachesProcess(t, sh) })
}

// testGroupUpdateReachesProcess: UpdateGroup in this process changes the
// settings a member in another process delivers by, within its lease
// renewals, without a restart.
func testGroupUpdateReachesProcess(t *testing.T, sh Shared) {
	store := sh.New(t)
	const topic, group = "upd", "g"
	member := startHelper(t, "member", "consume", store, map[string]string{
		"HELPER_TOPIC": topic, "HELPER_GROUP": group, "HELPER_MEMBER": "member", "HELPER_LEASE_MS": "900",
	})
	require.Eventually(t, func() bool { return member.Count(func(l helperLine) bool { return l.Ready }) == 1 },
		wait, 10*time.Millisecond, "member ready")
	s := openShared(t, sh, store)
	b := newBus(t, s)
	ctx := context.Background()
	maxOf := func(seq uint64) (int, bool) {
		for _, l := range member.Lines() {
			if isDelivery(l) && l.Seq == seq {
				return l.MaxAttempts, true
			}
		}
		return 0, false
	}
	r, err := b.Publish(ctx, topic, []byte(`1`))
	require.NoError(t, err)
	require.Eventually(t, func() bool { m, ok := maxOf(r.Seq); return ok && m == event.DefaultMaxAttempts },
		wait, 10*time.Millisecond, "delivered under the settings the member created")

	cfg, err := b.UpdateGroup(ctx, topic, group, func(c *event.GroupConfig) { c.MaxAttempts = 7 })
	require.NoError(t, err)
	require.Equal(t, 7, cfg.MaxAttempts)
	var probe uint64
	require.Eventually(t, func() bool {
		if probe != 0 {
			m, ok := maxOf(probe)
			if !ok {
				return false // wait for the probe
			}
			if m == 7 {
				return true
			}
		}
		r, err := b.Publish(ctx, topic, []byte(`2`))
		require.NoError(t, err)
		probe = r.Seq
		return false
	}, wait, 10*time.Millisecond, "the member in the other process delivers by the update")
}

// helperLine is one report of a helper process.
type helperLine struct {
	// publish: a publish was acknowledged.
	Acked string `json:"acked,omitempty"`
	// consume: a delivery; commit: a cursor commit.
	Member    string `json:"member,omitempty"`
	ID        string `json:"id,omitempty"`
	Seq       uint64 `json:"seq,omitempty"`
	Key       string `json:"key,omitempty"`
	Partition int    `json:"partition"`
	Attempt   int    `json:"attempt,omitempty"`
	// MaxAttempts is the group's MaxAttempts the delivery was made under.
	MaxAttempts int  `json:"max_attempts,omitempty"`
	Commit      bool `json:"commit,omitempty"`
	Ready       bool `json:"ready,omitempty"`
	// consume: Partition was assigned to Member, or revoked from it.
	Assigned bool `json:"assigned,omitempty"`
	Revoked  bool `json:"revoked,omitempty"`
	// consume: Member was granted a lease on Partition by a call to
	// AcquireLease that began at At; Beat: Member's heartbeat, which
	// begins each lease renewal round, began at At.
	Leased bool `json:"leased,omitempty"`
	Beat   bool `json:"beat,omitempty"`
	// At is when it happened, in Unix ns by the helper's wall clock (the
	// processes run on one machine): set on assign, revoke, lease and
	// heartbeat lines.
	At int64 `json:"at,omitempty"`
}

// lineWriter writes a helper's reports.
type lineWriter = proctest.Writer[helperLine]

func runHelper(role string, open OpenShared) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	s, closeStore, err := open(ctx, os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	defer closeStore()
	out := proctest.NewWriter[helperLine](os.Stdout)
	switch role {
	case "publish":
		err = helperPublish(ctx, s, out)
	case "consume":
		err = helperConsume(ctx, s, out)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// helperPublish publishes HELPER_N records with ids HELPER_PREFIX-i for i
// from HELPER_FROM (default 0) and keys k<i mod HELPER_KEYS> from
// HELPER_PUBLISHERS goroutines, each pausing HELPER_PAUSE_MS after every
// publish, printing each acknowledged id.
func helperPublish(ctx context.Context, s event.Store, out *lineWriter) error {
	topic := os.Getenv("HELPER_TOPIC")
	n, keys, pubs := proctest.EnvInt("HELPER_N", 100), proctest.EnvInt("HELPER_KEYS", 10), proctest.EnvInt("HELPER_PUBLISHERS", 1)
	prefix, from := os.Getenv("HELPER_PREFIX"), proctest.EnvInt("HELPER_FROM", 0)
	pause := time.Duration(proctest.EnvInt("HELPER_PAUSE_MS", 0)) * time.Millisecond
	b, err := event.NewBus(s, event.Config{Partitions: proctest.EnvInt("HELPER_PARTITIONS", 1)})
	if err != nil {
		return err
	}
	defer b.Close(context.Background())
	next := make(chan int)
	errs := make(chan error, pubs)
	var wg sync.WaitGroup
	for range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				id := prefix + "-" + strconv.Itoa(i)
				// A publisher retries a failed publish with the same id, as
				// real ones should: publishing is idempotent by id, so a
				// slow server costs time, not a record or a duplicate.
				var err error
				for attempt := range 5 {
					if attempt > 0 {
						time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
					}
					_, err = b.Publish(ctx, topic, []byte(`{"i":`+strconv.Itoa(i)+`}`),
						event.WithID(id), event.WithKey("k"+strconv.Itoa(i%keys)))
					if err == nil || ctx.Err() != nil {
						break
					}
				}
				if err != nil {
					errs <- err
					return
				}
				out.Write(helperLine{Acked: id})
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		}()
	}
	var ferr error
feed:
	for i := from; i < from+n; i++ {
		select {
		case next <- i:
		case ferr = <-errs:
			break feed
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return ferr
}

// commitPrinter reports cursor commits.
type commitPrinter struct {
	event.NopObserver
	out    *lineWriter
	member string
}

func (c commitPrinter) Committed(topic, group string, partition int, seq uint64) {
	c.out.Write(helperLine{Commit: true, Member: c.member, Partition: partition, Seq: seq})
}

// leasePrinter reports a member's heartbeats and the leases granted to
// it.
type leasePrinter struct {
	event.LeaseStore
	out    *lineWriter
	member string
}

func (l leasePrinter) Heartbeat(ctx context.Context, topic, group, member string, ttl time.Duration) ([]string, error) {
	began := time.Now()
	members, err := l.LeaseStore.Heartbeat(ctx, topic, group, member, ttl)
	if err == nil {
		l.out.Write(helperLine{Member: l.member, Beat: true, At: began.UnixNano()})
	}
	return members, err
}

func (l leasePrinter) AcquireLease(ctx context.Context, p event.PartitionRef, member string, ttl time.Duration) (uint64, bool, error) {
	began := time.Now()
	tok, ok, err := l.LeaseStore.AcquireLease(ctx, p, member, ttl)
	if ok && err == nil {
		l.out.Write(helperLine{Member: l.member, Partition: p.Partition, Leased: true, At: began.UnixNano()})
	}
	return tok, ok, err
}

// renewPrinter is a leasePrinter over a store that renews membership and
// leases in one call: a renewal reports the heartbeat and each lease it
// granted, begun when the renewal began.
type renewPrinter struct {
	leasePrinter
	r event.LeaseRenewer
}

func (l renewPrinter) Renew(ctx context.Context, topic, group, member string, ttl time.Duration, parts []int) ([]string, []event.LeaseGrant, error) {
	began := time.Now()
	members, grants, err := l.r.Renew(ctx, topic, group, member, ttl, parts)
	if err == nil {
		l.out.Write(helperLine{Member: l.member, Beat: true, At: began.UnixNano()})
		for _, g := range grants {
			if g.Held {
				l.out.Write(helperLine{Member: l.member, Partition: g.Partition, Leased: true, At: began.UnixNano()})
			}
		}
	}
	return members, grants, err
}

// helperConsume consumes HELPER_TOPIC in group HELPER_GROUP with
// MaxInFlight 1 until SIGTERM, printing every delivery, commit, lease
// granted and rebalance hook call. With
// HELPER_KEY_ORDERED set it subscribes key-ordered instead, with
// MaxInFlight HELPER_MAX_INFLIGHT, 4 handler goroutines and an hour of
// backoff, and nacks the first attempt of every record whose seq is a
// multiple of HELPER_NACK_EVERY (0: none), which holds its key.
func helperConsume(ctx context.Context, s event.Store, out *lineWriter) error {
	member := os.Getenv("HELPER_MEMBER")
	var leases event.LeaseStore
	if ls, ok := s.(event.LeaseStore); ok {
		leases = leasePrinter{LeaseStore: ls, out: out, member: member}
		if r, ok := ls.(event.LeaseRenewer); ok {
			leases = renewPrinter{leasePrinter{LeaseStore: ls, out: out, member: member}, r}
		}
	}
	b, err := event.NewBus(s, event.Config{
		Partitions:     proctest.EnvInt("HELPER_PARTITIONS", 1),
		LeaseTTL:       time.Duration(proctest.EnvInt("HELPER_LEASE_MS", 1000)) * time.Millisecond,
		CommitInterval: 20 * time.Millisecond,
		MemberID:       member,
		Leases:         leases,
		Observer:       commitPrinter{out: out, member: member},
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, nil)), // logged when the test fails
	})
	if err != nil {
		return err
	}
	opts := []event.SubscribeOption{event.FromEarliest(), event.WithMaxInFlight(1), event.WithRebalanceHooks(
		func(_ context.Context, p int) {
			out.Write(helperLine{Member: member, Partition: p, Assigned: true, At: time.Now().UnixNano()})
		},
		func(_ context.Context, p int) {
			out.Write(helperLine{Member: member, Partition: p, Revoked: true, At: time.Now().UnixNano()})
		},
	)}
	nackEvery := uint64(proctest.EnvInt("HELPER_NACK_EVERY", 0))
	if os.Getenv("HELPER_KEY_ORDERED") != "" {
		opts = append(opts, event.WithKeyOrdered(), event.WithMaxInFlight(proctest.EnvInt("HELPER_MAX_INFLIGHT", 1)),
			event.WithConcurrency(4), event.WithBackoff(time.Hour, time.Hour))
	}
	_, err = b.Subscribe(ctx, os.Getenv("HELPER_TOPIC"), os.Getenv("HELPER_GROUP"), func(ctx context.Context, d *event.Delivery) error {
		out.Write(helperLine{Member: member, ID: d.ID, Seq: d.Seq, Key: d.Key, Partition: d.Partition, Attempt: d.Attempt, MaxAttempts: d.MaxAttempts})
		if nackEvery > 0 && d.Seq%nackEvery == 0 && d.Attempt == 1 {
			return errHeld
		}
		time.Sleep(time.Millisecond)
		return nil
	}, opts...)
	if err != nil {
		return err
	}
	out.Write(helperLine{Ready: true, Member: member})
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return b.Close(cctx)
}

// proc is a helper process and what it reported.
type proc = proctest.Proc[helperLine]

// startHelper starts a helper process in role with the store's settings
// and env.
func startHelper(t *testing.T, name, role string, store, env map[string]string) *proc {
	t.Helper()
	return proctest.Start[helperLine](t, name, map[string]string{helperEnv: role}, store, env)
}

// heldCount returns how many partitions p holds now, by its rebalance hooks.
func heldCount(p *proc) int {
	n := 0
	for _, l := range p.Lines() {
		switch {
		case l.Assigned:
			n++
		case l.Revoked:
			n--
		}
	}
	return n
}

// holding returns the partitions p holds now, by its rebalance hooks.
func holding(p *proc) []int {
	held := make(map[int]bool)
	for _, l := range p.Lines() {
		switch {
		case l.Assigned:
			held[l.Partition] = true
		case l.Revoked:
			delete(held, l.Partition)
		}
	}
	out := make([]int, 0, len(held))
	for id := range held {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// openShared opens the shared store in the test, closed when it ends.
func openShared(t *testing.T, sh Shared, env map[string]string) event.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	s, closeStore, err := sh.Open(ctx, func(k string) string { return env[k] })
	require.NoError(t, err)
	t.Cleanup(closeStore)
	return s
}

func isDelivery(l helperLine) bool { return l.ID != "" }
func isAck(l helperLine) bool      { return l.Acked != "" }

// testConsumerKilled runs three publisher processes and three consumer
// processes of one group over one store, and kills a consumer with SIGKILL
// mid-run: the others take its partitions over after about one lease TTL
// (never before its lease ended, and in the first renewal round of the
// taker after it ended), every published record is
// delivered and acked, duplicates are only records the killed process had
// taken after its last cursor commit, and each member sees each key in
// seq order.
//
// The lease is 8s, one that a full test run on two cores holds: with
// every package's tests running at once, a live consumer's renewal waited
// past 4s for SQLite's write lock, and the consumer lost its partitions
// before the kill. Since writes are fenced that costs no record, but the
// next owner delivers again what the live one had in flight: the
// stalled-member case (testStalledMember), not this test's. The take-over
// is measured against the lease's end and the taker's renewal rounds,
// whatever the TTL and however a loaded machine stretches them.
func testConsumerKilled(t *testing.T, sh Shared) {
	store := sh.New(t)
	const (
		topic, group = "mp", "g"
		partitions   = 6
		leaseTTL     = 8 * time.Second
	)
	perPublisher := 300
	if sh.Fewer {
		perPublisher = 100
	}
	common := map[string]string{
		"HELPER_TOPIC": topic, "HELPER_GROUP": group,
		"HELPER_PARTITIONS": strconv.Itoa(partitions), "HELPER_LEASE_MS": strconv.Itoa(int(leaseTTL.Milliseconds())),
		"HELPER_KEYS": "24",
	}
	with := func(more map[string]string) map[string]string {
		m := make(map[string]string, len(common)+len(more))
		for k, v := range common {
			m[k] = v
		}
		for k, v := range more {
			m[k] = v
		}
		return m
	}

	s := openShared(t, sh, store)
	cs, ok := s.(event.CursorStore)
	require.True(t, ok, "a shared store keeps cursors")
	consumers := make([]*proc, 3)
	for i := range consumers {
		name := "c" + strconv.Itoa(i)
		consumers[i] = startHelper(t, name, "consume", store, with(map[string]string{"HELPER_MEMBER": name}))
	}
	for _, c := range consumers {
		require.Eventually(t, func() bool { return c.Count(func(l helperLine) bool { return l.Ready }) == 1 },
			30*time.Second, 10*time.Millisecond, "%s ready", c.Name)
	}
	// The first consumer up takes every partition until the others'
	// heartbeats reach it (a lease renewal later). On a quiet machine the
	// records would all be delivered before that, and the victim would
	// have nothing in hand when it is killed: publish once each member
	// holds its share.
	for _, c := range consumers {
		require.Eventually(t, func() bool { return heldCount(c) == partitions/len(consumers) },
			60*time.Second, 10*time.Millisecond, "%s holds its share of the partitions", c.Name)
	}
	publishers := make([]*proc, 3)
	for i := range publishers {
		name := "p" + strconv.Itoa(i)
		publishers[i] = startHelper(t, name, "publish", store, with(map[string]string{
			"HELPER_PREFIX": name, "HELPER_N": strconv.Itoa(perPublisher), "HELPER_PUBLISHERS": "2",
		}))
	}

	victim := consumers[0]
	if !assert.Eventually(t, func() bool { return victim.Count(isDelivery) >= 40 }, 60*time.Second, 5*time.Millisecond,
		"the victim gets work") {
		for _, p := range append(consumers, publishers...) {
			t.Logf("%s: %d deliveries, %d acknowledged publishes", p.Name, p.Count(isDelivery), p.Count(isAck))
		}
		victim.Quit() // its goroutines go to stderr, logged at cleanup
		t.FailNow()
	}
	victimHeld := holding(victim)
	killed := time.Now()
	victim.Kill(t)
	for _, p := range publishers {
		p.Wait(t, 120*time.Second)
	}

	acked := make(map[string]bool)
	addAcked(acked, publishers...)
	require.Len(t, acked, 3*perPublisher)

	// Every record is delivered, and the group's cursor reaches the head
	// in every partition: everything is acked.
	ctx := context.Background()
	head, err := s.Head(ctx, topic)
	require.NoError(t, err)
	require.Equal(t, uint64(3*perPublisher), head)
	waitSettled(t, cs, topic, group, partitions, head)
	for _, c := range consumers[1:] {
		c.Stop(t)
	}

	// The victim's partitions were taken over once its lease on them and
	// its membership had ended, and no later than the survivor's renewal
	// round after that: measured in lease TTLs and renewal rounds, not in
	// seconds, which a loaded machine stretches.
	require.NotEmpty(t, victimHeld, "the victim held partitions when it was killed")
	// Stores keep the end of a lease or of a membership in milliseconds,
	// rounded down.
	end := func(began int64) int64 { return began + (leaseTTL - time.Millisecond).Nanoseconds() }
	leased := make(map[int]int64) // the start of the victim's last lease of each partition
	var member int64              // the end of the victim's membership
	for _, l := range victim.Lines() {
		switch {
		case l.Leased:
			leased[l.Partition] = max(leased[l.Partition], l.At)
		case l.Beat:
			member = max(member, end(l.At))
		}
	}
	for _, p := range victimHeld {
		require.NotZero(t, leased[p], "the victim reported its lease of partition %d", p)
		var by *proc
		var at int64
		for _, c := range consumers[1:] {
			for _, l := range c.Lines() {
				if l.Assigned && l.Partition == p && l.At > leased[p] && (at == 0 || l.At < at) {
					by, at = c, l.At
				}
			}
		}
		if !assert.NotNil(t, by, "partition %d of the victim taken over", p) {
			continue
		}
		ended := end(leased[p])
		assert.GreaterOrEqual(t, at, ended, "partition %d taken over by %s %v before the victim's lease on it ended",
			p, by.Name, time.Duration(ended-at))
		// The taker's renewal rounds that began after the lease and the
		// membership ended, before it took the partition: the first
		// round takes it (the second, when a call of the first failed).
		round := 0
		for _, l := range by.Lines() {
			if l.Beat && l.At > max(ended, member) && l.At < at {
				round++
			}
		}
		assert.LessOrEqual(t, round, 2, "partition %d taken over by %s only in its renewal round %d after the victim's lease ended (%v after)",
			p, by.Name, round, time.Duration(at-ended))
		after := time.Duration(at - killed.UnixNano())
		t.Logf("partition %d taken over by %s %v after the kill (%.2f lease TTLs), %v after the victim's lease ended, in its renewal round %d after that",
			p, by.Name, after.Round(time.Millisecond), float64(after)/float64(leaseTTL), time.Duration(at-ended).Round(time.Millisecond), round)
	}

	delivered := make(map[string]int)
	bySeq := make(map[uint64][]string) // members that got each seq
	for _, c := range consumers {
		last := make(map[string]uint64)
		for _, l := range c.Lines() {
			if !isDelivery(l) {
				continue
			}
			delivered[l.ID]++
			bySeq[l.Seq] = append(bySeq[l.Seq], c.Name)
			if l.Attempt == 1 {
				assert.Greater(t, l.Seq, last[l.Key], "%s: key %s out of order", c.Name, l.Key)
				last[l.Key] = l.Seq
			}
		}
	}
	lost := 0
	for id := range acked {
		if delivered[id] == 0 {
			lost++
		}
	}
	assert.Zero(t, lost, "lost records")

	// The victim's last commit per partition before it died.
	committed := make(map[int]uint64)
	partOf := make(map[uint64]int)
	for _, l := range victim.Lines() {
		if l.Commit && l.Seq > committed[l.Partition] {
			committed[l.Partition] = l.Seq
		}
		if isDelivery(l) {
			partOf[l.Seq] = l.Partition
		}
	}
	// A survivor late with its renewals (a loaded machine can starve a
	// process for seconds) may lose its own partitions, and their records
	// in flight go again to the other: duplicates of a stalled member,
	// which the guarantees allow. Such a survivor shows it in its
	// heartbeats: a gap of two renewal rounds or more (the renewal after
	// it may land past the lease's end). Without one, the survivors
	// deliver nothing twice.
	stalled := make(map[string]time.Duration) // a survivor's longest gap between heartbeats
	for _, c := range consumers[1:] {
		var prev, gap int64
		for _, l := range c.Lines() {
			if l.Beat {
				if prev != 0 {
					gap = max(gap, l.At-prev)
				}
				prev = l.At
			}
		}
		stalled[c.Name] = time.Duration(gap)
	}
	late := func(m string) bool { return stalled[m] >= 2*leaseTTL/3 }
	dups, stalledDups := 0, 0
	for seq, members := range bySeq {
		if len(members) == 1 {
			continue
		}
		dups += len(members) - 1
		byVictim := 0
		anyLate := false
		for _, m := range members {
			if m == victim.Name {
				byVictim++
			}
			anyLate = anyLate || late(m)
		}
		if byVictim == 0 && anyLate {
			stalledDups += len(members) - 1
			continue
		}
		assert.Equal(t, 1, byVictim, "seq %d delivered to %v: duplicates only for records in flight at the killed process or at a survivor late with its renewals (longest gaps between heartbeats %v)",
			seq, members, stalled)
		assert.Len(t, members, 2, "seq %d delivered to %v", seq, members)
		assert.Greater(t, seq, committed[partOf[seq]], "seq %d was committed before the kill, yet redelivered", seq)
	}
	t.Logf("published %d, delivered %d distinct, %d duplicates (%d of them at a survivor late with its renewals), victim delivered %d; the survivors' longest gaps between heartbeats %v",
		len(acked), len(delivered), dups, stalledDups, victim.Count(isDelivery), stalled)
	assert.Positive(t, len(bySeq), "deliveries")
}

// testPublisherKilled kills a publishing process with SIGKILL in the
// middle of a burst, restarts it, and checks the topic: every acknowledged
// publish is there, seqs run 1..head without a hole, and every record
// reads back.
func testPublisherKilled(t *testing.T, sh Shared) {
	store := sh.New(t)
	const topic = "crash"
	env := func(prefix string, n int) map[string]string {
		return map[string]string{
			"HELPER_TOPIC": topic, "HELPER_PREFIX": prefix,
			"HELPER_N": strconv.Itoa(n), "HELPER_PUBLISHERS": "8", "HELPER_KEYS": "5",
		}
	}
	first := startHelper(t, "first", "publish", store, env("a", 1_000_000))
	require.Eventually(t, func() bool { return first.Count(isAck) >= 300 }, 60*time.Second, time.Millisecond)
	first.Kill(t)
	acked := make(map[string]bool)
	addAcked(acked, first)

	second := startHelper(t, "second", "publish", store, env("b", 100))
	second.Wait(t, 60*time.Second)
	addAcked(acked, second)

	s, ids, head := storedIDs(t, sh, store, topic)
	missing := 0
	for id := range acked {
		if !ids[id] {
			missing++
		}
	}
	assert.Zero(t, missing, "acknowledged publishes missing after the crash")
	dlq, err := s.Head(context.Background(), topic+".dlq")
	require.NoError(t, err)
	assert.Zero(t, dlq, "nothing was dead-lettered")
	t.Logf("%d acknowledged before the kill, %d stored in all (records written but not yet acknowledged count too)", len(acked)-100, head)
}

// testRepublish kills one of three publisher processes with SIGKILL and
// restarts it re-publishing its last 100 acknowledged ids while the other
// two keep appending to the topic. The restarted publisher must learn that
// those ids are stored and finish: every id is stored once, seqs run
// 1..head without a hole.
func testRepublish(t *testing.T, sh Shared) {
	store := sh.New(t)
	const topic = "republish"
	env := func(prefix string, from, n, publishers int) map[string]string {
		return map[string]string{
			"HELPER_TOPIC": topic, "HELPER_PREFIX": prefix,
			"HELPER_FROM": strconv.Itoa(from), "HELPER_N": strconv.Itoa(n),
			"HELPER_PUBLISHERS": strconv.Itoa(publishers), "HELPER_KEYS": "5",
		}
	}
	// The others append steadily, not as fast as they can: a slow test
	// server with writers flat out starves them whatever the store does.
	other := func(name string) *proc {
		e := env(name, 0, 1_000_000, 1)
		e["HELPER_PAUSE_MS"] = "3"
		return startHelper(t, name, "publish", store, e)
	}
	others := []*proc{other("o1"), other("o2")}
	victim := startHelper(t, "victim", "publish", store, env("v", 0, 1_000_000, 8))
	require.Eventually(t, func() bool { return victim.Count(isAck) >= 110 }, 120*time.Second, time.Millisecond,
		"the victim publishes (acknowledged: %d)", victim.Count(isAck))
	victim.Kill(t)
	acked := make(map[string]bool)
	last := -1
	for _, l := range victim.Lines() {
		if isAck(l) {
			acked[l.Acked] = true
			i, err := strconv.Atoi(l.Acked[len("v-"):])
			require.NoError(t, err)
			last = max(last, i)
		}
	}
	// The others are still appending while the victim re-publishes.
	for _, o := range others {
		before := o.Count(isAck)
		if !assert.Eventually(t, func() bool { return o.Count(isAck) > before }, 30*time.Second, time.Millisecond, "%s appends", o.Name) {
			o.Quit() // its goroutines go to stderr, logged at cleanup
			t.FailNow()
		}
	}
	restarted := startHelper(t, "restarted", "publish", store, env("v", last-99, 120, 8))
	restarted.Wait(t, 45*time.Second)
	for _, o := range others {
		o.Kill(t) // what they had acknowledged is reported; the rest may or may not be stored
	}
	addAcked(acked, append([]*proc{restarted}, others...)...)

	_, ids, _ := storedIDs(t, sh, store, topic)
	for id := range acked {
		assert.True(t, ids[id], "acknowledged id %s is stored", id)
	}
	assert.Len(t, restarted.Lines(), 120, "the restarted publisher acknowledged all it published")
}

// addAcked adds the ids that the publisher processes acknowledged.
func addAcked(acked map[string]bool, procs ...*proc) {
	for _, p := range procs {
		for _, l := range p.Lines() {
			if isAck(l) {
				acked[l.Acked] = true
			}
		}
	}
}

// waitSettled waits until the cursor of every partition of group on topic
// reaches head: the group settled every record.
func waitSettled(t *testing.T, cs event.CursorStore, topic, group string, partitions int, head uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		cur, err := cs.Cursors(context.Background(), topic, group)
		if err != nil || len(cur) != partitions {
			return false
		}
		for _, seq := range cur {
			if seq < head {
				return false
			}
		}
		return true
	}, 120*time.Second, 20*time.Millisecond, "the group settles every record")
}

// storedIDs reads topic back through a newly opened store and requires
// what every crash must leave: each record reads back, seqs run 1..head
// without a hole, and no id is stored twice.
func storedIDs(t *testing.T, sh Shared, store map[string]string, topic string) (event.Store, map[string]bool, uint64) {
	t.Helper()
	s := openShared(t, sh, store)
	ctx := context.Background()
	head, err := s.Head(ctx, topic)
	require.NoError(t, err)
	all, err := s.Read(ctx, topic, 0, int(head)+10)
	require.NoError(t, err)
	require.Len(t, all, int(head), "every record reads back")
	ids := make(map[string]bool, len(all))
	for i, r := range all {
		require.Equal(t, uint64(i+1), r.Seq, "seqs run 1..head without a hole")
		require.False(t, ids[r.ID], "id %s stored twice", r.ID)
		ids[r.ID] = true
	}
	return s, ids, head
}
