package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// cmd returns a BSON command body naming db (none when db is "").
func cmd(t *testing.T, db string) []byte {
	t.Helper()
	d := bson.D{{Key: "find", Value: "c"}}
	if db != "" {
		d = append(d, bson.E{Key: "$db", Value: db})
	}
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}

// withDocSequence puts a kind-1 section (a document sequence) before the
// body of an OP_MSG with no checksum.
func withDocSequence(t *testing.T, body []byte) message {
	t.Helper()
	doc, err := bson.Marshal(bson.D{{Key: "x", Value: 1}})
	require.NoError(t, err)
	var seq bytes.Buffer
	seq.WriteString("documents\x00")
	seq.Write(doc)
	var b bytes.Buffer
	b.Write(make([]byte, headerLen+4))
	b.WriteByte(1)
	_ = binary.Write(&b, binary.LittleEndian, uint32(4+seq.Len()))
	b.Write(seq.Bytes())
	b.WriteByte(0)
	b.Write(body)
	m := message(b.Bytes())
	binary.LittleEndian.PutUint32(m[0:4], uint32(len(m)))
	binary.LittleEndian.PutUint32(m[12:16], opMsg)
	return m
}

func TestMessageDatabase(t *testing.T) {
	t.Parallel()
	notMsg := newOpMsg(1, 0, 0, cmd(t, "app"))
	binary.LittleEndian.PutUint32(notMsg[12:16], 2004) // OP_QUERY
	truncated := newOpMsg(1, 0, 0, cmd(t, "app"))
	binary.LittleEndian.PutUint32(truncated[headerLen+5:], 1<<20)
	for _, tc := range []struct {
		name string
		m    message
		want string
	}{
		{"body", newOpMsg(1, 0, 0, cmd(t, "app")), "app"},
		{"checksum", newOpMsg(1, 0, flagChecksumPresent, cmd(t, "app")), "app"},
		{"after a document sequence", withDocSequence(t, cmd(t, "app")), "app"},
		{"no $db", newOpMsg(1, 0, 0, cmd(t, "")), ""},
		{"not BSON", newOpMsg(1, 0, 0, []byte("req")), ""},
		{"not OP_MSG", notMsg, ""},
		{"section longer than the message", truncated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.m.database())
		})
	}
}

// tryLock takes lock(db) if it comes within d, and reports whether it
// did; a lock that comes later is released at once. A check that a lock
// is refused passes a short d (it cannot fail wrongly, only miss a bug on
// a slow machine); a check that it is given passes a long one.
func tryLock(l *cmdLocks, db string, d time.Duration) (unlock func(), ok bool) {
	got := make(chan func(), 1)
	go func() { got <- l.lock(db) }()
	select {
	case u := <-got:
		return u, true
	case <-time.After(d):
		// Still blocked: release it as soon as it gets the lock.
		go func() { (<-got)() }()
		return nil, false
	}
}

func TestCmdLocks(t *testing.T) {
	t.Parallel()
	const refused = 50 * time.Millisecond
	var l cmdLocks
	unlockA := l.lock("a")

	unlockB, ok := tryLock(&l, "b", 10*time.Second)
	require.True(t, ok, "a command on another database waited")
	unlockB()

	_, ok = tryLock(&l, "a", refused)
	assert.False(t, ok, "two commands on one database ran at once")
	_, ok = tryLock(&l, "admin", refused)
	assert.False(t, ok, "a server-wide command ran beside a database's")
	unlockA()

	unlockAdmin := l.lock("")
	_, ok = tryLock(&l, "c", refused)
	assert.False(t, ok, "a database's command ran beside a server-wide one")
	unlockAdmin()
}

// TestProxyParallelAcrossDatabases: commands on two databases reach the
// backend together; commands on one database never do.
func TestProxyParallelAcrossDatabases(t *testing.T) {
	arrived := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	once := map[string]*sync.Once{"a": new(sync.Once), "b": new(sync.Once)}
	backend, backendAddr := startFakeBackend(t, func(req message) []message {
		db := req.database()
		other := map[string]string{"a": "b", "b": "a"}[db]
		if other == "" {
			return echoReply(req)
		}
		// Each command waits for the other database's to arrive: only a
		// proxy that lets them run side by side gets both answered.
		once[db].Do(func() { close(arrived[db]) })
		select {
		case <-arrived[other]:
			return echoReply(req)
		case <-time.After(10 * time.Second):
			return nil
		}
	})
	addr := startProxy(t, backendAddr)

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i, db := range []string{"a", "b"} {
		conn, r := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := conn.Write(newOpMsg(int32(i+1), 0, 0, cmd(t, db))); err != nil {
				errs <- err
				return
			}
			reply, err := readMessage(r)
			if err == nil && reply.responseTo() != int32(i+1) {
				err = errors.New("reply answers the wrong request")
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, int32(2), backend.maxInFlight.Load())
}

func TestProxySerializesOneDatabase(t *testing.T) {
	backend, backendAddr := startFakeBackend(t, echoReply)
	addr := startProxy(t, backendAddr)
	var wg sync.WaitGroup
	for c := range 8 {
		conn, r := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				id := int32(c*20 + i)
				if _, err := conn.Write(newOpMsg(id, 0, 0, cmd(t, "same"))); err != nil {
					return
				}
				if _, err := readMessage(r); err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	assert.Len(t, backend.seen(), 160)
	assert.Equal(t, int32(1), backend.maxInFlight.Load(), "commands on one database ran at once")
}
