package proctest

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const helperEnv = "PROCTEST_HELPER"

type report struct {
	I     int  `json:"i"`
	Ready bool `json:"ready,omitempty"`
}

// TestMain runs the helper roles of the tests below when started as one.
func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "report":
		// HELPER_N reports from two goroutines, a line that is no report,
		// then ready, then it waits for a signal.
		out := NewWriter[report](os.Stdout)
		n := EnvInt("HELPER_N", 0)
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < n; i += 2 {
				out.Write(report{I: i})
			}
		}()
		for i := 1; i < n; i += 2 {
			out.Write(report{I: i})
		}
		<-done
		// SIGTERM is caught before ready is reported: the test signals as
		// soon as it reads ready, and a SIGTERM before Notify ends the
		// process by the default action ("signal: terminated").
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		fmt.Println("not json")
		out.Write(report{Ready: true})
		<-ch
		os.Exit(0)
	case "fail":
		fmt.Fprintln(os.Stderr, "failing as asked")
		os.Exit(3)
	}
	os.Exit(2)
}

func TestReportsKillAndStop(t *testing.T) {
	t.Parallel()
	const n = 500
	// The later setting of helperEnv wins.
	p := Start[report](t, "reporter", map[string]string{helperEnv: "fail"}, map[string]string{helperEnv: "report", "HELPER_N": strconv.Itoa(n)})
	p.WaitFor(t, "ready", 30*time.Second, func(r report) bool { return r.Ready })
	lines := p.Lines()
	require.Len(t, lines, n+1, "every report, the line that is none skipped")
	seen := make(map[int]bool)
	for _, r := range lines[:n] {
		seen[r.I] = true
	}
	assert.Len(t, seen, n, "whole lines from both goroutines")
	assert.Equal(t, n/2, p.Count(func(r report) bool { return !r.Ready && r.I%2 == 0 }))
	assert.True(t, p.Has(func(r report) bool { return r.I == n-1 }))
	assert.False(t, p.Has(func(r report) bool { return r.I == n }))
	p.Stop(t)

	k := Start[report](t, "killed", map[string]string{helperEnv: "report", "HELPER_N": "1"})
	k.WaitFor(t, "ready", 30*time.Second, func(r report) bool { return r.Ready })
	k.Kill(t)
	select {
	case <-k.Exited():
	default:
		t.Fatal("Kill returned before the process exited")
	}
	require.Error(t, k.err, "a killed process does not exit cleanly")
}

func TestExitStatus(t *testing.T) {
	t.Parallel()
	p := Start[report](t, "failing", map[string]string{helperEnv: "fail"})
	<-p.Exited()
	require.Error(t, p.err)
	assert.Contains(t, p.stderr.String(), "failing as asked")
	assert.Empty(t, p.Lines())
}

func TestSignal(t *testing.T) {
	t.Parallel()
	p := Start[report](t, "signaled", map[string]string{helperEnv: "report"})
	p.WaitFor(t, "ready", 30*time.Second, func(r report) bool { return r.Ready })
	require.NoError(t, p.Signal(syscall.SIGTERM))
	p.Wait(t, 30*time.Second)
}

func TestEnvInt(t *testing.T) {
	t.Setenv("PROCTEST_INT", "42")
	assert.Equal(t, 42, EnvInt("PROCTEST_INT", 7))
	t.Setenv("PROCTEST_INT", "x")
	assert.Equal(t, 7, EnvInt("PROCTEST_INT", 7))
	assert.Equal(t, -1, EnvInt("PROCTEST_UNSET", -1))
}
