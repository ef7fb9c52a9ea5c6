package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ops"
)

// TestBackup covers POST /backup as TestEndpointsAuthAndAudit covers the
// other writes.
func init() { coveredByAuthAndAudit = append(coveredByAuthAndAudit, "POST /backup") }

// backupStore is a memory store that backs up as a file store does: the
// backup file holds the topics it lists.
type backupStore struct {
	*event.MemoryStore
	path  string
	mu    sync.Mutex
	files []string
}

func (s *backupStore) Path() string { return s.path }

func (s *backupStore) Backup(ctx context.Context, path string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%w: backup path %q exists", event.ErrInvalid, path)
	}
	topics, err := s.ListTopics(ctx)
	if err != nil {
		return err
	}
	b, err := json.Marshal(topics)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.files = append(s.files, path)
	s.mu.Unlock()
	return os.WriteFile(path, b, 0o600)
}

func allow(a acl.Action, topic string) acl.Rule {
	return acl.Rule{Effect: acl.Allow, Action: a, Topics: []string{topic}}
}

// policyVerifier accepts the tokens of policies, each giving a principal
// with its rules as policy.
func policyVerifier(t *testing.T, policies map[string][]acl.Rule) auth.Verifier {
	t.Helper()
	byToken := make(map[string]*acl.Policy, len(policies))
	for tok, rules := range policies {
		p, err := acl.NewPolicy(rules...)
		require.NoError(t, err)
		byToken[tok] = p
	}
	return auth.VerifierFunc(func(_ context.Context, token string) (*auth.Principal, error) {
		p, ok := byToken[token]
		if !ok {
			return nil, &auth.TokenError{Reason: auth.ErrUnknownToken}
		}
		return &auth.Principal{Subject: token, Policy: p}, nil
	})
}

// POST /ops/backup backs the store up beside its file, as a new file with
// the given name or a dated one; it needs admin on every topic, is off
// with ReadOnly, is logged and counted; a store without online backups
// answers 501 naming the tools to use.
func TestBackup(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st := &backupStore{MemoryStore: event.NewMemoryStore(), path: filepath.Join(dir, "events.db")}
	bus, err := event.NewBus(st, event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(ctx)) })
	_, err = bus.Publish(ctx, "orders", []byte(`{}`))
	require.NoError(t, err)
	logs := &syncBuf{}
	reg := prometheus.NewRegistry()
	clk := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	h := newHandler(t, ops.Config{
		Bus: bus, Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Clock: clock.NewFake(clk),
		Verifier: policyVerifier(t, map[string][]acl.Rule{
			"root":   {allow(acl.Inspect, "**"), allow(acl.Admin, "**")},
			"orders": {allow(acl.Inspect, "**"), allow(acl.Admin, "orders")},
			"reader": {allow(acl.Inspect, "**")},
			"denied": {allow(acl.AnyAction, "**"), {Effect: acl.Deny, Action: acl.Admin, Topics: []string{"secret"}}},
			"nobody": {allow(acl.Publish, "**")},
		}),
	})
	callAs(t, h, http.MethodPost, "/ops/backup", "", http.StatusUnauthorized)
	callAs(t, h, http.MethodPost, "/ops/backup", "wrong", http.StatusUnauthorized)
	for _, bad := range []string{"a/b", "..", ".hidden", "x%00y", "a%20b", ""} {
		body := callAs(t, h, http.MethodPost, "/ops/backup?name="+bad, "root", http.StatusBadRequest)
		assert.Contains(t, body, "name", bad)
	}
	body := callAs(t, h, http.MethodPost, "/ops/backup?x=1", "root", http.StatusBadRequest)
	assert.Contains(t, body, "x")
	for _, p := range []string{"orders", "reader", "nobody", "denied"} {
		body := callAs(t, h, http.MethodPost, "/ops/backup", p, http.StatusForbidden)
		assert.Contains(t, body, `"forbidden"`, p)
	}
	assert.Empty(t, st.files, "nothing backed up for a refused request")

	body = callAs(t, h, http.MethodPost, "/ops/backup", "root", http.StatusOK)
	var resp ops.BackupResponse
	require.NoError(t, json.Unmarshal([]byte(body), &resp))
	assert.Equal(t, filepath.Join(dir, "events-backup-20260304T050607.000Z.db"), resp.File)
	fi, err := os.Stat(resp.File)
	require.NoError(t, err)
	assert.Equal(t, fi.Size(), resp.Bytes)
	b, err := os.ReadFile(resp.File)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"topic":"orders"`)
	assert.Contains(t, logs.String(), `msg="ops: admin action" action=backup principal=root`)
	assert.Equal(t, 1.0, counterValue(t, reg, "backup"))

	body = callAs(t, h, http.MethodPost, "/ops/backup?name=before-upgrade.db", "root", http.StatusOK)
	require.NoError(t, json.Unmarshal([]byte(body), &resp))
	assert.Equal(t, filepath.Join(dir, "before-upgrade.db"), resp.File)
	body = callAs(t, h, http.MethodPost, "/ops/backup?name=before-upgrade.db", "root", http.StatusBadRequest)
	assert.Contains(t, body, "exists")
	callAs(t, h, http.MethodGet, "/ops/backup", "root", http.StatusMethodNotAllowed)

	ro := newHandler(t, ops.Config{Bus: bus, ReadOnly: true})
	body = callAs(t, ro, http.MethodPost, "/ops/backup", "", http.StatusForbidden)
	assert.Contains(t, body, "read_only")

	mem := newHandler(t, ops.Config{Bus: newBus(t)})
	body = callAs(t, mem, http.MethodPost, "/ops/backup", "", http.StatusNotImplemented)
	assert.Contains(t, body, "pg_dump")
	assert.Len(t, st.files, 2)
}
