// Package metrics exposes promlib's bus, gateway and outbox to Prometheus
// (github.com/prometheus/client_golang).
//
// The core packages do not import Prometheus: each has an observer
// interface, and this package implements it. [Bus] is an [event.Observer]
// with a publish and a delivery interceptor ([Bus.Instrument] sets all
// three), [Gateway] a [ws.Observer], [Outbox] an [outbox.Observer]; each also
// registers gauges that are read at scrape time ([Bus.Watch],
// [Gateway.Watch], [Outbox.Watch]), so that lag and in-flight counts are
// read from their source, not kept by hand. [Handler] serves a registry
// on /metrics.
//
//	reg := prometheus.NewRegistry()
//	bm, _ := metrics.NewBus(metrics.Config{Registerer: reg})
//	bus, _ := event.NewBus(store, bm.Instrument(event.Config{}))
//	_ = bm.Watch(bus)
//	http.Handle("/metrics", metrics.Handler(reg))
//
// # Registry
//
// The collectors go to [Config.Registerer], never to the global registry
// behind the caller's back; a nil Registerer means no metrics, and the
// observers then do nothing. Go runtime and process collectors are the
// caller's choice (client_golang's collectors package).
//
// # Labels
//
// Labels are topic and group (plus op, code and status where named
// below), never event ids. Topics and groups come from publishers and
// subscribers, so their number is bounded: past [Config.MaxTopics]
// distinct topics or [Config.MaxGroups] distinct groups, the others are
// counted under [OtherLabel] ("~other", which no topic or group can be
// named). The gateway's op label is one of the protocol's ops,
// HTTP_PUBLISH, "invalid" (undecodable) or "other"; its close code label
// is a code of RFC 6455 or of the gateway, or "other".
//
// # Names
//
// The seed documents' names, in the promlib_ namespace, with _total
// counters and histograms in seconds:
//
//	seed name                                   Prometheus name                              type, labels
//	events_published_total{topic}               promlib_events_published_total               counter, topic
//	events_delivered_total{topic,group}         promlib_events_delivered_total               counter, topic group
//	(new)                                       promlib_events_redelivered_total             counter, topic group
//	events_acked_total{topic,group}             promlib_events_acked_total                   counter, topic group
//	events_nacked_total{topic,group}            promlib_events_nacked_total                  counter, topic group
//	(new)                                       promlib_events_expired_total                 counter, topic group
//	(new)                                       promlib_events_dead_lettered_total           counter, topic group
//	(new)                                       promlib_events_skipped_total                 counter, topic group
//	events_inflight{topic,group}                promlib_events_in_flight                     gauge*, topic group
//	(new)                                       promlib_events_waiting                       gauge*, topic group
//	(new)                                       promlib_events_buffered                      gauge*, topic group
//	delivery_latency_ms_bucket{topic,group}     promlib_delivery_latency_seconds             histogram, topic group
//	delivery_handler_duration_ms_bucket         promlib_handler_duration_seconds             histogram, topic group
//	(new)                                       promlib_handler_errors_total                 counter, topic group
//	subscribe_poll_duration_ms_bucket           none: delivery is pushed, not polled
//	(new)                                       promlib_consumer_lag                         gauge*, topic group
//	(new)                                       promlib_consumer_lag_seconds                 gauge*, topic group
//	(new)                                       promlib_consumer_committed_seq               gauge*, topic group
//	(new)                                       promlib_consumer_subscribers                 gauge*, topic group
//	(new)                                       promlib_consumer_partitions_owned            gauge*, topic group
//	(new)                                       promlib_topic_head_seq                       gauge*, topic
//	ws_inflight{topic,group}                    promlib_ws_events_in_flight                  gauge*
//	(new)                                       promlib_ws_connections                       gauge
//	(new)                                       promlib_ws_connections_opened_total          counter
//	(new)                                       promlib_ws_connections_closed_total          counter, code
//	(new)                                       promlib_ws_connection_duration_seconds       histogram
//	(new)                                       promlib_ws_connections_authenticated         gauge*
//	(new)                                       promlib_ws_subscriptions                     gauge*
//	(new)                                       promlib_ws_frames_received_total             counter, op
//	(new)                                       promlib_ws_frame_errors_total                counter, op code
//	(new)                                       promlib_ws_rate_limited_total                counter, op
//	(new)                                       promlib_ws_frame_duration_seconds            histogram, op
//	(new)                                       promlib_ws_events_sent_total                 counter, topic group
//	(new)                                       promlib_ws_send_queue_frames                 gauge*
//	(new)                                       promlib_ws_send_queue_max_frames             gauge*
//	(new)                                       promlib_outbox_sent_total                    counter, topic
//	(new)                                       promlib_outbox_retries_total                 counter, topic
//	(new)                                       promlib_outbox_failed_total                  counter, topic
//	(new)                                       promlib_outbox_drain_latency_seconds         histogram, topic
//	(new)                                       promlib_outbox_rows                          gauge*, status
//
// A * marks a gauge read at scrape time by a Watch method.
//
// Notes on the seeds' names: the delivery latency needs no t0 header,
// since every record carries its publish ts (a publisher that sets its
// own ts with event.WithTS moves the start). events_inflight and
// ws_inflight are one count in the bus (events_in_flight, deliveries
// leased by this process's Bus, including those the gateway holds for its
// clients) and one in the gateway (ws_events_in_flight, its part).
//
// # Lag
//
// promlib_consumer_lag is head - committed cursor in events and
// promlib_consumer_lag_seconds the age of the oldest record not settled,
// both computed by [event.Bus.Lag] from the store for every group with
// subscribers in the watched Bus, at scrape time, within
// [Config.ScrapeTimeout]. They follow the cursor, which the Bus commits
// every event.Config.CommitInterval. A group whose lag cannot be read
// fails that series of the scrape; [Handler] serves the rest.
package metrics
