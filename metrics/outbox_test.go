package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/promethean/promlib/clock"
	"github.com/promethean/promlib/metrics"
	"github.com/promethean/promlib/outbox"
)

func TestOutboxMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	om, err := metrics.NewOutboxObserver(metrics.Config{Registerer: reg})
	require.NoError(t, err)
	store := outbox.NewMemoryStore()
	require.NoError(t, om.Watch(store))
	assert.ErrorIs(t, om.Watch(store), metrics.ErrInvalid)

	ctx := context.Background()
	require.NoError(t, store.Add(ctx,
		outbox.Message{Topic: "orders", Payload: []byte(`1`)},
		outbox.Message{Topic: "orders", Payload: []byte(`2`)},
		outbox.Message{Topic: "invoices", Payload: []byte(`3`)},
	))
	_, fams := scrape(t, reg)
	v, _ := value(fams, "promlib_outbox_rows", "status", "pending")
	assert.Equal(t, 3.0, v)

	bus := newBus(t, nil)
	d, err := outbox.NewDrainer(outbox.Config{Store: store, Bus: bus, Observer: om, PollInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	// The drainer marks a row sent before it reports it: wait for both.
	fams = scrapeUntil(t, reg, func(f famMap) bool {
		sent, _ := value(f, "promlib_outbox_rows", "status", "sent")
		orders, _ := value(f, "promlib_outbox_sent_total", "topic", "orders")
		invoices, _ := value(f, "promlib_outbox_sent_total", "topic", "invoices")
		return sent == 3 && orders+invoices == 3
	})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"promlib_outbox_sent_total", []string{"topic", "orders"}, 2},
		{"promlib_outbox_sent_total", []string{"topic", "invoices"}, 1},
		{"promlib_outbox_drain_latency_seconds", []string{"topic", "orders"}, 2},
		{"promlib_outbox_rows", []string{"status", "pending"}, 0},
		{"promlib_outbox_rows", []string{"status", "failed"}, 0},
	} {
		got, ok := value(fams, c.name, c.labels...)
		if assert.True(t, ok, "%s%v missing", c.name, c.labels) {
			assert.Equal(t, c.want, got, "%s%v", c.name, c.labels)
		}
	}
	om.Retried("orders")
	om.Failed("orders")
	text, fams := scrape(t, reg)
	v, _ = value(fams, "promlib_outbox_retries_total", "topic", "orders")
	assert.Equal(t, 1.0, v)
	v, _ = value(fams, "promlib_outbox_failed_total", "topic", "orders")
	assert.Equal(t, 1.0, v)
	lint(t, reg, text)
}

// promlib_outbox_rows is read from the store at scrape time, so sent
// rows the retention deleted leave the gauge.
func TestOutboxRowsFollowRetention(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	om, err := metrics.NewOutboxObserver(metrics.Config{Registerer: reg})
	require.NoError(t, err)
	fk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := outbox.NewMemoryStoreWith(outbox.MemoryStoreConfig{Clock: fk})
	require.NoError(t, om.Watch(store))
	ctx := context.Background()
	require.NoError(t, store.Add(ctx,
		outbox.Message{ID: "a", Topic: "orders", Payload: []byte(`1`)},
		outbox.Message{ID: "b", Topic: "orders", Payload: []byte(`2`)},
	))
	tok, ok, err := store.AcquireLease(ctx, "w", time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, store.MarkSent(ctx, tok, "a"))
	_, fams := scrape(t, reg)
	v, _ := value(fams, "promlib_outbox_rows", "status", "sent")
	assert.Equal(t, 1.0, v)

	fk.Advance(outbox.DefaultRetention + time.Hour)
	n, err := store.DeleteSent(ctx, fk.Now().Add(-outbox.DefaultRetention), 100)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, fams = scrape(t, reg)
	v, _ = value(fams, "promlib_outbox_rows", "status", "sent")
	assert.Equal(t, 0.0, v)
	v, _ = value(fams, "promlib_outbox_rows", "status", "pending")
	assert.Equal(t, 1.0, v)
}
