package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// MongoDB wire protocol constants.
//
// Every message starts with a 16-byte header of four little-endian int32s:
// messageLength (including the header), requestID, responseTo and opCode.
const (
	headerLen = 16

	// maxMessageLen is the largest message accepted; it matches the
	// maxMessageSizeBytes that FerretDB (like MongoDB) advertises in hello.
	maxMessageLen = 48_000_000

	// opMsg is the opcode of OP_MSG, the only opcode whose flags matter here.
	opMsg = 2013

	// OP_MSG flag bits (the uint32 right after the header).
	flagChecksumPresent = 1 << 0
	flagMoreToCome      = 1 << 1
	flagExhaustAllowed  = 1 << 16

	// opMsgMinLen is a header plus flagBits plus at least one section kind byte.
	opMsgMinLen = headerLen + 4 + 1
	// checksumLen is the length of the optional trailing CRC-32C of OP_MSG.
	checksumLen = 4
)

// errMessageLength reports a length header outside the accepted bounds.
var errMessageLength = errors.New("invalid message length")

// castagnoli is the CRC-32C table used for OP_MSG checksums.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// message is one complete wire protocol message, header included.
type message []byte

// readMessage reads one whole message from r, using the 4-byte little-endian
// length at its start.
func readMessage(r io.Reader) (message, error) {
	var lenBuf [4]byte
	if _, err := io.ReadFull(r, lenBuf[:]); err != nil {
		return nil, err // io.EOF here is a clean close between messages
	}

	n := int32(binary.LittleEndian.Uint32(lenBuf[:]))
	if n < headerLen || n > maxMessageLen {
		return nil, fmt.Errorf("%w: %d", errMessageLength, n)
	}

	m := make(message, n)
	copy(m, lenBuf[:])
	if _, err := io.ReadFull(r, m[4:]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the header promised more bytes
		}
		return nil, fmt.Errorf("reading %d-byte message: %w", n, err)
	}
	return m, nil
}

// opCode returns the message's opcode.
func (m message) opCode() int32 {
	return int32(binary.LittleEndian.Uint32(m[12:16]))
}

// flags returns the OP_MSG flag bits; ok is false for other opcodes and for
// messages too short to carry flags.
func (m message) flags() (flags uint32, ok bool) {
	if m.opCode() != opMsg || len(m) < opMsgMinLen {
		return 0, false
	}
	return binary.LittleEndian.Uint32(m[headerLen : headerLen+4]), true
}

// hasFlag reports whether m is an OP_MSG with the given flag bit set.
func (m message) hasFlag(bit uint32) bool {
	f, ok := m.flags()
	return ok && f&bit != 0
}

// moreToCome reports whether the OP_MSG moreToCome bit is set. On a request
// it means the sender expects no reply; on a reply it means another reply
// follows without a further request.
func (m message) moreToCome() bool {
	return m.hasFlag(flagMoreToCome)
}

// clearFlags clears the given OP_MSG flag bits, fixing up the checksum if
// one is present. It reports whether m changed; other opcodes are left alone.
func (m message) clearFlags(bits uint32) bool {
	f, ok := m.flags()
	if !ok || f&bits == 0 {
		return false
	}

	f &^= bits
	binary.LittleEndian.PutUint32(m[headerLen:headerLen+4], f)

	if f&flagChecksumPresent != 0 && len(m) >= opMsgMinLen+checksumLen {
		body := m[:len(m)-checksumLen]
		binary.LittleEndian.PutUint32(m[len(body):], crc32.Checksum(body, castagnoli))
	}
	return true
}

// database returns the "$db" of an OP_MSG request's body section, and ""
// when m is no OP_MSG or its body names no database.
func (m message) database() string {
	f, ok := m.flags()
	if !ok {
		return ""
	}
	end := len(m)
	if f&flagChecksumPresent != 0 {
		end -= checksumLen
	}
	for i := headerLen + 4; i+5 <= end; {
		kind := m[i]
		n := int(binary.LittleEndian.Uint32(m[i+1 : i+5]))
		if n < 5 || i+1+n > end {
			return ""
		}
		if kind == 0 {
			v, err := bson.Raw(m[i+1 : i+1+n]).LookupErr("$db")
			if err != nil {
				return ""
			}
			db, _ := v.StringValueOK()
			return db
		}
		i += 1 + n // a kind 1 section: its size covers itself and its documents
	}
	return ""
}
