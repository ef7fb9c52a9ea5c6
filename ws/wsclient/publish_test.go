package wsclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/coder/websocket"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws"
	"github.com/promethean/promlib/ws/internal/wsframe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPublishAsync: many publishes in flight on one connection; each
// future gets its own outcome, in the order of the calls, a refused one
// included, and the events are stored in call order.
func TestPublishAsync(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *ws.Config) { c.MaxPayload = 100 })
	c := e.client(&Options{Token: testToken, PublishWindow: 16})
	ctx := context.Background()
	const n = 500
	futs := make([]*PublishFuture, n)
	for i := range futs {
		p := []byte(fmt.Sprint(i))
		if i == 250 {
			p = []byte(`"` + strings.Repeat("x", 200) + `"`)
		}
		futs[i] = c.PublishAsync(ctx, "t", p)
	}
	require.NoError(t, c.Flush(ctx))
	last := uint64(0)
	for i, f := range futs {
		select {
		case <-f.Done():
		default:
			t.Fatalf("future %d not done after Flush", i)
		}
		res, err := f.Get(ctx)
		if i == 250 {
			assert.ErrorIs(t, err, wsproto.ErrTooLarge)
			continue
		}
		require.NoError(t, err, "publish %d", i)
		assert.Greater(t, res.Seq, last, "publish %d", i)
		last = res.Seq
	}
	recs, err := e.bus.Store().Read(ctx, "t", 0, 1000)
	require.NoError(t, err)
	require.Len(t, recs, n-1)
	for i, r := range recs {
		want := i
		if i >= 250 {
			want++
		}
		assert.Equal(t, fmt.Sprint(want), string(r.Payload))
	}

	// Bad input is refused before it is sent.
	_, err = c.PublishAsync(ctx, "bad topic", []byte(`1`)).Get(ctx)
	assert.ErrorIs(t, err, event.ErrInvalid)
	_, err = c.PublishAsync(ctx, "t", []byte(`{`)).Get(ctx)
	assert.ErrorIs(t, err, ErrInvalid)
}

// TestPublishAsyncWindow: with PublishWindow publishes unanswered,
// PublishAsync waits; an answer makes room.
func TestPublishAsyncWindow(t *testing.T) {
	t.Parallel()
	answer := make(chan struct{})
	frames := make(chan *wsframe.Frame, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer c.CloseNow()
		for {
			_, data, err := c.Read(r.Context())
			if err != nil {
				return
			}
			f, err := wsframe.Decode(data)
			if err != nil {
				return
			}
			if f.Op == wsproto.OpPublish {
				frames <- f
				select {
				case <-answer: // one answer per token
				case <-r.Context().Done():
					return
				}
			}
			_ = c.Write(r.Context(), websocket.MessageText, wsframe.AppendOK(nil, f.Corr, publishID(f), 1))
		}
	}))
	defer srv.Close()
	c, err := Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"), &Options{Token: "x", PublishWindow: 2, DisableReconnect: true})
	require.NoError(t, err)
	defer c.Close()

	ctx := context.Background()
	f1 := c.PublishAsync(ctx, "t", []byte(`1`))
	f2 := c.PublishAsync(ctx, "t", []byte(`2`))
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = c.PublishAsync(short, "t", []byte(`3`)).Get(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the window is full")

	answer <- struct{}{}
	res, err := f1.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, (<-frames).Opts.ID, res.ID)
	f4 := c.PublishAsync(ctx, "t", []byte(`4`)) // room again
	answer <- struct{}{}
	answer <- struct{}{}
	for _, f := range []*PublishFuture{f2, f4} {
		_, err := f.Get(ctx)
		require.NoError(t, err)
	}
	require.NoError(t, c.Flush(ctx))
}

// TestPublishAsyncAcrossReconnect: publishes cut off by dropped
// connections are sent again after the reconnect, in order and before
// later ones; every one is stored once, in call order.
func TestPublishAsyncAcrossReconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(nil)
	ctx := context.Background()
	const n = 600
	futs := make([]*PublishFuture, n)
	for i := range futs {
		futs[i] = c.PublishAsync(ctx, "t", []byte(fmt.Sprint(i)))
		if i == 200 || i == 400 {
			e.dropConnections()
		}
	}
	require.NoError(t, c.Flush(ctx))
	last := uint64(0)
	for i, f := range futs {
		res, err := f.Get(ctx)
		require.NoError(t, err, "publish %d", i)
		assert.Greater(t, res.Seq, last, "publish %d", i)
		last = res.Seq
	}
	recs, err := e.bus.Store().Read(ctx, "t", 0, 2*n)
	require.NoError(t, err)
	require.Len(t, recs, n, "each stored once")
	for i, r := range recs {
		assert.Equal(t, fmt.Sprint(i), string(r.Payload))
	}
}

// TestPublishAsyncNoReconnect: without reconnects, publishes cut off fail
// with ErrDisconnected; after Close, with ErrClosed.
func TestPublishAsyncNoReconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	c := e.client(&Options{Token: testToken, DisableReconnect: true})
	ctx := context.Background()
	_, err := c.PublishAsync(ctx, "t", []byte(`1`)).Get(ctx)
	require.NoError(t, err)
	e.dropConnections()
	require.Eventually(t, func() bool {
		_, err := c.PublishAsync(ctx, "t", []byte(`1`)).Get(ctx)
		return errors.Is(err, ErrDisconnected)
	}, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, c.Close())
	_, err = c.PublishAsync(ctx, "t", []byte(`1`)).Get(ctx)
	assert.ErrorIs(t, err, ErrClosed)
	require.NoError(t, c.Flush(ctx))
}

func publishID(f *wsframe.Frame) string {
	if f.Opts == nil {
		return ""
	}
	return f.Opts.ID
}
