package schema_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/schema"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const orderV1 = `{"type":"object","properties":{"id":{"type":"string"},"qty":{"type":"integer","minimum":1}},"required":["id"]}`

func newBus(t *testing.T) (*schema.Registry, *event.Bus, *event.MemoryStore) {
	t.Helper()
	ctx := context.Background()
	reg, err := schema.NewRegistry(ctx, schema.Config{Store: schema.NewMemoryStore()})
	require.NoError(t, err)
	st := event.NewMemoryStore()
	bus, err := event.NewBus(st, event.Config{PublishInterceptors: []event.PublishInterceptor{reg.Interceptor()}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bus.Close(context.Background()) })
	return reg, bus, st
}

func TestPublishValidates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, bus, st := newBus(t)
	_, err := reg.Register(ctx, "orders", json.RawMessage(orderV1), schema.RuleBackward)
	require.NoError(t, err)

	rec, err := bus.Publish(ctx, "orders", []byte(`{"id":"a","qty":2}`), event.WithHeaders(map[string]string{"h": "1"}))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"h": "1", schema.DefaultHeader: "1"}, rec.Headers)

	_, err = bus.Publish(ctx, "orders", []byte(`{"id":"b","qty":0}`))
	var ve *schema.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.ErrorIs(t, err, schema.ErrPayloadInvalid)
	assert.Equal(t, "/qty", ve.Pointer)
	assert.Contains(t, ve.Reason, "minimum")
	assert.Equal(t, 1, ve.Version)

	_, err = bus.Publish(ctx, "orders", []byte(`{"qty":3}`))
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "", ve.Pointer)
	assert.Contains(t, ve.Reason, "id")

	_, err = bus.Publish(ctx, "orders", []byte{1, 2, 3}, event.WithContentType("application/octet-stream"))
	require.ErrorAs(t, err, &ve)
	assert.Contains(t, ve.Reason, "not JSON")

	// A tombstone passes; a topic without a schema is untouched.
	_, err = bus.Publish(ctx, "orders", []byte(`null`), event.WithKey("a"))
	require.NoError(t, err)
	other, err := bus.Publish(ctx, "other", []byte(`"anything"`))
	require.NoError(t, err)
	assert.Empty(t, other.Headers)

	// Nothing refused was stored.
	recs, err := st.Read(ctx, "orders", 0, 100)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.JSONEq(t, `{"id":"a","qty":2}`, string(recs[0].Payload))
	assert.Equal(t, "null", string(recs[1].Payload))

	// A new version takes effect at once, and its number is in the header.
	_, err = reg.Register(ctx, "orders", json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"},"qty":{"type":"integer","minimum":0}},"required":["id"]}`), "")
	require.NoError(t, err)
	rec, err = bus.Publish(ctx, "orders", []byte(`{"id":"b","qty":0}`))
	require.NoError(t, err)
	assert.Equal(t, "2", rec.Headers[schema.DefaultHeader])
}

func TestPipelinedBatchRefusesOnlyBadRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, bus, st := newBus(t)
	_, err := reg.Register(ctx, "orders", json.RawMessage(orderV1), schema.RuleNone)
	require.NoError(t, err)
	p, err := bus.NewPublisher(event.PublisherConfig{MaxPending: 64})
	require.NoError(t, err)
	payloads := []string{`{"id":"1"}`, `{"id":2}`, `{"id":"3"}`, `[]`, `{"id":"5","qty":1}`}
	results := make([]*event.PublishFuture, len(payloads))
	for i, pl := range payloads {
		results[i] = p.Publish(ctx, "orders", []byte(pl))
	}
	require.NoError(t, p.Flush(ctx))
	var stored []string
	for i, r := range results {
		rec, err := r.Get(ctx)
		if i == 1 || i == 3 {
			var ve *schema.ValidationError
			require.ErrorAs(t, err, &ve, "record %d", i)
			continue
		}
		require.NoError(t, err, "record %d", i)
		stored = append(stored, string(rec.Payload))
	}
	recs, err := st.Read(ctx, "orders", 0, 100)
	require.NoError(t, err)
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Payload))
	}
	assert.Equal(t, stored, got)
	assert.Len(t, got, 3)
}

func TestRegisterRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg, err := schema.NewRegistry(ctx, schema.Config{Store: schema.NewMemoryStore()})
	require.NoError(t, err)
	_, err = reg.Register(ctx, "t", json.RawMessage(orderV1), schema.RuleFull)
	require.NoError(t, err)

	tests := []struct {
		name    string
		topic   string
		doc     string
		rule    schema.Rule
		wantErr error
	}{
		{"bad topic", "a b", `true`, "", schema.ErrInvalid},
		{"bad rule", "t", `true`, "sideways", schema.ErrInvalid},
		{"not JSON", "t", `{`, "", schema.ErrBadSchema},
		{"not a schema", "t", `{"type":"strin"}`, "", schema.ErrBadSchema},
		{"other draft", "t", `{"$schema":"http://json-schema.org/draft-07/schema#"}`, "", schema.ErrBadSchema},
		{"external ref", "u", `{"$ref":"https://example.com/x.json"}`, schema.RuleNone, schema.ErrBadSchema},
		{"array", "t", `[]`, "", schema.ErrBadSchema},
		{"incompatible", "t", `{"type":"object","required":["id","qty"]}`, "", schema.ErrIncompatible},
		{"keyword outside the subset", "t", `{"type":"object","oneOf":[true]}`, "", schema.ErrUnsupportedKeyword},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := reg.Register(ctx, tt.topic, json.RawMessage(tt.doc), tt.rule)
			assert.ErrorIs(t, err, tt.wantErr)
		})
	}
	vs, err := reg.Versions(ctx, "t")
	require.NoError(t, err)
	assert.Len(t, vs, 1, "nothing refused was stored")

	// Under rule none, anything that compiles goes; back to a rule, the
	// next version is checked again.
	v, err := reg.Register(ctx, "t", json.RawMessage(`{"type":"object","oneOf":[true]}`), schema.RuleNone)
	require.NoError(t, err)
	assert.Equal(t, 2, v.Version)
	again, err := reg.Register(ctx, "t", json.RawMessage(`{"type":"object", "oneOf":[true]}`), schema.RuleNone)
	require.NoError(t, err)
	assert.Equal(t, 2, again.Version, "registering the current schema again stores nothing")
	_, err = reg.Register(ctx, "t", json.RawMessage(`true`), schema.RuleBackward)
	var ke *schema.KeywordError
	require.ErrorAs(t, err, &ke)
	assert.Equal(t, "oneOf", ke.Keyword)

	_, err = schema.NewRegistry(ctx, schema.Config{})
	assert.ErrorIs(t, err, schema.ErrInvalid)
	_, err = reg.Current("nope")
	assert.True(t, errors.Is(err, schema.ErrNotFound))
}
