package main

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/promethean/promlib/internal/testpg"
)

// TestMain runs the test binary as a child of the harness when the
// harness started it so (TestShortRun runs the harness in the test, and
// the harness runs its own executable as its children).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// shortOptions are the settings of the short run of make test: every
// fault the store has but the server restart (the test server is not the
// harness's), a few seconds of them, a light load.
func shortOptions(store string) *Options {
	o := &Options{
		Store: store, Publishers: 2, Consumers: 3, Partitions: 4,
		Lease: time.Second, Duration: 10 * time.Second, Seed: 1,
		Rate: 20, MaxInFlight: 4, MaxAttempts: 10, Nack: 0.05,
		FaultEvery: 700 * time.Millisecond, Faults: "kill,stop,pg_terminate",
		Drain: 90 * time.Second,
	}
	o.setDefaults()
	return o
}

// TestShortRun runs the harness briefly on each SQL store: nothing
// acknowledged is lost, nothing is invented or stored twice, and the group
// drains. The PostgreSQL run needs PG_URL (make test sets it); without it
// the run is skipped, and under CI=true it fails.
func TestShortRun(t *testing.T) {
	for _, store := range []string{"sqlite", "postgres"} {
		t.Run(store, func(t *testing.T) {
			if store == "postgres" {
				testpg.URL(t)
			}
			t.Parallel()
			o := shortOptions(store)
			require.NoError(t, o.validate())
			var log bytes.Buffer
			rep, err := Run(context.Background(), o, &log)
			require.NoError(t, err, log.String())
			var line bytes.Buffer
			require.NoError(t, rep.writeJSON(&line))
			t.Logf("%s", line.String())
			assert.True(t, rep.OK, "%v\n%s", rep.Failures, log.String())
			assert.Positive(t, rep.PublishedAcked, "published")
			assert.Positive(t, rep.Faults[faultKill]+rep.Faults[faultStop], "faults injected")
		})
	}
}
