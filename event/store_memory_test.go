package event_test

import (
	"testing"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/event/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) event.Store { return event.NewMemoryStore() })
}
