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
	e.o.Engine().Gauge("mistralrs_sequences_capacity")(32) // what the engine does when it starts
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

// Every recorder lands in its family. (Which engine.Stats field each family
// reads is internal/server's table, tested there.)
func TestEngineMetricsUpdates(t *testing.T) {
	e := newEnv(t, "off", nil)
	m := e.o.Engine()
	m.Counter("mistralrs_tokens_processed_total")(17)
	m.Counter("mistralrs_tokens_processed_total")(1)
	m.Counter("mistralrs_prefix_cache_lookups_total")(1)
	m.Counter("mistralrs_prefix_cache_lookups_total")(1)
	m.Counter("mistralrs_prefix_cache_hits_total")(1)
	m.Counter("mistralrs_prefix_cache_evictions_total")(3)
	m.Gauge("mistralrs_sequences_running")(2)
	m.Gauge("mistralrs_sequences_waiting")(5)
	completed := m.Labelled("mistralrs_sequences_completed_total")
	completed("stop", 1)
	completed("stop", 1)
	completed("canceled", 1)
	m.Labelled("mistralrs_sequences_rejected_total")("cache_exhausted", 1)
	m.Gauge("mistralrs_kv_cache_blocks_used")(10)
	m.Gauge("mistralrs_kv_cache_blocks_total")(64)
	m.Counter("mistralrs_paged_preemptions_total")(1)
	m.Gauge("mistralrs_requests_pending_admission")(4)
	m.Gauge("mistralrs_sequences_capacity")(8)
	m.Counter("mistralrs_speculative_drafts_total")(2)
	m.Counter("mistralrs_speculative_draft_tokens_proposed_total")(6)
	m.Counter("mistralrs_speculative_draft_tokens_accepted_total")(3)
	perPos := m.Labelled("mistralrs_speculative_draft_tokens_accepted_per_pos_total")
	perPos("0", 2)
	perPos("1", 1)
	perPos("2", 0)
	m.Counter("mistralrs_speculative_staged_drops_total")(1)
	m.Counter("mistralrs_encoder_cache_hits_total")(1)
	m.Counter("mistralrs_encoder_cache_misses_total")(2)
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
	// Disabled metrics: a nil *EngineMetrics hands out recorders that
	// ignore every call.
	var nilM *EngineMetrics
	nilM.Counter("mistralrs_tokens_processed_total")(1)
	nilM.Labelled("mistralrs_sequences_completed_total")("stop", 1)
	nilM.Gauge("mistralrs_sequences_capacity")(3)
	nilM.Labelled("mistralrs_speculative_draft_tokens_accepted_per_pos_total")("0", 1)
}

// Asking for a family that does not exist, or as another kind, is a
// programming error caught when the server starts, metrics enabled or not.
func TestEngineMetricsUnknownFamily(t *testing.T) {
	var nilM *EngineMetrics
	for name, ask := range map[string]func(){
		"unknown":          func() { NewMetrics().Engine().Counter("mistralrs_no_such_total") },
		"unknown, nil":     func() { nilM.Gauge("mistralrs_no_such") },
		"gauge as counter": func() { nilM.Counter("mistralrs_sequences_running") },
		"labelled as gauge": func() {
			NewMetrics().Engine().Gauge("mistralrs_sequences_completed_total")
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			ask()
		}()
	}
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
	e.o.Engine().Labelled("mistralrs_sequences_completed_total")("stop", 1) // safe on nil
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
