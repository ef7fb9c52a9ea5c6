package sqliteoutbox_test

import (
	"testing"

	"github.com/promethean/promlib/outbox/outboxtest"
)

// TestCopy: outbox.Copy into this store and out of it (outboxtest.CheckCopy).
func TestCopy(t *testing.T) {
	t.Parallel()
	outboxtest.CheckCopy(t, newStore(t, openDB(t), nil))
}
