package wsframe

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsproto"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeFrame(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		wantErr error
		check   func(t *testing.T, f *Frame)
	}{
		{name: "auth", in: `{"op":"AUTH","token":"x","corr":"1"}`, check: func(t *testing.T, f *Frame) {
			assert.Equal(t, "x", f.Token)
			assert.Equal(t, `"1"`, string(f.Corr))
		}},
		{name: "auth without token", in: `{"op":"AUTH"}`},
		{name: "publish null payload", in: `{"op":"PUBLISH","topic":"t","payload":null}`, check: func(t *testing.T, f *Frame) {
			assert.Equal(t, "null", string(f.Payload))
		}},
		{name: "subscribe opts", in: `{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"from":"seq","seq":4,"ackTimeoutMs":10,"maxInFlight":3,"maxAttempts":2}}`, check: func(t *testing.T, f *Frame) {
			assert.Equal(t, uint64(4), f.Opts.Seq)
			assert.Equal(t, int64(10), f.Opts.AckTimeoutMS)
		}},
		{name: "subscribe key order", in: `{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"keyOrdered":true,"maxPerKey":2}}`, check: func(t *testing.T, f *Frame) {
			assert.True(t, f.Opts.KeyOrdered)
			assert.Equal(t, 2, f.Opts.MaxPerKey)
		}},
		{name: "maxPerKey without keyOrdered", in: `{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"maxPerKey":2}}`, wantErr: wsproto.ErrBadFrame},
		{name: "maxPerKey negative", in: `{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"keyOrdered":true,"maxPerKey":-1}}`, wantErr: wsproto.ErrBadFrame},
		{name: "keyOrdered a string", in: `{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"keyOrdered":"yes"}}`, wantErr: wsproto.ErrBadFrame},
		// A SUBSCRIBE with a field of another op is refused; empty values
		// count as absent, and fields no op knows are ignored.
		{name: "subscribe empty fields of other ops", in: `{"op":"SUBSCRIBE","topic":"t","group":"g","token":"","id":"","reason":"","payload":null,"payload_encoding":"","extend_ms":null,"attempt":0,"opts":{"id":"","key":"","headers":{},"tags":[],"caused_by":null,"sid":"","content_type":""}}`},
		{name: "subscribe unknown fields", in: `{"op":"SUBSCRIBE","topic":"t","group":"g","x":1,"opts":{"manualAck":true,"batchSize":10}}`},
		{name: "modack", in: `{"op":"MODACK","topic":"t","group":"g","id":"i","extend_ms":5,"attempt":2}`, check: func(t *testing.T, f *Frame) {
			assert.Equal(t, int64(5), *f.ExtendMS)
			assert.Equal(t, 2, f.Attempt)
		}},
		{name: "unknown fields ignored", in: `{"op":"RESUME","topic":"t","group":"g","x":[1]}`},
		{name: "null corr", in: `{"op":"AUTH","corr":null}`},
		{name: "bad json", in: `{`, wantErr: wsproto.ErrBadJSON},
		{name: "empty", in: ``, wantErr: wsproto.ErrBadJSON},
		{name: "number", in: `5`, wantErr: wsproto.ErrBadFrame},
		{name: "unknown op", in: `{"op":"auth"}`, wantErr: wsproto.ErrBadFrame},
		{name: "ack attempt negative", in: `{"op":"ACK","topic":"t","group":"g","id":"i","attempt":-1}`, wantErr: wsproto.ErrBadFrame},
		{name: "ts negative", in: `{"op":"PUBLISH","topic":"t","payload":1,"opts":{"ts":-1}}`, wantErr: wsproto.ErrBadFrame},
		{name: "from ts without ts", in: `{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"from":"ts"}}`, wantErr: wsproto.ErrBadFrame},
		{name: "publish base64", in: `{"op":"PUBLISH","topic":"t","payload":"AP8=","payload_encoding":"base64","opts":{"content_type":"image/png"}}`, check: func(t *testing.T, f *Frame) {
			assert.Equal(t, []byte{0, 0xff}, []byte(f.Payload))
			assert.Equal(t, "image/png", f.Opts.ContentType)
			assert.Empty(t, f.PayloadEncoding)
		}},
		{name: "publish base64 without a type", in: `{"op":"PUBLISH","topic":"t","payload":"","payload_encoding":"base64"}`, check: func(t *testing.T, f *Frame) {
			assert.Empty(t, f.Payload)
			assert.Equal(t, event.ContentTypeBinary, f.Opts.ContentType)
		}},
		{name: "publish bad base64", in: `{"op":"PUBLISH","topic":"t","payload":"AP8","payload_encoding":"base64"}`, wantErr: wsproto.ErrBadFrame},
		{name: "publish base64 not a string", in: `{"op":"PUBLISH","topic":"t","payload":[1],"payload_encoding":"base64"}`, wantErr: wsproto.ErrBadFrame},
		{name: "publish unknown encoding", in: `{"op":"PUBLISH","topic":"t","payload":"00","payload_encoding":"hex"}`, wantErr: wsproto.ErrBadFrame},
		{name: "publish base64 of JSON type", in: `{"op":"PUBLISH","topic":"t","payload":"e30=","payload_encoding":"base64","opts":{"content_type":"application/json"}}`, wantErr: wsproto.ErrBadFrame},
		{name: "publish binary type without marker", in: `{"op":"PUBLISH","topic":"t","payload":"AP8=","opts":{"content_type":"image/png"}}`, wantErr: wsproto.ErrBadFrame},
		{name: "huge extend", in: `{"op":"MODACK","topic":"t","group":"g","id":"i","extend_ms":9223372036854775807}`, wantErr: wsproto.ErrBadFrame},
		// Live subscriptions: SUBSCRIBE without group.
		{name: "live", in: `{"op":"SUBSCRIBE","topic":"t"}`, check: func(t *testing.T, f *Frame) {
			assert.Empty(t, f.Group)
			assert.Nil(t, f.Opts)
		}},
		{name: "live since 0 and skip", in: `{"op":"SUBSCRIBE","topic":"t","opts":{"since":0,"slow":"skip"}}`, check: func(t *testing.T, f *Frame) {
			require.NotNil(t, f.Opts.Since)
			assert.Equal(t, int64(0), *f.Opts.Since)
			assert.Equal(t, wsproto.SlowSkip, f.Opts.Slow)
		}},
		{name: "live since null", in: `{"op":"SUBSCRIBE","topic":"t","opts":{"since":null,"slow":"close"}}`, check: func(t *testing.T, f *Frame) {
			assert.Nil(t, f.Opts.Since)
		}},
		{name: "group since 0 is absent", in: `{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"since":0,"slow":""}}`},
		{name: "live empty group options", in: `{"op":"SUBSCRIBE","topic":"t","opts":{"from":"","ts":0,"seq":0,"maxInFlight":0,"keyOrdered":false,"since":3}}`},
		{name: "live since negative", in: `{"op":"SUBSCRIBE","topic":"t","opts":{"since":-1}}`, wantErr: wsproto.ErrBadFrame},
		{name: "live since a string", in: `{"op":"SUBSCRIBE","topic":"t","opts":{"since":"3"}}`, wantErr: wsproto.ErrBadFrame},
		{name: "live unknown slow", in: `{"op":"SUBSCRIBE","topic":"t","opts":{"slow":"drop"}}`, wantErr: wsproto.ErrBadFrame},
		{name: "live without topic", in: `{"op":"SUBSCRIBE","opts":{"since":1}}`, wantErr: wsproto.ErrBadFrame},
		{name: "unsubscribe live", in: `{"op":"UNSUBSCRIBE","topic":"t"}`},
		{name: "ack without group", in: `{"op":"ACK","topic":"t","id":"i"}`, wantErr: wsproto.ErrBadFrame},
		{name: "pause without group", in: `{"op":"PAUSE","topic":"t"}`, wantErr: wsproto.ErrBadFrame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Decode([]byte(tt.in))
			require.NotNil(t, f)
			if tt.wantErr != nil {
				require.Error(t, err)
				assert.True(t, errors.Is(err, tt.wantErr), "got %v", err)
				return
			}
			require.NoError(t, err)
			if tt.check != nil {
				tt.check(t, f)
			}
		})
	}
}

// TestDecodeSubscribeRefusesOtherOpsFields: a SUBSCRIBE carrying a field
// of another op is answered bad_frame naming the field.
func TestDecodeSubscribeRefusesOtherOpsFields(t *testing.T) {
	t.Parallel()
	for field, in := range map[string]string{
		"token":             `"token":"x"`,
		"payload":           `"payload":{"a":1}`,
		"payload_encoding":  `"payload_encoding":"base64"`,
		"id":                `"id":"i"`,
		"reason":            `"reason":"r"`,
		"extend_ms":         `"extend_ms":5`,
		"attempt":           `"attempt":2`,
		"opts.id":           `"opts":{"id":"i"}`,
		"opts.key":          `"opts":{"key":"k","from":"earliest"}`,
		"opts.headers":      `"opts":{"headers":{"a":"b"}}`,
		"opts.tags":         `"opts":{"tags":["x"]}`,
		"opts.caused_by":    `"opts":{"caused_by":["c"]}`,
		"opts.sid":          `"opts":{"sid":"s"}`,
		"opts.content_type": `"opts":{"content_type":"image/png"}`,
	} {
		for _, frame := range []string{
			`{"op":"SUBSCRIBE","topic":"t","group":"g",` + in + `,"corr":"c"}`,
			`{"op":"SUBSCRIBE","topic":"t","group":"g","corr":"c",` + in + `}`,
		} {
			f, err := Decode([]byte(frame))
			var pe *wsproto.Error
			require.True(t, errors.As(err, &pe), "%s: %v", frame, err)
			assert.Equal(t, wsproto.CodeBadFrame, pe.Code, frame)
			assert.True(t, strings.HasPrefix(pe.Msg, field+": not supported in SUBSCRIBE"), "%s: %s", frame, pe.Msg)
			assert.Equal(t, `"c"`, string(f.Corr), "the ERR answers the frame")
		}
	}
}

// TestDecodeLiveRefusesByName: a live SUBSCRIBE refuses each option of a
// consumer group by name, a SUBSCRIBE with a group refuses since and slow,
// and the ops that only a group has refuse a frame without one naming
// group.
func TestDecodeLiveRefusesByName(t *testing.T) {
	t.Parallel()
	tests := []struct{ frame, prefix string }{
		{`{"op":"SUBSCRIBE","topic":"t","opts":{"from":"earliest"}}`, "opts.from: not supported in a live SUBSCRIBE"},
		{`{"op":"SUBSCRIBE","topic":"t","opts":{"ts":5}}`, "opts.ts: not supported in a live SUBSCRIBE"},
		{`{"op":"SUBSCRIBE","topic":"t","opts":{"seq":5}}`, "opts.seq: not supported in a live SUBSCRIBE"},
		{`{"op":"SUBSCRIBE","topic":"t","opts":{"afterId":"x"}}`, "opts.afterId: not supported in a live SUBSCRIBE"},
		{`{"op":"SUBSCRIBE","topic":"t","opts":{"ackTimeoutMs":5}}`, "opts.ackTimeoutMs: not supported in a live SUBSCRIBE"},
		{`{"op":"SUBSCRIBE","topic":"t","opts":{"maxInFlight":5}}`, "opts.maxInFlight: not supported in a live SUBSCRIBE"},
		{`{"op":"SUBSCRIBE","topic":"t","opts":{"maxAttempts":5}}`, "opts.maxAttempts: not supported in a live SUBSCRIBE"},
		{`{"op":"SUBSCRIBE","topic":"t","opts":{"keyOrdered":true}}`, "opts.keyOrdered: not supported in a live SUBSCRIBE"},
		{`{"op":"SUBSCRIBE","topic":"t","opts":{"maxPerKey":2}}`, "opts.maxPerKey: not supported in a live SUBSCRIBE"},
		{`{"op":"SUBSCRIBE","topic":"t","opts":{"key":"k"}}`, "opts.key: not supported in SUBSCRIBE"},
		{`{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"since":3}}`, "opts.since: not supported in a SUBSCRIBE with a group"},
		{`{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"slow":"skip"}}`, "opts.slow: not supported in a SUBSCRIBE with a group"},
		{`{"op":"SUBSCRIBE","topic":"t","opts":{"since":-2}}`, "opts.since: -2 is negative"},
		{`{"op":"SUBSCRIBE","topic":"t","opts":{"slow":"wait"}}`, `opts.slow: unknown policy "wait"`},
		{`{"op":"ACK","topic":"t","id":"i"}`, "group: missing or empty (ACK settles an event of a consumer group"},
		{`{"op":"NACK","topic":"t","id":"i"}`, "group: missing or empty (NACK"},
		{`{"op":"MODACK","topic":"t","id":"i","extend_ms":5}`, "group: missing or empty (MODACK"},
		{`{"op":"PAUSE","topic":"t"}`, "group: missing or empty (PAUSE applies to a subscription of a consumer group"},
		{`{"op":"RESUME","topic":"t"}`, "group: missing or empty (RESUME"},
	}
	for _, tt := range tests {
		_, err := Decode([]byte(tt.frame))
		var pe *wsproto.Error
		require.True(t, errors.As(err, &pe), "%s: %v", tt.frame, err)
		assert.Equal(t, wsproto.CodeBadFrame, pe.Code, tt.frame)
		assert.True(t, strings.HasPrefix(pe.Msg, tt.prefix), "%s: %s", tt.frame, pe.Msg)
	}
}

// FuzzDecodeFrame: any input gives a frame and either no error or a
// protocol error of code bad_json or bad_frame, never a panic; an accepted
// frame has a known op and the fields that op needs; an echoed corr is
// always valid JSON.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"op":"AUTH","token":"x","corr":"1"}`,
		`{"op":"PUBLISH","topic":"t","payload":{"a":[1,2]},"opts":{"id":"i","headers":{"a":"b"},"tags":["x"],"ts":5}}`,
		`{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"from":"afterId","afterId":"x","maxInFlight":2}}`,
		`{"op":"ACK","topic":"t","group":"g","id":"i","corr":12}`,
		`{"op":"MODACK","topic":"t","group":"g","id":"i","extend_ms":5}`,
		`{"op":"NACK","topic":"t","group":"g","id":"i","reason":"r"}`,
		`[]`, `{"op":null}`, `{"corr":{"a":1}}`, "\xff", `{"op":"PAUSE","topic":"\u0000"}`,
		`{"op":"SUBSCRIBE","topic":"t","opts":{"since":4,"slow":"skip"}}`, `{"op":"UNSUBSCRIBE","topic":"t"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fr, err := Decode(data)
		if fr == nil {
			t.Fatal("nil frame")
		}
		if len(fr.Corr) > 0 && !json.Valid(fr.Corr) {
			t.Fatalf("corr %q is not JSON", fr.Corr)
		}
		if err != nil {
			var pe *wsproto.Error
			if !errors.As(err, &pe) || (pe.Code != wsproto.CodeBadJSON && pe.Code != wsproto.CodeBadFrame) || pe.Msg == "" {
				t.Fatalf("unexpected error %#v", err)
			}
			out := AppendErr(nil, fr.Corr, pe.Code, pe.Msg, "", "")
			if !json.Valid(out) {
				t.Fatalf("ERR frame is not JSON: %s", out)
			}
			return
		}
		switch fr.Op {
		case wsproto.OpAuth:
		case wsproto.OpPublish:
			if fr.Topic == "" || fr.Payload == nil {
				t.Fatal("accepted PUBLISH without topic or payload")
			}
		case wsproto.OpSubscribe, wsproto.OpUnsubscribe:
			if fr.Topic == "" {
				t.Fatal("accepted frame without topic")
			}
			if fr.Op == wsproto.OpSubscribe && fr.checkNotSubscribe() != nil {
				t.Fatal("accepted SUBSCRIBE with a field of another op")
			}
			if o := fr.Opts; fr.Op == wsproto.OpSubscribe && o != nil {
				if fr.Group == "" && (o.From != "" || o.MaxInFlight != 0 || o.KeyOrdered || (o.Since != nil && *o.Since < 0)) {
					t.Fatal("accepted a live SUBSCRIBE with an option of a group")
				}
				if fr.Group != "" && ((o.Since != nil && *o.Since != 0) || o.Slow != "") {
					t.Fatal("accepted a SUBSCRIBE with a group and an option of a live subscription")
				}
			}
		case wsproto.OpPause, wsproto.OpResume:
			if fr.Topic == "" || fr.Group == "" {
				t.Fatal("accepted frame without topic or group")
			}
		case wsproto.OpAck, wsproto.OpNack, wsproto.OpModAck:
			if fr.Topic == "" || fr.Group == "" || fr.ID == "" {
				t.Fatal("accepted ack without topic, group or id")
			}
			if fr.Op == wsproto.OpModAck && (fr.ExtendMS == nil || *fr.ExtendMS <= 0) {
				t.Fatal("accepted MODACK without a positive extend_ms")
			}
		default:
			t.Fatalf("accepted unknown op %q", fr.Op)
		}
	})
}

// TestEncodeMatchesEncodingJSON: the hand-written server frames decode to
// what encoding/json makes of the same values.
func TestEncodeMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	recs := []event.Record{
		{ID: "a", Seq: 1, TS: 2, Topic: "t", Payload: json.RawMessage(`{"x":1}`)},
		{ID: "<&>\"\\\n\t\u2028", Seq: 1 << 60, TS: -1, Topic: "t.u", Key: "k\x01\x7f", Partition: 7,
			Headers:  map[string]string{"b": "2", "a": "\xff", "é": "ü"},
			Payload:  json.RawMessage(`[1,"two",null]`),
			CausedBy: []string{"c1", ""}, Tags: []string{"x"}, SID: "s"},
		{ID: "b", Seq: 2, TS: 3, Topic: "t", Payload: []byte{0, 0xff, '<'}, ContentType: "application/octet-stream; x=\"<\"", Tags: []string{"y"}},
		{ID: "e", Seq: 2, TS: 3, Topic: "t", ContentType: "image/png"},
		{ID: "j", Seq: 2, TS: 3, Topic: "t", Payload: json.RawMessage(`1`), ContentType: "application/json"},
	}
	for _, r := range recs {
		got := AppendEvent(nil, "t", "g", &r, 3, 1500)
		want, err := json.Marshal(map[string]any{
			"op": "EVENT", "topic": "t", "group": "g", "event": r,
			"ctx": map[string]any{"attempt": 3, "ack_deadline_ms": 1500},
		})
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(got))
		// Byte for byte, the record is what encoding/json writes.
		wantRec, err := json.Marshal(r)
		require.NoError(t, err)
		assert.Equal(t, string(wantRec), string(event.AppendRecordJSON(nil, &r)))
	}
	assert.JSONEq(t, `{"op":"OK","corr":"c","id":"i","seq":4}`, string(AppendOK(nil, json.RawMessage(`"c"`), "i", 4)))
	assert.JSONEq(t, `{"op":"OK"}`, string(AppendOK(nil, nil, "", 0)))
	assert.JSONEq(t, `{"op":"ERR","code":"bad_frame","msg":"m\"","corr":7}`, string(AppendErr(nil, json.RawMessage(`7`), wsproto.CodeBadFrame, `m"`, "", "")))
	assert.JSONEq(t, `{"op":"ERR","code":"forbidden","msg":"m","topic":"a.b","group":"g"}`, string(AppendErr(nil, nil, wsproto.CodeForbidden, "m", "a.b", "g")))
	assert.JSONEq(t, `{"op":"ERR","code":"forbidden","msg":"m","topic":"a.b"}`, string(AppendErr(nil, nil, wsproto.CodeForbidden, "m", "a.b", "")))
	yes, no := true, false
	assert.JSONEq(t, `{"op":"OK","corr":"c","seq":41}`, string(AppendLiveOK(nil, json.RawMessage(`"c"`), 41, nil)))
	assert.JSONEq(t, `{"op":"OK","seq":0,"recovered":true}`, string(AppendLiveOK(nil, nil, 0, &yes)))
	assert.JSONEq(t, `{"op":"OK","corr":1,"seq":7,"recovered":false}`, string(AppendLiveOK(nil, json.RawMessage(`1`), 7, &no)))
	assert.JSONEq(t, `{"op":"GAP","topic":"a.b","from":43,"to":97,"reason":"slow"}`, string(AppendGap(nil, "a.b", 43, 97, wsproto.GapSlow)))
	for _, r := range recs {
		got := AppendLiveEvent(nil, "t", &r)
		want, err := json.Marshal(map[string]any{"op": "EVENT", "topic": "t", "event": r})
		require.NoError(t, err)
		assert.JSONEq(t, string(want), string(got))
		// A client decodes it, as it decodes every server frame.
		sf, err := DecodeServer(got)
		require.NoError(t, err)
		assert.Equal(t, r.ID, sf.Event.ID)
		assert.Empty(t, sf.Group)
	}
	sf, err := DecodeServer(AppendGap(nil, "t", 3, 9, wsproto.GapDeleted))
	require.NoError(t, err)
	assert.Equal(t, ServerFrame{Op: wsproto.OpGap, Topic: "t", From: 3, To: 9, Reason: wsproto.GapDeleted}, *sf)
	sf, err = DecodeServer(AppendLiveOK(nil, json.RawMessage(`"c"`), 7, &no))
	require.NoError(t, err)
	require.NotNil(t, sf.Recovered)
	assert.False(t, *sf.Recovered)
	assert.Equal(t, uint64(7), sf.Seq)
	assert.Equal(t, int64(1), DeadlineMS(time.Now(), time.Now().Add(time.Hour)))
}

// TestAppendFrameMatchesEncodingJSON: the client's hand-written frames are
// what encoding/json makes of Frame, byte for byte.
func TestAppendFrameMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	ext := int64(1500)
	frames := []*Frame{
		{Op: wsproto.OpAck, Corr: json.RawMessage(`"c1"`), Topic: "t", Group: "g", ID: "i", Attempt: 2},
		{Op: wsproto.OpAuth, Token: "tok\"<"},
		{Op: wsproto.OpModAck, Topic: "t", Group: "g", ID: "i", ExtendMS: &ext},
		{Op: wsproto.OpNack, Topic: "t", Group: "g", ID: "i", Reason: "bad\nthing"},
		{Op: wsproto.OpPublish, Topic: "t", Payload: json.RawMessage(`{"a":[1,2]}`), Opts: &FrameOpts{}},
		{Op: wsproto.OpPublish, Topic: "t", Payload: json.RawMessage(`null`), Opts: &FrameOpts{
			ID: "i", Key: "k", Headers: map[string]string{"b": "1", "a": "2"}, Tags: []string{"x", "y"},
			CausedBy: []string{"c"}, SID: "s", TS: 99,
		}},
		{Op: wsproto.OpPublish, Topic: "t", Payload: AppendBase64String(nil, []byte{0, 1, 0xff}), PayloadEncoding: "base64", Opts: &FrameOpts{ContentType: "image/png", TS: 1}},
		{Op: wsproto.OpSubscribe, Topic: "t", Group: "g", Opts: &FrameOpts{From: "afterId", AfterID: "x", Seq: 3, AckTimeoutMS: 100, MaxInFlight: 5, MaxAttempts: 2}},
		{Op: wsproto.OpSubscribe, Topic: "t", Group: "g", Opts: &FrameOpts{MaxAttempts: 2, KeyOrdered: true, MaxPerKey: 3}},
		{Op: wsproto.OpSubscribe, Topic: "t", Group: "g", Opts: &FrameOpts{KeyOrdered: true}},
		{Op: wsproto.OpSubscribe, Topic: "t", Opts: &FrameOpts{Since: new(int64(0)), Slow: wsproto.SlowSkip}},
		{Op: wsproto.OpSubscribe, Topic: "t", Opts: &FrameOpts{Since: new(int64(41))}},
		{Op: wsproto.OpUnsubscribe, Topic: "t"},
	}
	for _, f := range frames {
		want, err := json.Marshal(f)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(AppendFrame(nil, f)))
	}
}
