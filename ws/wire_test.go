package ws

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// socketPair returns the two ends of a connected stream socket pair: the
// wire reader reads the first, the test writes the second.
func socketPair(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		require.NoError(t, err)
		f.Close()
		conns[i] = c
		t.Cleanup(func() { c.Close() })
	}
	return conns[0], conns[1]
}

// clientFrame encodes a frame as a client sends it: masked, with the
// shortest length form unless long asks for the 8-byte one.
func clientFrame(first byte, payload []byte, long bool) []byte {
	b := []byte{first, 0}
	switch n := len(payload); {
	case long:
		b[1] = 127
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	case n > 0xffff:
		b[1] = 127
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	case n > 125:
		b[1] = 126
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b[1] = byte(n)
	}
	b[1] |= 0x80
	mask := []byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, mask...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// stripPongs is what a wireReader must hand on of a whole stream: every
// frame but the complete pongs it takes off (final, masked, at most 125
// bytes), with a cut frame at the end handed on as it is. It counts the
// pongs.
func stripPongs(stream []byte) (out []byte, pongs int) {
	for len(stream) > 0 {
		size, pong, ok := frameSize(stream)
		if !ok || size > int64(len(stream)) {
			return append(out, stream...), pongs
		}
		if pong {
			pongs++
		} else {
			out = append(out, stream[:size]...)
		}
		stream = stream[size:]
	}
	return out, pongs
}

// readThrough writes stream to a socket in chunks, closes it, and reads
// it all through a wireReader behind a buffer as the websocket library
// has; it returns what was read and the pongs reported.
func readThrough(t testing.TB, stream []byte, chunks []int) ([]byte, int) {
	t.Helper()
	a, b := socketPair(t)
	r := newWireReader(a, nil)
	require.NotNil(t, r)
	var pongs atomic.Int64
	r.onPong = func() { pongs.Add(1) }

	done := make(chan error, 1)
	go func() {
		rest := stream
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if len(chunks) > 0 {
				n = min(n, max(1, chunks[i%len(chunks)]))
			}
			if _, err := b.Write(rest[:n]); err != nil {
				done <- err
				return
			}
			rest = rest[n:]
		}
		done <- b.Close()
	}()
	got, err := io.ReadAll(bufio.NewReaderSize(r, libReaderSize))
	require.NoError(t, err)
	require.NoError(t, <-done)
	return got, int(pongs.Load())
}

// randomStream makes frames of every kind a client sends: text, binary
// (up to big bytes) and continuation frames of every length form, pings, closes, pongs (0
// to 125 bytes) and frames that look like pongs but are not to be taken
// off (too long, unmasked, not final, a reserved bit).
func randomStream(rng *rand.Rand, frames, big int) []byte {
	var s []byte
	payload := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.IntN(256))
		}
		return p
	}
	for range frames {
		switch rng.IntN(8) {
		case 0, 1:
			s = append(s, clientFrame(0x81, payload(rng.IntN(300)), rng.IntN(10) == 0)...)
		case 2:
			s = append(s, clientFrame(0x82, payload(rng.IntN(big)), false)...)
		case 3:
			// A fragmented message with a pong between its frames.
			s = append(s, clientFrame(0x01, payload(rng.IntN(200)), false)...)
			s = append(s, clientFrame(0x8A, payload(rng.IntN(126)), false)...)
			s = append(s, clientFrame(0x80, payload(rng.IntN(200)), false)...)
		case 4, 5:
			s = append(s, clientFrame(0x8A, payload(rng.IntN(126)), false)...)
		case 6:
			s = append(s, clientFrame(0x89, payload(rng.IntN(126)), false)...)
		default:
			switch rng.IntN(3) {
			case 0:
				s = append(s, clientFrame(0x8A, payload(126+rng.IntN(10)), false)...) // too long for a control frame
			case 1:
				s = append(s, clientFrame(0x0A, payload(rng.IntN(20)), false)...) // not final
			default:
				s = append(s, clientFrame(0xCA, payload(rng.IntN(20)), false)...) // RSV1
			}
		}
	}
	return s
}

// TestWireReaderStream: whatever the chunks the bytes come in, the wire
// reader hands on every frame but the pongs, byte for byte and in order,
// and reports each pong once.
func TestWireReaderStream(t *testing.T) {
	t.Parallel()
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		big := 70000 // the 8-byte length form
		if seed%3 == 0 {
			big = 400
		}
		stream := randomStream(rng, 40, big)
		want, wantPongs := stripPongs(stream)
		require.Greater(t, wantPongs, 0, "seed %d", seed)
		var chunks []int
		switch seed % 3 {
		case 0: // one byte at a time, the hardest split
			chunks = []int{1}
		case 1:
			for range 50 {
				chunks = append(chunks, 1+rng.IntN(200))
			}
		}
		got, pongs := readThrough(t, stream, chunks)
		require.True(t, bytes.Equal(want, got), "seed %d: %d bytes handed on, want %d", seed, len(got), len(want))
		assert.Equal(t, wantPongs, pongs, "seed %d", seed)
	}
}

// TestWireReaderNeverPastFrame: the reader hands on no byte of the next
// frame with the current one, however much the caller asks for, so that
// the library's buffer never holds the start of a frame it has not begun.
func TestWireReaderNeverPastFrame(t *testing.T) {
	t.Parallel()
	a, b := socketPair(t)
	r := newWireReader(a, nil)
	r.onPong = func() {}
	f1 := clientFrame(0x81, []byte("first"), false)
	f2 := clientFrame(0x81, []byte("second"), false)
	_, err := b.Write(append(append([]byte(nil), f1...), f2...))
	require.NoError(t, err)
	p := make([]byte, 100)
	n, err := r.Read(p)
	require.NoError(t, err)
	assert.Equal(t, f1, p[:n], "one frame at most")
	n, err = r.Read(p)
	require.NoError(t, err)
	assert.Equal(t, f2, p[:n])
}

// TestWireReaderAwait: await returns at the first frame that is not a
// pong, having taken off the pongs before it, and holds no buffer while it
// waits; an idle reader holds none either.
func TestWireReaderAwait(t *testing.T) {
	t.Parallel()
	a, b := socketPair(t)
	r := newWireReader(a, nil)
	var pongs atomic.Int64
	r.onPong = func() { pongs.Add(1) }
	assert.False(t, r.ready(), "nothing sent")
	assert.Nil(t, r.bp, "an idle reader holds no buffer")

	returned := make(chan struct{})
	go func() {
		r.await()
		close(returned)
	}()
	// Three pongs, the last cut in two, then a text frame: await returns
	// only once it sees the text frame, all pongs taken off.
	pong := clientFrame(0x8A, []byte("p"), false)
	for i := range 3 {
		msg := pong
		if i == 2 {
			_, err := b.Write(msg[:3])
			require.NoError(t, err)
			msg = msg[3:]
		}
		_, err := b.Write(msg)
		require.NoError(t, err)
	}
	text := clientFrame(0x81, []byte("hello"), false)
	_, err := b.Write(text)
	require.NoError(t, err)
	<-returned
	assert.EqualValues(t, 3, pongs.Load(), "every pong taken off before await returned")
	assert.True(t, r.ready())
	got := make([]byte, 64)
	n, err := r.Read(got)
	require.NoError(t, err)
	assert.Equal(t, text, got[:n])
	assert.False(t, r.ready())
	assert.Nil(t, r.bp, "the buffer goes back once all is handed on")

	// The end of the socket reaches the reader after what was pending.
	require.NoError(t, b.Close())
	r.await()
	assert.True(t, r.ready())
	_, err = r.Read(got)
	assert.ErrorIs(t, err, io.EOF)
}

// TestWireReaderBuffered: bytes the HTTP server read past the upgrade
// request come first, filtered as the rest.
func TestWireReaderBuffered(t *testing.T) {
	t.Parallel()
	a, b := socketPair(t)
	f1 := clientFrame(0x81, []byte("early"), false)
	pong := clientFrame(0x8A, nil, false)
	f2 := clientFrame(0x81, []byte("later"), false)
	r := newWireReader(a, append(append([]byte(nil), f1...), pong[:2]...))
	var pongs atomic.Int64
	r.onPong = func() { pongs.Add(1) }
	_, err := b.Write(append(append([]byte(nil), pong[2:]...), f2...))
	require.NoError(t, err)
	require.NoError(t, b.Close())
	got, err := io.ReadAll(bufio.NewReaderSize(r, libReaderSize))
	require.NoError(t, err)
	assert.Equal(t, append(append([]byte(nil), f1...), f2...), got)
	assert.EqualValues(t, 1, pongs.Load())
}

// TestWireReaderNotASocket: a connection that is not a socket (TLS, a
// pipe) gets no wire reader: the library then reads it as it would.
func TestWireReaderNotASocket(t *testing.T) {
	t.Parallel()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	assert.Nil(t, newWireReader(a, nil))
}

// TestWireReaderClosed: a socket closed under a waiting reader ends the
// wait with an error that says so.
func TestWireReaderClosed(t *testing.T) {
	t.Parallel()
	a, _ := socketPair(t)
	r := newWireReader(a, nil)
	r.onPong = func() {}
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 16))
		done <- err
	}()
	require.NoError(t, a.Close())
	assert.True(t, errors.Is(<-done, net.ErrClosed))
}

// FuzzWireReader: any bytes, in any chunks, come out as stripPongs says.
func FuzzWireReader(f *testing.F) {
	f.Add(clientFrame(0x8A, []byte("x"), false), uint8(1))
	f.Add(append(clientFrame(0x81, []byte("a"), true), clientFrame(0x8A, nil, false)...), uint8(3))
	f.Add([]byte{0x8A, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, uint8(2))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		want, wantPongs := stripPongs(stream)
		got, pongs := readThrough(t, stream, []int{int(chunk)})
		if !bytes.Equal(want, got) || pongs != wantPongs {
			t.Fatalf("handed on %x (%d pongs), want %x (%d pongs)", got, pongs, want, wantPongs)
		}
	})
}
