package txn_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/txn"
)

// ledger is an in-process store that joins memory transactions: Set
// writes at once outside one, and at the commit inside one. A value set
// to "taken" cannot be set again, which lets a test make a commit's check
// fail.
type ledger struct {
	mu   sync.Mutex
	vals map[string]string
}

func newLedger() *ledger { return &ledger{vals: make(map[string]string)} }

type ledgerPart struct {
	l    *ledger
	vals map[string]string
}

func (p *ledgerPart) Lock()   { p.l.mu.Lock() }
func (p *ledgerPart) Unlock() { p.l.mu.Unlock() }
func (p *ledgerPart) Check() error {
	for k := range p.vals {
		if p.l.vals[k] == "taken" {
			return fmt.Errorf("%s is taken", k)
		}
	}
	return nil
}
func (p *ledgerPart) Apply() { maps.Copy(p.l.vals, p.vals) }

func (l *ledger) Set(ctx context.Context, k, v string) error {
	if tx := txn.MemoryTxFrom(ctx); tx != nil {
		p, err := tx.Join(l, func() txn.Participant { return &ledgerPart{l: l, vals: map[string]string{}} })
		if err != nil {
			return err
		}
		p.(*ledgerPart).vals[k] = v
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.vals[k] = v
	return nil
}

func (l *ledger) Get(k string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.vals[k]
}

func TestMemoryCommitsAndRollsBack(t *testing.T) {
	ctx := context.Background()
	tx := txn.NewMemory()
	a, b := newLedger(), newLedger()

	require.NoError(t, tx.InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, a.Set(ctx, "k", "1"))
		require.NoError(t, b.Set(ctx, "k", "1"))
		assert.Empty(t, a.Get("k"), "not visible before the commit")
		return nil
	}))
	assert.Equal(t, "1", a.Get("k"))
	assert.Equal(t, "1", b.Get("k"))

	errAbort := errors.New("abort")
	err := tx.InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, a.Set(ctx, "k", "2"))
		// An InTx inside joins the outer transaction.
		require.NoError(t, tx.InTx(ctx, func(ctx context.Context) error { return b.Set(ctx, "k", "2") }))
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	assert.Equal(t, "1", a.Get("k"), "a rollback drops the writes")
	assert.Equal(t, "1", b.Get("k"), "the inner InTx rolled back with the outer one")
}

// A ctx that ends before the commit (the process died, say) rolls back,
// even though fn returned nil.
func TestMemoryCancelledBeforeCommitRollsBack(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	l := newLedger()
	err := txn.NewMemory().InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, l.Set(ctx, "k", "v"))
		cancel()
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, l.Get("k"))
}

// The commit is all or nothing: when one store's check fails, no store
// applies its writes.
func TestMemoryCommitIsAtomic(t *testing.T) {
	ctx := context.Background()
	a, b := newLedger(), newLedger()
	require.NoError(t, b.Set(ctx, "k", "taken"))
	err := txn.NewMemory().InTx(ctx, func(ctx context.Context) error {
		require.NoError(t, a.Set(ctx, "k", "v"))
		return b.Set(ctx, "k", "v")
	})
	require.ErrorContains(t, err, "k is taken")
	assert.Empty(t, a.Get("k"), "a's write went with b's")
	assert.Equal(t, "taken", b.Get("k"))
}

// A write through a transaction's ctx after it ended is refused.
func TestMemoryWriteAfterEndIsRefused(t *testing.T) {
	l := newLedger()
	var kept context.Context
	require.NoError(t, txn.NewMemory().InTx(context.Background(), func(ctx context.Context) error {
		kept = ctx
		return nil
	}))
	assert.ErrorIs(t, l.Set(kept, "k", "v"), txn.ErrTxDone)
	assert.Nil(t, txn.MemoryTxFrom(context.Background()))
}
