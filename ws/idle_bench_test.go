package ws

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
)

// Environment of the child process of BenchmarkIdleConnMemory.
const (
	idleChildURL   = "PROMLIB_WS_IDLE_URL"
	idleChildN     = "PROMLIB_WS_IDLE_N"
	idleChildGroup = "PROMLIB_WS_IDLE_GROUP" // "": no subscription; "own": a group per connection; "live": a live subscription
)

// BenchmarkIdleConnMemory measures the gateway's memory per idle,
// authenticated connection, with 1,000 connections: with no subscription,
// with one subscription of a group they share, with one of a group of its
// own each, and with a live subscription (SUBSCRIBE without group) of one
// topic. A child process (this test binary again) opens them, so
// that only the server side is counted here: heap and goroutine stacks,
// after a GC, before and after. With PROMLIB_WS_IDLE_PROFILE set to a
// directory, heap and goroutine profiles of the server are written there.
//
//	go test ./ws -run '^$' -bench IdleConnMemory -benchtime 1x
func BenchmarkIdleConnMemory(b *testing.B) {
	for _, c := range []struct{ name, group string }{{"auth", ""}, {"shared-group", "g"}, {"own-group", "own"}, {"live", "live"}} {
		b.Run(c.name, func(b *testing.B) { benchIdle(b, c.group) })
	}
}

func benchIdle(b *testing.B, group string) {
	const n = 1000
	if os.Getenv("PROMLIB_WS_IDLE_PROFILE") != "" {
		defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
		runtime.MemProfileRate = 1 // every allocation, for an exact profile
	}
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close(ctx)
	gw, err := NewGateway(Config{Bus: bus, Verifier: auth.StaticTokens(testToken)})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	defer gw.Shutdown(ctx)

	for i := 0; i < b.N; i++ {
		before := memNow()
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
		cmd.Env = append(os.Environ(), idleChildURL+"=ws"+strings.TrimPrefix(srv.URL, "http"), idleChildN+"="+strconv.Itoa(n), idleChildGroup+"="+group)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "ready" {
			b.Fatalf("child: %q %v", line, err)
		}
		deadline := time.Now().Add(30 * time.Second)
		want := 0
		if group != "" {
			want = n
		}
		for st := gw.Stats(); st.Authenticated < n || st.Subscriptions < want; st = gw.Stats() {
			if time.Now().After(deadline) {
				b.Fatalf("only %d of %d authenticated, %d subscribed", st.Authenticated, n, st.Subscriptions)
			}
			time.Sleep(10 * time.Millisecond)
		}
		after := memNow()
		if dir := os.Getenv("PROMLIB_WS_IDLE_PROFILE"); dir != "" {
			writeProfiles(b, dir, group)
		}
		heap := float64(after.heap-before.heap) / n
		stack := float64(after.stack-before.stack) / n
		b.ReportMetric(heap, "heap-B/conn")
		b.ReportMetric(stack, "stack-B/conn")
		b.ReportMetric(heap+stack, "B/conn")
		b.ReportMetric(float64(after.goroutines-before.goroutines)/n, "goroutines/conn")
		stdin.Close()
		_ = cmd.Wait()
		for gw.Stats().Connections > 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

type memSample struct {
	heap, stack uint64
	goroutines  int
}

func memNow() memSample {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return memSample{heap: m.HeapAlloc, stack: m.StackInuse, goroutines: runtime.NumGoroutine()}
}

func writeProfiles(b *testing.B, dir, group string) {
	for _, p := range []string{"heap", "goroutine"} {
		f, err := os.Create(filepath.Join(dir, p+"-"+group+".pb.gz"))
		if err != nil {
			b.Fatal(err)
		}
		if err := pprof.Lookup(p).WriteTo(f, 0); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// idleChild opens n authenticated connections to url, each with a
// subscription when group is set (of group, or of a group of its own for
// "own"), says "ready", and keeps them (reading, so pings are answered)
// until stdin closes.
func idleChild(url string, n int, group string) {
	ctx := context.Background()
	var conns []*websocket.Conn
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		c, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child dial:", err)
			os.Exit(1)
		}
		if err := c.Write(ctx, websocket.MessageText, []byte(`{"op":"AUTH","token":"`+testToken+`"}`)); err != nil {
			fmt.Fprintln(os.Stderr, "child auth:", err)
			os.Exit(1)
		}
		if group != "" {
			g := group
			if g == "own" {
				g = "own-" + strconv.Itoa(i)
			}
			frame := `{"op":"SUBSCRIBE","topic":"idle","group":"` + g + `"}`
			if g == "live" {
				frame = `{"op":"SUBSCRIBE","topic":"idle"}`
			}
			if err := c.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
				fmt.Fprintln(os.Stderr, "child subscribe:", err)
				os.Exit(1)
			}
		}
		conns = append(conns, c)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if _, _, err := c.Read(ctx); err != nil {
					return
				}
			}
		}()
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, c := range conns {
		_ = c.CloseNow()
	}
	wg.Wait()
}
