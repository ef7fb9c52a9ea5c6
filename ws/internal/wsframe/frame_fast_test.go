package wsframe

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzFastDecoders: whenever a fast path accepts an input, encoding/json
// accepts it too and decodes the same values.
func FuzzFastDecoders(f *testing.F) {
	for _, s := range []string{
		`{"op":"ACK","corr":"c1","topic":"t","group":"g","id":"i","attempt":2}`,
		`{"op":"PUBLISH","topic":"t","payload":{"a":[1,2.5e3,"x\"y"]},"opts":{"id":"i","key":"k","headers":{"a":"b"},"tags":["x"],"caused_by":["c"],"sid":"s","ts":5}}`,
		`{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"from":"seq","seq":3,"ackTimeoutMs":10,"maxInFlight":2,"maxAttempts":1,"afterId":"a"}}`,
		`{"op":"SUBSCRIBE","topic":"t","group":"g","opts":{"keyOrdered":true,"maxPerKey":2}}`,
		`{"opts":{"keyOrdered":false,"maxPerKey":null}}`, `{"opts":{"keyOrdered":null}}`, `{"opts":{"keyOrdered":1}}`, `{"opts":{"keyOrdered":"true"}}`,
		`{"op":"MODACK","topic":"t","group":"g","id":"i","extend_ms":5,"corr":7}`,
		`{"op":"OK","corr":"c","id":"i","seq":4}`,
		`{"op":"ERR","code":"bad_frame","msg":"m","corr":"c"}`,
		`{"op":"SUBSCRIBE","topic":"t","opts":{"since":0,"slow":"skip"}}`, `{"opts":{"since":null}}`, `{"opts":{"since":1,"since":2}}`, `{"opts":{"since":-3}}`,
		`{"op":"OK","corr":"c","seq":4,"recovered":false}`, `{"recovered":null}`, `{"recovered":true,"recovered":false}`,
		`{"op":"GAP","topic":"t","from":3,"to":9,"reason":"slow"}`, `{"op":"EVENT","topic":"t","event":{"id":"i","seq":1,"ts":2,"topic":"t","partition":0,"payload":1}}`,
		`{"op":"EVENT","topic":"t","group":"g","event":{"id":"i","seq":1,"ts":2,"topic":"t","key":"k","partition":3,"headers":{"a":"b"},"payload":null,"caused_by":["c"],"tags":["x"],"sid":"s"},"ctx":{"attempt":1,"ack_deadline_ms":30000}}`,
		`{"op":"PUBLISH","topic":"t","payload":"AP8=","payload_encoding":"base64","opts":{"content_type":"image/png"}}`,
		`{"op":"EVENT","topic":"t","group":"g","event":{"id":"i","seq":1,"ts":2,"topic":"t","partition":0,"payload":"AP8=","payload_encoding":"base64","content_type":"image/png"},"ctx":{"attempt":1,"ack_deadline_ms":1}}`,
		`{"op":"EVENT","event":{"id":"i","payload":"AP8","payload_encoding":"base64"}}`,
		`{"op":"EVENT","event":{"id":"i","payload":"AP8=","content_type":"image/png"}}`,
		`{"op":"EVENT","event":{"id":"i","payload":{"a":1},"payload_encoding":"base64"}}`,
		`{"op":"EVENT","event":{"id":"i","payload":"","payload_encoding":null,"content_type":"application/json"}}`,
		`{"OP":"ACK"}`, `{"op":null,"opts":null,"extend_ms":null}`, ` {"a":{"b":[true,false,null]}} `,
		`{"seq":-1}`, `{"attempt":1.0}`, `{"id":"\u00e9"}`, `{"topic":"é"}`, "{\"topic\":\"\xff\"}",
		`{"op":"A","op":"B"}`, `{"attempt":00}`, `{"ts":-0}`, `[]`, `{}x`, `{"a":1,}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if fast, ok := decodeFrameFast(data); ok {
			var slow Frame
			if err := json.Unmarshal(data, &slow); err != nil {
				t.Fatalf("fast accepted what encoding/json refuses (%v): %q", err, data)
			}
			if !reflect.DeepEqual(normFrame(fast), normFrame(&slow)) {
				t.Fatalf("frame differs for %q:\nfast %+v\nslow %+v", data, fast, slow)
			}
		}
		if fast, ok := decodeServerFast(data); ok {
			var slow ServerFrame
			if err := json.Unmarshal(data, &slow); err != nil {
				t.Fatalf("fast accepted what encoding/json refuses (%v): %q", err, data)
			}
			if !reflect.DeepEqual(normServer(fast), normServer(&slow)) {
				t.Fatalf("server frame differs for %q:\nfast %+v\nslow %+v", data, fast, slow)
			}
		}
	})
}

// normFrame makes empty and nil raw values comparable.
func normFrame(f *Frame) Frame {
	g := *f
	if len(g.Corr) == 0 {
		g.Corr = nil
	}
	if len(g.Payload) == 0 {
		g.Payload = nil
	}
	return g
}

func normServer(f *ServerFrame) ServerFrame {
	g := *f
	if g.Event != nil {
		r := *g.Event
		if len(r.Payload) == 0 {
			r.Payload = nil
		}
		g.Event = &r
	}
	return g
}
