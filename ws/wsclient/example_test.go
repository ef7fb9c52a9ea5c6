package wsclient_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
	"github.com/promethean/promlib/ws/wsclient"
)

// Wrong tokens are refused with a protocol error that errors.Is matches.
func ExampleDial_authFailed() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)
	gw, _ := ws.NewGateway(ws.Config{Bus: bus, Authenticator: ws.StaticTokens("s3cret")})
	srv := httptest.NewServer(gw)
	defer srv.Close()
	defer gw.Shutdown(ctx)

	_, err := wsclient.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &wsclient.Options{Token: "guess"})
	fmt.Println(err)
	// Output:
	// ws: auth_failed: unknown token
}
