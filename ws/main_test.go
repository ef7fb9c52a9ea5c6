package ws

import (
	"os"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine (a connection's writer or
// pinger, a bus handler, a client loop) outlives the tests.
func TestMain(m *testing.M) {
	if url := os.Getenv(idleChildURL); url != "" {
		n, _ := strconv.Atoi(os.Getenv(idleChildN))
		idleChild(url, n, os.Getenv(idleChildGroup))
		return
	}
	goleak.VerifyTestMain(m)
}
