package wsframe

import (
	"encoding/json"

	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/ws/wsproto"
)

// ServerFrame is a decoded server frame (OK, ERR, EVENT or GAP), as a
// client reads it.
type ServerFrame struct {
	Op    string        `json:"op"`
	Corr  string        `json:"corr"`
	ID    string        `json:"id"`
	Seq   uint64        `json:"seq"`
	Code  wsproto.Code  `json:"code"`
	Msg   string        `json:"msg"`
	Topic string        `json:"topic"`
	Group string        `json:"group"`
	Event *event.Record `json:"event"`
	Ctx   struct {
		Attempt       int   `json:"attempt"`
		AckDeadlineMS int64 `json:"ack_deadline_ms"`
	} `json:"ctx"`
	// From, To and Reason are a GAP's.
	From   uint64 `json:"from"`
	To     uint64 `json:"to"`
	Reason string `json:"reason"`
	// Recovered is set in the OK of a live SUBSCRIBE with since.
	Recovered *bool `json:"recovered"`
}

// Err returns the protocol error of an ERR frame, nil for any other.
func (f *ServerFrame) Err() error {
	if f.Op == wsproto.OpErr {
		return &wsproto.Error{Code: f.Code, Msg: f.Msg}
	}
	return nil
}

// DecodeServer parses one server frame. The event's payload may alias
// data.
func DecodeServer(data []byte) (*ServerFrame, error) {
	if f, ok := decodeServerFast(data); ok {
		return f, nil
	}
	f := &ServerFrame{}
	if err := json.Unmarshal(data, f); err != nil {
		return nil, err
	}
	return f, nil
}
