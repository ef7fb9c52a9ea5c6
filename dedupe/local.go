package dedupe

import (
	"reflect"
	"sync"
)

// localClaims are the keys that wrapped handlers of this process hold, by
// store: two calls in one process never hold one key at once, whatever
// the store's leases say. A claim's lease is for holders that may be dead
// (another process that crashed). A holder in this process is alive even
// when its renewal comes late (a long pause of the whole process: a
// starved machine, a stop-the-world collection), and a delivery of this
// process waiting for the key must not take it over then.
var localClaims = keyLocks{held: make(map[localKey]struct{})}

// localKey names a key of a store. scope is the store, or the wrapper
// when the store's type cannot be a map key.
type localKey struct {
	scope any
	key   string
}

// localScope returns the scope of the keys of store for a wrapper: the
// store itself, so that every wrapper of it in this process shares its
// keys, or else (a store whose type is not comparable) a scope of the
// wrapper's own.
func localScope(store Store) any {
	if reflect.TypeOf(store).Comparable() {
		return store
	}
	return new(byte)
}

// keyLocks is a set of held keys.
type keyLocks struct {
	mu   sync.Mutex
	held map[localKey]struct{}
}

// tryLock takes k if nobody in this process holds it, and reports
// whether it did.
func (l *keyLocks) tryLock(k localKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.held[k]; ok {
		return false
	}
	l.held[k] = struct{}{}
	return true
}

// unlock gives k up.
func (l *keyLocks) unlock(k localKey) {
	l.mu.Lock()
	delete(l.held, k)
	l.mu.Unlock()
}
