package event

import (
	"bufio"
	"crypto/rand"
	"sync"

	"github.com/google/uuid"
)

// idSource buffers crypto/rand for UUIDv7 generation: one system call per
// 4 KiB instead of one per id. Ids are unique, not secret, so buffering is
// safe; it is private to promlib, unlike uuid.EnableRandPool, which would
// change the host's global uuid settings.
var idSource = &lockedReader{r: bufio.NewReaderSize(rand.Reader, 4096)}

type lockedReader struct {
	mu sync.Mutex
	r  *bufio.Reader
}

func (l *lockedReader) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Read(p)
}

// newID returns a new UUIDv7 in canonical form and the wall clock time it
// holds, in milliseconds since the Unix epoch.
func newID() (string, int64, error) {
	id, err := uuid.NewV7FromReader(idSource)
	if err != nil {
		return "", 0, err
	}
	sec, nsec := id.Time().UnixTime()
	return id.String(), sec*1000 + nsec/1e6, nil
}
