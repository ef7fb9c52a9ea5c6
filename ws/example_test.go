package ws_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/lestrrat-go/jwx/v2/jwa"
	"github.com/lestrrat-go/jwx/v2/jwt"

	"github.com/promethean/promlib/acl"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
	"github.com/promethean/promlib/ws/wsclient"
)

// A gateway over an in-memory bus, and a client that subscribes and
// publishes through it.
func Example() {
	ctx := context.Background()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)
	gw, _ := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.StaticTokens("s3cret")})
	srv := httptest.NewServer(gw)
	defer srv.Close()
	defer gw.Shutdown(ctx)

	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	c, err := wsclient.Dial(ctx, url, &wsclient.Options{Token: "s3cret"})
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
	_, _ = wsclient.SubscribeJSON(ctx, c, "orders", "billing", func(ctx context.Context, o order, m *wsclient.Message) error {
		got <- o
		return nil // acks
	})
	res, _ := wsclient.PublishJSON(ctx, c, "orders", order{ID: "o-1", Total: 42})
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

// JWTs on every entry point: the gateway verifies AUTH tokens (and HTTP
// publish bearer tokens) and checks the token's scopes; a later HTTP
// endpoint, here a stand-in for replay, takes the same tokens with the
// same verifier through auth.Middleware and auth.Authorize.
func Example_jwt() {
	ctx := context.Background()
	secret := []byte("an example secret of 32 bytes!!!")
	acfg := auth.Config{Secrets: []auth.Secret{{Key: secret}}, Leeway: 5 * time.Second}
	v, err := auth.NewJWTVerifier(acfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer v.Close()
	bus, _ := event.NewBus(event.NewMemoryStore(), event.Config{})
	defer bus.Close(ctx)
	gw, _ := ws.NewGateway(ws.Config{Bus: bus, Verifier: v})

	mux := http.NewServeMux()
	mux.Handle("/ws", gw)
	mux.Handle("POST /publish/{topic}", gw.PublishHandler())
	mux.Handle("GET /replay/{topic}", auth.Middleware(v)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := auth.Authorize(r.Context(), acl.Replay, r.PathValue("topic"), ""); err != nil {
			auth.WriteError(w, err) // 403 {"error":{"code":"forbidden",...}}
			return
		}
		fmt.Fprintln(w, "[]")
	})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer gw.Shutdown(ctx)

	// A token as an identity provider would issue it.
	tok, _ := jwt.NewBuilder().Subject("svc-a").Expiration(time.Now().Add(time.Hour)).
		Claim("scope", "publish:a.* replay:a.**").Build()
	signed, _ := jwt.Sign(tok, jwt.WithKey(jwa.HS256, secret))
	token := string(signed)

	c, err := wsclient.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", &wsclient.Options{Token: token})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	_, err = c.Publish(ctx, "a.b", []byte(`1`))
	fmt.Println("publish a.b:", err)
	_, err = c.Publish(ctx, "b.c", []byte(`1`))
	fmt.Println("publish b.c forbidden:", errors.Is(err, wsproto.ErrForbidden))

	for _, topic := range []string{"a.b", "b.c"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/replay/"+topic, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("replay %s: %d %s", topic, resp.StatusCode, body)
	}
	// Output:
	// publish a.b: <nil>
	// publish b.c forbidden: true
	// replay a.b: 200 []
	// replay b.c: 403 {"error":{"code":"forbidden","msg":"acl: forbidden: replay \"b.c\": no rule allows it"}}
}
