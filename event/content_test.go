package event_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/event"
)

func TestContentTypes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ct         string
		json, text bool
	}{
		{"", true, false},
		{"application/json", true, false},
		{"Application/JSON; charset=utf-8", true, false},
		{"application/cloudevents+json", true, false},
		{"text/plain", false, true},
		{"text/csv; charset=utf-8", false, true},
		{"application/octet-stream", false, false},
		{"image/png", false, false},
	} {
		assert.Equal(t, tc.json, event.IsJSONContentType(tc.ct), tc.ct)
		assert.Equal(t, tc.text, event.IsTextContentType(tc.ct), tc.ct)
		r := event.Record{ContentType: tc.ct}
		assert.Equal(t, !tc.json, r.IsBinary(), tc.ct)
	}
}

func TestValidatePayloadAs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		p       string
		ct      string
		wantErr error
	}{
		{"json", `{"a":1}`, "", nil},
		{"bad json", `{"a":`, "", event.ErrBadJSON},
		{"bad json of an explicit type", `nope`, "application/json", event.ErrBadJSON},
		{"text", "héllo", "text/plain", nil},
		{"text not utf-8", "h\xffllo", "text/plain", event.ErrBadJSON},
		{"binary not utf-8", "\x00\xff\xfe", "application/octet-stream", nil},
		{"empty binary", "", "application/octet-stream", nil},
		{"empty json", "", "", event.ErrBadJSON},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := event.ValidatePayloadAs([]byte(tc.p), tc.ct)
			if tc.wantErr == nil {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, tc.wantErr)
			assert.ErrorIs(t, err, event.ErrInvalid)
			assert.Contains(t, err.Error(), "payload")
		})
	}
}

func TestContentTypeOption(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ct      string
		wantErr bool
	}{
		{"application/octet-stream", false},
		{"text/plain; charset=utf-8", false},
		{"octet-stream", true},
		{"a/b; =", true},
		{"application/\xff", true},
		{"application/" + string(make([]byte, 300)), true},
	} {
		o := event.PublishOptions{}
		event.WithContentType(tc.ct)(&o)
		err := o.Validate()
		if tc.wantErr {
			require.ErrorIs(t, err, event.ErrInvalid, "%q", tc.ct)
			assert.Contains(t, err.Error(), "content_type")
		} else {
			assert.NoError(t, err, "%q", tc.ct)
		}
	}
}

func TestRecordJSONBinary(t *testing.T) {
	t.Parallel()
	r := event.Record{
		ID: "x", Seq: 3, TS: 9, Topic: "t", Key: "k", Headers: map[string]string{"a": "b"},
		Payload: []byte{0, 0xff, '"', '<'}, ContentType: "application/octet-stream", Tags: []string{"#t"},
	}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"x","seq":3,"ts":9,"topic":"t","key":"k","partition":0,"headers":{"a":"b"},
		"payload":"AP8iPA==","payload_encoding":"base64","content_type":"application/octet-stream","tags":["#t"]}`, string(b))
	// A reader that ignores the marker sees a string payload.
	var ignorant struct{ Payload string }
	require.NoError(t, json.Unmarshal(b, &ignorant))
	assert.Equal(t, "AP8iPA==", ignorant.Payload)
	var back event.Record
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, r, back)
	assert.Equal(t, string(b), string(event.AppendRecordJSON(nil, &r)))

	// An empty binary payload is an empty string, not null.
	b, err = json.Marshal(event.Record{ID: "e", Topic: "t", ContentType: "image/png"})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"payload":"","payload_encoding":"base64"`)

	// JSON records are written as before: no marker, no content type.
	b, err = json.Marshal(event.Record{ID: "j", Topic: "t", Payload: json.RawMessage(`{"a":1}`)})
	require.NoError(t, err)
	assert.Equal(t, `{"id":"j","seq":0,"ts":0,"topic":"t","partition":0,"payload":{"a":1}}`, string(b))
}

func TestRecordJSONHostile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, field string
	}{
		{"bad base64", `{"id":"a","payload":"!!!","payload_encoding":"base64","content_type":"image/png"}`, "base64"},
		{"base64 of a JSON type", `{"id":"a","payload":"AAA=","payload_encoding":"base64","content_type":"application/json"}`, "payload_encoding"},
		{"unknown encoding", `{"id":"a","payload":"AAA=","payload_encoding":"hex"}`, "payload_encoding"},
		{"marker on an object", `{"id":"a","payload":{"x":1},"payload_encoding":"base64"}`, "payload"},
		{"marker on null", `{"id":"a","payload":null,"payload_encoding":"base64"}`, "payload"},
		{"binary type without marker", `{"id":"a","payload":"AAA=","content_type":"image/png"}`, "payload_encoding"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r event.Record
			err := json.Unmarshal([]byte(tc.in), &r)
			require.ErrorIs(t, err, event.ErrInvalid)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
	// A marker without a content type means octet-stream.
	var r event.Record
	require.NoError(t, json.Unmarshal([]byte(`{"id":"a","payload":"AAE=","payload_encoding":"base64"}`), &r))
	assert.Equal(t, []byte{0, 1}, []byte(r.Payload))
	assert.Equal(t, event.ContentTypeBinary, r.ContentType)
}
