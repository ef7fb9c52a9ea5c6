package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/ws"
)

// TestHubWSWriteTimeoutFlag: -ws-write-timeout sets the gateway's write
// deadline (default ws.DefaultWriteTimeout, 10s).
func TestHubWSWriteTimeoutFlag(t *testing.T) {
	none := func(string) string { return "" }
	s, err := parseFlags(nil, none, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, ws.DefaultWriteTimeout, s.wsWriteTO)
	assert.Equal(t, 10*time.Second, s.wsWriteTO)
	s, err = parseFlags([]string{"-ws-write-timeout", "3s"}, none, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, s.wsWriteTO)
}
