package mongostore_test

import (
	"testing"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/storetest"
)

func TestConformance(t *testing.T) {
	client(t) // skip (or fail under CI) before the suite starts
	storetest.Run(t, func(t *testing.T) event.Store { return newStore(t) })
}
