package sqlitestore_test

import (
	"testing"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/storetest"
)

func TestCopy(t *testing.T) {
	t.Parallel()
	storetest.RunCopy(t, func(t *testing.T) event.Store { return newStore(t) })
}

// TestCopyBetweenFiles copies one SQLite file into another and back into
// a third: each is the first record for record, and its consumers
// continue where they were.
func TestCopyBetweenFiles(t *testing.T) {
	t.Parallel()
	a := newStore(t)
	sc := storetest.FillForCopy(t, a)
	b := newStore(t)
	storetest.CopyAndCheck(t, b, a)
	c := newStore(t)
	storetest.CopyAndCheck(t, c, b)
	storetest.CheckCopied(t, c, a)
	storetest.CheckContinues(t, c, sc)
}
