package mongooutbox_test

import (
	"testing"

	"github.com/promethean/promlib/outbox/outboxtest"
)

// TestCopy: outbox.Copy into this store and out of it (outboxtest.CheckCopy).
func TestCopy(t *testing.T) {
	outboxtest.CheckCopy(t, newStore(t, nil))
}
