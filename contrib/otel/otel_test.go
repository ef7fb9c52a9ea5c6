package otel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/ws"
	"github.com/promethean/promlib/ws/wsclient"

	promotel "github.com/promethean/promlib/contrib/otel"
)

const token = "secret"

// helperEnv names the helper process's role; see TestMain.
const helperEnv = "PROMOTEL_HELPER_URL"

func TestMain(m *testing.M) {
	if u := os.Getenv(helperEnv); u != "" {
		os.Exit(runSubscriber(u))
	}
	os.Exit(m.Run())
}

// tracing returns a Tracing whose spans go to an in-memory exporter.
func tracing(t *testing.T) (*promotel.Tracing, *tracetest.InMemoryExporter, trace.Tracer) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr, err := promotel.New(promotel.Config{TracerProvider: tp})
	require.NoError(t, err)
	return tr, exp, tp.Tracer("test")
}

func tracedBus(t *testing.T, tr *promotel.Tracing) *event.Bus {
	t.Helper()
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{
		CommitInterval:       5 * time.Millisecond,
		PublishInterceptors:  []event.PublishInterceptor{tr.PublishInterceptor()},
		DeliveryInterceptors: []event.DeliveryInterceptor{tr.DeliveryInterceptor()},
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, bus.Close(context.Background())) })
	return bus
}

// server serves the gateway at /ws and HTTP publish behind the tracing
// middleware.
func server(t *testing.T, tr *promotel.Tracing, bus *event.Bus) *httptest.Server {
	t.Helper()
	gw, err := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.StaticTokens(token)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/ws", gw)
	mux.Handle("POST /publish/{topic}", tr.HTTPMiddleware(gw.PublishHandler()))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = gw.Shutdown(ctx)
		srv.Close()
	})
	return srv
}

// httpPublish posts body to topic in a client span of tracer and returns
// the span's context.
func httpPublish(t *testing.T, tracer trace.Tracer, srv *httptest.Server, topic, body string) trace.SpanContext {
	t.Helper()
	ctx, span := tracer.Start(context.Background(), "client publish", trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/publish/"+topic, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	return span.SpanContext()
}

// waitSpans waits until exp holds spans with every name of names and
// returns the last span of each name.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, names ...string) map[string]tracetest.SpanStub {
	t.Helper()
	var byName map[string]tracetest.SpanStub
	require.Eventually(t, func() bool {
		byName = map[string]tracetest.SpanStub{}
		for _, s := range exp.GetSpans() {
			byName[s.Name] = s
		}
		for _, n := range names {
			if _, ok := byName[n]; !ok {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "spans %v", names)
	return byName
}

func attrs(s tracetest.SpanStub) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value.String()
	}
	return m
}

// One trace from an HTTP publish, through the bus and the gateway, to a
// WebSocket subscriber's ack.
func TestTraceFromHTTPPublishToWebSocketAck(t *testing.T) {
	t.Parallel()
	tr, exp, tracer := tracing(t)
	bus := tracedBus(t, tr)
	srv := server(t, tr, bus)

	c, err := wsclient.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", &wsclient.Options{Token: token})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	got := make(chan string, 1)
	_, err = c.Subscribe(context.Background(), "orders", "ui", tr.ClientHandler(func(ctx context.Context, m *wsclient.Message) error {
		got <- m.ID
		return nil
	}), event.FromEarliest())
	require.NoError(t, err)

	root := httpPublish(t, tracer, srv, "orders", `{"n":1}`)
	id := <-got
	s := waitSpans(t, exp, "client publish", "POST /publish/{topic}", "send orders", "process orders", "settle orders")
	for name, span := range s {
		assert.Equal(t, root.TraceID(), span.SpanContext.TraceID(), "span %q is in the trace of the publish", name)
	}
	assert.Equal(t, root.SpanID(), s["POST /publish/{topic}"].Parent.SpanID())
	send := s["send orders"]
	assert.Equal(t, s["POST /publish/{topic}"].SpanContext.SpanID(), send.Parent.SpanID())
	assert.Equal(t, trace.SpanKindProducer, send.SpanKind)
	a := attrs(send)
	assert.Equal(t, "promlib", a["messaging.system"])
	assert.Equal(t, "orders", a["messaging.destination.name"])
	assert.Equal(t, "send", a["messaging.operation.type"])
	assert.Equal(t, id, a["messaging.message.id"])

	// Two consumer spans are children of the producer: the gateway's
	// delivery and the WebSocket subscriber's, whose ack is its child.
	var consumers []tracetest.SpanStub
	for _, x := range exp.GetSpans() {
		if x.Name == "process orders" {
			consumers = append(consumers, x)
		}
	}
	require.Len(t, consumers, 2)
	for _, x := range consumers {
		assert.Equal(t, send.SpanContext.SpanID(), x.Parent.SpanID())
		assert.Equal(t, trace.SpanKindConsumer, x.SpanKind)
		a := attrs(x)
		assert.Equal(t, "ui", a["messaging.consumer.group.name"])
		assert.Equal(t, "process", a["messaging.operation.type"])
		assert.Equal(t, id, a["messaging.message.id"])
	}
	settle := s["settle orders"]
	assert.Equal(t, "settle", attrs(settle)["messaging.operation.type"])
	assert.Contains(t, []trace.SpanID{consumers[0].SpanContext.SpanID(), consumers[1].SpanContext.SpanID()}, settle.Parent.SpanID())
	assert.Equal(t, "Unset", settle.Status.Code.String(), "the ack succeeded")
}

// A trace continues through the outbox: the row carries the trace context
// of the transaction that added it, and the drainer's publish joins it.
func TestTraceThroughOutbox(t *testing.T) {
	t.Parallel()
	tr, exp, tracer := tracing(t)
	bus := tracedBus(t, tr)
	store := outbox.NewMemoryStore()
	d, err := outbox.NewDrainer(outbox.Config{Store: store, Bus: bus, PollInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = d.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })

	done := make(chan struct{})
	_, err = bus.Subscribe(context.Background(), "billing", "ledger", func(ctx context.Context, d *event.Delivery) error {
		assert.True(t, trace.SpanContextFromContext(ctx).IsValid(), "the handler runs in the consumer span")
		close(done)
		return nil
	}, event.FromEarliest())
	require.NoError(t, err)

	rctx, span := tracer.Start(context.Background(), "place order")
	require.NoError(t, store.Add(rctx, outbox.Message{ID: "row-1", Topic: "billing", Payload: []byte(`1`), Headers: tr.Inject(rctx, map[string]string{"k": "v"})}))
	span.End()
	d.Notify()
	<-done
	s := waitSpans(t, exp, "place order", "send billing", "process billing")
	root := s["place order"].SpanContext
	assert.Equal(t, root.TraceID(), s["send billing"].SpanContext.TraceID())
	assert.Equal(t, root.SpanID(), s["send billing"].Parent.SpanID(), "the drainer's publish is a child of the row's span")
	assert.Equal(t, s["send billing"].SpanContext.SpanID(), s["process billing"].Parent.SpanID())
	assert.Equal(t, "row-1", attrs(s["process billing"])["messaging.message.id"])
}

// spanLine is a span a helper process reports on its stdout.
type spanLine struct {
	Name    string `json:"name"`
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
	Parent  string `json:"parent"`
}

// runSubscriber is the helper process: it subscribes to the gateway at
// url with a traced handler, says "ready", acks one event, prints its
// spans as JSON lines and exits.
func runSubscriber(url string) int {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	tr, _ := promotel.New(promotel.Config{TracerProvider: tp})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := wsclient.Dial(ctx, url, &wsclient.Options{Token: token})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	got := make(chan struct{}, 1)
	traced := tr.ClientHandler(func(context.Context, *wsclient.Message) error { return nil })
	_, err = c.Subscribe(ctx, "remote", "far", func(ctx context.Context, m *wsclient.Message) error {
		err := traced(ctx, m) // acks, and ends (and exports) its spans
		got <- struct{}{}
		return err
	}, event.FromEarliest())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	select {
	case <-got:
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "no event")
		return 1
	}
	enc := json.NewEncoder(os.Stdout)
	for _, s := range exp.GetSpans() {
		_ = enc.Encode(spanLine{Name: s.Name, TraceID: s.SpanContext.TraceID().String(), SpanID: s.SpanContext.SpanID().String(), Parent: s.Parent.SpanID().String()})
	}
	return 0
}

// A trace crosses processes: a subscriber in another process acks an
// event published over HTTP here, in the publisher's trace.
func TestTraceAcrossProcesses(t *testing.T) {
	t.Parallel()
	tr, exp, tracer := tracing(t)
	bus := tracedBus(t, tr)
	srv := server(t, tr, bus)

	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"=ws"+strings.TrimPrefix(srv.URL, "http")+"/ws")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	require.True(t, lines.Scan(), "the helper process says ready")
	require.Equal(t, "ready", lines.Text())

	root := httpPublish(t, tracer, srv, "remote", `"hello"`)
	var remote []spanLine
	for lines.Scan() {
		var l spanLine
		require.NoError(t, json.Unmarshal(lines.Bytes(), &l), lines.Text())
		remote = append(remote, l)
	}
	require.NoError(t, cmd.Wait())
	send := waitSpans(t, exp, "send remote")["send remote"]
	byName := map[string]spanLine{}
	for _, l := range remote {
		byName[l.Name] = l
	}
	require.Contains(t, byName, "process remote")
	require.Contains(t, byName, "settle remote")
	for _, l := range remote {
		assert.Equal(t, root.TraceID().String(), l.TraceID, "the helper's span %q is in the publisher's trace", l.Name)
	}
	assert.Equal(t, send.SpanContext.SpanID().String(), byName["process remote"].Parent, "the remote consumer span is a child of the producer span")
	assert.Equal(t, byName["process remote"].SpanID, byName["settle remote"].Parent)
}

// The publish interceptor leaves the caller's headers alone, and a
// refused publish ends its span with the error.
func TestPublishSpanOnError(t *testing.T) {
	t.Parallel()
	tr, exp, _ := tracing(t)
	bus := tracedBus(t, tr)
	h := map[string]string{"a": "b"}
	rec, err := bus.NewRecord("t", []byte(`1`), event.PublishOptions{Headers: h})
	require.NoError(t, err)
	_, err = bus.Append(context.Background(), "t", []event.Record{rec})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "b"}, h, "the caller's map is not changed")
	stored, err := bus.Store().Read(context.Background(), "t", 0, 1)
	require.NoError(t, err)
	require.Len(t, stored, 1)
	assert.Contains(t, stored[0].Headers, "traceparent")
	assert.Equal(t, "b", stored[0].Headers["a"])

	require.NoError(t, bus.Close(context.Background()))
	bad := event.Record{ID: "x", Topic: "t", Payload: []byte(`1`)}
	failing := tr.PublishInterceptor()(func(context.Context, string, []event.Record) ([]event.Record, error) {
		return nil, event.ErrClosed
	})
	_, err = failing(context.Background(), "t", []event.Record{bad})
	require.ErrorIs(t, err, event.ErrClosed)
	var failed tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if attrs(s)["messaging.message.id"] == "x" {
			failed = s
		}
	}
	assert.Equal(t, "Error", failed.Status.Code.String())
	assert.Equal(t, "closed", attrs(failed)["error.type"])
}

// A WebSocket PUBLISH whose headers carry a trace context continues that
// trace: the gateway's publish has no span of its own.
func TestTraceFromWebSocketPublish(t *testing.T) {
	t.Parallel()
	tr, exp, tracer := tracing(t)
	bus := tracedBus(t, tr)
	srv := server(t, tr, bus)
	c, err := wsclient.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http")+"/ws", &wsclient.Options{Token: token})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })

	ctx, span := tracer.Start(context.Background(), "browser click")
	_, err = c.Publish(ctx, "clicks", []byte(`1`), event.WithHeaders(tr.Inject(ctx, nil)))
	require.NoError(t, err)
	span.End()
	s := waitSpans(t, exp, "browser click", "send clicks")
	assert.Equal(t, s["browser click"].SpanContext.TraceID(), s["send clicks"].SpanContext.TraceID())
	assert.Equal(t, s["browser click"].SpanContext.SpanID(), s["send clicks"].Parent.SpanID())
}
