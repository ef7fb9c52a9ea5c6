package ws

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a connection's writer or
// pinger, a bus handler, a client loop) outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
