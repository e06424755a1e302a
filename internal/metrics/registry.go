// Package metrics is tidemark's Prometheus instrumentation: one registry
// per daemon (never the global default registry, so a process, or a test,
// can hold several daemons), with the Go runtime and process collectors,
// request and store query durations observed as they happen, and a
// collector that reads the streams, the metadata store and the batch
// tables on each scrape. docs/metrics.md lists every metric.
package metrics

import (
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tidemark/tidemark/internal/logkey"
)

// Registry is one daemon's metrics. It is safe for concurrent use.
type Registry struct {
	reg     *prometheus.Registry
	handler http.Handler
	http    *prometheus.HistogramVec
	store   *prometheus.HistogramVec
}

// New builds a registry with the Go runtime, process, HTTP request and
// store query metrics. Errors while serving a scrape go to log.
func New(log *slog.Logger) *Registry {
	r := &Registry{
		reg: prometheus.NewRegistry(),
		http: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tidemark_http_request_duration_seconds",
			Help:    "Time to answer an API request, by route pattern and HTTP status code.",
			Buckets: prometheus.DefBuckets,
		}, []string{"route", "code"}),
		store: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tidemark_store_query_duration_seconds",
			Help:    "Time of a metadata store statement or transaction, by operation.",
			Buckets: []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"operation"}),
	}
	r.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		r.http, r.store,
	)
	r.handler = promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{
		ErrorLog: errorLog{log},
		// A store that cannot be read leaves its metrics out; the others
		// are still served.
		ErrorHandling: promhttp.ContinueOnError,
	})
	return r
}

// Register adds a collector, such as the one NewCollector builds.
func (r *Registry) Register(c prometheus.Collector) error {
	if err := r.reg.Register(c); err != nil {
		return fmt.Errorf("register metrics collector: %w", err)
	}
	return nil
}

// Gatherer is the registry as promhttp and tests read it.
func (r *Registry) Gatherer() prometheus.Gatherer { return r.reg }

// Handler serves the registry's metrics in the Prometheus text format (or
// OpenMetrics, when asked).
func (r *Registry) Handler() http.Handler { return r.handler }

// ObserveHTTP records one request of the route pattern that answered with
// code. route must be a registered pattern, never a raw URL path, to keep
// the series few.
func (r *Registry) ObserveHTTP(route string, code int, took time.Duration) {
	r.http.WithLabelValues(route, strconv.Itoa(code)).Observe(took.Seconds())
}

// ObserveStore records one store statement or transaction; it fits
// store.Observer.
func (r *Registry) ObserveStore(op string, took time.Duration) {
	r.store.WithLabelValues(op).Observe(took.Seconds())
}

// errorLog is promhttp's logger over slog.
type errorLog struct{ log *slog.Logger }

func (l errorLog) Println(v ...any) {
	if l.log != nil {
		l.log.Warn("serve metrics", slog.String(logkey.ErrKey, fmt.Sprint(v...)))
	}
}
