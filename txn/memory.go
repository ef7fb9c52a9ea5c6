package txn

import (
	"context"
	"errors"
	"sync"
)

// ErrTxDone is returned by a write through a [MemoryTx] that has already
// committed or rolled back.
var ErrTxDone = errors.New("txn: the transaction has already committed or rolled back")

// Participant is an in-process store's share of a [MemoryTx]: the writes
// it buffered in the transaction. At commit the transaction locks every
// participant, checks them all, and only when every check passes applies
// them all; a rolled-back transaction drops them.
type Participant interface {
	// Lock and Unlock are the store's own mutex, held from Check through
	// Apply so that no other write comes between.
	sync.Locker
	// Check reports, with the lock held, whether the buffered writes can
	// still apply (another write may have taken a key since).
	Check() error
	// Apply makes the buffered writes visible, with the lock held. It
	// cannot fail.
	Apply()
}

// Memory is a [Runner] for in-process stores (outbox.MemoryStore,
// dedupe.MemoryStore, an application's own): their writes made with the
// ctx InTx passes are buffered in a [MemoryTx] and applied together when
// fn returns nil, or dropped. Reads outside the transaction never see its
// writes before the commit. It is for tests and examples: it runs fn once
// and never retries.
type Memory struct{}

var _ Runner = (*Memory)(nil)

// NewMemory returns a runner of memory transactions.
func NewMemory() *Memory { return &Memory{} }

// commitMu serialises commits, so that commits taking the locks of
// several stores never wait on each other in a circle; store methods
// outside commits take one store's lock at a time.
var commitMu sync.Mutex

type memoryKey struct{}

// MemoryTx is an open memory transaction; stores find it in the ctx with
// [MemoryTxFrom].
type MemoryTx struct {
	mu    sync.Mutex
	parts []Participant
	byKey map[any]Participant
	done  bool
}

// MemoryTxFrom returns the memory transaction ctx carries, or nil.
func MemoryTxFrom(ctx context.Context) *MemoryTx {
	tx, _ := ctx.Value(memoryKey{}).(*MemoryTx)
	return tx
}

// Join returns the participant of key (a store, typically) in tx, made by
// newPart on the first call, so that one store buffers all its writes of
// the transaction in one place. It fails with [ErrTxDone] after the
// commit or rollback.
func (tx *MemoryTx) Join(key any, newPart func() Participant) (Participant, error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.done {
		return nil, ErrTxDone
	}
	if p, ok := tx.byKey[key]; ok {
		return p, nil
	}
	p := newPart()
	if tx.byKey == nil {
		tx.byKey = make(map[any]Participant)
	}
	tx.byKey[key] = p
	tx.parts = append(tx.parts, p)
	return p, nil
}

// InTx implements [Runner]. Inside a memory transaction it joins it. The
// transaction commits when fn returns nil and ctx has not ended: a ctx
// cancelled before the commit rolls it back, as a process that died
// before committing would, and InTx returns ctx's error.
func (m *Memory) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	if MemoryTxFrom(ctx) != nil {
		return fn(ctx)
	}
	tx := &MemoryTx{}
	err := fn(context.WithValue(ctx, memoryKey{}, tx))
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		tx.finish()
		return err
	}
	return tx.commit()
}

// finish ends tx and returns its participants.
func (tx *MemoryTx) finish() []Participant {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.done = true
	return tx.parts
}

func (tx *MemoryTx) commit() error {
	parts := tx.finish()
	commitMu.Lock()
	defer commitMu.Unlock()
	for _, p := range parts {
		p.Lock()
		defer p.Unlock()
	}
	for _, p := range parts {
		if err := p.Check(); err != nil {
			return err
		}
	}
	for _, p := range parts {
		p.Apply()
	}
	return nil
}
