package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
	"github.com/promethean/promlib/ws/wsclient"
	"github.com/promethean/promlib/ws/wsproto"
)

// TestBackupCommand backs a hub's SQLite store up with promctl backup, through
// the hub's ops endpoints, and opens the backup: the record published
// before it is there.
func TestBackupCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	db := migrateOpenDB(t, "sqlite:"+filepath.Join(dir, "hub.db"))
	bus, err := event.NewBus(db.Store(), event.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, bus.Close(ctx)) }()
	rec, err := bus.Publish(ctx, "orders", []byte(`{"n":1}`))
	require.NoError(t, err)
	h, err := ops.NewHandler(ops.Config{Bus: bus})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ops/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	code, out, errOut := migrateRun(t, "backup", "-url", srv.URL, "-name", "nightly.db", "-o", "json")
	require.Equal(t, exitOK, code, errOut)
	var res ops.BackupResponse
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, filepath.Join(dir, "nightly.db"), res.File)
	fi, err := os.Stat(res.File)
	require.NoError(t, err)
	assert.Equal(t, fi.Size(), res.Bytes)
	bk := migrateOpenDB(t, "sqlite:"+res.File)
	got, err := bk.Store().FindByID(ctx, "orders", rec.ID)
	require.NoError(t, err)
	assert.Equal(t, rec.Seq, got.Seq)

	code, _, errOut = migrateRun(t, "backup", "-url", srv.URL, "-name", "nightly.db")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "exists")
	code, out, errOut = migrateRun(t, "backup", "-url", srv.URL)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "backed up to "+filepath.Join(dir, "hub-backup-"))
	code, _, errOut = migrateRun(t, "backup", "-url", srv.URL, "-name", "../x.db")
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "bad_request")
	code, _, errOut = migrateRun(t, "backup", "-url", srv.URL, "extra")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `unexpected argument "extra"`)
}

// TestBackupUnderLoadRestoresIntoANewHub runs a hub on a SQLite file with
// four publishers (promctl publish, one event a call) and a consumer group
// (promctl tail -group, acking what it prints, and a member of the Go
// client that acks nothing), backs it up with promctl backup while they
// run, and starts a new hub on the backup. The new hub holds every event
// whose publish returned before the backup began, with its id and seq;
// its cursors are at least where the old hub's were before the backup;
// and the group, followed there with tail -group, gets once each record
// it had not settled at the backup (the Go member's, those not printed
// before the backup returned) and no record at or below a cursor
// committed before it began. Acks after the last commit before the
// backup are not in it (cursors are committed every
// event.Config.CommitInterval): those records may come again, as
// docs/RELIABILITY.md says (at least once; nothing settled and
// committed comes again).
func TestBackupUnderLoadRestoresIntoANewHub(t *testing.T) {
	t.Parallel()
	const (
		topic      = "t.backup.load"
		group      = "restored"
		publishers = 4
	)
	dir := t.TempDir()
	old := runHub(t, "sqlite:"+filepath.Join(dir, "hub.db"))

	var out, errOut lineSink
	stopTail := follow(t, old.url, &out, &errOut, "tail", topic, "-group", group, "-from", "earliest", "-o", "json")
	var pubs pubLog
	stopPublishers := make(chan struct{})
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stopPublishers:
					return
				default:
				}
				if err := pubs.publish(old.url, topic, p, n); err != nil {
					t.Errorf("publisher %d: %v", p, err)
					return
				}
			}
		}()
	}
	defer func() { // on a failure before the publishers are stopped
		select {
		case <-stopPublishers:
		default:
			close(stopPublishers)
		}
		wg.Wait()
	}()
	require.Eventually(t, func() bool { return len(out.snapshot()) >= 20 }, 30*time.Second, 5*time.Millisecond, "tail -group prints")

	// A member that acks nothing: what it holds is unsettled at the
	// backup, whoever else acks.
	held := dialMember(t, old.url, topic, group)
	require.Eventually(t, func() bool {
		c0, err := groupStatusOf(old.url, topic, group)
		return err == nil && pubs.holds(held.ids()) && pubs.each() >= 20 && c0.cursors() > 0
	}, 30*time.Second, 20*time.Millisecond, "publishes, a cursor committed, a delivery held")

	c0, err := groupStatusOf(old.url, topic, group)
	require.NoError(t, err)
	cursors := c0.byPartition()
	before := pubs.snapshot()
	heldBefore := held.ids()
	r := promctlAt(t, old.url, "", "backup", "-name", "restore.db", "-o", "json").ok(t)
	printed := map[string]bool{}
	for _, rec := range tailedLines(t, out.snapshot()) {
		printed[rec.ID] = true
	}
	var res ops.BackupResponse
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &res), r.stdout)
	require.Equal(t, filepath.Join(dir, "restore.db"), res.File)
	// The load goes on after the backup returned, then stops.
	atBackup := pubs.each()
	require.Eventually(t, func() bool { return pubs.each() >= atBackup+10 }, 30*time.Second, 5*time.Millisecond, "publishes after the backup")
	close(stopPublishers)
	wg.Wait()
	tr := stopTail()
	assert.Equal(t, exitOK, tr.code, tr.stderr)
	assert.Empty(t, errOut.snapshot(), "tail's stderr")
	old.stop()
	require.NotEmpty(t, heldBefore)
	t.Logf("%d publishes before the backup (%d in all), %d printed by tail -group when it returned, %d held unacked; cursors before it %v",
		len(before), len(pubs.snapshot()), len(printed), len(heldBefore), cursors)

	nw := runHub(t, "sqlite:"+res.File)
	recs := exported(t, nw.url, topic)
	byID := map[string]event.Record{}
	last := map[int]uint64{} // the last seq of each partition in the backup
	for i, rec := range recs {
		if i > 0 {
			require.Greater(t, rec.Seq, recs[i-1].Seq, "export is in seq order, each seq once")
		}
		_, dup := byID[rec.ID]
		require.False(t, dup, "id %s stored twice", rec.ID)
		byID[rec.ID] = rec
		last[rec.Partition] = rec.Seq
	}
	missing := 0
	for _, p := range before {
		rec, ok := byID[p.ID]
		if !assert.True(t, ok, "publish %s (seq %d) returned before the backup began and is not in it", p.ID, p.Seq) {
			missing++
			continue
		}
		assert.Equal(t, p.Seq, rec.Seq, "the seq of %s", p.ID)
	}
	require.Zero(t, missing)

	st, err := groupStatusOf(nw.url, topic, group)
	require.NoError(t, err)
	for part, c := range st.byPartition() {
		assert.GreaterOrEqual(t, c, cursors[part], "partition %d's cursor in the backup is behind the one committed before it began", part)
	}
	for part := range cursors {
		_, ok := st.byPartition()[part]
		assert.True(t, ok, "partition %d of the group is not in the backup", part)
	}

	var out2, errOut2 lineSink
	stopTail2 := follow(t, nw.url, &out2, &errOut2, "tail", topic, "-group", group, "-o", "json")
	// The new hub's member gets the partitions once the old hub's leases
	// in the backup end (event.Config.LeaseTTL), and the group is done
	// when every partition's cursor covers its last record.
	require.Eventually(t, func() bool {
		st, err := groupStatusOf(nw.url, topic, group)
		if err != nil {
			return false
		}
		cur := st.byPartition()
		for part, seq := range last {
			if cur[part] < seq {
				return false
			}
		}
		return true
	}, 60*time.Second, 10*time.Millisecond, "the group settles the backup's records on the new hub")
	tr = stopTail2()
	assert.Equal(t, exitOK, tr.code, tr.stderr)
	assert.Empty(t, errOut2.snapshot(), "tail's stderr on the new hub")

	got := map[string]event.Record{}
	for _, rec := range tailedLines(t, out2.snapshot()) {
		_, dup := got[rec.ID]
		assert.False(t, dup, "seq %d delivered twice on the new hub", rec.Seq)
		got[rec.ID] = rec
		stored, ok := byID[rec.ID]
		if assert.True(t, ok, "seq %d delivered on the new hub is not in the backup", rec.Seq) {
			assert.Equal(t, stored.Seq, rec.Seq)
		}
		assert.Greater(t, rec.Seq, cursors[rec.Partition], "seq %d of partition %d was settled and committed before the backup began, and came again", rec.Seq, rec.Partition)
	}
	owed := 0
	for _, p := range before {
		if printed[p.ID] {
			continue // acked before the backup returned: may be in it as settled
		}
		owed++
		assert.Contains(t, got, p.ID, "seq %d, not acked before the backup, is not delivered on the new hub", p.Seq)
	}
	for _, id := range heldBefore {
		assert.Contains(t, got, id, "a record held unacked at the backup is not delivered on the new hub")
	}
	t.Logf("the new hub delivered %d records to the group; %d were owed (published before the backup, not printed by its end)", len(got), owed)
}

// lineSink is the stdout of a command still running: the lines it wrote.
type lineSink struct {
	mu    sync.Mutex
	part  []byte
	lines []string
}

func (s *lineSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.part = append(s.part, p...)
	for {
		i := bytes.IndexByte(s.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		s.lines = append(s.lines, string(s.part[:i]))
		s.part = s.part[i+1:]
	}
}

// snapshot returns the lines written so far.
func (s *lineSink) snapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.lines)
}

// tailedLines decodes the lines of promctl tail -o json.
func tailedLines(t *testing.T, ls []string) []event.Record {
	t.Helper()
	return tailed(t, strings.Join(ls, "\n"))
}

// follow runs promctl against hubURL, writing to stdout and stderr, until
// stop cancels it; stop returns its result (the streams are the caller's).
func follow(t *testing.T, hubURL string, stdout, stderr io.Writer, args ...string) (stop func() result) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"-url", hubURL}, args...), strings.NewReader(""), stdout, stderr)
	}()
	var once sync.Once
	var res result
	stop = func() result {
		once.Do(func() {
			cancel()
			select {
			case res.code = <-done:
			case <-time.After(30 * time.Second):
				t.Errorf("promctl %q did not end within 30s of its interruption", args)
				res.code = -1
			}
		})
		return res
	}
	t.Cleanup(func() { stop() })
	return stop
}

// pubLog keeps the publishes that returned, in the order they did, and
// how many each publisher made.
type pubLog struct {
	mu   sync.Mutex
	recs []wsproto.Published
	ids  map[string]bool
	per  map[int]int
}

// publish publishes {"p":p,"n":n} to topic with promctl publish and logs
// its id and seq once it returned.
func (l *pubLog) publish(hubURL, topic string, p, n int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var o, e bytes.Buffer
	args := []string{"-url", hubURL, "publish", topic, fmt.Sprintf(`{"p":%d,"n":%d}`, p, n), "-key", fmt.Sprintf("k%d.%d", p, n%5), "-o", "json"}
	if code := run(ctx, args, strings.NewReader(""), &o, &e); code != exitOK {
		return fmt.Errorf("promctl publish: exit %d: %s", code, e.String())
	}
	var res wsproto.Published
	if err := json.Unmarshal(o.Bytes(), &res); err != nil || res.ID == "" || res.Seq == 0 {
		return fmt.Errorf("promctl publish -o json: %q: %v", o.String(), err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ids == nil {
		l.ids, l.per = map[string]bool{}, map[int]int{}
	}
	l.recs = append(l.recs, res)
	l.ids[res.ID] = true
	l.per[p]++
	return nil
}

// snapshot returns the publishes that returned so far.
func (l *pubLog) snapshot() []wsproto.Published {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

// each returns the fewest publishes a publisher made so far.
func (l *pubLog) each() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	least := -1
	for _, n := range l.per {
		if least < 0 || n < least {
			least = n
		}
	}
	return max(least, 0)
}

// holds reports whether ids is not empty and every one of them is a
// publish that returned.
func (l *pubLog) holds(ids []string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range ids {
		if !l.ids[id] {
			return false
		}
	}
	return len(ids) > 0
}

// heldMember is a member of a group, over the Go client, that acks
// nothing: what it gets stays unsettled until it goes.
type heldMember struct {
	mu  sync.Mutex
	got []string
}

// dialMember joins group at the hub as a heldMember, gone when the test
// ends.
func dialMember(t *testing.T, hubURL, topic, group string) *heldMember {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := wsclient.Dial(ctx, "ws"+strings.TrimPrefix(hubURL, "http")+"/ws", nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	m := &heldMember{}
	_, err = c.Subscribe(ctx, topic, group, func(_ context.Context, msg *wsclient.Message) error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.got = append(m.got, msg.ID)
		return nil
	}, event.WithManualAck(), event.WithMaxInFlight(4))
	require.NoError(t, err)
	return m
}

// ids returns the ids delivered to the member so far.
func (m *heldMember) ids() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got)
}

// groupStatusOf reads a group's status at the hub with promctl lag -o json.
func groupStatusOf(hubURL, topic, group string) (groupState, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var o, e bytes.Buffer
	if code := run(ctx, []string{"-url", hubURL, "lag", topic, group, "-o", "json"}, strings.NewReader(""), &o, &e); code != exitOK {
		return groupState{}, fmt.Errorf("promctl lag: exit %d: %s", code, e.String())
	}
	var st event.GroupStatus
	if err := json.Unmarshal(o.Bytes(), &st); err != nil {
		return groupState{}, fmt.Errorf("promctl lag -o json: %w", err)
	}
	return groupState(st), nil
}

// groupState is a group's status with its cursors by partition.
type groupState event.GroupStatus

// byPartition returns the committed cursor of each partition.
func (s groupState) byPartition() map[int]uint64 {
	out := map[int]uint64{}
	for _, p := range s.Partitions {
		out[p.Partition] = p.Cursor
	}
	return out
}

// cursors returns the sum of the partitions' cursors: above 0 once one
// was committed.
func (s groupState) cursors() uint64 {
	var n uint64
	for _, p := range s.Partitions {
		n += p.Cursor
	}
	return n
}
