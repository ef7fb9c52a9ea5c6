package wsclient

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a client loop, a handler,
// a gateway connection) outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
