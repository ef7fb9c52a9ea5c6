package ws

import (
	"bufio"
	"net"
	"net/http"
	"sync"
)

// corkMax is the most a corked connection buffers before it writes anyway.
const corkMax = 64 << 10

// corkConn batches writes while corked, as TCP_CORK does: the websocket
// library flushes every message with one write, so a writer that has
// several frames queued corks, writes them all, and uncorks, sending them
// in one system call. Uncorked, writes go straight through.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked bool
	buf    []byte
	err    error
}

func (c *corkConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	if !c.corked {
		return c.Conn.Write(p)
	}
	c.buf = append(c.buf, p...)
	if len(c.buf) >= corkMax {
		return len(p), c.flushLocked()
	}
	return len(p), nil
}

// cork starts batching; nil-safe.
func (c *corkConn) cork() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.corked = true
	c.mu.Unlock()
}

// uncork writes what was batched and stops batching; nil-safe.
func (c *corkConn) uncork() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked = false
	return c.flushLocked()
}

func (c *corkConn) flushLocked() error {
	if c.err != nil || len(c.buf) == 0 {
		return c.err
	}
	_, err := c.Conn.Write(c.buf)
	if cap(c.buf) > 2*corkMax {
		c.buf = nil
	} else {
		c.buf = c.buf[:0]
	}
	if err != nil {
		c.err = err
	}
	return err
}

// corkingWriter wraps a ResponseWriter so that the connection the
// websocket library hijacks is a corkConn.
type corkingWriter struct {
	http.ResponseWriter
	cc *corkConn
}

func (w *corkingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	w.cc = &corkConn{Conn: conn}
	brw.Writer.Reset(w.cc)
	return w.cc, brw, nil
}

func (w *corkingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
