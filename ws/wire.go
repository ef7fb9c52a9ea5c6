package ws

import (
	"encoding/binary"
	"io"
	"math"
	"net"
	"os"
	"sync"
	"syscall"
)

// wireReader is what the websocket library reads a connection's frames
// from, in place of a buffered reader of the socket, so that an idle
// connection costs little:
//
//   - It holds no buffer while nothing is pending: bytes are read from the
//     socket into a pooled buffer, given back once they are all handed on.
//   - Waiting for the peer's next frame is done by a goroutine of its own
//     (conn.awaitFrames, in await), whose stack stays small, and not by
//     the reader goroutine deep in the library's frame reader, whose stack
//     does not.
//   - It takes the peer's pongs off the stream and reports them through
//     onPong: a pong answering the gateway's ping would otherwise wake the
//     library's reader, which then waits for the next frame deep in its
//     stack again.
//
// It hands the library the bytes of one frame at a time, never past the
// end of the frame they are in, so that when the library has read a
// message to its end, none of the next frame's bytes is in the library's
// buffer: whatever is pending is here, where the gateway can see it.
//
// Reads of the socket are non-blocking system calls through its RawConn,
// made with mu held, so that the library's reads (its close handshake
// reads from another goroutine) and await never read the socket at once.
type wireReader struct {
	rc     syscall.RawConn
	onPong func() // set before the connection is served

	mu      sync.Mutex
	bp      *[]byte // the pooled buffer pending is in; nil while nothing is pending
	pending []byte  // read from the socket, not handed on yet
	left    int64   // bytes of the current frame still to hand on; 0 at a frame boundary
	err     error   // the socket's read error (io.EOF at its end), handed on after pending

	// The arguments and results of readFn, so that a read allocates no
	// closure. Used with mu held.
	rb     []byte
	rbp    *[]byte // the pool's buffer read into when rb is nil
	rwait  bool
	rn     int
	rerr   error
	readFn func(fd uintptr) bool
}

const (
	// wireBufSize is the buffer a connection reads its socket into while
	// it has bytes pending; pooled.
	wireBufSize = 4 << 10
	// wireDirectMin is the least room a reader must offer for the bytes of
	// a frame to be read from the socket straight into it, rather than
	// through the pooled buffer.
	wireDirectMin = 512
	// libReaderSize is the websocket library's buffer in front of a
	// wireReader: a frame's header and the start of its payload.
	libReaderSize = 64
)

var wireBufs = sync.Pool{New: func() any { b := make([]byte, wireBufSize); return &b }}

// newWireReader returns a wireReader of nc with the bytes already read
// from it (what the HTTP server read past the upgrade request), or nil if
// nc is not a socket it can read with non-blocking system calls (a TLS
// connection, say).
func newWireReader(nc net.Conn, buffered []byte) *wireReader {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &wireReader{rc: rc}
	r.readFn = r.readOnce
	if len(buffered) > 0 {
		r.bp = wireBufs.Get().(*[]byte)
		if len(buffered) > len(*r.bp) {
			b := make([]byte, len(buffered))
			r.bp = &b
		}
		r.pending = (*r.bp)[:copy(*r.bp, buffered)]
	}
	return r
}

// Read hands the library the bytes of the current frame, waiting for the
// socket when none is pending.
func (r *wireReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if r.left == 0 && !r.nextFrame() {
			if r.err == nil {
				r.fill(true)
				continue
			}
			if len(r.pending) == 0 {
				return 0, r.err
			}
			// The socket ended in a frame's header or in a pong: what
			// came goes on, for the library to tell the frame was cut.
			r.left = int64(len(r.pending))
		}
		if len(r.pending) > 0 {
			n := copy(p[:min(int64(len(p)), r.left)], r.pending)
			r.consume(n)
			r.left -= int64(n)
			return n, nil
		}
		if r.err != nil {
			return 0, r.err
		}
		if len(p) >= wireDirectMin {
			// The middle of a frame: straight into p.
			n, err := r.readSocket(p[:min(int64(len(p)), r.left)], true)
			r.left -= int64(n)
			if n > 0 {
				return n, nil
			}
			r.err = err
			continue
		}
		r.fill(true)
	}
}

// ready reports whether the library can read a frame's bytes without
// waiting for the socket (or will get its error). It reads what the
// socket holds, without waiting, when nothing is pending.
func (r *wireReader) ready() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		if r.err != nil || r.left > 0 || r.nextFrame() {
			return true
		}
		if !r.fill(false) {
			return false
		}
	}
}

// await waits until a frame that is not a pong begins (or the socket
// failed): the library then reads it.
func (r *wireReader) await() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.err == nil && r.left == 0 && !r.nextFrame() {
		r.fill(true)
	}
}

// nextFrame is called at a frame boundary: it drops the complete pongs
// that begin pending, and reports whether the frame that begins pending
// is another, whose length it then sets as left. It reports false while
// pending does not hold the next frame's header, or all of a pong.
func (r *wireReader) nextFrame() bool {
	for {
		size, pong, ok := frameSize(r.pending)
		if !ok {
			return false
		}
		if !pong {
			r.left = size
			return true
		}
		if int64(len(r.pending)) < size {
			return false
		}
		r.consume(int(size))
		r.onPong()
	}
}

// frameSize reads the header of the client frame that begins b: its
// length with the header, and whether it is a pong the reader takes off
// the stream (final, masked, at most 125 bytes, no reserved bit: a frame
// breaking these rules goes to the library, which fails the connection
// with the right code). ok is false if b does not hold the whole header.
func frameSize(b []byte) (size int64, pong, ok bool) {
	if len(b) < 2 {
		return 0, false, false
	}
	masked := b[1]&0x80 != 0
	n, hdr := int64(b[1]&0x7f), int64(2)
	switch n {
	case 126:
		hdr = 4
	case 127:
		hdr = 10
	}
	if masked {
		hdr += 4
	}
	if int64(len(b)) < hdr {
		return 0, false, false
	}
	switch n {
	case 126:
		n = int64(binary.BigEndian.Uint16(b[2:4]))
	case 127:
		u := binary.BigEndian.Uint64(b[2:10])
		if u > math.MaxInt64-uint64(hdr) {
			// Invalid: the library refuses it. Everything goes to it.
			return math.MaxInt64, false, true
		}
		n = int64(u)
	}
	const fin, opPong = 0x80, 0xA
	pong = b[0] == fin|opPong && masked && n <= 125
	return hdr + n, pong, true
}

// consume drops the first n pending bytes, giving the buffer back when
// none is left.
func (r *wireReader) consume(n int) {
	r.pending = r.pending[n:]
	if len(r.pending) == 0 && r.bp != nil {
		if cap(*r.bp) == wireBufSize {
			wireBufs.Put(r.bp)
		}
		r.bp, r.pending = nil, nil
	}
}

// fill reads the socket into the pending buffer, waiting for it with
// wait. It reports whether bytes came; an error is kept in r.err. While
// nothing is pending, the buffer is taken from the pool only for the
// system call that reads, not for the wait: an idle connection holds
// none.
func (r *wireReader) fill(wait bool) bool {
	var n int
	var err error
	if len(r.pending) == 0 {
		r.consume(0)
		n, err = r.readSocket(nil, wait)
		if n > 0 {
			r.bp, r.rbp = r.rbp, nil
			r.pending = (*r.bp)[:n]
		}
	} else {
		if cap(r.pending) == len(r.pending) {
			// Move what is pending (a part of a header or of a pong) to
			// the front, for room behind it.
			r.pending = (*r.bp)[:copy(*r.bp, r.pending)]
		}
		n, err = r.readSocket(r.pending[len(r.pending):cap(r.pending)], wait)
		r.pending = r.pending[:len(r.pending)+n]
	}
	if err != nil {
		r.err = err
	}
	return n > 0
}

// readSocket reads into b with one system call, waiting for the socket to
// have bytes with wait; without, it returns 0, nil when it has none. With
// b nil, it reads into a buffer of the pool, left in r.rbp when bytes
// came.
func (r *wireReader) readSocket(b []byte, wait bool) (int, error) {
	r.rb, r.rwait, r.rn, r.rerr = b, wait, 0, nil
	err := r.rc.Read(r.readFn)
	n, rerr := r.rn, r.rerr
	r.rb, r.rerr = nil, nil
	if n == 0 && r.rbp != nil {
		wireBufs.Put(r.rbp)
		r.rbp = nil
	}
	switch {
	case err != nil:
		return 0, err
	case rerr == syscall.EAGAIN:
		return 0, nil
	case rerr != nil:
		return 0, os.NewSyscallError("read", rerr)
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readOnce is the RawConn read function of readSocket: false asks the
// runtime to wait for the socket, then call it again.
func (r *wireReader) readOnce(fd uintptr) bool {
	b := r.rb
	if b == nil {
		if r.rbp == nil {
			r.rbp = wireBufs.Get().(*[]byte)
		}
		b = *r.rbp
	}
	for {
		r.rn, r.rerr = syscall.Read(int(fd), b)
		if r.rerr != syscall.EINTR {
			break
		}
	}
	if r.rn < 0 {
		r.rn = 0
	}
	if r.rerr == syscall.EAGAIN && r.rwait {
		if r.rbp != nil { // no buffer held while waiting
			wireBufs.Put(r.rbp)
			r.rbp = nil
		}
		return false
	}
	return true
}
