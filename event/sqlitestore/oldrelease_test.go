package sqlitestore_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/promethean/promlib/event/storetest"
	"github.com/stretchr/testify/require"
)

// A file written by the release at commit ccdae86 (before lease tokens and
// stored partition counts; testdata/release-ccdae86.db, made by
// tools/oldrelease/gen.go) opens with the current code, which migrates
// it, and delivers what it held: a Bus left at the default partition
// count uses the 8 partitions the old Bus used, group g gets the two
// records it had not settled (and only those) with their attempts
// counted on, group dl resumes after its dead letter, and the records are
// as the old release stored them.
func TestOldReleaseFile(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("testdata", "release-ccdae86.db"))
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "events.db")
	require.NoError(t, os.WriteFile(path, src, 0o644))
	s := openStore(t, path)
	storetest.CheckPreviousRelease(t, s)
}
