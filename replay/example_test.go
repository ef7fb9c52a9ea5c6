package replay_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/replay"
)

func Example() {
	ctx := context.Background()
	store := event.NewMemoryStore()
	bus, _ := event.NewBus(store, event.Config{})
	defer bus.Close(ctx)
	for i, item := range []string{"tea", "cake", "jam"} {
		// Two orders share a timestamp: pages by seq lose neither.
		_, _ = bus.Publish(ctx, "orders", fmt.Appendf(nil, `{"item":%q}`, item),
			event.WithID(fmt.Sprintf("o%d", i+1)), event.WithTS(1000+int64(i/2)))
	}

	h, err := replay.NewHandler(replay.Config{Store: store})
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", h) // /v1/replay, /v1/export, /v1/latest

	get := func(target string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	get("/v1/replay?topic=orders&limit=2")
	get("/v1/replay?topic=orders&limit=2&from=seq&seq=3")
	get("/v1/export?topic=orders&fromTs=1000&toTs=1000")
	get("/v1/replay?topic=orders&limit=5000")
	// Output:
	// 200 {"events":[{"id":"o1","seq":1,"ts":1000,"topic":"orders","partition":0,"payload":{"item":"tea"}},{"id":"o2","seq":2,"ts":1000,"topic":"orders","partition":0,"payload":{"item":"cake"}}],"next_seq":3}
	// 200 {"events":[{"id":"o3","seq":3,"ts":1001,"topic":"orders","partition":0,"payload":{"item":"jam"}}],"next_seq":4}
	// 200 {"id":"o1","seq":1,"ts":1000,"topic":"orders","partition":0,"payload":{"item":"tea"}}
	// {"id":"o2","seq":2,"ts":1000,"topic":"orders","partition":0,"payload":{"item":"cake"}}
	// 400 {"error":{"code":"bad_request","msg":"limit: 5000 is over the maximum of 1000"}}
}

func ExampleConfig_verifier() {
	// With a Verifier, every request needs "Authorization: Bearer <token>"
	// whose scopes allow the replay action on the topic, such as
	// "replay:orders.**"; without one it is answered 401.
	v, err := auth.NewJWTVerifier(auth.Config{
		Secrets: []auth.Secret{{Key: []byte("an example secret of 32 bytes!!!")}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer v.Close()
	h, err := replay.NewHandler(replay.Config{Store: event.NewMemoryStore(), Verifier: v})
	if err != nil {
		fmt.Println(err)
		return
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/export?topic=orders", nil))
	fmt.Print(rec.Code, " ", rec.Body.String())
	// Output:
	// 401 {"error":{"code":"unauthorized","msg":"auth: no bearer token: no Authorization header"}}
}
