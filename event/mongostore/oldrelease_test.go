package mongostore_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/promethean/promlib/event/storetest"
	"github.com/promethean/promlib/internal/testmongo"
)

// A database written by the release at commit ccdae86 (before leases moved
// into the cursor documents and before stored partition counts;
// testdata/release-ccdae86.json, its collections exported by
// tools/oldrelease/gen.go) opens with the current code, which migrates
// it, and delivers what it held: a Bus left at the default partition
// count uses the 8 partitions the old Bus used, group g gets the two
// records it had not settled (and only those) with their attempts
// counted on, group dl resumes after its dead letter, and the records are
// as the old release stored them. The export's collections, with their
// indexes and documents, are loaded into a fresh database through the
// driver.
func TestOldReleaseDatabase(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join("testdata", "release-ccdae86.json"))
	require.NoError(t, err)
	var export struct {
		Collections []struct {
			Name      string            `json:"name"`
			Indexes   []json.RawMessage `json:"indexes"`
			Documents []json.RawMessage `json:"documents"`
		} `json:"collections"`
	}
	require.NoError(t, json.Unmarshal(raw, &export))
	require.NotEmpty(t, export.Collections)
	db := testmongo.DB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range export.Collections {
		require.NoError(t, db.CreateCollection(ctx, c.Name), "create %s", c.Name)
		// One index at a time, as the store creates them.
		for _, ix := range c.Indexes {
			var spec bson.D
			require.NoError(t, bson.UnmarshalExtJSON(ix, true, &spec), "index of %s: %s", c.Name, ix)
			err := db.RunCommand(ctx, bson.D{{Key: "createIndexes", Value: c.Name}, {Key: "indexes", Value: bson.A{spec}}}).Err()
			require.NoError(t, err, "create index of %s: %s", c.Name, ix)
		}
		docs := make([]any, 0, len(c.Documents))
		for _, d := range c.Documents {
			var doc bson.D
			require.NoError(t, bson.UnmarshalExtJSON(d, true, &doc), "document of %s: %s", c.Name, d)
			docs = append(docs, doc)
		}
		if len(docs) > 0 {
			_, err := db.Collection(c.Name).InsertMany(ctx, docs)
			require.NoError(t, err, "insert the documents of %s", c.Name)
		}
	}
	s := newStoreIn(t, db.Name(), nil)
	storetest.CheckPreviousRelease(t, s)
}
