package observe

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// CompletionReasons are the values of mistralrs_sequences_completed_total's
// reason label (mistral.rs StopReason::metric_label, plus error).
var CompletionReasons = []string{"stop", "length", "canceled", "generated_image", "generated_speech", "tool_calls", "error"}

// RejectionReasons are the values of mistralrs_sequences_rejected_total's reason label.
var RejectionReasons = []string{"over_total_capacity", "cache_exhausted"}

// EngineMetrics holds mistral.rs's engine metric families (tokens processed,
// prefix cache, sequences, KV cache blocks, preemptions). It has the method set
// of engine.Observer, so the server hands it to the engine; every engine of
// a multi-model server shares it (counters sum, gauges: last writer wins).
// All methods are safe for concurrent use and do nothing on a nil receiver,
// which is what the server passes when metrics are disabled.
type EngineMetrics struct {
	tokensProcessed   prometheus.Counter
	prefixLookups     prometheus.Counter
	prefixHits        prometheus.Counter
	prefixEvictions   prometheus.Counter
	encoderHits       prometheus.Counter
	encoderMisses     prometheus.Counter
	running           prometheus.Gauge
	waiting           prometheus.Gauge
	capacity          prometheus.Gauge
	completed         *prometheus.CounterVec
	completedByReason map[string]prometheus.Counter
	rejected          *prometheus.CounterVec
	rejectedByReason  map[string]prometheus.Counter
	kvUsed            prometheus.Gauge
	kvTotal           prometheus.Gauge
	pendingAdmission  prometheus.Gauge
	preemptions       prometheus.Counter

	specDrafts      prometheus.Counter
	specProposed    prometheus.Counter
	specAccepted    prometheus.Counter
	specAcceptedPos *prometheus.CounterVec
	specStagedDrops prometheus.Counter
}

func newEngineMetrics(reg *prometheus.Registry) *EngineMetrics {
	counter := func(name string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: metricHelp[name]})
		reg.MustRegister(c)
		return c
	}
	gauge := func(name string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: metricHelp[name]})
		reg.MustRegister(g)
		return g
	}
	counterVec := func(name, label string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: metricHelp[name]}, []string{label})
		reg.MustRegister(c)
		return c
	}
	m := &EngineMetrics{
		tokensProcessed:  counter("mistralrs_tokens_processed_total"),
		prefixLookups:    counter("mistralrs_prefix_cache_lookups_total"),
		prefixHits:       counter("mistralrs_prefix_cache_hits_total"),
		prefixEvictions:  counter("mistralrs_prefix_cache_evictions_total"),
		encoderHits:      counter("mistralrs_encoder_cache_hits_total"),
		encoderMisses:    counter("mistralrs_encoder_cache_misses_total"),
		running:          gauge("mistralrs_sequences_running"),
		waiting:          gauge("mistralrs_sequences_waiting"),
		capacity:         gauge("mistralrs_sequences_capacity"),
		completed:        counterVec("mistralrs_sequences_completed_total", "reason"),
		rejected:         counterVec("mistralrs_sequences_rejected_total", "reason"),
		kvUsed:           gauge("mistralrs_kv_cache_blocks_used"),
		kvTotal:          gauge("mistralrs_kv_cache_blocks_total"),
		pendingAdmission: gauge("mistralrs_requests_pending_admission"),
		preemptions:      counter("mistralrs_paged_preemptions_total"),

		specDrafts:      counter("mistralrs_speculative_drafts_total"),
		specProposed:    counter("mistralrs_speculative_draft_tokens_proposed_total"),
		specAccepted:    counter("mistralrs_speculative_draft_tokens_accepted_total"),
		specAcceptedPos: counterVec("mistralrs_speculative_draft_tokens_accepted_per_pos_total", "position"),
		specStagedDrops: counter("mistralrs_speculative_staged_drops_total"),
	}
	// Known label values exist at 0 from startup, so rate() and absent()
	// behave before the first event; position 0 makes the per-position
	// family visible although no proposer is attached yet.
	m.completedByReason = make(map[string]prometheus.Counter, len(CompletionReasons))
	for _, r := range CompletionReasons {
		m.completedByReason[r] = m.completed.WithLabelValues(r)
	}
	m.rejectedByReason = make(map[string]prometheus.Counter, len(RejectionReasons))
	for _, r := range RejectionReasons {
		m.rejectedByReason[r] = m.rejected.WithLabelValues(r)
	}
	m.specAcceptedPos.WithLabelValues("0")
	return m
}

// TokensProcessed adds prompt tokens of a prefill step and one per sequence
// of a decode step.
func (m *EngineMetrics) TokensProcessed(n int) {
	if m != nil && n > 0 {
		m.tokensProcessed.Add(float64(n))
	}
}

// PrefixCacheLookup counts a new sequence looked up in the prefix cache
// (also when prefix caching is off, as mistral.rs does).
func (m *EngineMetrics) PrefixCacheLookup() {
	if m != nil {
		m.prefixLookups.Inc()
	}
}

// PrefixCacheHit counts a sequence that reused cached KV (once per sequence).
func (m *EngineMetrics) PrefixCacheHit() {
	if m != nil {
		m.prefixHits.Inc()
	}
}

// PrefixCacheEvictions counts evicted prefix-cache entries.
func (m *EngineMetrics) PrefixCacheEvictions(n int) {
	if m != nil && n > 0 {
		m.prefixEvictions.Add(float64(n))
	}
}

// SchedulerState sets the running and waiting queue lengths after a
// scheduling decision.
func (m *EngineMetrics) SchedulerState(running, waiting int) {
	if m != nil {
		m.running.Set(float64(running))
		m.waiting.Set(float64(waiting))
	}
}

// SequenceCompleted counts a sequence reaching a terminal state by reason
// (one of CompletionReasons).
func (m *EngineMetrics) SequenceCompleted(reason string) {
	if m == nil {
		return
	}
	if c := m.completedByReason[reason]; c != nil {
		c.Inc()
		return
	}
	m.completed.WithLabelValues(reason).Inc()
}

// SequenceRejected counts a sequence refused before it ran (one of RejectionReasons).
func (m *EngineMetrics) SequenceRejected(reason string) {
	if m == nil {
		return
	}
	if c := m.rejectedByReason[reason]; c != nil {
		c.Inc()
		return
	}
	m.rejected.WithLabelValues(reason).Inc()
}

// KVCacheBlocks sets the paged KV cache's used and total blocks.
func (m *EngineMetrics) KVCacheBlocks(used, total int) {
	if m != nil {
		m.kvUsed.Set(float64(used))
		m.kvTotal.Set(float64(total))
	}
}

// Preempted counts a running sequence sent back to the waiting queue.
func (m *EngineMetrics) Preempted() {
	if m != nil {
		m.preemptions.Inc()
	}
}

// PendingAdmission sets the number of requests not yet handed to the scheduler.
func (m *EngineMetrics) PendingAdmission(n int) {
	if m != nil {
		m.pendingAdmission.Set(float64(n))
	}
}

// Capacity sets the maximum number of concurrently scheduled sequences. The
// engine calls it at startup, so the gauge is exported from the first scrape
// (deliberate fix: in mistral.rs it is set before the recorder exists).
func (m *EngineMetrics) Capacity(n int) {
	if m != nil {
		m.capacity.Set(float64(n))
	}
}

// EncoderCache adds multimodal encoder cache hits and misses.
func (m *EngineMetrics) EncoderCache(hits, misses int) {
	if m == nil {
		return
	}
	if hits > 0 {
		m.encoderHits.Add(float64(hits))
	}
	if misses > 0 {
		m.encoderMisses.Add(float64(misses))
	}
}

// SpeculativeStats records one speculative verification batch: verified
// sequences, proposed and accepted draft tokens, and for each position i the
// number of sequences that accepted at least i+1 drafts. Nothing is recorded
// for a batch without drafts.
func (m *EngineMetrics) SpeculativeStats(drafts, proposed, accepted int, acceptedPerPos []int) {
	if m == nil || drafts == 0 {
		return
	}
	m.specDrafts.Add(float64(drafts))
	m.specProposed.Add(float64(max(proposed, 0)))
	m.specAccepted.Add(float64(max(accepted, 0)))
	for i, n := range acceptedPerPos {
		if n > 0 {
			m.specAcceptedPos.WithLabelValues(strconv.Itoa(i)).Add(float64(n))
		}
	}
}

// SpeculativeStagedDrops counts staged proposals discarded without verification.
func (m *EngineMetrics) SpeculativeStagedDrops(n int) {
	if m != nil && n > 0 {
		m.specStagedDrops.Add(float64(n))
	}
}
