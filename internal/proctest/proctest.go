package proctest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Proc is a helper process and the reports of type L it wrote.
type Proc[L any] struct {
	// Name names the process in failures and logs.
	Name   string
	cmd    *exec.Cmd
	stderr bytes.Buffer
	mu     sync.Mutex
	lines  []L
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

// Start starts the test binary again as a helper process named name,
// running no test (-test.run=^$), with this process's environment and
// the variables of env added in order (a later one wins). Its stdout is
// read as JSON lines of type L; a line that is not one is skipped. It is
// killed when the test ends, if still running, and its stderr is logged
// when the test failed.
func Start[L any](t *testing.T, name string, env ...map[string]string) *Proc[L] {
	t.Helper()
	p := &Proc[L]{Name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$")
	p.cmd.Env = os.Environ()
	for _, m := range env {
		for k, v := range m {
			p.cmd.Env = append(p.cmd.Env, k+"="+v)
		}
	}
	p.cmd.Stderr = &p.stderr
	stdout, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l L
			if json.Unmarshal(sc.Bytes(), &l) == nil {
				p.mu.Lock()
				p.lines = append(p.lines, l)
				p.mu.Unlock()
			}
		}
		p.err = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() && p.stderr.Len() > 0 {
			t.Logf("%s stderr:\n%s", p.Name, p.stderr.String())
		}
	})
	return p
}

// Lines returns a copy of the reports read so far.
func (p *Proc[L]) Lines() []L {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]L(nil), p.lines...)
}

// Count returns how many of the reports read so far f accepts.
func (p *Proc[L]) Count(f func(L) bool) int {
	n := 0
	for _, l := range p.Lines() {
		if f(l) {
			n++
		}
	}
	return n
}

// Has reports whether f accepts a report read so far.
func (p *Proc[L]) Has(f func(L) bool) bool {
	return p.Count(f) > 0
}

// WaitFor waits up to d for a report that f accepts. When none comes it
// sends the process SIGQUIT (its goroutines go to its stderr, logged when
// the test ends) and fails the test now, saying what.
func (p *Proc[L]) WaitFor(t *testing.T, what string, d time.Duration, f func(L) bool) {
	t.Helper()
	if !assert.Eventually(t, func() bool { return p.Has(f) }, d, 5*time.Millisecond, "%s: %s", p.Name, what) {
		p.Quit()
		t.FailNow()
	}
}

// Quit sends the process SIGQUIT, which makes a Go program write its
// goroutines to stderr and exit, and waits for it to exit.
func (p *Proc[L]) Quit() {
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	<-p.exited
}

// Signal sends the process sig.
func (p *Proc[L]) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited is closed once the process has exited and its stdout is read.
func (p *Proc[L]) Exited() <-chan struct{} { return p.exited }

// Wait waits up to d for the process to exit and requires a clean exit.
func (p *Proc[L]) Wait(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		t.Fatalf("%s still running after %v", p.Name, d)
	}
	require.NoError(t, p.err, "%s: %s", p.Name, p.stderr.String())
}

// Stop sends the process SIGTERM and requires it to exit cleanly within
// 30 seconds.
func (p *Proc[L]) Stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.Wait(t, 30*time.Second)
}

// Kill kills the process with SIGKILL and waits for it to exit.
func (p *Proc[L]) Kill(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Kill())
	<-p.exited
}

// Writer writes the reports of a helper process, each a JSON line.
type Writer[L any] struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewWriter returns a writer of reports to w (the helper's os.Stdout).
func NewWriter[L any](w io.Writer) *Writer[L] {
	return &Writer[L]{enc: json.NewEncoder(w)}
}

// Write writes l as one line, in one write(2): a killed process leaves
// whole lines. Writes of several goroutines do not interleave.
func (w *Writer[L]) Write(l L) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_ = w.enc.Encode(l)
}

// EnvInt returns the integer in the environment variable name, or def
// when it is unset or not an integer.
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}
