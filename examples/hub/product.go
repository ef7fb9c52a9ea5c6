package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/promethean/promlib/auth"
	"github.com/promethean/promlib/event"
	"github.com/promethean/promlib/metrics"
	"github.com/promethean/promlib/ops"
	"github.com/promethean/promlib/outbox"
	"github.com/promethean/promlib/replay"
	"github.com/promethean/promlib/ws"
)

// observability holds the hub's metrics: a registry of its own, never the
// global one, with the bus, gateway and outbox collectors.
type observability struct {
	reg    *prometheus.Registry
	bus    *metrics.BusObserver
	gw     *metrics.GatewayObserver
	outbox *metrics.OutboxObserver
}

func newObservability() (*observability, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	cfg := metrics.Config{Registerer: reg}
	bm, err := metrics.NewBusObserver(cfg)
	if err != nil {
		return nil, err
	}
	gm, err := metrics.NewGatewayObserver(cfg)
	if err != nil {
		return nil, err
	}
	om, err := metrics.NewOutboxObserver(cfg)
	if err != nil {
		return nil, err
	}
	return &observability{reg: reg, bus: bm, gw: gm, outbox: om}, nil
}

// verifierFor returns the verifier of the HTTP endpoints, nil in open mode
// (no token asked for, as on the gateway).
func verifierFor(a *hubAuth) auth.Verifier {
	if a.mode == modeOpen {
		return nil
	}
	return a.verifier
}

// opsSettings are the hub's flags for ops.
type opsSettings struct {
	readOnly      bool
	chartWindow   time.Duration
	chartInterval time.Duration
	chartGroups   string
}

// gatewayConns lists a gateway's connections for ops.
type gatewayConns struct{ gw *ws.Gateway }

func (g gatewayConns) Connections() []ops.Connection {
	cs := g.gw.Connections()
	out := make([]ops.Connection, len(cs))
	for i, c := range cs {
		subs := make([]ops.Subscription, len(c.Subs))
		for j, s := range c.Subs {
			subs[j] = ops.Subscription{Kind: s.Kind, Topic: s.Topic, Group: s.Group}
		}
		out[i] = ops.Connection{ID: strconv.FormatUint(c.ID, 10), Principal: c.Principal, RemoteAddr: c.RemoteAddr,
			Since: c.Opened, Subscriptions: c.Subscriptions, Subs: subs, QueueDepth: c.Queued}
	}
	return out
}

// mountProduct adds /metrics, /ops/ and the replay endpoints to mux, and
// starts the sampling of the ops charts (kept by the hub for
// -ops-chart-window, so that a reload of the dashboard shows the history);
// stop ends the sampling.
func mountProduct(mux *http.ServeMux, bus *event.Bus, gw *ws.Gateway, obs *observability, v auth.Verifier, writeTimeout time.Duration, os opsSettings, log *slog.Logger) (stop func(), err error) {
	mux.Handle("GET /metrics", metrics.Handler(obs.reg))
	var groups []string
	for _, g := range strings.Split(os.chartGroups, ",") {
		if g = strings.TrimSpace(g); g != "" {
			groups = append(groups, g)
		}
	}
	oh, err := ops.NewHandler(ops.Config{Bus: bus, Verifier: v, Logger: log, Registerer: obs.reg, ReadOnly: os.readOnly,
		ChartWindow: os.chartWindow, ChartInterval: os.chartInterval, ChartGroups: groups, Connections: gatewayConns{gw}})
	if err != nil {
		return nil, err // "ops: ..." already
	}
	mux.Handle("/ops/", oh)
	rh, err := replay.NewHandler(replay.Config{Store: bus.Store(), Verifier: v, ExportWriteTimeout: writeTimeout, Logger: log})
	if err != nil {
		return nil, err // "replay: ..." already
	}
	mux.Handle("GET /replay", rh.Replay())
	mux.Handle("GET /export", rh.Export())
	mux.Handle("GET /latest", rh.Latest())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = oh.Run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}

// drainable is an outbox store the hub's drainer can run on.
type drainable interface {
	outbox.Store
	metrics.StatsReader
}

// startDrainer drains the outbox of the hub's store (its outbox
// collection on MongoDB, its promlib_outbox table on SQLite and
// PostgreSQL): services add rows in their own transactions, the hub
// publishes them. It returns a function that stops it.
func startDrainer(ctx context.Context, hs *hubStore, bus *event.Bus, obs *observability, log *slog.Logger) (func(), error) {
	store, where, closeOutbox, err := hs.openOutbox(ctx)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	if err := obs.outbox.Watch(store); err != nil {
		closeOutbox()
		return nil, err
	}
	d, err := outbox.NewDrainer(outbox.Config{Store: store, Bus: bus, Logger: log, Observer: obs.outbox})
	if err != nil {
		closeOutbox()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := d.Run(ctx); err != nil {
			log.Error("outbox drainer stopped", "err", err)
		}
	}()
	log.Info("outbox drainer running", "store", hs.name, "outbox", where)
	return func() { cancel(); wg.Wait(); closeOutbox() }, nil
}

var _ ws.Observer = (*metrics.GatewayObserver)(nil)
