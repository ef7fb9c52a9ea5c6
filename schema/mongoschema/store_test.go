package mongoschema_test

import (
	"testing"

	"github.com/promethean/promlib/internal/testmongo"
	"github.com/promethean/promlib/schema"
	"github.com/promethean/promlib/schema/mongoschema"
	"github.com/promethean/promlib/schema/schematest"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) { testmongo.Main(m) }

func TestConformance(t *testing.T) {
	t.Parallel()
	schematest.Run(t, func(t *testing.T) schema.Store {
		s, err := mongoschema.New(testmongo.DB(t), mongoschema.Config{})
		require.NoError(t, err)
		return s
	})
}
