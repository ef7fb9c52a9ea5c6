package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/ws/wsclient"
)

// TestHubMongo: with MONGO_URL the hub keeps its events in MongoDB, so a
// hub started again on the same database delivers what the first one
// stored. Skipped without MONGO_URL, except under CI=true, where it fails.
func TestHubMongo(t *testing.T) {
	db := testmongo.DB(t) // dropped when the test ends, after the hubs stop
	env := map[string]string{"MONGO_URL": testmongo.URL(t), "MONGO_DB": db.Name(), "WS_TOKEN": "tok"}

	addr, logs, stop := runHub(t, env)
	assert.Contains(t, logs.String(), "events are kept in MongoDB")
	assert.NotContains(t, logs.String(), env["MONGO_URL"], "the URL may hold credentials")
	status, out := httpPublish(t, addr, "hub.mongo", "tok")
	require.Equal(t, http.StatusOK, status, "%v", out)
	stop()

	n, err := db.Collection("events").CountDocuments(context.Background(), map[string]any{"topic": "hub.mongo"})
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "stored in database %s", db.Name())

	addr, _ = startHub(t, env)
	ctx := context.Background()
	c, err := wsclient.Dial(ctx, "ws://"+addr+"/ws", &wsclient.Options{Token: "tok"})
	require.NoError(t, err)
	defer c.Close()
	got := make(chan string, 1)
	_, err = c.Subscribe(ctx, "hub.mongo", "g", func(_ context.Context, m *wsclient.Message) error {
		got <- m.ID
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)
	select {
	case id := <-got:
		assert.Equal(t, out["id"], id, "the event stored by the first hub")
	case <-time.After(10 * time.Second):
		t.Fatal("the restarted hub did not deliver the stored event")
	}
}
