package stacktest_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/promethean/promlib/internal/stacktest"
)

// Deep's stack is measured where it is used: offstack's
// TestRunLeavesTheCallersStackAsItWas holds goroutines that called it
// directly to 64 KB of stack each or more.
func TestDeepSums(t *testing.T) {
	// Frame i holds i at index i: 0 + 1 + ... + 10.
	assert.Equal(t, byte(55), stacktest.Deep(10))
}
