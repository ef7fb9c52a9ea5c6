package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// doc.go's usage names every command, so that the package documentation
// cannot fall behind the command table.
func TestDocNamesEveryCommand(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	doc := string(b)
	for name := range commands {
		assert.True(t, strings.Contains(doc, "\n//\tpromctl "+name+" "), "doc.go's usage has no line \"promctl %s ...\"", name)
	}
}
