package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeBackend is a wire-protocol server that answers each request with the
// replies its respond function returns, and records what it saw.
type fakeBackend struct {
	respond func(req message) []message

	inFlight    atomic.Int32
	maxInFlight atomic.Int32

	mu       sync.Mutex
	requests []message
}

// startFakeBackend serves on a loopback port until the test ends.
func startFakeBackend(t *testing.T, respond func(req message) []message) (*fakeBackend, string) {
	t.Helper()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	b := &fakeBackend{respond: respond}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})

	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer conn.Close()
				b.serve(conn)
			}()
		}
	}()
	return b, ln.Addr().String()
}

// serve answers requests on one connection until it closes.
func (b *fakeBackend) serve(conn net.Conn) {
	r := bufio.NewReader(conn)
	for {
		req, err := readMessage(r)
		if err != nil {
			return
		}

		n := b.inFlight.Add(1)
		for {
			old := b.maxInFlight.Load()
			if n <= old || b.maxInFlight.CompareAndSwap(old, n) {
				break
			}
		}

		b.mu.Lock()
		b.requests = append(b.requests, req)
		b.mu.Unlock()

		// Widen the window in which an unserialized proxy would let a
		// second command in; this is not waiting for anything.
		time.Sleep(100 * time.Microsecond)
		replies := b.respond(req)
		b.inFlight.Add(-1)

		for _, reply := range replies {
			if _, err := conn.Write(reply); err != nil {
				return
			}
		}
	}
}

// seen returns the requests received so far.
func (b *fakeBackend) seen() []message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]message(nil), b.requests...)
}

// echoReply answers every request with one reply carrying its payload.
func echoReply(req message) []message {
	return []message{newOpMsg(req.requestID()+1000, req.requestID(), 0, req[headerLen+5:])}
}

// startProxy runs a Proxy in front of backendAddr until the test ends and
// returns its address.
func startProxy(t *testing.T, backendAddr string) string {
	t.Helper()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- NewProxy(backendAddr, slog.New(slog.DiscardHandler)).Serve(ctx, ln) }()

	t.Cleanup(func() {
		cancel()
		assert.NoError(t, <-errc)
	})
	return ln.Addr().String()
}

// dial opens a raw client connection to addr that the test closes.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()

	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	return conn, bufio.NewReader(conn)
}

func TestProxySerializesAcrossConnections(t *testing.T) {
	backend, backendAddr := startFakeBackend(t, echoReply)
	addr := startProxy(t, backendAddr)

	const conns, perConn = 16, 50
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for c := range conns {
		conn, r := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perConn {
				id := int32(c*perConn + i)
				if _, err := conn.Write(newOpMsg(id, 0, 0, []byte("req"))); err != nil {
					errs <- err
					return
				}
				reply, err := readMessage(r)
				if err != nil {
					errs <- err
					return
				}
				if reply.responseTo() != id {
					errs <- errors.New("reply answers the wrong request")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	assert.Len(t, backend.seen(), conns*perConn)
	assert.Equal(t, int32(1), backend.maxInFlight.Load(), "backend ran commands concurrently")
}

func TestProxyMoreToComeRequestGetsNoReply(t *testing.T) {
	// Like FerretDB 1.24, this backend answers every request, even one
	// whose sender set moreToCome and expects no answer.
	backend, backendAddr := startFakeBackend(t, echoReply)
	addr := startProxy(t, backendAddr)
	conn, r := dial(t, addr)

	_, err := conn.Write(newOpMsg(1, 0, flagMoreToCome, []byte("fire-and-forget")))
	require.NoError(t, err)
	_, err = conn.Write(newOpMsg(2, 0, 0, []byte("acknowledged")))
	require.NoError(t, err)

	reply, err := readMessage(r)
	require.NoError(t, err)
	assert.Equal(t, int32(2), reply.responseTo(), "the dropped reply must not reach the client")

	seen := backend.seen()
	require.Len(t, seen, 2)
	assert.False(t, seen[0].moreToCome(), "proxy asks the backend for a reply")
}

func TestProxyRelaysMoreToComeReplies(t *testing.T) {
	const streamed = 3
	backend, backendAddr := startFakeBackend(t, func(req message) []message {
		var replies []message
		for i := range streamed {
			var flags uint32
			if i < streamed-1 {
				flags = flagMoreToCome
			}
			replies = append(replies, newOpMsg(int32(100+i), req.requestID(), flags, []byte("part")))
		}
		return replies
	})
	addr := startProxy(t, backendAddr)
	conn, r := dial(t, addr)

	_, err := conn.Write(newOpMsg(1, 0, flagExhaustAllowed, []byte("getMore")))
	require.NoError(t, err)

	for i := range streamed {
		reply, err := readMessage(r)
		require.NoError(t, err)
		assert.Equal(t, i < streamed-1, reply.moreToCome(), "reply %d", i)
	}

	seen := backend.seen()
	require.Len(t, seen, 1)
	assert.False(t, seen[0].hasFlag(flagExhaustAllowed), "proxy withdraws exhaustAllowed")
}

func TestProxyShutdownClosesClients(t *testing.T) {
	_, backendAddr := startFakeBackend(t, echoReply)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- NewProxy(backendAddr, slog.New(slog.DiscardHandler)).Serve(ctx, ln) }()

	conn, r := dial(t, ln.Addr().String())
	_, err = conn.Write(newOpMsg(1, 0, 0, []byte("ping")))
	require.NoError(t, err)
	_, err = readMessage(r)
	require.NoError(t, err)

	cancel()
	require.NoError(t, <-errc)

	_, err = readMessage(r)
	assert.True(t, errors.Is(err, io.EOF) || isClosed(err), "client connection closed: %v", err)

	_, err = net.Dial("tcp", ln.Addr().String())
	assert.Error(t, err, "listener closed")
}
