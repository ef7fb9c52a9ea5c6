package wsclient_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
	"github.com/promethean/promlib/ws/wsclient"
)

// A subscription that settles its messages itself: the handler acks
// once the work is done (an error, or a Nack, has it delivered again).
func ExampleClient_Subscribe_manualAck() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)
	gw, _ := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.StaticTokens("s3cret")})
	srv := httptest.NewServer(gw)
	defer srv.Close()
	defer gw.Shutdown(ctx)

	c, err := wsclient.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &wsclient.Options{Token: "s3cret"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	acked := make(chan string, 1)
	_, err = c.Subscribe(ctx, "jobs", "workers", func(ctx context.Context, m *wsclient.Message) error {
		if err := m.Ack(ctx); err != nil {
			return err
		}
		acked <- string(m.Payload)
		return nil
	}, event.WithManualAck(), event.FromEarliest())
	if err != nil {
		fmt.Println(err)
		return
	}
	res, _ := c.Publish(ctx, "jobs", []byte(`"resize photo 7"`))
	fmt.Println("published at seq", res.Seq)
	select {
	case job := <-acked:
		fmt.Println("done and acked:", job)
	case <-time.After(5 * time.Second):
		fmt.Println("nothing delivered")
	}
	// Output:
	// published at seq 1
	// done and acked: "resize photo 7"
}

// Wrong tokens are refused with a protocol error that errors.Is matches.
func ExampleDial_authFailed() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)
	gw, _ := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.StaticTokens("s3cret")})
	srv := httptest.NewServer(gw)
	defer srv.Close()
	defer gw.Shutdown(ctx)

	_, err := wsclient.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &wsclient.Options{Token: "guess"})
	fmt.Println(err)
	// Output:
	// ws: auth_failed: auth: unknown token
}

// Many publishes in flight: PublishAsync returns at once, the gateway
// stores them in batches, and each future tells its own outcome.
func ExampleClient_PublishAsync() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)
	gw, _ := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.StaticTokens("s3cret")})
	srv := httptest.NewServer(gw)
	defer srv.Close()
	defer gw.Shutdown(ctx)

	c, err := wsclient.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &wsclient.Options{Token: "s3cret"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	var futures []*wsclient.PublishFuture
	for i := range 1000 {
		futures = append(futures, c.PublishAsync(ctx, "meters", fmt.Appendf(nil, `{"reading":%d}`, i)))
	}
	if err := c.Flush(ctx); err != nil {
		fmt.Println(err)
		return
	}
	last, _ := futures[len(futures)-1].Get(ctx)
	fmt.Println("the last one is at seq", last.Seq)
	// Output:
	// the last one is at seq 1000
}

// A live subscription for a viewer: the topic's events from where the
// viewer was (WithSince), then as they come; no group, nothing to ack.
// Position is what to resume from; the client resumes from it by itself
// after a reconnect.
func ExampleClient_SubscribeLive() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)
	gw, _ := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.StaticTokens("s3cret")})
	srv := httptest.NewServer(gw)
	defer srv.Close()
	defer gw.Shutdown(ctx)
	for _, state := range []string{`"starting"`, `"running"`} {
		_, _ = bus.Publish(ctx, "process.state", []byte(state))
	}

	c, err := wsclient.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &wsclient.Options{Token: "s3cret"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	seen := make(chan string, 3)
	live, err := c.SubscribeLive(ctx, "process.state", func(ctx context.Context, m *wsclient.Message) error {
		seen <- fmt.Sprintf("%d %s", m.Seq, m.Payload)
		return nil
	}, wsclient.WithSince(1), wsclient.WithOnGap(func(from, to uint64, reason string) {
		fmt.Println("missed", from, "to", to, reason)
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = c.Publish(ctx, "process.state", []byte(`"stopped"`))
	for range 2 {
		select {
		case s := <-seen:
			fmt.Println(s)
		case <-time.After(5 * time.Second):
			fmt.Println("nothing delivered")
		}
	}
	_ = live.Close() // waits for the handler: Position is final
	fmt.Println("position", live.Position())
	// Output:
	// 2 "running"
	// 3 "stopped"
	// position 3
}
