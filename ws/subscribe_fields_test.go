package ws

import (
	"testing"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/stretchr/testify/assert"
)

// TestSubscribeRefusesFieldsOfOtherOps: a raw SUBSCRIBE that carries a
// field of another op (PUBLISH's payload or opts.key, AUTH's token,
// MODACK's extend_ms...) is answered ERR bad_frame naming the field, and
// subscribes nothing; the connection stays up. Empty values and fields no
// op knows still pass, so the frames of the bundled clients and of seed
// clients (which pass their bus options through) keep working.
func TestSubscribeRefusesFieldsOfOtherOps(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	r := e.authed()
	tests := []struct{ field, json string }{
		{"token", `"token":"` + testToken + `"`},
		{"payload", `"payload":{"a":1}`},
		{"payload_encoding", `"payload_encoding":"base64"`},
		{"id", `"id":"x-1"`},
		{"reason", `"reason":"because"`},
		{"extend_ms", `"extend_ms":1000`},
		{"attempt", `"attempt":1`},
		{"opts.id", `"opts":{"from":"earliest","id":"x-1"}`},
		{"opts.key", `"opts":{"key":"k"}`},
		{"opts.headers", `"opts":{"headers":{"a":"b"}}`},
		{"opts.tags", `"opts":{"tags":["x"]}`},
		{"opts.caused_by", `"opts":{"caused_by":["c"]}`},
		{"opts.sid", `"opts":{"sid":"s"}`},
		{"opts.content_type", `"opts":{"content_type":"application/json"}`},
	}
	for _, tt := range tests {
		r.send(`{"op":"SUBSCRIBE","topic":"t","group":"g",` + tt.json + `,"corr":"c"}`)
		f := r.expectErr(wsproto.CodeBadFrame, "c")
		assert.Contains(t, f.str("msg"), tt.field+": not supported in SUBSCRIBE", tt.field)
	}

	// Nothing was subscribed: the group subscribes now, from the frame the
	// TypeScript client sends with every option it has.
	r.send(`{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"from":"seq","seq":1,"ackTimeoutMs":5000,"maxInFlight":10,"maxAttempts":3,"keyOrdered":true,"maxPerKey":2},"corr":"ts"}`)
	r.expectOK("ts")
	e.authed().publish("t", 1, "p")
	ev := r.expectEvent()
	assert.Equal(t, "g", ev.str("group"))
	r.send(ack("ACK", "t", "g", ev.obj("event").str("id"), "a"))
	r.expectOK("a")

	// Empty values of other ops' fields count as absent; unknown fields,
	// such as the bus options a seed client passes through, are ignored.
	r.send(`{"op":"SUBSCRIBE","topic":"t","group":"g2","token":"","id":"","payload":null,"extend_ms":null,"attempt":0,` +
		`"opts":{"from":"earliest","key":"","headers":{},"tags":[],"manualAck":true,"batchSize":10},"v":2,"corr":"s2"}`)
	r.expectOK("s2")
}
