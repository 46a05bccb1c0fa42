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

// Help texts: the Meaning column of the observability document (deliberate
// difference: mistral.rs exports no # HELP lines). The last three families
// are not in that document; their text is ours.
var metricHelp = map[string]string{
	"http_requests_total":                   "Completed request count.",
	"http_request_duration_seconds":         "End-to-end request latency.",
	"http_requests_in_flight":               "Requests currently running.",
	"http_request_body_bytes":               "Request body bytes when the body size is known.",
	"mistralrs_time_to_first_token_seconds": "Time from request start to the first engine token step. Includes queueing and prefill.",
	"mistralrs_inter_token_latency_seconds": "Gaps between consecutive engine token steps. One sample per step after the first.",

	"mistralrs_tokens_processed_total":       "Tokens processed (prefill plus decode).",
	"mistralrs_prefix_cache_lookups_total":   "New sequences that requested a prefix cache lookup.",
	"mistralrs_prefix_cache_hits_total":      "New sequences that found a cached KV prefix.",
	"mistralrs_prefix_cache_evictions_total": "Prefix cache entries evicted to free memory: cache entries in non-paged mode, KV prefix blocks (plus recurrent prefix entries on a full cache reset) with paged attention.",
	"mistralrs_encoder_cache_hits_total":     "Multimodal encoder cache hits (multimodal models only).",
	"mistralrs_encoder_cache_misses_total":   "Multimodal encoder cache misses (multimodal models only).",
	"mistralrs_sequences_running":            "Sequences currently running.",
	"mistralrs_sequences_waiting":            "Sequences in the waiting queue.",
	"mistralrs_sequences_completed_total":    "Sequences that reached a terminal state. reason is one of stop, length, canceled, generated_image, generated_speech, tool_calls, error.",
	"mistralrs_kv_cache_blocks_used":         "KV cache blocks currently in use (paged attention).",
	"mistralrs_kv_cache_blocks_total":        "Total KV cache blocks (paged attention).",

	"mistralrs_speculative_drafts_total":                        "Verified sequences: one per sequence per step that used speculative verification.",
	"mistralrs_speculative_draft_tokens_proposed_total":         "Draft tokens proposed for verification.",
	"mistralrs_speculative_draft_tokens_accepted_total":         "Draft tokens the target model accepted.",
	"mistralrs_speculative_draft_tokens_accepted_per_pos_total": "Draft tokens accepted at each proposal position. The drop-off across positions shows where proposals start failing.",
	"mistralrs_speculative_staged_drops_total":                  "Staged proposals discarded without verification (preemption, batch-shape mismatch, or a step that cannot verify).",
	"mistralrs_paged_preemptions_total":                         "Running sequences preempted and returned to the waiting queue (paged attention).",

	"mistralrs_sequences_capacity":         "Maximum number of sequences the engine runs at once (--max-seqs, or the paged max_num_seqs).",
	"mistralrs_sequences_rejected_total":   "Sequences refused before running because the KV cache cannot hold them. reason is over_total_capacity or cache_exhausted.",
	"mistralrs_requests_pending_admission": "Requests received by the engine and not yet handed to the scheduler.",
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

// Engine returns the engine observer.
func (m *Metrics) Engine() *EngineMetrics { return m.engine }

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
