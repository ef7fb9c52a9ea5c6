package ops

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
)

// Backuper is a store that backs itself up into a file while it is in use
// (event/sqlitestore's Store): POST /ops/backup calls it when the Bus's
// store is one. Path is the store's file: backups go into its directory.
type Backuper interface {
	Backup(ctx context.Context, path string) error
	Path() string
}

// BackupResponse is the body of POST /ops/backup.
type BackupResponse struct {
	// File is the backup's path, in the directory of the store's file.
	File string `json:"file"`
	// Bytes is the backup's size; TookMs how long it took.
	Bytes  int64 `json:"bytes"`
	TookMs int64 `json:"took_ms"`
}

// maxBackupName bounds the name of a backup file.
const maxBackupName = 200

// backupEndpoint backs the store up online ([Backuper]) into a new file
// beside the store's: name (letters, digits, '.', '_', '-'; default
// "<store file>-backup-<UTC time>.db"). It is an admin action on the whole
// store: the principal must be allowed admin on every topic ("**") and
// denied it on none; the backup holds them all.
func (h *Handler) backupEndpoint(r *http.Request, p params) (any, error) {
	name := p.str("name")
	if p.v.Has("name") {
		if err := checkBackupName(name); err != nil {
			return nil, err
		}
	}
	if err := p.done(); err != nil {
		return nil, err
	}
	if err := storeAdmin(r.Context()); err != nil {
		return nil, err
	}
	if err := h.writable(); err != nil {
		return nil, err
	}
	b, ok := h.bus.Store().(Backuper)
	if !ok {
		return nil, fmt.Errorf("%w: the store (%T) has no online backup (a SQLite store has; back PostgreSQL up with pg_dump, MongoDB with mongodump)", ErrNotSupported, h.bus.Store())
	}
	start := h.cfg.Clock.Now()
	if name == "" {
		base := strings.TrimSuffix(filepath.Base(b.Path()), filepath.Ext(b.Path()))
		name = base + "-backup-" + start.UTC().Format("20060102T150405.000Z") + ".db"
	}
	file := filepath.Join(filepath.Dir(b.Path()), name)
	err := b.Backup(r.Context(), file)
	resp := BackupResponse{File: file, TookMs: h.cfg.Clock.Now().Sub(start).Milliseconds()}
	if err == nil {
		if fi, serr := os.Stat(file); serr == nil {
			resp.Bytes = fi.Size()
		}
	}
	h.audit(r, "backup", "", "", err, "file", file, "bytes", resp.Bytes, "took", time.Duration(resp.TookMs)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// checkBackupName checks that name is a plain file name.
func checkBackupName(name string) error {
	if name == "" || len(name) > maxBackupName || name[0] == '.' {
		return invalid("name", "%q, want 1 to %d letters, digits, '.', '_' or '-', not starting with '.'", name, maxBackupName)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return invalid("name", "%q has %q: want a file name of letters, digits, '.', '_' or '-' (the backup goes beside the store's file)", name, c)
		}
	}
	return nil
}

// storeAdmin refuses a principal whose policy does not allow admin on
// every topic, or denies it on some: a backup holds every topic.
func storeAdmin(ctx context.Context) error {
	p, ok := auth.PrincipalFromContext(ctx)
	if !ok {
		return nil // open access: no Verifier
	}
	all := false
	for _, rule := range p.Policy.Rules() {
		if rule.Action != acl.Admin && rule.Action != acl.AnyAction {
			continue
		}
		if rule.Effect == acl.Deny {
			return &authError{fmt.Errorf("%w: admin: a backup holds every topic, and the principal is denied admin on %s", acl.ErrForbidden, strings.Join(rule.Topics, ", "))}
		}
		if len(rule.Groups) == 0 && containsAll(rule.Topics) {
			all = true
		}
	}
	if !all {
		return &authError{fmt.Errorf("%w: admin: a backup holds every topic: the principal needs admin on \"**\"", acl.ErrForbidden)}
	}
	return nil
}

func containsAll(patterns []string) bool {
	for _, p := range patterns {
		if p == "**" {
			return true
		}
	}
	return false
}
