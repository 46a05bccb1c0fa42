package observe

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// CompletionReasons are the values of mistralrs_sequences_completed_total's
// reason label (mistral.rs StopReason::metric_label, plus error).
var CompletionReasons = []string{"stop", "length", "canceled", "generated_image", "generated_speech", "tool_calls", "error"}

// RejectionReasons are the values of mistralrs_sequences_rejected_total's reason label.
var RejectionReasons = []string{"over_total_capacity", "cache_exhausted"}

// engineFamilyDefs defines mistral.rs's engine metric families (tokens
// processed, prefix cache, sequences, KV cache blocks, preemptions,
// speculative decoding) and ours, each with its HELP text: the Meaning
// column of the observability document (deliberate difference: mistral.rs
// exports no # HELP lines); the capacity, rejection and pending-admission
// texts are ours, as those families are not in that document.
//
// The families are known by name only. This package must not import the
// engine (docs/architecture.md), so which field of engine.Stats a family
// reads is said where both are known: the server's engineMetricTable
// (internal/server/throughput.go). A new engine metric is a row here and a
// row there, beside its field in engine.Stats.
var engineFamilyDefs = []engineFamily{
	counter("mistralrs_tokens_processed_total", "Tokens processed (prefill plus decode)."),
	counter("mistralrs_prefix_cache_lookups_total", "New sequences that requested a prefix cache lookup."),
	counter("mistralrs_prefix_cache_hits_total", "New sequences that found a cached KV prefix."),
	counter("mistralrs_prefix_cache_evictions_total", "Prefix cache entries evicted to free memory: cache entries in non-paged mode, KV prefix blocks (plus recurrent prefix entries on a full cache reset) with paged attention."),
	counter("mistralrs_encoder_cache_hits_total", "Multimodal encoder cache hits (multimodal models only)."),
	counter("mistralrs_encoder_cache_misses_total", "Multimodal encoder cache misses (multimodal models only)."),
	gauge("mistralrs_sequences_running", "Sequences currently running."),
	gauge("mistralrs_sequences_waiting", "Sequences in the waiting queue."),
	labelled("mistralrs_sequences_completed_total", "reason", CompletionReasons, "Sequences that reached a terminal state. reason is one of stop, length, canceled, generated_image, generated_speech, tool_calls, error."),
	gauge("mistralrs_kv_cache_blocks_used", "KV cache blocks currently in use (paged attention)."),
	gauge("mistralrs_kv_cache_blocks_total", "Total KV cache blocks (paged attention)."),
	// Ours, beside the two block gauges (which stay): the same occupancy as
	// one fraction, the form the Gateway API Inference Extension's endpoint
	// picker reads (--kv-cache-usage-percentage-metric).
	gauge("mistralrs_kv_cache_usage_ratio", "Fraction of the paged KV cache's blocks in use, 0 to 1: mistralrs_kv_cache_blocks_used over mistralrs_kv_cache_blocks_total (0 without a paged pool)."),

	counter("mistralrs_speculative_drafts_total", "Verified sequences: one per sequence per step that used speculative verification."),
	counter("mistralrs_speculative_draft_tokens_proposed_total", "Draft tokens proposed for verification."),
	counter("mistralrs_speculative_draft_tokens_accepted_total", "Draft tokens the target model accepted."),
	// Position 0 exists from startup, so that the family is visible
	// although no proposer is attached yet.
	labelled("mistralrs_speculative_draft_tokens_accepted_per_pos_total", "position", []string{"0"}, "Draft tokens accepted at each proposal position. The drop-off across positions shows where proposals start failing."),
	counter("mistralrs_speculative_staged_drops_total", "Staged proposals discarded without verification (preemption, batch-shape mismatch, or a step that cannot verify)."),
	counter("mistralrs_paged_preemptions_total", "Running sequences preempted and returned to the waiting queue (paged attention)."),

	// The engine reports its capacity when it starts, so this gauge is
	// exported from the first scrape (deliberate fix: in mistral.rs it is
	// set before the recorder exists).
	gauge("mistralrs_sequences_capacity", "Maximum number of sequences the engine runs at once (--max-seqs, or the paged max_num_seqs)."),
	labelled("mistralrs_sequences_rejected_total", "reason", RejectionReasons, "Sequences refused before running because the KV cache cannot hold them. reason is over_total_capacity or cache_exhausted."),
	gauge("mistralrs_requests_pending_admission", "Requests received by the engine and not yet handed to the scheduler."),
}

type familyKind int

const (
	counterKind familyKind = iota
	gaugeKind
	labelledKind // a counter with one label
)

// engineFamily is one row of engineFamilyDefs.
type engineFamily struct {
	name  string
	kind  familyKind
	label string
	known []string // label values that exist, at 0, from startup
	help  string
}

func counter(name, help string) engineFamily {
	return engineFamily{name: name, kind: counterKind, help: help}
}

func gauge(name, help string) engineFamily {
	return engineFamily{name: name, kind: gaugeKind, help: help}
}

func labelled(name, label string, known []string, help string) engineFamily {
	return engineFamily{name: name, kind: labelledKind, label: label, known: known, help: help}
}

// EngineMetrics holds the engine metric families. Every engine of a
// multi-model server reports to it (counters sum, gauges: last writer wins).
// A nil *EngineMetrics, which is what the server has when metrics are
// disabled, hands out recorders that do nothing.
type EngineMetrics struct {
	counters map[string]prometheus.Counter
	gauges   map[string]prometheus.Gauge
	labelled map[string]*labelledCounter
	lora     *loraInfo // mistralrs_lora_requests_info (lorainfo.go)
}

type labelledCounter struct {
	vec   *prometheus.CounterVec
	known map[string]prometheus.Counter // the known values' series, without a lookup by label
}

func newEngineMetrics(reg *prometheus.Registry) *EngineMetrics {
	m := &EngineMetrics{counters: map[string]prometheus.Counter{}, gauges: map[string]prometheus.Gauge{}, labelled: map[string]*labelledCounter{},
		lora: newLoRAInfo(reg)}
	for _, f := range engineFamilyDefs {
		switch f.kind {
		case counterKind:
			c := prometheus.NewCounter(prometheus.CounterOpts{Name: f.name, Help: f.help})
			reg.MustRegister(c)
			m.counters[f.name] = c
		case gaugeKind:
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: f.name, Help: f.help})
			reg.MustRegister(g)
			m.gauges[f.name] = g
		case labelledKind:
			l := &labelledCounter{vec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.name, Help: f.help}, []string{f.label}),
				known: make(map[string]prometheus.Counter, len(f.known))}
			reg.MustRegister(l.vec)
			// Known label values exist at 0 from startup, so rate() and
			// absent() behave before the first event.
			for _, v := range f.known {
				l.known[v] = l.vec.WithLabelValues(v)
			}
			m.labelled[f.name] = l
		}
	}
	return m
}

// mustFamily panics unless engineFamilyDefs has name, of kind: a recorder is
// asked for when the server starts, so a misspelt name or a counter read as
// a gauge fails every test that starts one, metrics enabled or not.
func mustFamily(name string, kind familyKind) {
	for _, f := range engineFamilyDefs {
		if f.name == name {
			if f.kind != kind {
				panic(fmt.Sprintf("observe: engine metric %s is not of the kind asked for", name))
			}
			return
		}
	}
	panic("observe: no engine metric " + name)
}

// Counter returns the recorder of the counter family name: it adds n when
// n > 0. Recorders are safe for concurrent use.
func (m *EngineMetrics) Counter(name string) func(n int) {
	mustFamily(name, counterKind)
	if m == nil {
		return func(int) {}
	}
	c := m.counters[name]
	return func(n int) {
		if n > 0 {
			c.Add(float64(n))
		}
	}
}

// Gauge returns the recorder of the gauge family name: it sets the gauge to n.
func (m *EngineMetrics) Gauge(name string) func(n int) {
	mustFamily(name, gaugeKind)
	if m == nil {
		return func(int) {}
	}
	g := m.gauges[name]
	return func(n int) { g.Set(float64(n)) }
}

// GaugeFloat returns the recorder of the gauge family name for a value
// that is not a count (a ratio): it sets the gauge to v.
func (m *EngineMetrics) GaugeFloat(name string) func(v float64) {
	mustFamily(name, gaugeKind)
	if m == nil {
		return func(float64) {}
	}
	g := m.gauges[name]
	return func(v float64) { g.Set(v) }
}

// Labelled returns the recorder of the labelled counter family name: it adds
// n to the series of label value v when n > 0.
func (m *EngineMetrics) Labelled(name string) func(v string, n int) {
	mustFamily(name, labelledKind)
	if m == nil {
		return func(string, int) {}
	}
	l := m.labelled[name]
	return func(v string, n int) {
		if n <= 0 {
			return
		}
		if c := l.known[v]; c != nil {
			c.Add(float64(n))
			return
		}
		l.vec.WithLabelValues(v).Add(float64(n))
	}
}
