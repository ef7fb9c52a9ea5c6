package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler returns an http.Handler that serves the metrics of g in the
// Prometheus exposition formats, for a /metrics endpoint. A collector that
// fails (a store that cannot be read) is left out of the answer and the
// rest is served. A nil g gives a handler that answers 404.
func Handler(g prometheus.Gatherer) http.Handler {
	if g == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
