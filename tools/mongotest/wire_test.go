package main

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newOpMsg builds an OP_MSG with one kind-0 section holding payload. The
// proxy never decodes sections, so payload need not be valid BSON. With
// flagChecksumPresent in flags a correct CRC-32C is appended.
func newOpMsg(requestID, responseTo int32, flags uint32, payload []byte) message {
	var b bytes.Buffer
	hdr := make([]byte, headerLen)
	b.Write(hdr)
	_ = binary.Write(&b, binary.LittleEndian, flags)
	b.WriteByte(0) // section kind 0
	b.Write(payload)
	if flags&flagChecksumPresent != 0 {
		b.Write(make([]byte, checksumLen))
	}

	m := message(b.Bytes())
	binary.LittleEndian.PutUint32(m[0:4], uint32(len(m)))
	binary.LittleEndian.PutUint32(m[4:8], uint32(requestID))
	binary.LittleEndian.PutUint32(m[8:12], uint32(responseTo))
	binary.LittleEndian.PutUint32(m[12:16], opMsg)
	if flags&flagChecksumPresent != 0 {
		body := m[:len(m)-checksumLen]
		binary.LittleEndian.PutUint32(m[len(body):], crc32.Checksum(body, castagnoli))
	}
	return m
}

// responseTo returns the header field naming the request a reply answers.
func (m message) responseTo() int32 {
	return int32(binary.LittleEndian.Uint32(m[8:12]))
}

// requestID returns the header's request ID.
func (m message) requestID() int32 {
	return int32(binary.LittleEndian.Uint32(m[4:8]))
}

func TestReadMessage(t *testing.T) {
	first := newOpMsg(1, 0, 0, []byte("first"))
	second := newOpMsg(2, 0, flagMoreToCome, bytes.Repeat([]byte("x"), 1<<20))
	r := bytes.NewReader(append(append([]byte{}, first...), second...))

	got, err := readMessage(r)
	require.NoError(t, err)
	assert.Equal(t, first, got)
	assert.False(t, got.moreToCome())

	got, err = readMessage(r)
	require.NoError(t, err)
	assert.Equal(t, second, got)
	assert.True(t, got.moreToCome())

	_, err = readMessage(r)
	assert.ErrorIs(t, err, io.EOF, "a clean end between messages is io.EOF")
}

func TestReadMessageRejectsBadInput(t *testing.T) {
	t.Run("too short", func(t *testing.T) {
		_, err := readMessage(bytes.NewReader([]byte{8, 0, 0, 0, 0, 0, 0, 0}))
		assert.ErrorIs(t, err, errMessageLength)
	})

	t.Run("too long", func(t *testing.T) {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], maxMessageLen+1)
		_, err := readMessage(bytes.NewReader(b[:]))
		assert.ErrorIs(t, err, errMessageLength)
	})

	t.Run("truncated", func(t *testing.T) {
		m := newOpMsg(1, 0, 0, []byte("payload"))
		_, err := readMessage(bytes.NewReader(m[:len(m)-3]))
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	})
}

func TestFlagsOnlyForOpMsg(t *testing.T) {
	m := newOpMsg(1, 0, flagMoreToCome, []byte("p"))
	binary.LittleEndian.PutUint32(m[12:16], 2004) // OP_QUERY

	_, ok := m.flags()
	assert.False(t, ok)
	assert.False(t, m.moreToCome())
	assert.False(t, m.clearFlags(flagMoreToCome))
}

func TestClearFlagsKeepsChecksumValid(t *testing.T) {
	m := newOpMsg(7, 0, flagChecksumPresent|flagExhaustAllowed|flagMoreToCome, []byte("payload"))

	require.True(t, m.clearFlags(flagExhaustAllowed|flagMoreToCome))
	f, ok := m.flags()
	require.True(t, ok)
	assert.Equal(t, uint32(flagChecksumPresent), f)

	body := m[:len(m)-checksumLen]
	want := crc32.Checksum(body, castagnoli)
	assert.Equal(t, want, binary.LittleEndian.Uint32(m[len(body):]))

	assert.False(t, m.clearFlags(flagExhaustAllowed), "nothing left to clear")
}
