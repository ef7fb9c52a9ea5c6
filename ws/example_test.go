package ws_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
)

// A gateway over an in-memory bus, and a client that subscribes and
// publishes through it.
func Example() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)
	gw, _ := ws.New(ws.Config{Bus: bus, Authenticator: ws.StaticTokens("s3cret")})
	srv := httptest.NewServer(gw)
	defer srv.Close()
	defer gw.Shutdown(ctx)

	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	c, err := ws.Dial(ctx, url, &ws.ClientOptions{Token: "s3cret"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	type order struct {
		ID    string  `json:"id"`
		Total float64 `json:"total"`
	}
	got := make(chan order, 1)
	_, _ = ws.SubscribeJSON(ctx, c, "orders", "billing", func(ctx context.Context, o order, m *ws.Message) error {
		got <- o
		return nil // acks
	})
	res, _ := ws.PublishJSON(ctx, c, "orders", order{ID: "o-1", Total: 42})
	fmt.Println("stored at seq", res.Seq)
	select {
	case o := <-got:
		fmt.Printf("billing got %s for %.2f\n", o.ID, o.Total)
	case <-time.After(5 * time.Second):
		fmt.Println("nothing delivered")
	}
	// Output:
	// stored at seq 1
	// billing got o-1 for 42.00
}

// Wrong tokens are refused with a protocol error that errors.Is matches.
func ExampleDial_authFailed() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)
	gw, _ := ws.New(ws.Config{Bus: bus, Authenticator: ws.StaticTokens("s3cret")})
	srv := httptest.NewServer(gw)
	defer srv.Close()
	defer gw.Shutdown(ctx)

	_, err := ws.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &ws.ClientOptions{Token: "guess"})
	fmt.Println(err)
	// Output:
	// ws: auth_failed: unknown token
}
