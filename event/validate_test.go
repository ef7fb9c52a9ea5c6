package event_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

func TestValidateNames(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		topic   string
		wantErr string // "" = valid
	}{
		{"simple", "heartbeat", ""},
		{"segments", "heartbeat.received", ""},
		{"allowed chars", "a-b_c:d.E9", ""},
		{"max length", strings.Repeat("a", 255), ""},
		{"empty", "", "must not be empty"},
		{"too long", strings.Repeat("a", 256), "more than 255"},
		{"empty segment", "a..b", "empty segment"},
		{"leading dot", ".a", "empty segment"},
		{"trailing dot", "a.", "ends with '.'"},
		{"star", "a.*", "reserved"},
		{"double star", "**", "reserved"},
		{"space", "a b", "allowed are"},
		{"slash", "a/b", "allowed are"},
		{"unicode", "café", "allowed are"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := event.ValidateTopic(tc.topic)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				assert.NoError(t, event.ValidateGroup(tc.topic))
				return
			}
			assert.ErrorIs(t, err, event.ErrInvalid)
			assert.ErrorContains(t, err, "topic")
			assert.ErrorContains(t, err, tc.wantErr)
			assert.ErrorContains(t, event.ValidateGroup(tc.topic), "group")
		})
	}
}

func FuzzValidateTopic(f *testing.F) {
	for _, s := range []string{"a", "a.b", "a..b", "*", "a.**.b", "", strings.Repeat("x", 300)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := event.ValidateTopic(s)
		if err == nil {
			// Whatever passes is a name the ACL matcher and the stores can
			// take: bounded, non-empty segments, no wildcard.
			require.LessOrEqual(t, len(s), event.MaxNameLen)
			for _, seg := range strings.Split(s, ".") {
				require.NotEmpty(t, seg)
				require.NotContains(t, seg, "*")
			}
		}
	})
}

func newTestBus(t *testing.T) *event.Bus {
	t.Helper()
	b, err := event.NewBus(event.NewMemoryStore(), event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close(context.Background())) })
	return b
}

func nopHandler(context.Context, *event.Delivery) error { return nil }

func TestSubscribeRejectsBadInput(t *testing.T) {
	t.Parallel()
	b := newTestBus(t)
	tests := []struct {
		name   string
		topic  string
		group  string
		h      event.Handler
		opts   []event.SubscribeOption
		fields []string
	}{
		{"empty topic", "", "g", nopHandler, nil, []string{"topic"}},
		{"bad topic", "a b", "g", nopHandler, nil, []string{"topic"}},
		{"empty group", "t", "", nopHandler, nil, []string{"group"}},
		{"nil handler", "t", "g", nil, nil, []string{"handler"}},
		{"negative maxInFlight", "t", "g", nopHandler, []event.SubscribeOption{event.WithMaxInFlight(-1)}, []string{"maxInFlight"}},
		{"negative ack timeout", "t", "g", nopHandler, []event.SubscribeOption{event.WithAckTimeout(-time.Second)}, []string{"ackTimeout"}},
		{"negative attempts", "t", "g", nopHandler, []event.SubscribeOption{event.WithMaxAttempts(-2)}, []string{"maxAttempts"}},
		{"negative backoff", "t", "g", nopHandler, []event.SubscribeOption{event.WithBackoff(-1, 0)}, []string{"backoff"}},
		{"unknown start", "t", "g", nopHandler, []event.SubscribeOption{event.WithOptions(event.SubscribeOptions{Group: event.GroupConfig{Start: event.Position{Kind: 42}}})}, []string{"from"}},
		{"seq zero", "t", "g", nopHandler, []event.SubscribeOption{event.FromSeq(0)}, []string{"seq"}},
		{"empty afterId", "t", "g", nopHandler, []event.SubscribeOption{event.AfterID("")}, []string{"afterId"}},
		{"unknown afterId", "t", "g", nopHandler, []event.SubscribeOption{event.AfterID("nope")}, []string{"afterId"}},
		{"negative ts", "t", "g", nopHandler, []event.SubscribeOption{event.FromTS(-1)}, []string{"ts"}},
		{"bad dlq topic", "t", "g", nopHandler, []event.SubscribeOption{event.WithDeadLetterTopic("x y")}, []string{"deadLetterTopic"}},
		{"dlq topic too long", strings.Repeat("a", 253), "g", nopHandler, nil, []string{"deadLetterTopic"}},
		{"maxPerKey without key order", "t", "g", nopHandler, []event.SubscribeOption{event.WithMaxPerKey(3)}, []string{"maxPerKey", "without keyOrdered"}},
		{"negative maxPerKey", "t", "g", nopHandler, []event.SubscribeOption{event.WithKeyOrdered(), event.WithMaxPerKey(-1)}, []string{"maxPerKey", "negative"}},
		{"several problems", "", "", nil, []event.SubscribeOption{event.WithMaxInFlight(-1)}, []string{"topic", "group", "handler", "maxInFlight"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var sub *event.Subscription
			var err error
			require.NotPanics(t, func() {
				sub, err = b.Subscribe(context.Background(), tc.topic, tc.group, tc.h, tc.opts...)
			})
			require.Error(t, err)
			assert.Nil(t, sub)
			assert.ErrorIs(t, err, event.ErrInvalid)
			for _, f := range tc.fields {
				assert.ErrorContains(t, err, f)
			}
		})
	}
	assert.Empty(t, b.Stats(), "a refused subscribe leaves no group behind")
}

func TestPublishRejectsBadInput(t *testing.T) {
	t.Parallel()
	b := newTestBus(t)
	ctx := context.Background()
	good, err := b.Publish(ctx, "t", []byte(`{"ok":true}`))
	require.NoError(t, err)
	tests := []struct {
		name    string
		topic   string
		payload string
		opts    []event.PublishOption
		field   string
	}{
		{"empty topic", "", `1`, nil, "topic"},
		{"wildcard topic", "a.*", `1`, nil, "topic"},
		{"empty payload", "t", ``, nil, "payload"},
		{"not json", "t", `{"a":`, nil, "payload"},
		{"two values", "t", `1 2`, nil, "payload"},
		{"long id", "t", `1`, []event.PublishOption{event.WithID(strings.Repeat("i", 256))}, "id"},
		{"negative ts", "t", `1`, []event.PublishOption{event.WithTS(-5)}, "ts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Publish(ctx, tc.topic, []byte(tc.payload), tc.opts...)
			assert.ErrorIs(t, err, event.ErrInvalid)
			assert.ErrorContains(t, err, tc.field)
		})
	}
	got, err := b.Store().Read(ctx, "t", 0, 10)
	require.NoError(t, err)
	require.Len(t, got, 1, "bad input stores nothing and loses nothing")
	assert.Equal(t, good.ID, got[0].ID)
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := event.NewBus(nil, event.Config{})
	assert.ErrorIs(t, err, event.ErrInvalid)
	_, err = event.NewBus(event.NewMemoryStore(), event.Config{Partitions: -1, PollInterval: -1, ReadBatch: -3})
	assert.ErrorIs(t, err, event.ErrInvalid)
	for _, f := range []string{"Partitions", "PollInterval", "ReadBatch"} {
		assert.ErrorContains(t, err, f)
	}
}

func TestParseStartPosition(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"latest", "earliest", "seq", "ts", "afterId"} {
		p, err := event.ParseStartPosition(s)
		require.NoError(t, err)
		assert.Equal(t, s, p.String())
		text, err := p.MarshalText()
		require.NoError(t, err)
		var back event.StartPosition
		require.NoError(t, back.UnmarshalText(text))
		assert.Equal(t, p, back)
	}
	p, err := event.ParseStartPosition("")
	require.NoError(t, err)
	assert.Equal(t, event.StartLatest, p)
	_, err = event.ParseStartPosition("yesterday")
	assert.ErrorIs(t, err, event.ErrInvalid)
	assert.ErrorContains(t, err, `"yesterday"`)
}

func TestAckRejectsBadInput(t *testing.T) {
	t.Parallel()
	b := newTestBus(t)
	ctx := context.Background()
	assert.ErrorIs(t, b.Ack(ctx, event.AttemptRef{Topic: "t", Group: "g", ID: "x", Attempt: 1}), event.ErrNotInFlight, "no such group here")
	_, err := b.Subscribe(ctx, "t", "g", nopHandler)
	require.NoError(t, err)
	assert.ErrorIs(t, b.Ack(ctx, event.AttemptRef{Topic: "t", Group: "g", ID: "x", Attempt: 0}), event.ErrInvalid)
	assert.ErrorIs(t, b.Ack(ctx, event.AttemptRef{Topic: "t", Group: "g", ID: "x", Attempt: 1}), event.ErrNotInFlight)
	assert.ErrorIs(t, b.ModAck(ctx, event.AttemptRef{Topic: "t", Group: "g", ID: "x", Attempt: 1}, 0), event.ErrInvalid)
	_, err = b.ResetCursor(ctx, "t", "g", event.AtSeq(3), false)
	assert.ErrorIs(t, err, event.ErrGroupActive)
}
