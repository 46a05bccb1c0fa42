package observe

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"mistralrs/internal/testutil"
)

// engineObserver is engine.Observer's method set (internal/engine/observer.go),
// copied so this package does not import the engine.
type engineObserver interface {
	TokensProcessed(n int)
	PrefixCacheLookup()
	PrefixCacheHit()
	PrefixCacheEvictions(n int)
	SchedulerState(running, waiting int)
	SequenceCompleted(reason string)
	SequenceRejected(reason string)
	KVCacheBlocks(used, total int)
	Preempted()
	PendingAdmission(n int)
	Capacity(n int)
}

var _ engineObserver = (*EngineMetrics)(nil)

var engineFamilies = map[string]dto.MetricType{
	"mistralrs_tokens_processed_total":                          dto.MetricType_COUNTER,
	"mistralrs_prefix_cache_lookups_total":                      dto.MetricType_COUNTER,
	"mistralrs_prefix_cache_hits_total":                         dto.MetricType_COUNTER,
	"mistralrs_prefix_cache_evictions_total":                    dto.MetricType_COUNTER,
	"mistralrs_encoder_cache_hits_total":                        dto.MetricType_COUNTER,
	"mistralrs_encoder_cache_misses_total":                      dto.MetricType_COUNTER,
	"mistralrs_sequences_running":                               dto.MetricType_GAUGE,
	"mistralrs_sequences_waiting":                               dto.MetricType_GAUGE,
	"mistralrs_sequences_capacity":                              dto.MetricType_GAUGE,
	"mistralrs_sequences_completed_total":                       dto.MetricType_COUNTER,
	"mistralrs_sequences_rejected_total":                        dto.MetricType_COUNTER,
	"mistralrs_kv_cache_blocks_used":                            dto.MetricType_GAUGE,
	"mistralrs_kv_cache_blocks_total":                           dto.MetricType_GAUGE,
	"mistralrs_requests_pending_admission":                      dto.MetricType_GAUGE,
	"mistralrs_paged_preemptions_total":                         dto.MetricType_COUNTER,
	"mistralrs_speculative_drafts_total":                        dto.MetricType_COUNTER,
	"mistralrs_speculative_draft_tokens_proposed_total":         dto.MetricType_COUNTER,
	"mistralrs_speculative_draft_tokens_accepted_total":         dto.MetricType_COUNTER,
	"mistralrs_speculative_draft_tokens_accepted_per_pos_total": dto.MetricType_COUNTER,
	"mistralrs_speculative_staged_drops_total":                  dto.MetricType_COUNTER,
}

func metricValue(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// Engine families: present from startup with exact names, types and reason
// values; counters at 0; the capacity gauge set at startup.
func TestEngineFamiliesAtStartup(t *testing.T) {
	e := newEnv(t, "off", nil)
	e.o.Engine().Capacity(32) // what the engine does when it starts
	fams := e.scrape(t)
	for name, typ := range engineFamilies {
		f := fams[name]
		if f == nil {
			t.Errorf("family %s missing at startup", name)
			continue
		}
		if f.GetType() != typ {
			t.Errorf("%s: type %v, want %v", name, f.GetType(), typ)
		}
		for _, m := range f.Metric {
			want := 0.0
			if name == "mistralrs_sequences_capacity" {
				want = 32
			}
			if metricValue(m) != want {
				t.Errorf("%s%v = %v at startup", name, m.Label, metricValue(m))
			}
			for _, lp := range m.Label {
				if n := lp.GetName(); n != "reason" && n != "position" {
					t.Errorf("%s has label %s (engine metrics are unlabelled)", name, n)
				}
			}
		}
	}
	reasons := func(name string) []string {
		var r []string
		for _, m := range fams[name].Metric {
			r = append(r, m.Label[0].GetValue())
		}
		return r
	}
	wantDone := []string{"canceled", "error", "generated_image", "generated_speech", "length", "stop", "tool_calls"}
	if got := reasons("mistralrs_sequences_completed_total"); strings.Join(got, ",") != strings.Join(wantDone, ",") {
		t.Errorf("completed reasons %v", got)
	}
	if got := reasons("mistralrs_sequences_rejected_total"); strings.Join(got, ",") != "cache_exhausted,over_total_capacity" {
		t.Errorf("rejected reasons %v", got)
	}
}

// Every engine.Observer method lands in its family.
func TestEngineMetricsUpdates(t *testing.T) {
	e := newEnv(t, "off", nil)
	var m engineObserver = e.o.Engine()
	m.TokensProcessed(17)
	m.TokensProcessed(1)
	m.PrefixCacheLookup()
	m.PrefixCacheLookup()
	m.PrefixCacheHit()
	m.PrefixCacheEvictions(3)
	m.SchedulerState(2, 5)
	m.SequenceCompleted("stop")
	m.SequenceCompleted("stop")
	m.SequenceCompleted("canceled")
	m.SequenceRejected("cache_exhausted")
	m.KVCacheBlocks(10, 64)
	m.Preempted()
	m.PendingAdmission(4)
	m.Capacity(8)
	e.o.Engine().SpeculativeStats(2, 6, 3, []int{2, 1, 0})
	e.o.Engine().SpeculativeStagedDrops(1)
	e.o.Engine().EncoderCache(1, 2)
	fams := e.scrape(t)
	for name, want := range map[string]float64{
		"mistralrs_tokens_processed_total":                  18,
		"mistralrs_prefix_cache_lookups_total":              2,
		"mistralrs_prefix_cache_hits_total":                 1,
		"mistralrs_prefix_cache_evictions_total":            3,
		"mistralrs_sequences_running":                       2,
		"mistralrs_sequences_waiting":                       5,
		"mistralrs_kv_cache_blocks_used":                    10,
		"mistralrs_kv_cache_blocks_total":                   64,
		"mistralrs_paged_preemptions_total":                 1,
		"mistralrs_requests_pending_admission":              4,
		"mistralrs_sequences_capacity":                      8,
		"mistralrs_speculative_drafts_total":                2,
		"mistralrs_speculative_draft_tokens_proposed_total": 6,
		"mistralrs_speculative_draft_tokens_accepted_total": 3,
		"mistralrs_speculative_staged_drops_total":          1,
		"mistralrs_encoder_cache_hits_total":                1,
		"mistralrs_encoder_cache_misses_total":              2,
	} {
		if got := metricValue(fams[name].Metric[0]); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	for lbl, want := range map[string]float64{"stop": 2, "canceled": 1, "length": 0} {
		if got := series(fams, "mistralrs_sequences_completed_total", labels("reason", lbl)); got.GetCounter().GetValue() != want {
			t.Errorf("completed{%s} = %v", lbl, got.GetCounter().GetValue())
		}
	}
	if got := series(fams, "mistralrs_sequences_rejected_total", labels("reason", "cache_exhausted")); got.GetCounter().GetValue() != 1 {
		t.Error("rejected")
	}
	if got := series(fams, "mistralrs_speculative_draft_tokens_accepted_per_pos_total", labels("position", "1")); got.GetCounter().GetValue() != 1 {
		t.Error("accepted per position")
	}
	if got := series(fams, "mistralrs_speculative_draft_tokens_accepted_per_pos_total", labels("position", "2")); got != nil {
		t.Error("zero positions are not emitted")
	}
	// Disabled metrics: a nil *EngineMetrics ignores every call.
	var nilM *EngineMetrics
	var obs engineObserver = nilM
	obs.TokensProcessed(1)
	obs.SequenceCompleted("stop")
	obs.Capacity(3)
	nilM.SpeculativeStats(1, 1, 1, []int{1})
}

// seedMeanings reads the Meaning column of every metric table in the
// observability document.
func seedMeanings(t *testing.T) map[string]string {
	path := testutil.SharedFile(t, "spec", "observability-seed.txt")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cols := strings.Split(sc.Text(), "\t")
		if len(cols) == 4 && (strings.HasPrefix(cols[0], "http_") || strings.HasPrefix(cols[0], "mistralrs_")) {
			out[cols[0]] = cols[3]
		}
	}
	if len(out) < 20 {
		t.Fatalf("parsed only %d metric rows from the seed", len(out))
	}
	return out
}

// # HELP lines are the seed's Meaning column, and the exposition passes
// promlint (in-process promtool check metrics) apart from naming rules the
// spec fixes (histogram/counter names of mistral.rs).
func TestHelpLines(t *testing.T) {
	e := newEnv(t, "off", nil)
	e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":2}`)
	fams := e.scrape(t)
	meanings := seedMeanings(t)
	for name, meaning := range meanings {
		f := fams[name]
		if f == nil {
			t.Errorf("family %s of the seed is not exported", name)
			continue
		}
		if f.GetHelp() != meaning {
			t.Errorf("%s HELP %q, want %q", name, f.GetHelp(), meaning)
		}
	}
	for name, f := range fams {
		if f.GetHelp() == "" {
			t.Errorf("%s has no HELP", name)
		}
	}
	rec := httptest.NewRecorder()
	e.o.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	problems, err := promlint.New(rec.Body).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Logf("promlint (informational): %s: %s", p.Metric, p.Text)
	}
}

var exemplarRe = regexp.MustCompile(`^(\w+)_bucket\{[^}]*\} \d+ # \{request_id="([^"]+)"\} [0-9.e+-]+ [0-9.e+-]+$`)

// Prometheus text by default; OpenMetrics when the scraper asks, with the
// request id as exemplar on http_request_duration_seconds and the TTFT histogram.
func TestExpositionAndExemplars(t *testing.T) {
	e := newEnv(t, "off", nil)
	e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":2}`, "X-Request-Id", "trace-me-1")

	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("default Content-Type %q", ct)
	}
	if strings.Contains(rec.Body.String(), "request_id=") {
		t.Error("exemplars in the Prometheus text format")
	}
	if !strings.Contains(rec.Body.String(), "# HELP http_requests_total Completed request count.\n# TYPE http_requests_total counter\n") {
		t.Error("text exposition lacks HELP/TYPE for http_requests_total")
	}

	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0; charset=utf-8")
	rec = httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("OpenMetrics Content-Type %q", ct)
	}
	body := rec.Body.String()
	if !strings.HasSuffix(body, "# EOF\n") {
		t.Error("OpenMetrics body without # EOF")
	}
	found := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		if m := exemplarRe.FindStringSubmatch(line); m != nil {
			found[m[1]] = m[2]
		}
	}
	for _, fam := range []string{"http_request_duration_seconds", "mistralrs_time_to_first_token_seconds"} {
		if found[fam] != "trace-me-1" {
			t.Errorf("%s exemplar %q, want the request id\n%s", fam, found[fam], body)
		}
	}
	if _, ok := found["mistralrs_inter_token_latency_seconds"]; ok {
		t.Error("ITL carries exemplars")
	}
}

// --disable-metrics: no registry; GET /metrics → 503 "metrics disabled";
// everything else keeps working.
func TestMetricsDisabled(t *testing.T) {
	e := newEnv(t, "warn,mistralrs=info", func(o *Options) { o.Metrics = false })
	if e.o.Metrics() != nil || e.o.Engine() != nil {
		t.Fatal("registry exists with metrics disabled")
	}
	e.o.Engine().SequenceCompleted("stop") // safe on nil
	rec := e.do("GET", "/metrics", "")
	if rec.Code != http.StatusServiceUnavailable || rec.Body.String() != "metrics disabled" ||
		!strings.HasPrefix(rec.Header().Get("Content-Type"), "text/plain") {
		t.Errorf("%d %q %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body.String())
	}
	rec = e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":2,"usage":true}`, "X-Request-Id", "d1")
	if rec.Code != 200 || rec.Header().Get("X-Request-Id") != "d1" {
		t.Errorf("stream with metrics off: %d", rec.Code)
	}
	if l := e.logs.Lines(); len(l) != 2 || !strings.Contains(l[1], "outcome=completed") || !strings.Contains(l[1], "prompt_tokens=12") {
		t.Errorf("access log with metrics off: %q", l)
	}
	_, _ = io.Copy(io.Discard, rec.Body)
}
