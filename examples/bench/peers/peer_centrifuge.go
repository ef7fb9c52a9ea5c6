package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"syscall"

	"github.com/centrifugal/centrifuge"
	"github.com/coder/websocket"
)

// centrifugeServerEnv makes this program the server of -peer centrifuge.
const centrifugeServerEnv = "PEERS_CENTRIFUGE_SERVER"

// centrifugeChannel is the channel every connection subscribes to.
const centrifugeChannel = "fanout"

// runCentrifuge is -peer centrifuge: the fan-out bench of examples/bench
// (-mode fanout) against a centrifuge server. Centrifuge is the standard
// real-time fan-out server library in Go (the core of Centrifugo): a
// node with its memory broker, clients over WebSocket with the JSON
// protocol, a channel without history, every option at its default. A
// child process (this program again) runs it, so that its resident set
// and CPU time are the server's alone; this process opens the
// connections, each a subscriber of one channel, and publishes over one
// more connection (a client-side publish, allowed by the server's
// OnPublish), with the harness of fanout.go, the same file as
// examples/bench's.
func runCentrifuge(ctx context.Context, cfg fanConfig) (*fanOutcome, error) {
	srv, err := startFanServer(ctx, centrifugeServerEnv, "1")
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	return runFanout(ctx, cfg, centrifugeFanout{}, srv, "live")
}

// centrifugeServer is the server process of -peer centrifuge.
func centrifugeServer() error {
	node, err := centrifuge.New(centrifuge.Config{LogLevel: centrifuge.LogLevelError, LogHandler: func(e centrifuge.LogEntry) {
		fmt.Fprintf(os.Stderr, "centrifuge: %s %v\n", e.Message, e.Fields)
	}})
	if err != nil {
		return err
	}
	node.OnConnect(func(c *centrifuge.Client) {
		c.OnSubscribe(func(e centrifuge.SubscribeEvent, cb centrifuge.SubscribeCallback) {
			cb(centrifuge.SubscribeReply{}, nil)
		})
		c.OnPublish(func(e centrifuge.PublishEvent, cb centrifuge.PublishCallback) {
			cb(centrifuge.PublishReply{}, nil)
		})
	})
	if err := node.Run(); err != nil {
		return err
	}
	ws := centrifuge.NewWebsocketHandler(node, centrifuge.WebsocketConfig{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws.ServeHTTP(w, r.WithContext(centrifuge.SetCredentials(r.Context(), &centrifuge.Credentials{UserID: "bench"})))
	})
	return serveFanChild(h, func(ctx context.Context) { _ = node.Shutdown(ctx) })
}

// centrifugeFanout is centrifuge's client protocol (version 2, JSON) in
// raw frames: a frame holds one or more replies, one per line; an empty
// reply ({}) is the server's ping, answered with an empty command.
type centrifugeFanout struct{}

// centrifugeReplies reads frames of c until the reply to command id has
// come; an error reply is returned as an error.
func centrifugeReplies(ctx context.Context, c *websocket.Conn, id int) error {
	want := []byte(`{"id":` + strconv.Itoa(id) + `,`)
	for {
		_, data, err := c.Read(ctx)
		if err != nil {
			return err
		}
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			if !bytes.HasPrefix(line, want) {
				continue
			}
			if bytes.Contains(line, []byte(`"error":`)) {
				return fmt.Errorf("answered %s", line)
			}
			return nil
		}
	}
}

func (centrifugeFanout) connect(ctx context.Context, c *websocket.Conn) error {
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"id":1,"connect":{}}`)); err != nil {
		return err
	}
	return centrifugeReplies(ctx, c, 1)
}

func (p centrifugeFanout) subscribe(ctx context.Context, c *websocket.Conn, s *fanSub) error {
	if err := p.connect(ctx, c); err != nil {
		return err
	}
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"id":2,"subscribe":{"channel":"`+centrifugeChannel+`"}}`)); err != nil {
		return err
	}
	return centrifugeReplies(ctx, c, 2)
}

func (p centrifugeFanout) startPublisher(ctx context.Context, c *websocket.Conn) error {
	return p.connect(ctx, c)
}

// The publishes are commands 10 and up.
func (centrifugeFanout) appendPublish(b []byte, k int, payload []byte) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, int64(k+10), 10)
	b = append(b, `,"publish":{"channel":"`+centrifugeChannel+`","data":`...)
	b = append(b, payload...)
	return append(b, "}}"...)
}

func (centrifugeFanout) publisherMessage(data, reply []byte) (answered int, out []byte, err error) {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		switch {
		case len(bytes.TrimSpace(line)) == 0:
		case bytes.Equal(line, []byte("{}")):
			reply = appendLine(reply, "{}")
		case bytes.HasPrefix(line, []byte(`{"id":`)):
			answered++
			if bytes.Contains(line, []byte(`"error":`)) && err == nil {
				err = errors.New(string(line))
			}
		}
	}
	return answered, reply, err
}

func (centrifugeFanout) message(s *fanSub, data []byte, now int64, reply []byte) []byte {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		switch {
		case len(bytes.TrimSpace(line)) == 0:
		case bytes.Equal(line, []byte("{}")):
			reply = appendLine(reply, "{}")
		case bytes.HasPrefix(line, []byte(`{"push":`)):
			if i, sent, ok := fanPayload(line); ok {
				s.event(i, sent, now)
			}
		case bytes.Contains(line, []byte(`"error":`)):
			if s.errs == 0 {
				fmt.Fprintf(os.Stderr, "centrifuge: connection %d: %s\n", s.i, line)
			}
			s.errFrame()
		}
	}
	return reply
}

// appendLine appends a command to a frame of commands, one per line.
func appendLine(b []byte, cmd string) []byte {
	if len(b) > 0 {
		b = append(b, '\n')
	}
	return append(b, cmd...)
}

// raiseNoFile raises the soft RLIMIT_NOFILE to the hard one and returns
// both (as examples/bench's does).
func raiseNoFile() (soft, hard uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, fmt.Errorf("RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return 0, 0, fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", lim.Max, err)
		}
	}
	return lim.Cur, lim.Max, nil
}
