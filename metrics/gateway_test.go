package metrics_test

import (
	"testing"
	"time"

	"github.com/promethean/promlib/ws/wsproto"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/metrics"
	"github.com/promethean/promlib/ws"
)

func TestGatewayMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	gm, err := metrics.NewGatewayObserver(metrics.Config{Registerer: reg, MaxTopics: 1})
	require.NoError(t, err)
	require.NoError(t, gm.Watch(func() ws.Stats {
		return ws.Stats{Connections: 2, Authenticated: 1, Subscriptions: 3, Queued: 7, MaxQueued: 5, Leases: 4}
	}))
	assert.ErrorIs(t, gm.Watch(nil), metrics.ErrInvalid)

	var o ws.Observer = gm
	o.Connected()
	o.Connected()
	o.Connected()
	o.Handled(wsproto.OpAuth, "", time.Millisecond)
	o.Handled(wsproto.OpPublish, "", time.Millisecond)
	o.Handled(wsproto.OpPublish, wsproto.CodeRateLimited, time.Microsecond)
	o.Handled(wsproto.OpSubscribe, wsproto.CodeForbidden, time.Microsecond)
	o.Handled("", wsproto.CodeBadJSON, time.Microsecond)
	o.Handled("FROB", wsproto.CodeBadFrame, time.Microsecond)
	o.Handled("HTTP_PUBLISH", "", time.Millisecond)
	o.Handled(wsproto.OpAck, wsproto.Code("Not A Code"), time.Microsecond)
	o.Sent("orders", "billing")
	o.Sent("orders", "billing")
	o.Sent("payments", "billing")
	o.Disconnected(1000, time.Minute)
	o.Disconnected(3999, time.Second)

	text, fams := scrape(t, reg)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"promlib_ws_connections_opened_total", nil, 3},
		{"promlib_ws_connections", nil, 1},
		{"promlib_ws_connections_closed_total", []string{"code", "1000"}, 1},
		{"promlib_ws_connections_closed_total", []string{"code", "other"}, 1},
		{"promlib_ws_connection_duration_seconds", nil, 2},
		{"promlib_ws_frames_received_total", []string{"op", "PUBLISH"}, 2},
		{"promlib_ws_frames_received_total", []string{"op", "AUTH"}, 1},
		{"promlib_ws_frames_received_total", []string{"op", "HTTP_PUBLISH"}, 1},
		{"promlib_ws_frames_received_total", []string{"op", "invalid"}, 1},
		{"promlib_ws_frames_received_total", []string{"op", "other"}, 1},
		{"promlib_ws_frames_received_total", []string{"op", "NACK"}, 0},
		{"promlib_ws_frame_errors_total", []string{"op", "PUBLISH", "code", "rate_limited"}, 1},
		{"promlib_ws_frame_errors_total", []string{"op", "SUBSCRIBE", "code", "forbidden"}, 1},
		{"promlib_ws_frame_errors_total", []string{"op", "invalid", "code", "bad_json"}, 1},
		{"promlib_ws_frame_errors_total", []string{"op", "other", "code", "bad_frame"}, 1},
		{"promlib_ws_frame_errors_total", []string{"op", "ACK", "code", "other"}, 1},
		{"promlib_ws_rate_limited_total", []string{"op", "PUBLISH"}, 1},
		{"promlib_ws_frame_duration_seconds", []string{"op", "PUBLISH"}, 2},
		{"promlib_ws_events_sent_total", []string{"topic", "orders", "group", "billing"}, 2},
		{"promlib_ws_events_sent_total", []string{"topic", metrics.OtherLabel, "group", "billing"}, 1},
		{"promlib_ws_connections_authenticated", nil, 1},
		{"promlib_ws_subscriptions", nil, 3},
		{"promlib_ws_send_queue_frames", nil, 7},
		{"promlib_ws_send_queue_max_frames", nil, 5},
		{"promlib_ws_events_in_flight", nil, 4},
	} {
		got, ok := value(fams, c.name, c.labels...)
		if assert.True(t, ok, "%s%v missing", c.name, c.labels) {
			assert.Equal(t, c.want, got, "%s%v", c.name, c.labels)
		}
	}
	lint(t, reg, text)
}
