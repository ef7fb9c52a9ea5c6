package replay_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/replay"
)

// slowStore takes d for every Read, as a store far away does.
type slowStore struct {
	event.Store
	d time.Duration
}

func (s *slowStore) Read(ctx context.Context, topic string, afterSeq uint64, limit int) ([]event.Record, error) {
	select {
	case <-time.After(s.d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.Read(ctx, topic, afterSeq, limit)
}

// An export takes as long as the topic needs: each page gets its own write
// deadline, so a server whose WriteTimeout is shorter than the whole export
// still sends all of it.
func TestExportOutlivesServerWriteTimeout(t *testing.T) {
	t.Parallel()
	bus, store := newBus(t)
	fill(t, bus, "t", 8, sameTS(1), nil)
	const writeTimeout = 100 * time.Millisecond
	h := newHandler(t, &slowStore{Store: store, d: writeTimeout / 2}, replay.Config{ExportPageSize: 1})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.WriteTimeout = writeTimeout // 8 pages take 4 times as long
	srv.Start()
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/export?topic=t")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "the export was cut off")
	assert.Equal(t, 8, strings.Count(string(body), "\n"), "every record arrived")
}
