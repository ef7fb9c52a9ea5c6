package event

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gateStore is a store a call of which is not in process (it hides the
// MemoryStore's ReadInto, so a Bus over it group-commits its waiting
// publishes). Its first Append waits for release; each Append's ids are
// kept; refuse, when set, answers an append instead of the store.
type gateStore struct {
	Store
	release chan struct{}
	refuse  func(ctx context.Context, recs []Record) ([]Record, error)

	mu    sync.Mutex
	calls [][]string // the ids of each Append, in call order
}

func newGateStore() *gateStore {
	return &gateStore{Store: NewMemoryStore(), release: make(chan struct{})}
}

func (s *gateStore) Append(ctx context.Context, topic string, recs []Record) ([]Record, error) {
	ids := make([]string, len(recs))
	for i := range recs {
		ids[i] = recs[i].ID
	}
	s.mu.Lock()
	s.calls = append(s.calls, ids)
	first := len(s.calls) == 1
	s.mu.Unlock()
	if first {
		select {
		case <-s.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if s.refuse != nil {
		if out, err := s.refuse(ctx, recs); err != nil {
			return out, err
		}
	}
	return s.Store.Append(ctx, topic, recs)
}

func (s *gateStore) appends() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// published is the outcome of one Publish.
type published struct {
	rec Record
	err error
}

// groupCommitBus returns a Bus over s (closed at the end) whose first
// publish, id "first" to topic "t", is running: it is in the store's
// Append, waiting for s.release. The publishes made from now on queue.
func groupCommitBus(t *testing.T, s *gateStore, ics ...PublishInterceptor) (*Bus, <-chan published) {
	t.Helper()
	b, err := NewBus(s, Config{Cursors: s.Store.(CursorStore), PublishInterceptors: ics})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(context.Background()) })
	first := publishAsync(context.Background(), b, "t", "first")
	require.Eventually(t, func() bool { return len(s.appends()) == 1 }, 10*time.Second, time.Millisecond)
	return b, first
}

// publishAsync runs Bus.Publish of id to topic on a goroutine of its own.
func publishAsync(ctx context.Context, b *Bus, topic, id string) <-chan published {
	ch := make(chan published, 1)
	go func() {
		rec, err := b.Publish(ctx, topic, []byte(`"`+id+`"`), WithID(id))
		ch <- published{rec, err}
	}()
	return ch
}

// queue publishes each id to topic, one after the other once the one
// before is queued, so that they queue in this order.
func queue(t *testing.T, ctx context.Context, b *Bus, topic string, ids ...string) []<-chan published {
	t.Helper()
	var chs []<-chan published
	for _, id := range ids {
		n := b.commits.queued()
		chs = append(chs, publishAsync(ctx, b, topic, id))
		require.Eventually(t, func() bool { return b.commits.queued() == n+1 }, 10*time.Second, time.Millisecond)
	}
	return chs
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

// TestGroupCommitSharesOneAppend: publishes that wait while the store
// writes are written together by the next append, in the order they came,
// and each caller gets its own record.
func TestGroupCommitSharesOneAppend(t *testing.T) {
	t.Parallel()
	s := newGateStore()
	b, first := groupCommitBus(t, s)
	want := ids("c", 8)
	chs := queue(t, context.Background(), b, "t", want...)
	close(s.release)

	require.NoError(t, (<-first).err)
	for i, ch := range chs {
		p := <-ch
		require.NoError(t, p.err, want[i])
		assert.Equal(t, want[i], p.rec.ID)
		assert.Equal(t, `"`+want[i]+`"`, string(p.rec.Payload))
		assert.Equal(t, uint64(i+2), p.rec.Seq, "stored in the order the calls came")
	}
	assert.Equal(t, [][]string{{"first"}, want}, s.appends(), "one append for the eight waiting calls")
	stored, err := s.Read(context.Background(), "t", 0, 100)
	require.NoError(t, err)
	assert.Len(t, stored, 9, "each record once")
}

type tenantKey struct{}

// TestGroupCommitInterceptorsPerCaller: each caller's publish interceptors
// run with its own ctx and record, and the shared append writes what each
// made.
func TestGroupCommitInterceptorsPerCaller(t *testing.T) {
	t.Parallel()
	s := newGateStore()
	tag := func(next PublishFunc) PublishFunc {
		return func(ctx context.Context, topic string, recs []Record) ([]Record, error) {
			tenant, _ := ctx.Value(tenantKey{}).(string)
			for i := range recs {
				recs[i].Headers = map[string]string{"tenant": tenant}
			}
			return next(ctx, topic, recs)
		}
	}
	b, first := groupCommitBus(t, s, tag)
	var chs []<-chan published
	for _, id := range []string{"x", "y"} {
		chs = append(chs, queue(t, context.WithValue(context.Background(), tenantKey{}, "tenant-"+id), b, "t", id)...)
	}
	close(s.release)
	require.NoError(t, (<-first).err)
	for i, id := range []string{"x", "y"} {
		p := <-chs[i]
		require.NoError(t, p.err)
		assert.Equal(t, "tenant-"+id, p.rec.Headers["tenant"])
	}
	assert.Equal(t, [][]string{{"first"}, {"x", "y"}}, s.appends())
}

// TestGroupCommitOneTopicPerAppend: the waiting publishes of each topic
// are written by an append of their own, in their order.
func TestGroupCommitOneTopicPerAppend(t *testing.T) {
	t.Parallel()
	s := newGateStore()
	b, first := groupCommitBus(t, s)
	var chs []<-chan published
	for _, id := range []string{"u1", "t1", "u2", "t2"} {
		chs = append(chs, queue(t, context.Background(), b, id[:1], id)...)
	}
	close(s.release)
	require.NoError(t, (<-first).err)
	for _, ch := range chs {
		require.NoError(t, (<-ch).err)
	}
	assert.Equal(t, [][]string{{"first"}, {"u1", "u2"}, {"t1", "t2"}}, s.appends())
}

// TestGroupCommitErrorReachesEveryCaller: a shared append that fails
// fails each of its callers (each tried alone too, as the store's refusal
// may be one record's), with the store's error.
func TestGroupCommitErrorReachesEveryCaller(t *testing.T) {
	t.Parallel()
	errDown := errors.New("database down")
	s := newGateStore()
	s.refuse = func(context.Context, []Record) ([]Record, error) { return nil, errDown }
	b, first := groupCommitBus(t, s)
	chs := queue(t, context.Background(), b, "t", ids("c", 4)...)
	close(s.release)

	assert.ErrorIs(t, (<-first).err, errDown)
	for _, ch := range chs {
		p := <-ch
		assert.ErrorIs(t, p.err, errDown)
		assert.Zero(t, p.rec)
	}
	assert.Len(t, s.appends(), 1+1+4, "the first, the shared one, then each alone")
}

// TestGroupCommitRefusedRecordFailsAlone: the caller of a record the store
// refuses gets the error, the others of the same append are stored,
// whether the store says which record it refused or refuses the append.
func TestGroupCommitRefusedRecordFailsAlone(t *testing.T) {
	t.Parallel()
	errBad := errors.New("bad record")
	for _, tt := range []struct {
		name   string
		refuse func(ctx context.Context, recs []Record) ([]Record, error)
		calls  int
	}{
		{name: "per record", calls: 2, refuse: func(_ context.Context, recs []Record) ([]Record, error) {
			if !slices.ContainsFunc(recs, func(r Record) bool { return r.ID == "bad" }) {
				return nil, nil
			}
			out := make([]Record, len(recs))
			errs := make([]error, len(recs))
			for i, r := range recs {
				if r.ID == "bad" {
					errs[i] = errBad
				} else {
					out[i] = r
					out[i].Seq = uint64(100 + i)
				}
			}
			return out, &RecordErrors{Errs: errs}
		}},
		{name: "the whole append", calls: 2 + 3, refuse: func(_ context.Context, recs []Record) ([]Record, error) {
			if slices.ContainsFunc(recs, func(r Record) bool { return r.ID == "bad" }) {
				return nil, errBad
			}
			return nil, nil
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newGateStore()
			s.refuse = tt.refuse
			b, first := groupCommitBus(t, s)
			want := []string{"a", "bad", "b"}
			chs := queue(t, context.Background(), b, "t", want...)
			close(s.release)
			require.NoError(t, (<-first).err)
			for i, ch := range chs {
				p := <-ch
				if want[i] == "bad" {
					assert.ErrorIs(t, p.err, errBad)
					assert.Zero(t, p.rec)
					continue
				}
				require.NoError(t, p.err, want[i])
				assert.Equal(t, want[i], p.rec.ID)
				assert.NotZero(t, p.rec.Seq)
			}
			assert.Len(t, s.appends(), tt.calls)
		})
	}
}

// TestGroupCommitCanceledBeforeWrite: a caller whose ctx ends while its
// record waits returns ctx's error at once and its record is not written;
// the others are.
func TestGroupCommitCanceledBeforeWrite(t *testing.T) {
	t.Parallel()
	s := newGateStore()
	b, first := groupCommitBus(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	a := queue(t, context.Background(), b, "t", "a")[0]
	gone := queue(t, ctx, b, "t", "gone")[0]
	c := queue(t, context.Background(), b, "t", "c")[0]
	cancel()
	p := <-gone // while the store still holds the first append
	assert.ErrorIs(t, p.err, context.Canceled)
	assert.Equal(t, 2, b.commits.queued(), "it left the queue")
	close(s.release)

	require.NoError(t, (<-first).err)
	require.NoError(t, (<-a).err)
	require.NoError(t, (<-c).err)
	assert.Equal(t, [][]string{{"first"}, {"a", "c"}}, s.appends())
	stored, err := s.Read(context.Background(), "t", 0, 100)
	require.NoError(t, err)
	var got []string
	for _, r := range stored {
		got = append(got, r.ID)
	}
	assert.Equal(t, []string{"first", "a", "c"}, got)
}

// TestGroupCommitCanceledDuringWrite: a caller whose ctx ends while the
// shared append runs returns ctx's error (its record may be stored); the
// append goes on for the others, and is stopped once every caller of it
// gave up.
func TestGroupCommitCanceledDuringWrite(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		cancelB bool
	}{{name: "one gives up"}, {name: "all give up", cancelB: true}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newGateStore()
			hold := make(chan struct{})
			s.refuse = func(ctx context.Context, recs []Record) ([]Record, error) {
				if len(recs) == 1 {
					return nil, nil
				}
				select { // the shared append waits
				case <-hold:
					return nil, nil
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			b, first := groupCommitBus(t, s)
			ctxA, cancelA := context.WithCancel(context.Background())
			defer cancelA()
			ctxB, cancelB := context.WithCancel(context.Background())
			defer cancelB()
			pa := queue(t, ctxA, b, "t", "a")[0]
			pb := queue(t, ctxB, b, "t", "b")[0]
			close(s.release)
			require.NoError(t, (<-first).err)
			require.Eventually(t, func() bool { return len(s.appends()) == 2 }, 10*time.Second, time.Millisecond, "the shared append runs")

			cancelA()
			p := <-pa
			assert.ErrorIs(t, p.err, context.Canceled)
			assert.ErrorContains(t, p.err, "may have been stored")
			if !tt.cancelB {
				close(hold)
				p = <-pb
				require.NoError(t, p.err, "the append went on for b")
				assert.Equal(t, "b", p.rec.ID)
				return
			}
			cancelB()
			assert.ErrorIs(t, (<-pb).err, context.Canceled)
			// The writer is done once a publish after it is written.
			require.NoError(t, (<-publishAsync(context.Background(), b, "t", "after")).err)
			assert.Equal(t, [][]string{{"first"}, {"a", "b"}, {"after"}}, s.appends(), "no retry for callers that gave up")
			stored, err := s.Read(context.Background(), "t", 0, 100)
			require.NoError(t, err)
			assert.Len(t, stored, 2, "first and after")
		})
	}
}

// TestGroupCommitInProcessStoreDirect: over an InProcessStore (the
// MemoryStore) Publish appends in the caller, with its ctx.
func TestGroupCommitInProcessStoreDirect(t *testing.T) {
	t.Parallel()
	b, err := NewBus(NewMemoryStore(), Config{})
	require.NoError(t, err)
	defer b.Close(context.Background())
	_, err = b.Publish(context.Background(), "t", []byte(`1`))
	require.NoError(t, err)
	assert.Nil(t, b.commits.b, "no group commit")
}

// committingStore is a gateStore that declares whether it group-commits
// itself.
type committingStore struct {
	*gateStore
	commits bool
}

func (s committingStore) GroupCommits() bool { return s.commits }

// TestGroupCommitStoreOfItsOwn: over a store that group-commits itself,
// each Publish is an Append of its own, made at once (the store writes
// them together); over one that says it does not, the Bus does.
func TestGroupCommitStoreOfItsOwn(t *testing.T) {
	t.Parallel()
	for _, commits := range []bool{true, false} {
		t.Run(strconv.FormatBool(commits), func(t *testing.T) {
			t.Parallel()
			s := committingStore{gateStore: newGateStore(), commits: commits}
			b, err := NewBus(s, Config{Cursors: s.Store.(CursorStore)})
			require.NoError(t, err)
			defer b.Close(context.Background())
			first := publishAsync(context.Background(), b, "t", "first")
			require.Eventually(t, func() bool { return len(s.appends()) == 1 }, 10*time.Second, time.Millisecond)
			var chs []<-chan published
			for _, id := range ids("c", 4) {
				chs = append(chs, publishAsync(context.Background(), b, "t", id))
			}
			if commits {
				// The four reach the store while its first append waits.
				require.Eventually(t, func() bool { return len(s.appends()) == 5 }, 10*time.Second, time.Millisecond)
				assert.Nil(t, b.commits.b, "no group commit of the Bus's")
			} else {
				require.Eventually(t, func() bool { return b.commits.queued() == 4 }, 10*time.Second, time.Millisecond)
				assert.Len(t, s.appends(), 1)
			}
			close(s.release)
			require.NoError(t, (<-first).err)
			for _, ch := range chs {
				require.NoError(t, (<-ch).err)
			}
		})
	}
}
