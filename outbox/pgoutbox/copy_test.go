package pgoutbox_test

import (
	"testing"

	"github.com/promethean/promlib/internal/testpg"
	"github.com/promethean/promlib/outbox/outboxtest"
)

// TestCopy: outbox.Copy into this store and out of it (outboxtest.CheckCopy).
func TestCopy(t *testing.T) {
	t.Parallel()
	testpg.URL(t)
	pool, _ := testpg.Pool(t)
	outboxtest.CheckCopy(t, newStore(t, pool, nil))
}
