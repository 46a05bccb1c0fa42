package server

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"mistralrs/internal/engine"
	"mistralrs/internal/observe"
)

// engineMetricTable maps the engine's reports onto its Prometheus families:
// each row names a family and says how it reads an engine.Stats. It is here
// because the server is the one package that knows both sides: observe
// defines the families (name, type, label, HELP text: engineFamilyDefs in
// internal/observe/enginemetrics.go) and must not import the engine, and the
// engine must not import observe or Prometheus (docs/architecture.md).
// A new engine metric is a field in engine.Stats, a row here and its
// definition in observe.
var engineMetricTable = []metricRow{
	counterRow("mistralrs_tokens_processed_total", func(s *engine.Stats) int { return s.Tokens }),
	counterRow("mistralrs_prefix_cache_lookups_total", func(s *engine.Stats) int { return s.PrefixLookups }),
	counterRow("mistralrs_prefix_cache_hits_total", func(s *engine.Stats) int { return s.PrefixHits }),
	counterRow("mistralrs_prefix_cache_evictions_total", func(s *engine.Stats) int { return s.PrefixEvictions }),
	counterRow("mistralrs_encoder_cache_hits_total", func(s *engine.Stats) int { return s.EncoderHits }),
	counterRow("mistralrs_encoder_cache_misses_total", func(s *engine.Stats) int { return s.EncoderMisses }),
	counterRow("mistralrs_paged_preemptions_total", func(s *engine.Stats) int { return s.Preemptions }),
	labelledRow("mistralrs_sequences_completed_total", finishes(false)),
	labelledRow("mistralrs_sequences_rejected_total", finishes(true)),
	counterRow("mistralrs_speculative_drafts_total", func(s *engine.Stats) int { return s.SpecDrafts }),
	counterRow("mistralrs_speculative_draft_tokens_proposed_total", func(s *engine.Stats) int { return s.SpecProposed }),
	counterRow("mistralrs_speculative_draft_tokens_accepted_total", func(s *engine.Stats) int { return s.SpecAccepted }),
	labelledRow("mistralrs_speculative_draft_tokens_accepted_per_pos_total", acceptedPerPos),
	counterRow("mistralrs_speculative_staged_drops_total", func(s *engine.Stats) int { return s.SpecStagedDrops }),
	gaugeRow("mistralrs_sequences_running", engine.LevelQueues, func(s *engine.Stats) int { return s.Running }),
	gaugeRow("mistralrs_sequences_waiting", engine.LevelQueues, func(s *engine.Stats) int { return s.Waiting }),
	gaugeRow("mistralrs_kv_cache_blocks_used", engine.LevelKV, func(s *engine.Stats) int { return s.KVBlocksUsed }),
	gaugeRow("mistralrs_kv_cache_blocks_total", engine.LevelKV, func(s *engine.Stats) int { return s.KVBlocksTotal }),
	ratioRow("mistralrs_kv_cache_usage_ratio", engine.LevelKV, func(s *engine.Stats) (int, int) { return s.KVBlocksUsed, s.KVBlocksTotal }),
	gaugeRow("mistralrs_requests_pending_admission", engine.LevelPending, func(s *engine.Stats) int { return s.PendingAdmission }),
	gaugeRow("mistralrs_sequences_capacity", engine.LevelCapacity, func(s *engine.Stats) int { return s.Capacity }),
}

// A metricRow is a family's name and the binding of that family of m to
// its reader of a report.
type metricRow struct {
	name string
	bind func(m *observe.EngineMetrics) func(*engine.Stats)
}

// counterRow adds what read counts (counts in a Stats are since the
// previous report).
func counterRow(name string, read func(*engine.Stats) int) metricRow {
	return metricRow{name, func(m *observe.EngineMetrics) func(*engine.Stats) {
		add := m.Counter(name)
		return func(s *engine.Stats) { add(read(s)) }
	}}
}

// gaugeRow sets the gauge to what read returns, from the reports that
// measured level: several engines share the gauges, and a report leaves
// alone what its engine did not measure.
func gaugeRow(name string, level engine.Levels, read func(*engine.Stats) int) metricRow {
	return metricRow{name, func(m *observe.EngineMetrics) func(*engine.Stats) {
		set := m.Gauge(name)
		return func(s *engine.Stats) {
			if s.Measured&level != 0 {
				set(read(s))
			}
		}
	}}
}

// ratioRow sets the gauge to the fraction read returns (a part and its
// whole; 0 for an empty whole), from the reports that measured level, as
// gaugeRow: so it always agrees with the gauges of the part and the whole.
func ratioRow(name string, level engine.Levels, read func(*engine.Stats) (part, whole int)) metricRow {
	return metricRow{name, func(m *observe.EngineMetrics) func(*engine.Stats) {
		set := m.GaugeFloat(name)
		return func(s *engine.Stats) {
			if s.Measured&level == 0 {
				return
			}
			part, whole := read(s)
			if whole <= 0 {
				set(0)
				return
			}
			set(float64(part) / float64(whole))
		}
	}}
}

// labelledRow hands read the adder of the family's series by label value.
func labelledRow(name string, read func(s *engine.Stats, add func(v string, n int))) metricRow {
	return metricRow{name, func(m *observe.EngineMetrics) func(*engine.Stats) {
		add := m.Labelled(name)
		return func(s *engine.Stats) { read(s, add) }
	}}
}

// finishes reads the completed sequences by reason, or the rejected ones.
func finishes(rejected bool) func(*engine.Stats, func(string, int)) {
	return func(s *engine.Stats, add func(string, int)) {
		for _, f := range s.Finished {
			if f.Rejected == rejected {
				add(f.Reason, 1)
			}
		}
	}
}

// acceptedPerPos reads the accepted drafts by position, leaving out those
// without any.
func acceptedPerPos(s *engine.Stats, add func(string, int)) {
	for i, n := range s.SpecAcceptedPerPos {
		if n > 0 {
			add(strconv.Itoa(i), n)
		}
	}
}

// engineStats is one engine's StatsSink (mistral.rs's IntervalLogger, one per
// engine): it keeps what the periodic throughput line needs and records
// every report in the engine metrics all engines share.
type engineStats struct {
	metrics []func(*engine.Stats) // engineMetricTable's rows, bound; none when metrics are disabled

	tokens  atomic.Int64 // processed in the current interval
	lookups atomic.Int64 // cumulative
	hits    atomic.Int64 // cumulative
	running atomic.Int64
	waiting atomic.Int64
	// Speculative decoding in the current interval: sequences verified and
	// draft tokens proposed and accepted.
	specDrafts, specProposed, specAccepted atomic.Int64
	// The encoder cache's lookups (cumulative), for a model with a vision
	// projector (multimodal): only its line has the encoder segment.
	multimodal                 bool
	encoderHits, encoderMisses atomic.Int64
	// loraInfo records the LoRA levels in mistralrs_lora_requests_info,
	// for a model with a LoRA runtime (nil: none).
	loraInfo func(running, waiting []string)
}

// newEngineStats makes a sink recording in m (nil: metrics disabled), for
// a multimodal model or not.
func newEngineStats(m *observe.EngineMetrics, multimodal bool) *engineStats {
	s := &engineStats{multimodal: multimodal}
	for _, row := range engineMetricTable {
		rec := row.bind(m) // a misspelt family panics here, metrics enabled or not
		if m != nil {
			s.metrics = append(s.metrics, rec)
		}
	}
	return s
}

// record is the engine's StatsSink.
func (s *engineStats) record(st engine.Stats) {
	s.tokens.Add(int64(st.Tokens))
	s.lookups.Add(int64(st.PrefixLookups))
	s.hits.Add(int64(st.PrefixHits))
	if st.Measured&engine.LevelQueues != 0 {
		s.running.Store(int64(st.Running))
		s.waiting.Store(int64(st.Waiting))
	}
	s.specDrafts.Add(int64(st.SpecDrafts))
	s.specProposed.Add(int64(st.SpecProposed))
	s.specAccepted.Add(int64(st.SpecAccepted))
	s.encoderHits.Add(int64(st.EncoderHits))
	s.encoderMisses.Add(int64(st.EncoderMisses))
	for _, rec := range s.metrics {
		rec(&st)
	}
	if s.loraInfo != nil && st.Measured&engine.LevelLoRA != 0 {
		s.loraInfo(st.RunningLoRA, st.WaitingLoRA)
	}
}

// withLoRAInfo makes s feed the LoRA info gauge of m for the served model
// id, which holds at most maxLoRA adapters at once.
func (s *engineStats) withLoRAInfo(m *observe.EngineMetrics, id string, maxLoRA int) *engineStats {
	rec := m.LoRAInfo(id)
	s.loraInfo = func(running, waiting []string) { rec(maxLoRA, running, waiting) }
	return s
}

// intervalLine returns the throughput line for the interval just ended and
// starts the next one. Like mistral.rs it says nothing for an interval
// without processed tokens or before any sequence was looked up.
func (s *engineStats) intervalLine(elapsed time.Duration) (string, bool) {
	tokens := s.tokens.Swap(0)
	lookups := s.lookups.Load()
	if tokens == 0 || lookups == 0 || elapsed <= 0 {
		return "", false
	}
	hitrate := 100 * float64(s.hits.Load()) / float64(lookups)
	drafts, proposed, accepted := s.specDrafts.Swap(0), s.specProposed.Swap(0), s.specAccepted.Swap(0)
	mtp := ""
	if proposed > 0 && drafts > 0 {
		// mistral.rs's segment: the acceptance rate, and the mean tokens a
		// verified step yields (the accepted drafts plus the one the
		// verification produces).
		mtp = fmt.Sprintf(", MTP accept %.1f%% (len %.2f)", 100*float64(accepted)/float64(proposed), 1+float64(accepted)/float64(drafts))
	}
	return fmt.Sprintf("Throughput (T/s) %.2f, Prefix cache hitrate %.2f%%%s%s, %d running, %d waiting",
		float64(tokens)/elapsed.Seconds(), hitrate, s.encoderSegment(), mtp, s.running.Load(), s.waiting.Load()), true
}

// encoderSegment is the line's encoder cache hit rate (cumulative, as the
// prefix cache's), for a multimodal model only.
func (s *engineStats) encoderSegment() string {
	if !s.multimodal {
		return ""
	}
	hits, lookups := s.encoderHits.Load(), s.encoderHits.Load()+s.encoderMisses.Load()
	rate := 0.0
	if lookups > 0 {
		rate = 100 * float64(hits) / float64(lookups)
	}
	return fmt.Sprintf(", Encoder cache hitrate %.2f%%", rate)
}

// logThroughput prints each engine's throughput line every interval while
// there is work, until ctx ends.
func (s *Server) logThroughput(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			elapsed := now.Sub(last)
			last = now
			for _, e := range s.models.entries {
				e.mu.Lock()
				st := e.stats
				e.mu.Unlock()
				if st == nil {
					continue
				}
				if line, ok := st.intervalLine(elapsed); ok {
					s.engineLog.Info(line)
				}
			}
		}
	}
}
