package observe

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Bucket lists: mistral.rs's, for the HTTP request duration and body size
// histograms and the streaming latency ones. TTFT and ITL are vLLM's lists
// (vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds).
var (
	DurationBuckets  = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200}
	BodyBytesBuckets = []float64{128, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 52428800, 104857600}
	TTFTBuckets      = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	ITLBuckets       = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}
)

// Help texts of the HTTP families: the Meaning column of the observability
// document (deliberate difference: mistral.rs exports no # HELP lines). The
// engine families have theirs in engineFamilyDefs (enginemetrics.go).
var metricHelp = map[string]string{
	"http_requests_total":                   "Completed request count.",
	"http_request_duration_seconds":         "End-to-end request latency.",
	"http_requests_in_flight":               "Requests currently running.",
	"http_request_body_bytes":               "Request body bytes when the body size is known.",
	"mistralrs_time_to_first_token_seconds": "Time from request start to the first engine token step. Includes queueing and prefill.",
	"mistralrs_inter_token_latency_seconds": "Gaps between consecutive engine token steps. One sample per step after the first.",
}

// Metrics is the registry of one server process: the HTTP middleware
// families and the engine families. It is not the global default registry,
// so tests and embedders can hold several.
type Metrics struct {
	reg    *prometheus.Registry
	http   *httpMetrics
	engine *EngineMetrics
}

// NewMetrics creates the registry with every family registered; engine
// counters start at 0 and their labelled counters have their known label
// values, so dashboards see the families from the first scrape.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	return &Metrics{reg: reg, http: newHTTPMetrics(reg), engine: newEngineMetrics(reg)}
}

// Registry returns the Prometheus registry.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Engine returns the engine metric families; nil on a nil *Metrics
// (metrics disabled), whose recorders do nothing.
func (m *Metrics) Engine() *EngineMetrics {
	if m == nil {
		return nil
	}
	return m.engine
}

// Handler serves GET /metrics: the Prometheus text format by default, and
// OpenMetrics (which carries the request-id exemplars) when the scraper's
// Accept header asks for it. A nil registry (--disable-metrics) answers 503
// "metrics disabled": a server builds its routes before its HTTP layer.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.HandlerFunc(disabledMetrics)
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// disabledMetrics answers GET /metrics when --disable-metrics is given.
func disabledMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write([]byte("metrics disabled"))
}
