package ws

import (
	"bytes"
	"context"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
)

// BenchmarkLiveFanOut measures a live topic's fan-out over the wire: each
// op publishes one event, which reaches every one of N subscribers (raw
// WebSocket clients in this process, each reading on a goroutine). It
// reports the time per event published and per delivery, and the
// publish-to-receive latency (p50, p99) of the deliveries. The clients'
// reading runs in the same process, so the figures are an upper bound of
// the gateway's cost.
//
//	go test ./ws -run '^$' -bench LiveFanOut -benchtime 2000x
func BenchmarkLiveFanOut(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run("subscribers="+strconv.Itoa(n), func(b *testing.B) { benchLiveFanOut(b, n, 0) })
	}
}

// BenchmarkLiveLatency is BenchmarkLiveFanOut at a steady rate of 100
// events per second to 1,000 subscribers, as a page many people watch:
// the latency is then that of an unloaded gateway, not of a queue.
//
//	go test ./ws -run '^$' -bench LiveLatency -benchtime 300x
func BenchmarkLiveLatency(b *testing.B) {
	benchLiveFanOut(b, 1000, 10*time.Millisecond)
}

func benchLiveFanOut(b *testing.B, n int, every time.Duration) {
	ctx := context.Background()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer bus.Close(ctx)
	gw, err := NewGateway(Config{Bus: bus, Verifier: auth.StaticTokens(testToken), PingInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	defer gw.Shutdown(ctx)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")

	type client struct {
		got  atomic.Int64
		lats []time.Duration
	}
	clients := make([]*client, n)
	var readers sync.WaitGroup
	var all sync.WaitGroup // every client got every event
	all.Add(n)
	for i := range clients {
		c, _, err := websocket.Dial(ctx, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		c.SetReadLimit(-1)
		defer c.CloseNow()
		for _, f := range []string{`{"op":"AUTH","token":"` + testToken + `"}`, `{"op":"SUBSCRIBE","topic":"fan"}`} {
			if err := c.Write(ctx, websocket.MessageText, []byte(f)); err != nil {
				b.Fatal(err)
			}
			if _, _, err := c.Read(ctx); err != nil { // the OK
				b.Fatal(err)
			}
		}
		cl := &client{lats: make([]time.Duration, 0, b.N)}
		clients[i] = cl
		readers.Add(1)
		go func() {
			defer readers.Done()
			done := false
			for {
				_, data, err := c.Read(ctx)
				if err != nil {
					if !done {
						all.Done()
					}
					return
				}
				// The payload is the publish time in Unix nanoseconds.
				if j := bytes.Index(data, []byte(`"payload":`)); j >= 0 {
					p := data[j+len(`"payload":`):]
					k := bytes.IndexAny(p, ",}")
					if ns, err := strconv.ParseInt(string(p[:k]), 10, 64); err == nil {
						cl.lats = append(cl.lats, time.Since(time.Unix(0, ns)))
					}
				}
				if cl.got.Add(1) == int64(b.N) && !done {
					done = true
					all.Done()
				}
			}
		}()
	}
	for gw.LiveStats().Subscriptions < n {
		time.Sleep(time.Millisecond)
	}

	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if every > 0 {
			if d := time.Until(start.Add(time.Duration(i) * every)); d > 0 {
				time.Sleep(d)
			}
		}
		if _, err := bus.Publish(ctx, "fan", strconv.AppendInt(nil, time.Now().UnixNano(), 10)); err != nil {
			b.Fatal(err)
		}
	}
	all.Wait()
	b.StopTimer()
	elapsed := time.Since(start)

	var lats []time.Duration
	for _, cl := range clients {
		lats = append(lats, cl.lats...)
	}
	slices.Sort(lats)
	if len(lats) > 0 {
		b.ReportMetric(float64(lats[len(lats)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*n), "ns/delivery")
	b.ReportMetric(float64(b.N*n)/elapsed.Seconds(), "deliveries/s")
	_ = gw.Shutdown(ctx)
	readers.Wait()
}
