// Package cork batches the writes of a connection while corked, as
// TCP_CORK does, so that WebSocket frames queued together leave in one
// system call. The gateway (package ws) and the Go client (package
// ws/wsclient) both use it.
package cork

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// maxBuffered is the most a corked connection buffers before it writes anyway.
const maxBuffered = 64 << 10

// hijackWriterSize is the buffer of the writer that [Writer.Hijack] returns.
const hijackWriterSize = 256

// hijackReaderSize is the buffer of the reader that [Writer.Hijack]
// returns: an idle connection keeps it for its life (the websocket
// library reads frames through it), so it is a quarter of the 4 KiB one
// the server made; a frame larger than it is read straight into the
// message's buffer.
const hijackReaderSize = 1 << 10

// Conn batches writes while corked, as TCP_CORK does: the websocket
// library flushes every message with one write, so a writer that has
// several frames queued corks, writes them all, and uncorks, sending them
// in one system call. Uncorked, writes go straight through.
type Conn struct {
	net.Conn
	mu      sync.Mutex
	corked  bool
	buf     []byte  // what the cork holds; from bufPool, nil while empty
	bp      *[]byte // where buf came from
	err     error
	timeout time.Duration // of each write to the socket; 0: none

	src io.Reader // what Read reads, if not the socket (Writer.Source)
}

// Read reads the socket, or the source of [Writer.Source].
func (c *Conn) Read(p []byte) (int, error) {
	if c.src != nil {
		return c.src.Read(p)
	}
	return c.Conn.Read(p)
}

// bufPool holds the corks' buffers: a connection holds one only while it
// has writes batched, so idle connections hold none.
var bufPool = sync.Pool{New: func() any { return new([]byte) }}

// SetWriteTimeout gives every later write to the socket a deadline of d
// from its start (0: none), so that a peer that does not read cannot
// block the writer for longer; the write then fails with an error that
// matches os.ErrDeadlineExceeded.
func (c *Conn) SetWriteTimeout(d time.Duration) {
	c.mu.Lock()
	c.timeout = d
	c.mu.Unlock()
}

// writeConn writes p to the socket, within the write timeout.
func (c *Conn) writeConn(p []byte) (int, error) {
	if c.timeout > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
			return 0, err
		}
	}
	return c.Conn.Write(p)
}

func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if !c.corked {
		return c.writeConn(p)
	}
	if c.bp == nil {
		c.bp = bufPool.Get().(*[]byte)
		c.buf = (*c.bp)[:0]
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) >= maxBuffered {
		return len(p), c.flushLocked()
	}
	return len(p), nil
}

// Cork starts batching; nil-safe.
func (c *Conn) Cork() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// Uncork writes what was batched and stops batching; nil-safe.
func (c *Conn) Uncork() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

func (c *Conn) flushLocked() error {
	if c.err != nil || len(c.buf) == 0 {
		return c.err
	}
	_, err := c.writeConn(c.buf)
	if cap(c.buf) <= 2*maxBuffered {
		*c.bp = c.buf[:0]
		bufPool.Put(c.bp)
	}
	c.buf, c.bp = nil, nil
	if err != nil {
		c.err = err
	}
	return err
}

// Writer wraps a ResponseWriter so that the connection the websocket
// library hijacks is a Conn; after the hijack, Conn is it.
type Writer struct {
	http.ResponseWriter
	Conn *Conn

	// Source, if set, gives the reader the websocket library reads frames
	// from: it gets the hijacked socket and the bytes the server read past
	// the request (nil if none), and returns nil to keep the default, a
	// buffered reader of the socket. The library reads it through a
	// buffer of SourceBuffer bytes (16 at least).
	Source       func(conn net.Conn, buffered []byte) io.Reader
	SourceBuffer int
}

func (w *Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.Conn = &Conn{Conn: conn}
	// The websocket library writes each frame through brw.Writer and
	// flushes it; the cork does the batching, so a small buffer serves
	// (the 4 KiB one the server made would stay with the connection).
	brw.Writer = bufio.NewWriterSize(w.Conn, hijackWriterSize)
	if w.Source != nil {
		var buffered []byte
		if n := brw.Reader.Buffered(); n > 0 {
			buffered, _ = brw.Reader.Peek(n)
		}
		if src := w.Source(conn, buffered); src != nil {
			// The websocket library reads through brw.Reader, reset to
			// read from the Conn returned here (after what brw.Reader
			// holds: nothing, the source has it).
			w.Conn.src = src
			brw.Reader = bufio.NewReaderSize(w.Conn, w.SourceBuffer)
			return w.Conn, brw, nil
		}
	}
	// The server's reader may hold bytes the client sent after its
	// request (rare: a client waits for the upgrade's answer); then it is
	// kept, so that nothing read is lost.
	if brw.Reader.Buffered() == 0 {
		brw.Reader = bufio.NewReaderSize(w.Conn, hijackReaderSize)
	}
	return w.Conn, brw, nil
}

func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
