package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/promethean/promlib/event"
)

// backupBusyTimeout bounds the wait of a backup's read transaction for a
// lock (a checkpoint's, the recovery of the write-ahead log).
const backupBusyTimeout = 10 * time.Second

// Backup writes a copy of the store to the file at path while the store
// is in use (an online backup), with SQLite's VACUUM INTO on a connection
// of its own: one read transaction, so the copy is the database as it
// was when the backup began (every record whose append had returned,
// cursors and group state as committed then), and appends,
// commits and reads go on meanwhile (the write-ahead log grows until the
// backup ends, as a checkpoint cannot pass its snapshot). The copy is
// written to path+".partial", synced and renamed to path, so path never
// holds a partial backup; path must not exist.
//
// Restore: stop the processes that use the store, replace its file with
// the backup (and remove the old file's -wal and -shm), or open the
// backup in its place: [Open] of the backup's path is the store as it was.
//
// ctx is checked before the backup starts; once started, it runs to its
// end (the driver's interruption would fall on another statement of a
// pooled connection, see conn.go).
func (s *Store) Backup(ctx context.Context, path string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if path == "" || strings.HasPrefix(path, "file:") || strings.ContainsAny(path, "?#") {
		return fmt.Errorf("%w: sqlitestore: backup path %q: want a file name without '?' or '#'", event.ErrInvalid, path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%w: sqlitestore: backup path %q: %v", event.ErrInvalid, path, err)
	}
	if src, err := filepath.Abs(s.path); err == nil && src == abs {
		return fmt.Errorf("%w: sqlitestore: backup path %q is the store's own file", event.ErrInvalid, path)
	}
	if _, err := os.Lstat(abs); err == nil {
		return fmt.Errorf("%w: sqlitestore: backup path %q exists: back up into a new file", event.ErrInvalid, path)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sqlitestore: backup to %q: %w", path, err)
	}
	partial := abs + ".partial"
	if err := os.Remove(partial); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sqlitestore: backup to %q: remove a partial backup left before: %w", path, err)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", backupBusyTimeout.Milliseconds()))
	db := openDB("file:" + (&url.URL{Path: s.path}).EscapedPath() + "?" + q.Encode())
	defer db.Close()
	if _, err := db.ExecContext(ctx, `VACUUM INTO $1`, partial); err != nil {
		_ = os.Remove(partial)
		return fmt.Errorf("sqlitestore: backup to %q: %w", path, err)
	}
	if err := syncFile(partial); err != nil {
		_ = os.Remove(partial)
		return fmt.Errorf("sqlitestore: backup to %q: %w", path, err)
	}
	if err := os.Rename(partial, abs); err != nil {
		_ = os.Remove(partial)
		return fmt.Errorf("sqlitestore: backup to %q: %w", path, err)
	}
	if err := syncFile(filepath.Dir(abs)); err != nil {
		return fmt.Errorf("sqlitestore: backup to %q: sync its directory: %w", path, err)
	}
	return nil
}

// syncFile flushes the file (or directory) at path to stable storage.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
