package wsclient

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
	"github.com/promethean/promlib/ws/internal/wsframe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// frameCounter counts the client frames the gateway handled, by op and
// answer code ("SUBSCRIBE/" is an accepted SUBSCRIBE).
type frameCounter struct {
	ws.NopObserver
	mu sync.Mutex
	n  map[string]int
}

func (o *frameCounter) Handled(op string, code wsproto.Code, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[op+"/"+string(code)]++
}

// ops returns the number of frames of op handled, whatever the answer.
func (o *frameCounter) ops(op string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for k, v := range o.n {
		if strings.HasPrefix(k, op+"/") {
			n += v
		}
	}
	return n
}

// barrier publishes on c and waits for the answer: the gateway handles a
// connection's frames in order, so every frame c sent before has been
// handled (and counted) by then.
func barrier(t *testing.T, c *Client) {
	t.Helper()
	_, err := c.Publish(context.Background(), "barrier", []byte(`1`))
	require.NoError(t, err)
}

// unsupportedOptions are the bus's subscribe options the client refuses,
// with the field each error names.
var unsupportedOptions = []struct {
	field string
	opt   event.SubscribeOption
}{
	{"DeferStart", event.WithDeferStart()},
	{"OnAssign", event.WithRebalanceHooks(func(context.Context, int) {}, nil)},
	{"OnRevoke", event.WithRebalanceHooks(nil, func(context.Context, int) {})},
	{"Filter", event.WithFilter(func(*event.Record) bool { return true })},
	{"Backoff", event.WithBackoff(time.Second, 0)},
	{"MaxBackoff", event.WithBackoff(0, time.Minute)},
	{"DeadLetterTopic", event.WithDeadLetterTopic("orders.dead")},
}

// TestSubscribeRefusesUnsupportedOptions: each option the client cannot
// honour fails Subscribe with an error that names it and matches
// event.ErrInvalid and ErrInvalid; the server sees no SUBSCRIBE, and the
// client keeps no trace of the subscription (the same group subscribes
// afterwards).
func TestSubscribeRefusesUnsupportedOptions(t *testing.T) {
	t.Parallel()
	obs := &frameCounter{}
	e := newEnv(t, func(c *ws.Config) { c.Observer = obs })
	c := e.client(nil)
	ctx := context.Background()
	h := func(context.Context, *Message) error { return nil }

	for _, tt := range unsupportedOptions {
		_, err := c.Subscribe(ctx, "orders", "billing", h, event.WithMaxInFlight(5), tt.opt)
		require.Error(t, err, tt.field)
		assert.ErrorIs(t, err, event.ErrInvalid, tt.field)
		assert.ErrorIs(t, err, ErrInvalid, tt.field)
		assert.Contains(t, err.Error(), tt.field+": not supported over the WebSocket gateway (", tt.field)
		for _, other := range unsupportedOptions {
			if other.field != tt.field {
				assert.NotContains(t, err.Error(), "argument: "+other.field+":", "only %s is named", tt.field)
			}
		}
	}
	_, err := c.Subscribe(ctx, "orders", "billing", h, event.WithDeferStart())
	assert.EqualError(t, err, "event: invalid argument: DeferStart: not supported over the WebSocket gateway (the server starts each attempt when it sends the delivery)")
	// Also when set through WithOptions.
	_, err = c.Subscribe(ctx, "orders", "billing", h, event.WithOptions(event.SubscribeOptions{DeferStart: true, MaxInFlight: 5}))
	assert.ErrorIs(t, err, event.ErrInvalid)
	assert.Contains(t, err.Error(), "DeferStart: not supported")

	// All at once: each is named, beside the other problems of the call.
	hook := func(context.Context, int) {}
	_, err = c.Subscribe(ctx, "orders", "bad group!", h, event.FromEarliest(), event.WithDeferStart(),
		event.WithRebalanceHooks(hook, hook), event.WithFilter(func(*event.Record) bool { return true }),
		event.WithBackoff(time.Second, time.Minute), event.WithDeadLetterTopic("orders.dead"))
	require.Error(t, err)
	for _, tt := range unsupportedOptions {
		assert.Contains(t, err.Error(), tt.field+": not supported over the WebSocket gateway")
	}
	assert.Contains(t, err.Error(), "group")
	// A supported option that is invalid is still reported as before.
	_, err = c.Subscribe(ctx, "orders", "billing", h, event.WithDeferStart(), event.WithMaxPerKey(2))
	assert.ErrorIs(t, err, event.ErrInvalid)
	assert.Contains(t, err.Error(), "maxPerKey")
	assert.Contains(t, err.Error(), "DeferStart")

	barrier(t, c)
	assert.Zero(t, obs.ops(wsproto.OpSubscribe), "no SUBSCRIBE reached the server")
	c.mu.Lock()
	assert.Empty(t, c.subs, "a refused subscription is not kept (nor subscribed again on reconnect)")
	c.mu.Unlock()

	// Without them the same group subscribes.
	sub, err := c.Subscribe(ctx, "orders", "billing", h, event.WithMaxInFlight(5))
	require.NoError(t, err)
	barrier(t, c)
	obs.mu.Lock()
	assert.Equal(t, 1, obs.n["SUBSCRIBE/"])
	obs.mu.Unlock()
	require.NoError(t, sub.Close())
}

// TestSubscribeSupportedOptions: the options the client honours go into
// SUBSCRIBE's opts or into the client's own settings, and the gateway
// accepts them: a group from earliest gets what was published before.
func TestSubscribeSupportedOptions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(nil)
	ctx := context.Background()

	_, err := c.Publish(ctx, "orders", []byte(`"first"`), event.WithKey("k"))
	require.NoError(t, err)
	msgs := make(chan *Message, 1)
	sub, err := c.Subscribe(ctx, "orders", "billing", func(_ context.Context, m *Message) error {
		msgs <- m
		return nil
	},
		event.FromEarliest(), event.WithAckTimeout(20*time.Second), event.WithMaxAttempts(3),
		event.WithMaxInFlight(7), event.WithKeyOrdered(), event.WithMaxPerKey(2),
		event.WithManualAck(), event.WithConcurrency(3), event.WithDrainTimeout(2*time.Second))
	require.NoError(t, err)
	f := sub.frame(wsproto.OpSubscribe)
	assert.Equal(t, &wsframe.FrameOpts{
		From: "earliest", AckTimeoutMS: 20000, MaxAttempts: 3, MaxInFlight: 7, KeyOrdered: true, MaxPerKey: 2,
	}, f.Opts)
	assert.True(t, sub.manual)
	assert.Equal(t, 2*time.Second, sub.drain)

	select {
	case m := <-msgs:
		assert.Equal(t, `"first"`, string(m.Payload))
		assert.Equal(t, 1, m.Attempt)
		require.NoError(t, m.Ack(ctx)) // manual ack
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery from earliest")
	}
	require.NoError(t, sub.Close())
}

// TestSubscribeSettings: what each supported option becomes.
func TestSubscribeSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts []event.SubscribeOption
		want subSettings
	}{
		{"none", nil, subSettings{concurrency: 1, drain: event.DefaultDrainTimeout}},
		{"latest", []event.SubscribeOption{event.FromLatest()}, subSettings{concurrency: 1, drain: event.DefaultDrainTimeout}},
		{"seq", []event.SubscribeOption{event.FromSeq(4)},
			subSettings{wire: wsframe.FrameOpts{From: "seq", Seq: 4}, concurrency: 1, drain: event.DefaultDrainTimeout}},
		{"ts", []event.SubscribeOption{event.FromTS(1700)},
			subSettings{wire: wsframe.FrameOpts{From: "ts", TS: 1700}, concurrency: 1, drain: event.DefaultDrainTimeout}},
		{"afterId", []event.SubscribeOption{event.AfterID("x-1")},
			subSettings{wire: wsframe.FrameOpts{From: "afterId", AfterID: "x-1"}, concurrency: 1, drain: event.DefaultDrainTimeout}},
		// A start position replaced by another leaves its value behind:
		// neither sent nor refused.
		{"ts then earliest", []event.SubscribeOption{event.FromTS(1700), event.FromEarliest()},
			subSettings{wire: wsframe.FrameOpts{From: "earliest"}, concurrency: 1, drain: event.DefaultDrainTimeout}},
		{"sub-millisecond ack timeout", []event.SubscribeOption{event.WithAckTimeout(time.Microsecond)},
			subSettings{wire: wsframe.FrameOpts{AckTimeoutMS: 1}, concurrency: 1, drain: event.DefaultDrainTimeout}},
		{"all", []event.SubscribeOption{
			event.FromSeq(9), event.WithAckTimeout(1500 * time.Millisecond), event.WithMaxAttempts(2),
			event.WithKeyOrdered(), event.WithMaxPerKey(3), event.WithMaxInFlight(30),
			event.WithManualAck(), event.WithConcurrency(4), event.WithDrainTimeout(time.Second),
		}, subSettings{
			wire:   wsframe.FrameOpts{From: "seq", Seq: 9, AckTimeoutMS: 1500, MaxAttempts: 2, KeyOrdered: true, MaxPerKey: 3, MaxInFlight: 30},
			manual: true, concurrency: 4, drain: time.Second,
		}},
		{"whole options", []event.SubscribeOption{event.WithOptions(event.SubscribeOptions{MaxInFlight: 2, Concurrency: 2, ManualAck: true})},
			subSettings{wire: wsframe.FrameOpts{MaxInFlight: 2}, manual: true, concurrency: 2, drain: event.DefaultDrainTimeout}},
	}
	for _, tt := range tests {
		got, errs := subscribeSettings(tt.opts)
		assert.Empty(t, errs, tt.name)
		assert.Equal(t, tt.want, got, tt.name)
	}
	for _, tt := range unsupportedOptions {
		_, errs := subscribeSettings([]event.SubscribeOption{tt.opt})
		require.Len(t, errs, 1, tt.field)
		assert.True(t, errors.Is(errs[0], event.ErrInvalid) && errors.Is(errs[0], ErrInvalid), tt.field)
		assert.Contains(t, errs[0].Error(), "event: invalid argument: "+tt.field+": not supported", tt.field)
	}
}

// TestEveryFieldHonouredOrRefused sets each field of
// event.SubscribeOptions (and of its group settings) alone and checks
// that the client either honours it or refuses it by name, as the table
// says. A field package event adds fails here until the table has it
// (meanwhile Subscribe refuses it).
func TestEveryFieldHonouredOrRefused(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"Group.Start":           "honoured", // opts.from with seq, ts or afterId
		"Group.AckTimeout":      "honoured", // opts.ackTimeoutMs
		"Group.MaxAttempts":     "honoured", // opts.maxAttempts
		"Group.Backoff":         "refused",
		"Group.MaxBackoff":      "refused",
		"Group.DeadLetterTopic": "refused",
		"Group.KeyOrdered":      "honoured", // opts.keyOrdered
		"Group.MaxPerKey":       "honoured", // opts.maxPerKey
		"Group.ExpireAfter":     "refused",
		"MaxInFlight":           "honoured", // opts.maxInFlight
		"Concurrency":           "honoured", // the client's handler goroutines
		"ManualAck":             "honoured", // the client does not ack on return
		"DeferStart":            "refused",
		"Filter":                "refused",
		"DrainTimeout":          "honoured", // the client's Close waits for handlers
		"OnAssign":              "refused",
		"OnRevoke":              "refused",
	}
	zero, errs := subscribeSettings(nil)
	require.Empty(t, errs)
	got := map[string]string{}
	var visit func(v reflect.Value, path string)
	visit = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			sf, fv := v.Type().Field(i), v.Field(i)
			name := path + sf.Name
			if sf.Type == reflect.TypeFor[event.GroupConfig]() {
				visit(fv, name+".")
				continue
			}
			var o event.SubscribeOptions
			f := reflect.ValueOf(&o).Elem().FieldByIndex(fieldIndex(t, name))
			switch {
			case sf.Type == reflect.TypeFor[event.Position]():
				f.Set(reflect.ValueOf(event.AtSeq(3)))
			case sf.Type.Kind() == reflect.Bool:
				f.SetBool(true)
			case sf.Type == reflect.TypeFor[time.Duration]():
				f.SetInt(int64(time.Second))
			case sf.Type.Kind() == reflect.Int:
				f.SetInt(3)
			case sf.Type.Kind() == reflect.String:
				f.SetString("orders.other")
			case sf.Type.Kind() == reflect.Func:
				f.Set(reflect.MakeFunc(sf.Type, func([]reflect.Value) []reflect.Value {
					out := make([]reflect.Value, sf.Type.NumOut())
					for i := range out {
						out[i] = reflect.Zero(sf.Type.Out(i))
					}
					return out
				}))
			default:
				t.Fatalf("field %s of type %s: teach this test a value for it", name, sf.Type)
			}
			if name == "Group.MaxPerKey" {
				o.Group.KeyOrdered = true // maxPerKey needs it
			}
			set, errs := subscribeSettings([]event.SubscribeOption{event.WithOptions(o)})
			switch {
			case len(errs) == 0:
				assert.NotEqual(t, zero, set, "%s is neither refused nor carried", name)
				got[name] = "honoured"
			case len(errs) == 1 && errors.Is(errs[0], event.ErrInvalid) && errors.Is(errs[0], ErrInvalid) &&
				strings.Contains(errs[0].Error(), ": "+sf.Name+": not supported over the WebSocket gateway ("):
				got[name] = "refused"
			default:
				t.Errorf("%s: %v", name, errs)
			}
		}
	}
	visit(reflect.ValueOf(event.SubscribeOptions{}), "")
	assert.Equal(t, want, got)
}

// fieldIndex returns the index path of the dotted field name in
// event.SubscribeOptions.
func fieldIndex(t *testing.T, name string) []int {
	t.Helper()
	typ := reflect.TypeFor[event.SubscribeOptions]()
	var idx []int
	for _, part := range strings.Split(name, ".") {
		sf, ok := typ.FieldByName(part)
		require.True(t, ok, name)
		idx = append(idx, sf.Index...)
		typ = sf.Type
	}
	return idx
}
