package pgstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event/storetest"
	"github.com/promethean/promlib/internal/testpg"
)

// A database written by the release at commit ccdae86 (before lease
// tokens and stored partition counts; testdata/release-ccdae86.sql, its
// tables dumped by pg_dump after tools/oldrelease/gen.go wrote them)
// opens with the current code, which migrates it, and delivers what it
// held: a Bus left at the default partition count uses the 8 partitions
// the old Bus used, group g gets the two records it had not settled (and
// only those) with their attempts counted on, group dl resumes after its
// dead letter, and the records are as the old release stored them. The
// dump is run through the driver (no psql needed) in the test's schema.
func TestOldReleaseDatabase(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile(filepath.Join("testdata", "release-ccdae86.sql"))
	require.NoError(t, err)
	pool, schema := testpg.Pool(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// No arguments: one simple query of all the dump's statements.
	_, err = pool.Exec(ctx, string(script))
	require.NoError(t, err, "restore the dump")
	s := openStore(t, schema)
	storetest.CheckPreviousRelease(t, s)
}
