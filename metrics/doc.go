// Package metrics exposes promlib's bus, gateway and outbox to Prometheus
// (github.com/prometheus/client_golang).
//
// The core packages do not import Prometheus: they take an observer, and
// this package's observers feed Prometheus. A [BusObserver] instruments an
// [event.Bus] through its publish and delivery interceptors and its
// [event.Observer], a [GatewayObserver] is the [ws.Observer] of a
// [ws.Gateway], an [OutboxObserver] the [outbox.Observer] of a drainer;
// each also registers gauges that are read at scrape time
// ([BusObserver.Watch], [GatewayObserver.Watch], [OutboxObserver.Watch]),
// so lag and in-flight counts come from
// their source, not from counts kept by hand. [Handler] serves a registry
// on /metrics.
//
//	reg := prometheus.NewRegistry()
//	bm, _ := metrics.NewBusObserver(metrics.Config{Registerer: reg})
//	bus, _ := event.NewBus(store, bm.Instrument(event.Config{}))
//	_ = bm.Watch(bus)
//	http.Handle("/metrics", metrics.Handler(reg))
//
// # Guarantees
//
//   - Collectors go to [Config.Registerer], never to the global registry; a
//     nil Registerer means no metrics, and the observers do nothing.
//   - Labels are topic and group (plus op, code or status), never event
//     ids, and bounded: past [Config.MaxTopics] topics or
//     [Config.MaxGroups] groups the rest count under [OtherLabel].
//   - Names are the seed documents' in the promlib_ namespace, with _total
//     counters and histograms in seconds; lag is head minus the committed
//     cursor.
//   - The gauges of consumer groups cover every group the store holds,
//     not only those this process subscribes to, so that an alert sees a
//     consumer that died: [Bus.Watch] reads them at most once per
//     [Config.GroupsInterval] (one listing of the topics, one read of the
//     groups of each topic), within [Config.ScrapeTimeout], and serves
//     the values last read in between and after a failed read.
//
// Every series, its labels and how it is computed: docs/METRICS.md of the
// repository.
package metrics
