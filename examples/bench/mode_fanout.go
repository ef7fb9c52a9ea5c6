package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
)

func init() { modes["fanout"] = runFanoutMode }

// fanoutServerEnv makes the bench the server of -mode fanout: a gateway
// over a memory bus whose topics have the partitions the variable holds.
const fanoutServerEnv = "PROMLIB_BENCH_FANOUT_SERVER"

// fanoutTopic is the topic every connection of -mode fanout subscribes to.
const fanoutTopic = "fanout"

// runFanoutMode measures the fan-out of one topic to many connections:
// a child process (this program again) runs a gateway over a memory bus,
// as the hub does, so that its resident set and CPU time are the
// gateway's alone; this process opens -conns connections, each a live
// subscriber of the topic (a SUBSCRIBE without group), or with
// -group-per-conn a consumer group of its own ("viewer-<i>") that acks
// every event, and publishes -rate events/s for -duration over one more
// connection. See fanout.go for what is measured, and
// examples/bench/peers (-peer centrifuge) for the same against
// centrifuge.
func runFanoutMode(ctx context.Context, o *Options, be Backend, r *Result) error {
	srv, err := startFanServer(ctx, fanoutServerEnv, strconv.Itoa(o.Partitions))
	if err != nil {
		return err
	}
	defer srv.stop()
	sub := "live"
	if o.GroupPerConn {
		sub = "group-per-conn"
	}
	cfg := fanConfig{Conns: o.Conns, Rate: o.Rate, Duration: o.Duration, Payload: o.Payload}
	out, err := runFanout(ctx, cfg, promlibFanout{groups: o.GroupPerConn}, srv, sub)
	if err != nil {
		return err
	}
	// The publisher sends at the rate without waiting for answers.
	r.Publish = "paced"
	r.N, r.Groups, r.Consumers = out.Events, 0, o.Conns
	if o.GroupPerConn {
		r.Groups = o.Conns
	}
	r.PublishPerS, r.DeliverPerS = out.PublishPerS, out.DeliverPerS
	r.P50Ms, r.P99Ms, r.Lost, r.Duplicates = out.P50Ms, out.P99Ms, out.Lost, out.Duplicates
	// The fields the JSON line has already (ws-idle's) hide the fan-out's
	// fields of the same name: they get the same values.
	r.Conns, r.BytesPerConn, r.GoroutinesPerConn = o.Conns, out.BytesPerConn, out.GoroutinesPerConn
	r.NoFileSoft, r.NoFileHard = out.NoFileSoft, out.NoFileHard
	r.FanoutFigures = &out.FanoutFigures
	return nil
}

// fanoutServer is the server process of -mode fanout (spec: the
// partitions per topic): a gateway with its defaults over a memory bus.
func fanoutServer(spec string) error {
	partitions, err := strconv.Atoi(spec)
	if err != nil {
		return fmt.Errorf("%s: %q: %w", fanoutServerEnv, spec, err)
	}
	bus, err := event.NewBus(event.NewMemoryStore(), event.Config{Partitions: partitions})
	if err != nil {
		return err
	}
	gw, err := ws.NewGateway(ws.Config{Bus: bus, Verifier: auth.StaticTokens("bench")})
	if err != nil {
		return err
	}
	return serveFanChild(gw, func(ctx context.Context) {
		_ = gw.Shutdown(ctx)
		_ = bus.Close(ctx)
	})
}

// promlibFanout is the gateway's protocol (docs/PROTOCOL.md) in raw frames.
type promlibFanout struct{ groups bool }

var (
	opOK    = []byte(`{"op":"OK"`)
	opERR   = []byte(`{"op":"ERR"`)
	opEVENT = []byte(`{"op":"EVENT"`)
	opGAP   = []byte(`{"op":"GAP"`)
)

// answers reads frames of c until n OK or ERR answers have come; an ERR
// is returned as an error.
func answers(ctx context.Context, c *websocket.Conn, n int) error {
	for n > 0 {
		_, data, err := c.Read(ctx)
		if err != nil {
			return err
		}
		switch {
		case bytes.HasPrefix(data, opOK):
			n--
		case bytes.HasPrefix(data, opERR):
			return fmt.Errorf("answered %s", data)
		}
	}
	return nil
}

func (p promlibFanout) subscribe(ctx context.Context, c *websocket.Conn, s *fanSub) error {
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"op":"AUTH","token":"bench"}`)); err != nil {
		return err
	}
	sub := `{"op":"SUBSCRIBE","topic":"` + fanoutTopic + `"}`
	if p.groups {
		sub = `{"op":"SUBSCRIBE","topic":"` + fanoutTopic + `","group":"viewer-` + strconv.Itoa(s.i) + `","opts":{"from":"latest"}}`
	}
	if err := c.Write(ctx, websocket.MessageText, []byte(sub)); err != nil {
		return err
	}
	return answers(ctx, c, 2)
}

func (promlibFanout) startPublisher(ctx context.Context, c *websocket.Conn) error {
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"op":"AUTH","token":"bench"}`)); err != nil {
		return err
	}
	return answers(ctx, c, 1)
}

func (promlibFanout) appendPublish(b []byte, k int, payload []byte) []byte {
	b = append(b, `{"op":"PUBLISH","topic":"`+fanoutTopic+`","payload":`...)
	b = append(b, payload...)
	return append(b, '}')
}

func (promlibFanout) publisherMessage(data, reply []byte) (int, []byte, error) {
	switch {
	case bytes.HasPrefix(data, opOK):
		return 1, reply, nil
	case bytes.HasPrefix(data, opERR):
		return 1, reply, errors.New(string(data))
	}
	return 0, reply, nil
}

func (p promlibFanout) message(s *fanSub, data []byte, now int64, reply []byte) []byte {
	switch {
	case bytes.HasPrefix(data, opEVENT):
		if i, sent, ok := fanPayload(data); ok {
			s.event(i, sent, now)
		}
		if p.groups {
			if id, ok := eventID(data); ok {
				reply = append(reply, `{"op":"ACK","topic":"`+fanoutTopic+`","group":"viewer-`...)
				reply = strconv.AppendInt(reply, int64(s.i), 10)
				reply = append(reply, `","id":"`...)
				reply = append(reply, id...)
				reply = append(reply, `"}`...)
			}
		}
	case bytes.HasPrefix(data, opGAP):
		from, ok1 := intField(data, `"from":`)
		to, ok2 := intField(data, `"to":`)
		if ok1 && ok2 && to >= from {
			s.gap(int(to - from + 1))
		}
	case bytes.HasPrefix(data, opERR):
		if s.errs == 0 {
			fmt.Fprintf(os.Stderr, "fanout: connection %d: %s\n", s.i, data)
		}
		s.errFrame()
	}
	return reply
}

// eventID is the event's id in an EVENT frame.
func eventID(frame []byte) ([]byte, bool) {
	const key = `"event":{"id":"`
	k := bytes.Index(frame, []byte(key))
	if k < 0 {
		return nil, false
	}
	rest := frame[k+len(key):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return nil, false
	}
	return rest[:end], true
}

// intField reads the integer after key in a frame.
func intField(frame []byte, key string) (int64, bool) {
	k := bytes.Index(frame, []byte(key))
	if k < 0 {
		return 0, false
	}
	n, _, ok := fanDigits(frame[k+len(key):])
	return n, ok
}
