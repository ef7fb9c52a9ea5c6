package schema_test

import (
	"testing"

	"github.com/promethean/promlib/schema"
	"github.com/promethean/promlib/schema/schematest"
)

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	schematest.Run(t, func(*testing.T) schema.Store { return schema.NewMemoryStore() })
}
