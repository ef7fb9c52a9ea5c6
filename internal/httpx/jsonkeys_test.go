package httpx_test

import (
	"encoding"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/internal/httpx"
	"github.com/promethean/promlib/ops"
	"github.com/promethean/promlib/replay"
	"github.com/promethean/promlib/ws"
)

// snake is the one naming style of the keys of every JSON the library
// answers over HTTP (the event record's style). Option names inside
// WebSocket frames are not answered over HTTP and keep their camelCase.
var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// TestHTTPJSONKeysAreSnakeCase walks every type the library encodes as an
// HTTP answer, and every type inside it, and checks each key: a field
// without a json tag would be answered under its Go name.
func TestHTTPJSONKeysAreSnakeCase(t *testing.T) {
	answers := map[string]any{
		"error body (every endpoint)":     httpx.ErrorBody{},
		"ws: GET /healthz of the hub":     ws.Stats{},
		"ws: POST /publish/{topic}":       wsproto.Published{},
		"replay: GET /replay":             replay.ReplayPage{},
		"replay: GET /latest":             replay.LatestPage{},
		"replay: GET /latest?key=":        replay.KeyRecord{},
		"replay: GET /export (each line)": event.Record{},
		"ops: GET /ops/topics":            ops.TopicsResponse{},
		"ops: GET /ops/cursors":           ops.CursorsResponse{},
		"ops: GET /ops/lag":               event.GroupStatus{},
		"ops: GET /ops/inflight":          ops.InflightResponse{},
		"ops: GET /ops/latest":            ops.LatestResponse{},
		"ops: GET /ops/dlq":               event.DeadLetterPage{},
		"ops: POST /ops/dlq/redrive":      event.DeadLetterResult{},
		"ops: GET /ops/groups":            ops.GroupsResponse{},
		"ops: GET /ops/events":            ops.EventsResponse{},
		"ops: GET /ops/connections":       ops.ConnectionsResponse{},
		"ops: POST /ops/cursor":           event.ResetResult{},
		"ops: POST /ops/groups/delete":    ops.DeleteGroupResult{},
	}
	for name, v := range answers {
		seen := map[reflect.Type]bool{}
		for _, bad := range badKeys(reflect.TypeOf(v), reflect.TypeOf(v).String(), seen) {
			t.Errorf("%s: %s", name, bad)
		}
	}
}

var rawMessage = reflect.TypeOf(json.RawMessage{})

func badKeys(t reflect.Type, at string, seen map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == rawMessage || seen[t] {
		return nil
	}
	switch reflect.New(t).Interface().(type) {
	case json.Marshaler, encoding.TextMarshaler: // its own form (a text form is a JSON string)
		return nil
	}
	seen[t] = true
	var bad []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			bad = append(bad, badKeys(f.Type, at, seen)...)
			continue
		}
		if !snake.MatchString(tag) {
			bad = append(bad, at+"."+f.Name+": key "+keyOf(tag, f.Name)+" is not snake_case")
		}
		bad = append(bad, badKeys(f.Type, at+"."+f.Name, seen)...)
	}
	return bad
}

func keyOf(tag, name string) string {
	if tag == "" {
		return `"` + name + `" (no json tag)`
	}
	return `"` + tag + `"`
}
