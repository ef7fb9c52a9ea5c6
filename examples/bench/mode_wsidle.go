package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
)

func init() { modes["ws-idle"] = runWSIdle }

// wsIdleChildEnv makes the bench the client side of -mode ws-idle: it
// holds the value "url conns" and opens the connections.
const wsIdleChildEnv = "PROMLIB_BENCH_WS_IDLE"

// runWSIdle measures what an idle connection costs the gateway: a child
// process (this program again, so that only the gateway's side is counted
// here) opens -conns WebSocket connections, each authenticated with one
// subscription (group "idle", shared; with -group-per-conn a group of its
// own each, "idle-<i>", as browsers that each have their group), and keeps
// them open and reading.
// bytes_per_conn is the growth of this process's resident set (after
// returning freed memory to the system, before and after) divided by
// -conns; heap_stack_per_conn the Go heap and stacks per connection. Both
// processes need -conns open files and some: the bench says what
// RLIMIT_NOFILE allows, raises the soft limit to the hard one, and refuses
// -conns beyond it.
func runWSIdle(ctx context.Context, o *Options, be Backend, r *Result) error {
	n := o.Conns
	soft, hard, err := raiseNoFile()
	if err != nil {
		return err
	}
	r.Conns, r.NoFileSoft, r.NoFileHard = n, soft, hard
	fmt.Fprintf(os.Stderr, "bench: open files (ulimit -n): soft %d, hard %d; %d connections need about %d in each process\n", soft, hard, n, n+64)
	if uint64(n+64) > soft {
		return fmt.Errorf("-conns %d needs about %d open files per process, but RLIMIT_NOFILE allows %d (hard limit %d): raise it (ulimit -n) or lower -conns", n, n+64, soft, hard)
	}

	bus, err := event.NewBus(be.Store, event.Config{Partitions: o.Partitions})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = bus.Close(cctx)
	}()
	gw, err := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.StaticTokens("bench")})
	if err != nil {
		return err
	}
	url, stop, err := serveLoopback(gw)
	if err != nil {
		return err
	}
	defer stop()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_ = gw.Shutdown(cctx)
	}()

	before := memSample()
	cmd := exec.CommandContext(ctx, os.Args[0])
	cmd.Env = append(os.Environ(), wsIdleChildEnv+"="+url+" "+strconv.Itoa(n)+" "+strconv.FormatBool(o.GroupPerConn))
	if o.GroupPerConn {
		r.Groups = n
	}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "ready" {
		return fmt.Errorf("client process: %q %v", line, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	// Stats walks every connection and subscription under their locks:
	// at 10,000 connections, asked every 10 ms, it took a fifth of the
	// process's CPU from the connections it waited for.
	for st := gw.Stats(); st.Authenticated < n || st.Subscriptions < n; st = gw.Stats() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d connections authenticated, %d subscribed", st.Authenticated, n, st.Subscriptions)
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "bench: %d connections set up in %v\n", n, time.Since(start).Round(time.Millisecond))
	after := memSample()
	r.BytesPerConn = float64(after.rss-before.rss) / float64(n)
	r.HeapStackPerConn = float64(after.heapStack-before.heapStack) / float64(n)
	r.GoroutinesPerConn = float64(after.goroutines-before.goroutines) / float64(n)
	if err := writeHeapProfile(o.HeapProfile); err != nil {
		return err
	}
	if st := gw.Stats(); st.Connections != n {
		r.Lost = n - st.Connections // connections that did not stay
	}
	return nil
}

type idleSample struct {
	rss, heapStack uint64
	goroutines     int
}

// memSample collects garbage, returns freed memory to the system and
// samples the resident set, the heap and the stacks.
func memSample() idleSample {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return idleSample{rss: rssBytes(), heapStack: m.HeapAlloc + m.StackInuse, goroutines: runtime.NumGoroutine()}
}

// rssBytes returns the resident set (VmRSS) of this process.
func rssBytes() uint64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// raiseNoFile raises the soft RLIMIT_NOFILE to the hard one (the Go
// runtime does so at start already; this says what it is) and returns
// both.
func raiseNoFile() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, 0, fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", lim.Max, err)
		}
	}
	return lim.Cur, lim.Max, nil
}

// wsIdleChild is the client side of -mode ws-idle: it opens the
// connections of spec ("url conns"), each authenticated with one
// subscription, says "ready" once all are answered, and keeps them open,
// reading (so that pings are answered), until stdin closes.
func wsIdleChild(spec string) error {
	url, rest, _ := strings.Cut(spec, " ")
	ns, own, _ := strings.Cut(rest, " ")
	n, err := strconv.Atoi(ns)
	if err != nil {
		return fmt.Errorf("%s: %q: %w", wsIdleChildEnv, spec, err)
	}
	groupPerConn, err := strconv.ParseBool(own)
	if err != nil {
		return fmt.Errorf("%s: %q: %w", wsIdleChildEnv, spec, err)
	}
	if _, _, err := raiseNoFile(); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	conns := make([]*websocket.Conn, n)
	var ready sync.WaitGroup
	var failed atomic.Value
	var next atomic.Int64
	var dialers sync.WaitGroup
	for range 32 {
		dialers.Add(1)
		go func() {
			defer dialers.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				c, _, err := websocket.Dial(ctx, url, nil)
				if err == nil {
					err = c.Write(ctx, websocket.MessageText, []byte(`{"op":"AUTH","token":"bench"}`))
				}
				if err == nil {
					group := "idle"
					if groupPerConn {
						group = "idle-" + strconv.Itoa(i)
					}
					err = c.Write(ctx, websocket.MessageText, []byte(`{"op":"SUBSCRIBE","topic":"idle","group":"`+group+`"}`))
				}
				if err != nil {
					failed.Store(fmt.Errorf("connection %d: %w", i, err))
					return
				}
				conns[i] = c
				ready.Add(1)
				go func() {
					answered := 0
					for {
						_, data, err := c.Read(ctx)
						if err != nil {
							if answered < 2 {
								ready.Done()
							}
							return
						}
						if strings.Contains(string(data), `"op":"OK"`) {
							if answered++; answered == 2 {
								ready.Done()
							}
						}
					}
				}()
			}
		}()
	}
	dialers.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	ready.Wait()
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		_ = c.CloseNow()
	}
	return nil
}
