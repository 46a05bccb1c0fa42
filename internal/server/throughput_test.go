package server

import (
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"mistralrs/internal/engine"
	"mistralrs/internal/observe"
)

// The periodic line carries mistralrs's MTP segment for an interval with
// verified guesses: acceptance over the interval and 1 + accepted per
// verified sequence; an interval without guesses has none.
func TestThroughputLineMTPSegment(t *testing.T) {
	s := newEngineStats(nil, false)
	s.record(engine.Stats{PrefixLookups: 1})
	s.record(engine.Stats{Tokens: 100})
	s.record(engine.Stats{SpecDrafts: 4, SpecProposed: 16, SpecAccepted: 6, SpecAcceptedPerPos: []int{3, 2, 1, 0}})
	s.record(engine.Stats{SpecDrafts: 2, SpecProposed: 8, SpecAccepted: 6, SpecAcceptedPerPos: []int{2, 2, 2}})
	line, ok := s.intervalLine(time.Second)
	if !ok || !strings.Contains(line, ", MTP accept 50.0% (len 3.00), ") {
		t.Errorf("line %q, want the segment MTP accept 50.0%% (len 3.00)", line)
	}
	s.record(engine.Stats{Tokens: 10})
	if line, _ := s.intervalLine(time.Second); strings.Contains(line, "MTP") {
		t.Errorf("an interval without guesses: %q", line)
	}
}

// The line of a multimodal model carries the encoder cache's cumulative
// hit rate where mistral.rs puts it (after the prefix cache's, before the
// MTP segment); a text model's has none.
func TestThroughputLineEncoderSegment(t *testing.T) {
	s := newEngineStats(nil, true)
	s.record(engine.Stats{PrefixLookups: 4, PrefixHits: 1, Tokens: 100, EncoderMisses: 1})
	line, ok := s.intervalLine(time.Second)
	if want := "Prefix cache hitrate 25.00%, Encoder cache hitrate 0.00%, 0 running"; !ok || !strings.Contains(line, want) {
		t.Errorf("line %q, want %q", line, want)
	}
	s.record(engine.Stats{Tokens: 10, EncoderHits: 3, SpecDrafts: 1, SpecProposed: 2, SpecAccepted: 1})
	line, _ = s.intervalLine(time.Second)
	if want := ", Encoder cache hitrate 75.00%, MTP accept 50.0% (len 2.00), "; !strings.Contains(line, want) {
		t.Errorf("line %q, want %q", line, want)
	}
	text := newEngineStats(nil, false)
	text.record(engine.Stats{PrefixLookups: 1, Tokens: 10, EncoderHits: 1})
	if line, _ := text.intervalLine(time.Second); strings.Contains(line, "Encoder") {
		t.Errorf("a text model's line %q has the encoder segment", line)
	}
}

// Every engine.Stats field lands in its family through engineMetricTable;
// a report leaves alone the gauges it did not measure; every engine family
// is in the table.
func TestEngineMetricTable(t *testing.T) {
	m := observe.NewMetrics()
	s := newEngineStats(m.Engine(), false)
	// What SetStatsSink, Submit and a step report.
	s.record(engine.Stats{Measured: engine.LevelCapacity | engine.LevelQueues | engine.LevelKV, Capacity: 8, KVBlocksTotal: 64})
	s.record(engine.Stats{PrefixLookups: 2})
	s.record(engine.Stats{Finished: []engine.Finish{{Reason: "cache_exhausted", Rejected: true}}})
	s.record(engine.Stats{Measured: engine.LevelPending, PendingAdmission: 4})
	s.record(engine.Stats{Tokens: 17, PrefixHits: 1, PrefixEvictions: 3, Preemptions: 1,
		SpecDrafts: 2, SpecProposed: 6, SpecAccepted: 3, SpecAcceptedPerPos: []int{2, 1, 0}, SpecStagedDrops: 1,
		EncoderHits: 2, EncoderMisses: 5,
		Finished: []engine.Finish{{Reason: "stop"}, {Reason: "stop"}, {Reason: "canceled"}},
		Measured: engine.LevelQueues | engine.LevelKV, Running: 2, Waiting: 5, KVBlocksUsed: 10, KVBlocksTotal: 64})
	s.record(engine.Stats{Tokens: 1, EncoderHits: 1})
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]float64{} // family, label value ("" unlabelled)
	for _, f := range fams {
		got[f.GetName()] = map[string]float64{}
		for _, s := range f.Metric {
			v := s.GetCounter().GetValue() + s.GetGauge().GetValue()
			lbl := ""
			if len(s.Label) > 0 {
				lbl = s.Label[0].GetValue()
			}
			got[f.GetName()][lbl] = v
		}
	}
	want := map[string]map[string]float64{
		"mistralrs_tokens_processed_total":                          {"": 18},
		"mistralrs_prefix_cache_lookups_total":                      {"": 2},
		"mistralrs_prefix_cache_hits_total":                         {"": 1},
		"mistralrs_prefix_cache_evictions_total":                    {"": 3},
		"mistralrs_sequences_running":                               {"": 2},
		"mistralrs_sequences_waiting":                               {"": 5},
		"mistralrs_kv_cache_blocks_used":                            {"": 10},
		"mistralrs_kv_cache_blocks_total":                           {"": 64},
		"mistralrs_kv_cache_usage_ratio":                            {"": 10.0 / 64},
		"mistralrs_paged_preemptions_total":                         {"": 1},
		"mistralrs_requests_pending_admission":                      {"": 4},
		"mistralrs_sequences_capacity":                              {"": 8},
		"mistralrs_speculative_drafts_total":                        {"": 2},
		"mistralrs_speculative_draft_tokens_proposed_total":         {"": 6},
		"mistralrs_speculative_draft_tokens_accepted_total":         {"": 3},
		"mistralrs_speculative_staged_drops_total":                  {"": 1},
		"mistralrs_encoder_cache_hits_total":                        {"": 3},
		"mistralrs_encoder_cache_misses_total":                      {"": 5},
		"mistralrs_speculative_draft_tokens_accepted_per_pos_total": {"0": 2, "1": 1},
		"mistralrs_sequences_completed_total":                       {"stop": 2, "canceled": 1, "length": 0},
		"mistralrs_sequences_rejected_total":                        {"cache_exhausted": 1, "over_total_capacity": 0},
	}
	for name, series := range want {
		for lbl, v := range series {
			if g, ok := got[name][lbl]; !ok || g != v {
				t.Errorf("%s{%s} = %v (present %v), want %v", name, lbl, g, ok, v)
			}
		}
	}
	if _, ok := got["mistralrs_speculative_draft_tokens_accepted_per_pos_total"]["2"]; ok {
		t.Error("zero positions are not emitted")
	}
	mapped := map[string]bool{}
	for _, row := range engineMetricTable {
		mapped[row.name] = true
	}
	for _, f := range fams {
		name := f.GetName()
		if f.GetType() == dto.MetricType_HISTOGRAM || !strings.HasPrefix(name, "mistralrs_") {
			continue
		}
		if !mapped[name] {
			t.Errorf("engine family %s is in no row of engineMetricTable", name)
		}
	}
}
