package event_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

// Text a record may not hold is refused by Publish and Append, naming the
// field, and nothing is stored.
func TestPublishRefusesBadText(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := event.NewMemoryStore()
	b, err := event.NewBus(store, event.Config{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close(ctx) })

	const bad = "a\xffb"
	deep := strings.Repeat("[", event.MaxJSONDepth+1) + strings.Repeat("]", event.MaxJSONDepth+1)
	tests := []struct {
		name, payload string
		opt           event.PublishOption
		field         string
	}{
		{"payload string", `{"v":"` + bad + `"}`, nil, "payload"},
		{"payload key", `{"` + bad + `":1}`, nil, "payload"},
		{"payload too deep", deep, nil, "payload: nested deeper than 64"},
		{"id", `1`, event.WithID(bad), "id"},
		{"key", `1`, event.WithKey(bad), "key"},
		{"sid", `1`, event.WithSID(bad), "sid"},
		{"header name", `1`, event.WithHeaders(map[string]string{bad: "v"}), "headers"},
		{"header value", `1`, event.WithHeaders(map[string]string{"h": bad}), `headers["h"]`},
		{"tag", `1`, event.WithTags("ok", bad), "tags[1]"},
		{"caused_by", `1`, event.WithCausedBy(bad), "caused_by[0]"},
	}
	for _, tc := range tests {
		var opts []event.PublishOption
		if tc.opt != nil {
			opts = append(opts, tc.opt)
		}
		_, err := b.Publish(ctx, "t", []byte(tc.payload), opts...)
		require.Error(t, err, tc.name)
		assert.ErrorIs(t, err, event.ErrInvalid, tc.name)
		assert.ErrorIs(t, err, event.ErrBadJSON, tc.name)
		assert.ErrorContains(t, err, tc.field, tc.name)
	}

	// Append checks records as NewRecord does: a hand-built record with a
	// bad field is refused, and none of its batch is stored.
	good, err := b.NewRecord("t", []byte(`1`), event.PublishOptions{})
	require.NoError(t, err)
	badRec := good
	badRec.ID, badRec.Key = "other", bad
	_, err = b.Append(ctx, "t", []event.Record{good, badRec})
	assert.ErrorIs(t, err, event.ErrBadJSON)
	assert.ErrorContains(t, err, "record 1: ")
	assert.ErrorContains(t, err, "key")
	badRec.Key, badRec.Payload = "", []byte(deep)
	_, err = b.Append(ctx, "t", []event.Record{good, badRec})
	assert.ErrorIs(t, err, event.ErrBadJSON)

	head, err := store.Head(ctx, "t")
	require.NoError(t, err)
	assert.Zero(t, head, "nothing may be stored")

	// Valid UTF-8 and the deepest allowed payload pass.
	ok := strings.Repeat("[", event.MaxJSONDepth) + strings.Repeat("]", event.MaxJSONDepth)
	_, err = b.Publish(ctx, "t", []byte(ok), event.WithKey("clé"), event.WithHeaders(map[string]string{"ünï": "€"}))
	require.NoError(t, err)
}
