package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"syscall"
)

// Proxy forwards MongoDB wire protocol traffic from clients to a backend
// server, running ONE command at a time per database across all client
// connections.
//
// FerretDB 1.24 does not apply a single update atomically when several
// connections touch the same document at once (concurrent $inc lose
// increments, two findOneAndUpdate calls can claim the same document).
// Serializing the commands of a database restores the per-operation
// atomicity that MongoDB guarantees, at the cost of throughput, which a
// test server can afford; commands on different databases run in
// parallel (see cmdLocks).
//
// Each client connection gets its own backend connection, so per-connection
// state (cursors, sessions) behaves as usual. The proxy frames messages by
// their length header and reads only the "$db" of a request's body.
type Proxy struct {
	backendAddr string
	logger      *slog.Logger

	// locks holds a command's database lock from the moment its request
	// is written to the backend until its last reply has been read back.
	locks cmdLocks

	// connsMu guards conns and closed; conns holds every open connection
	// so that shutdown can interrupt blocked reads.
	connsMu sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool

	wg sync.WaitGroup
}

// NewProxy returns a proxy that forwards to the server at backendAddr.
func NewProxy(backendAddr string, logger *slog.Logger) *Proxy {
	return &Proxy{
		backendAddr: backendAddr,
		logger:      logger,
		conns:       make(map[net.Conn]struct{}),
	}
}

// Serve accepts client connections on ln until ctx is canceled or ln fails.
// Before returning it closes ln and every open connection and waits for all
// connection handlers to finish. It returns nil after cancellation.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer stop()

	defer p.wg.Wait()
	defer p.closeAll()

	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			_ = ln.Close()
			return fmt.Errorf("accepting client connection: %w", err)
		}

		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.serveConn(ctx, conn)
		}()
	}
}

// serveConn relays commands from one client connection until either side
// closes or the proxy shuts down.
func (p *Proxy) serveConn(ctx context.Context, client net.Conn) {
	defer client.Close()
	if !p.track(client) {
		return
	}
	defer p.untrack(client)

	log := p.logger.With(slog.String("client", client.RemoteAddr().String()))

	var d net.Dialer
	backend, err := d.DialContext(ctx, "tcp", p.backendAddr)
	if err != nil {
		log.Warn("cannot reach backend", slog.Any("error", err))
		return
	}
	defer backend.Close()
	if !p.track(backend) {
		return
	}
	defer p.untrack(backend)

	s := &session{
		client:   client,
		clientR:  bufio.NewReader(client),
		backend:  backend,
		backendR: bufio.NewReader(backend),
	}

	log.Debug("client connected")
	for {
		if err := p.relayOne(s); err != nil {
			if isClosed(err) {
				log.Debug("client disconnected")
			} else {
				log.Warn("closing client connection", slog.Any("error", err))
			}
			return
		}
	}
}

// session is one client connection paired with its backend connection.
type session struct {
	client   net.Conn
	clientR  *bufio.Reader
	backend  net.Conn
	backendR *bufio.Reader
}

// relayOne reads one request from the client, runs it on the backend and
// sends the reply (if the client expects one) back to the client.
//
// The request is read before taking the lock, and the final reply is
// written after releasing it, so a slow client never stalls the others.
func (p *Proxy) relayOne(s *session) error {
	req, err := readMessage(s.clientR)
	if err != nil {
		return fmt.Errorf("reading request: %w", err)
	}

	reply, err := p.exchange(s, req)
	if err != nil {
		return err
	}
	if reply == nil {
		return nil // a moreToCome request: the client expects no reply
	}

	if _, err := s.client.Write(reply); err != nil {
		return fmt.Errorf("writing reply: %w", err)
	}
	return nil
}

// exchange runs req on the backend while holding its database's lock
// and returns the reply to pass on to the client, or nil if none is due.
//
// Before forwarding, two OP_MSG request flags are cleared:
//
//   - moreToCome: the client expects no reply, but the proxy asks for one
//     anyway (FerretDB 1.24 answers every request regardless) and drops it.
//     Waiting for it means the command has finished before the lock is
//     released, and keeps request and reply streams in step.
//   - exhaustAllowed: without it the backend must send a single reply, so
//     the lock is never held across a server-paced stream of replies.
//
// Should a reply still carry moreToCome, further replies follow without a
// request; they are read and passed on while the lock is held.
func (p *Proxy) exchange(s *session, req message) (message, error) {
	wantReply := !req.moreToCome()
	req.clearFlags(flagMoreToCome | flagExhaustAllowed)

	defer p.locks.lock(req.database())()

	if _, err := s.backend.Write(req); err != nil {
		return nil, fmt.Errorf("writing request to backend: %w", err)
	}

	for {
		reply, err := readMessage(s.backendR)
		if err != nil {
			return nil, fmt.Errorf("reading reply from backend: %w", err)
		}

		switch {
		case !wantReply:
			if !reply.moreToCome() {
				return nil, nil
			}
		case !reply.moreToCome():
			return reply, nil
		default:
			if _, err := s.client.Write(reply); err != nil {
				return nil, fmt.Errorf("writing streamed reply: %w", err)
			}
		}
	}
}

// track registers an open connection; it returns false (and the caller must
// close conn) if the proxy is already shutting down.
func (p *Proxy) track(conn net.Conn) bool {
	p.connsMu.Lock()
	defer p.connsMu.Unlock()

	if p.closed {
		return false
	}
	p.conns[conn] = struct{}{}
	return true
}

// untrack forgets a connection that its handler is closing.
func (p *Proxy) untrack(conn net.Conn) {
	p.connsMu.Lock()
	defer p.connsMu.Unlock()

	delete(p.conns, conn)
}

// closeAll closes every open connection and refuses new ones.
func (p *Proxy) closeAll() {
	p.connsMu.Lock()
	defer p.connsMu.Unlock()

	p.closed = true
	for conn := range p.conns {
		_ = conn.Close()
	}
}

// isClosed reports whether err is the ordinary end of a connection.
func isClosed(err error) bool {
	return errors.Is(err, io.EOF) ||
		errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNRESET)
}
