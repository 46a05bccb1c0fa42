package server

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"mistralrs/internal/observe"
)

// streamChat runs one streamed chat request and returns its data events.
func (ts *testServer) streamChat(t *testing.T, id string, body map[string]any) []string {
	t.Helper()
	body["stream"] = true
	resp, data := ts.post("/v1/chat/completions", body, "X-Request-Id", id)
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d %s", resp.StatusCode, data)
	}
	events, _ := sseEvents(t, data)
	return events
}

func TestMetricsAndAccessLog(t *testing.T) {
	ts := startServer(t)
	user := []map[string]string{{"role": "user", "content": "hello"}}
	chatLabels := map[string]string{"method": "POST", "path": "/v1/chat/completions", "model": "tiny"}

	// At startup: every engine family exists, counters at 0, the capacity set.
	fams := ts.metrics()
	for _, f := range []string{"mistralrs_tokens_processed_total", "mistralrs_prefix_cache_lookups_total", "mistralrs_prefix_cache_hits_total",
		"mistralrs_prefix_cache_evictions_total", "mistralrs_sequences_running", "mistralrs_sequences_waiting", "mistralrs_sequences_capacity",
		"mistralrs_kv_cache_blocks_used", "mistralrs_kv_cache_blocks_total", "mistralrs_requests_pending_admission"} {
		if value(fams, f, nil) < 0 {
			t.Errorf("family %s missing at startup", f)
		}
	}
	if v := value(fams, "mistralrs_tokens_processed_total", nil); v != 0 {
		t.Errorf("tokens processed at startup: %v", v)
	}
	if v := value(fams, "mistralrs_sequences_capacity", nil); v < 1 {
		t.Errorf("capacity at startup: %v", v)
	}
	for _, r := range observe.CompletionReasons {
		if v := value(fams, "mistralrs_sequences_completed_total", map[string]string{"reason": r}); v != 0 {
			t.Errorf("completed{reason=%s} at startup: %v", r, v)
		}
	}

	// Two streams of 6 and 4 tokens (ignore_eos: exactly that many steps),
	// one non-streaming request, one 404, one 400.
	steps := 0
	for i, n := range []int{6, 4} {
		ev := ts.streamChat(t, "s"+strconv.Itoa(i), map[string]any{"messages": user, "max_tokens": n, "ignore_eos": true, "temperature": 0})
		if ev[len(ev)-1] != "[DONE]" {
			t.Fatalf("stream %d: %q", i, ev)
		}
		steps += n
	}
	if r, b := ts.post("/v1/chat/completions", map[string]any{"model": "tiny", "messages": user, "max_tokens": 3, "ignore_eos": true}, "X-Request-Id", "plain"); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	ts.post("/v1/chat/completions", map[string]any{"model": "secret-model-name", "messages": user}, "X-Request-Id", "missing")
	ts.post("/v1/completions", `{"prompt":"x","temperature":9}`, "X-Request-Id", "badtemp")
	ts.get("/nowhere")
	ts.get("/health")

	fams = ts.metrics()
	lbl := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range chatLabels {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	ok200 := lbl(map[string]string{"status": "200"})
	if v := value(fams, "http_requests_total", ok200); v != 3 {
		t.Errorf("http_requests_total{chat,200} = %v, want 3", v)
	}
	if v := value(fams, "http_request_duration_seconds", ok200); v != 3 {
		t.Errorf("duration samples %v, want 3", v)
	}
	if v := value(fams, "http_requests_in_flight", chatLabels); v != 0 {
		t.Errorf("in flight %v", v)
	}
	if v := value(fams, "http_request_body_bytes", chatLabels); v != 3 {
		t.Errorf("body bytes samples %v", v)
	}
	// The unknown model is labelled unknown: its name never becomes a label.
	if v := value(fams, "http_requests_total", map[string]string{"path": "/v1/chat/completions", "model": "unknown", "status": "404"}); v != 1 {
		t.Errorf("404 series = %v", v)
	}
	if v := value(fams, "http_requests_total", map[string]string{"path": "/v1/completions", "model": "tiny", "status": "400"}); v != 1 {
		t.Errorf("400 series = %v", v)
	}
	if v := value(fams, "http_requests_total", map[string]string{"method": "GET", "path": "<unmatched>", "model": "none", "status": "404"}); v != 1 {
		t.Errorf("unmatched series = %v", v)
	}
	for _, f := range []string{"http_requests_total", "http_request_duration_seconds", "http_requests_in_flight", "http_request_body_bytes"} {
		for _, ls := range labelSets(fams, f) {
			if ls["model"] == "secret-model-name" || ls["path"] == "/health" || ls["path"] == "/metrics" {
				t.Errorf("%s has series %v", f, ls)
			}
		}
	}
	// TTFT: one sample per stream; ITL: one per token step after the first
	// (keep-alives and [DONE] are not steps).
	if v := value(fams, "mistralrs_time_to_first_token_seconds", ok200); v != 2 {
		t.Errorf("TTFT samples %v, want 2", v)
	}
	if v := value(fams, "mistralrs_inter_token_latency_seconds", ok200); v != float64(steps-2) {
		t.Errorf("ITL samples %v, want %d", v, steps-2)
	}
	// Engine families: three sequences finished by length; the lookups
	// count every sequence; tokens processed cover at least the generated
	// tokens that were fed back.
	if v := value(fams, "mistralrs_sequences_completed_total", map[string]string{"reason": "length"}); v != 3 {
		t.Errorf("completed{length} = %v", v)
	}
	if v := value(fams, "mistralrs_prefix_cache_lookups_total", nil); v != 3 {
		t.Errorf("lookups = %v", v)
	}
	if v := value(fams, "mistralrs_tokens_processed_total", nil); v < float64(steps+3-3) {
		t.Errorf("tokens processed = %v", v)
	}
	if v := value(fams, "mistralrs_sequences_running", nil); v != 0 {
		t.Errorf("running = %v", v)
	}

	// Access log: started and completed lines in mistral.rs's format, the
	// stream extras, and nothing for housekeeping.
	started := ts.log.waitLines(t, 1, "request started: request_id=s0 ")[0]
	if !regexp.MustCompile(`INFO mistralrs_server_core::metrics: request started: request_id=s0 method=POST route=/v1/chat/completions path=/v1/chat/completions model=tiny content_length=\d+$`).MatchString(started) {
		t.Errorf("started line %q", started)
	}
	done := ts.log.waitLines(t, 1, "request completed: request_id=s0 ")[0]
	if !regexp.MustCompile(`request completed: request_id=s0 method=POST route=/v1/chat/completions model=tiny status=200 outcome=completed duration_ms=\d+\.\d{3} prompt_tokens=\d+ completion_tokens=6 prefill_tok_s=\d+\.\d decode_tok_s=\d+\.\d$`).MatchString(done) {
		t.Errorf("completed line %q", done)
	}
	plain := ts.log.waitLines(t, 1, "request completed: request_id=plain ")[0]
	if !regexp.MustCompile(`model=tiny status=200 duration_ms=\d+\.\d{3}$`).MatchString(plain) {
		t.Errorf("non-stream completed line %q", plain)
	}
	if l := ts.log.lines("stream accepted: request_id=s1 "); len(l) != 1 || !strings.Contains(l[0], "DEBUG") {
		t.Errorf("stream accepted debug line: %q", l)
	}
	if l := ts.log.lines("INFO", "route=/health"); len(l) != 0 {
		t.Errorf("housekeeping in the access log: %q", l)
	}
	if l := ts.log.lines("DEBUG", "request completed:", "route=/health", "model=none status=200"); len(l) != 1 {
		t.Errorf("housekeeping debug fallback: %q", l)
	}
}

func TestRequestIDsAndCORS(t *testing.T) {
	ts := startServer(t)
	resp, _ := ts.get("/v1/models", "X-Request-Id", "client-id.1")
	if resp.Header.Get("X-Request-Id") != "client-id.1" {
		t.Errorf("echo: %v", resp.Header)
	}
	resp, _ = ts.get("/v1/models", "X-Request-Id", "has space")
	if id := resp.Header.Get("X-Request-Id"); !regexp.MustCompile(`^req_[0-9a-f]{32}$`).MatchString(id) {
		t.Errorf("invalid id not replaced: %q", id)
	}
	for _, path := range []string{"/nowhere", "/health"} {
		if resp, _ := ts.get(path); resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s without x-request-id", path)
		}
	}
	req, _ := newRequest("OPTIONS", ts.url+"/v1/chat/completions")
	req.Header.Set("Origin", "http://example.com")
	req.Header.Set("Access-Control-Request-Method", "POST")
	resp, _ = ts.do(req)
	if resp.StatusCode != 200 || !strings.Contains(strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "x-request-id") || resp.Header.Get("X-Request-Id") == "" {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
}

func TestMetricsDisabledAndJSONAccessLog(t *testing.T) {
	ts := startServer(t, func(o *Options) {
		o.Observe.Metrics = false
		o.Observe.AccessLogFormat = observe.FormatJSON
	})
	resp, body := ts.get("/metrics")
	if resp.StatusCode != 503 || string(body) != "metrics disabled" {
		t.Errorf("/metrics: %d %q", resp.StatusCode, body)
	}
	if r, b := ts.post("/v1/completions", map[string]any{"prompt": "hi", "max_tokens": 2}, "X-Request-Id", "j1"); r.StatusCode != 200 {
		t.Fatalf("%d %s", r.StatusCode, b)
	}
	line := ts.log.waitLines(t, 1, `"request_id":"j1"`, "request_completed")[0]
	var obj map[string]any
	if err := json.Unmarshal([]byte(line), &obj); err != nil {
		t.Fatalf("not one JSON object: %q", line)
	}
	if obj["route"] != "/v1/completions" || obj["model"] != "tiny" || obj["status"] != "200" {
		t.Errorf("json line %v", obj)
	}
}

// OpenMetrics scrapes carry the request id as an exemplar on the request
// duration and TTFT histograms.
func TestOpenMetricsExemplars(t *testing.T) {
	ts := startServer(t)
	ts.streamChat(t, "exemplar-1", map[string]any{"messages": []map[string]string{{"role": "user", "content": "x"}}, "max_tokens": 2})
	resp, body := ts.get("/metrics", "Accept", "application/openmetrics-text; version=1.0.0")
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/openmetrics-text") {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	for _, fam := range []string{"mistralrs_time_to_first_token_seconds_bucket", "http_request_duration_seconds_bucket"} {
		found := false
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, fam+"{") && strings.Contains(line, `# {request_id="exemplar-1"}`) {
				found = true
			}
		}
		if !found {
			t.Errorf("no exemplar with the request id on %s", fam)
		}
	}
}
