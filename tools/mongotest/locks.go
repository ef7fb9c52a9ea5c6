package main

import "sync"

// cmdLocks serializes commands per database. Commands on one database run
// one at a time, which restores the per-document atomicity FerretDB lacks
// under concurrency; commands on different databases run side by side,
// since FerretDB's SQLite backend keeps each database in a file of its own
// and the tests give every test a database of its own. A command with no
// database, or on admin, config or local (server-wide commands: hello,
// listDatabases, endSessions), runs alone.
type cmdLocks struct {
	all sync.RWMutex // read-held by per-database commands, held by server-wide ones

	mu  sync.Mutex
	dbs map[string]*sync.Mutex
}

// lock takes the lock of a command on db and returns its release.
func (l *cmdLocks) lock(db string) (unlock func()) {
	if serverWide(db) {
		l.all.Lock()
		return l.all.Unlock
	}
	l.all.RLock()
	l.mu.Lock()
	if l.dbs == nil {
		l.dbs = make(map[string]*sync.Mutex)
	}
	m, ok := l.dbs[db]
	if !ok {
		m = new(sync.Mutex)
		l.dbs[db] = m
	}
	l.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		l.all.RUnlock()
	}
}

func serverWide(db string) bool {
	switch db {
	case "", "admin", "config", "local":
		return true
	}
	return false
}
