package observe

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestSeedStatements walks the statements of observability-seed.txt that
// this package implements, each with a check. Statements about the CLI and
// TOML wiring (flag parsing, [server] keys, from-config sharing the path)
// belong to the server and config packages.
func TestSeedStatements(t *testing.T) {
	for _, c := range []struct {
		statement string
		check     func(t *testing.T)
	}{
		{"access logs appear in the same stdout/stderr stream as startup logs", func(t *testing.T) {
			var buf logBuf
			th := NewTracingHandler(&buf, nil)
			slog := slogWith(th)
			slog.Info("startup")
			o, _ := New(Options{AccessLog: true, Logger: slogWith(th)})
			serve(o, "GET", "/v1/models", "")
			if l := buf.Lines(); len(l) != 3 || !strings.Contains(l[1], "request started") {
				t.Errorf("%q", l)
			}
		}},
		{"Access logs are enabled by default.", func(t *testing.T) {
			if !DefaultOptions().AccessLog || DefaultOptions().AccessLogFormat != FormatText {
				t.Error("defaults")
			}
		}},
		{"request started: request id, method, matched route, raw path, resolved model id, and request content length when present", func(t *testing.T) {
			e := newEnv(t, "info", nil)
			e.do("POST", "/v1/chat/completions?q=1", `{"model":"my-alias"}`, "X-Request-Id", "r1")
			e.do("GET", "/v1/files/a%2Fb", "", "X-Request-Id", "r2")
			l := maskAll(e.logs.Lines())
			if !strings.HasSuffix(l[0], "request started: request_id=r1 method=POST route=/v1/chat/completions path=/v1/chat/completions model=my-alias content_length=20") ||
				!strings.HasSuffix(l[2], "request started: request_id=r2 method=GET route=/v1/files/{id} path=/v1/files/a%2Fb model=none") {
				t.Errorf("%q", l)
			}
		}},
		{"request completed: request id, method, matched route, resolved model id, status, and duration in milliseconds rounded to three decimal places", func(t *testing.T) {
			e := newEnv(t, "info", nil)
			e.do("GET", "/v1/models", "", "X-Request-Id", "r1")
			l := e.logs.Lines()[1]
			if !regexpMatch(`request completed: request_id=r1 method=GET route=/v1/models model=none status=200 duration_ms=\d+\.\d{3}$`, l) {
				t.Error(l)
			}
		}},
		{"Housekeeping endpoints (/, /health, /metrics, /docs, /api-doc/openapi.json, /ui) and CORS preflight requests are skipped by default; --access-log-health includes them", func(t *testing.T) {
			for _, health := range []bool{false, true} {
				e := newEnv(t, "info", func(o *Options) { o.AccessLogHealth = health })
				for _, p := range []string{"/", "/health", "/metrics", "/docs/", "/api-doc/openapi.json", "/ui/"} {
					e.do("GET", p, "")
				}
				e.do("OPTIONS", "/v1/chat/completions", "", "Access-Control-Request-Method", "POST")
				if n := len(e.logs.Lines()); (n == 14) != health || (n == 0) == health {
					t.Errorf("access-log-health=%v: %d lines", health, n)
				}
			}
		}},
		{"--disable-access-log turns off info-level HTTP access logs", func(t *testing.T) {
			e := newEnv(t, "trace", func(o *Options) { o.AccessLog = false })
			e.do("GET", "/v1/models", "")
			for _, l := range e.logs.Lines() {
				if strings.Contains(l, " INFO ") {
					t.Error(l)
				}
			}
		}},
		{"--access-log-format json logs each access-log message as a JSON object (deliberate difference: the whole line is the object)", func(t *testing.T) {
			e := newEnv(t, "info", func(o *Options) { o.AccessLogFormat = FormatJSON })
			e.do("GET", "/v1/models", "")
			for _, l := range e.logs.Lines() {
				jsonKeys(t, l)
			}
			if _, err := New(Options{AccessLogFormat: "xml"}); err == nil {
				t.Error("bad format accepted")
			}
		}},
		{"-v, -vv and RUST_LOG decide which levels are emitted; --disable-access-log only disables the info-level access events", func(t *testing.T) {
			e := newEnv(t, DefaultFilter(1).String(), func(o *Options) { o.AccessLog = false })
			e.do("GET", "/v1/models", "")
			if l := e.logs.Lines(); len(l) != 1 || !strings.Contains(l[0], "DEBUG mistralrs_server_core::metrics: request completed") {
				t.Errorf("-v with the access log off: %q", l)
			}
			e = newEnv(t, "mistralrs_server_core::metrics=warn", nil)
			e.do("GET", "/v1/models", "")
			if l := e.logs.Lines(); len(l) != 0 {
				t.Errorf("RUST_LOG silencing the access target: %q", l)
			}
		}},
		{"-l, --log is not an access-log file: it records full model requests and responses", func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "payload.log")
			p, err := OpenPayloadLog(path)
			if err != nil {
				t.Fatal(err)
			}
			_ = p.Request(`{"messages":[{"role":"user","content":"full prompt"}]}`)
			_ = p.Response(`{"choices":[{"message":{"content":"full answer"}}]}`)
			p.Close()
			b, _ := os.ReadFile(path)
			if !strings.Contains(string(b), "full prompt") || !strings.Contains(string(b), "full answer") || strings.Contains(string(b), "request started") {
				t.Errorf("%s", b)
			}
		}},
		{"The server honors an incoming x-request-id header when present, otherwise it generates one; added to access logs and echoed", func(t *testing.T) {
			e := newEnv(t, "info", nil)
			if got := e.do("GET", "/v1/models", "", "X-Request-Id", "client-1").Header().Get("X-Request-Id"); got != "client-1" {
				t.Error(got)
			}
			got := e.do("GET", "/v1/models", "").Header().Get("X-Request-Id")
			if !genIDRe.MatchString(got) || !strings.Contains(e.logs.Lines()[3], "request_id="+got) {
				t.Error(got)
			}
		}},
		{"The default CORS configuration allows browser clients to send x-request-id and exposes the response header", func(t *testing.T) {
			e := newEnv(t, "off", nil)
			pre := e.do("OPTIONS", "/v1/chat/completions", "", "Origin", "http://x", "Access-Control-Request-Headers", "x-request-id")
			get := e.do("GET", "/v1/models", "", "Origin", "http://x")
			if !strings.Contains(pre.Header().Get("Access-Control-Allow-Headers"), "x-request-id") ||
				get.Header().Get("Access-Control-Expose-Headers") != "x-request-id" {
				t.Error(pre.Header(), get.Header())
			}
		}},
		{"--disable-request-id-header stops adding the response header; the id is still generated for access logs", func(t *testing.T) {
			e := newEnv(t, "info", func(o *Options) { o.RequestIDHeader = false })
			rec := e.do("GET", "/v1/models", "")
			if rec.Header().Get("X-Request-Id") != "" || !strings.Contains(mask(e.logs.Lines()[0]), "request_id=req_ID") {
				t.Error(rec.Header(), e.logs.Lines())
			}
		}},
		{"GET /metrics exposes Prometheus text format by default", func(t *testing.T) {
			e := newEnv(t, "off", nil)
			if ct := e.do("GET", "/metrics", "").Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Error(ct)
			}
		}},
		{"Metrics come from two layers: http_* and mistralrs_*; engine metrics are unlabeled", func(t *testing.T) {
			e := newEnv(t, "off", nil)
			e.do("GET", "/v1/models", "")
			for name, f := range e.scrape(t) {
				if !strings.HasPrefix(name, "http_") && !strings.HasPrefix(name, "mistralrs_") {
					t.Error(name)
				}
				if _, ok := engineFamilies[name]; ok {
					for _, m := range f.Metric {
						if len(m.Label) > 1 || len(m.Label) == 1 && m.Label[0].GetName() != "reason" && m.Label[0].GetName() != "position" {
							t.Error(name, m.Label)
						}
					}
				}
			}
		}},
		{"HTTP metrics table: names, types and labels", func(t *testing.T) {
			e := newEnv(t, "off", nil)
			e.do("POST", "/v1/chat/completions", `{}`)
			checkTable(t, e.scrape(t), map[string]familyShape{
				"http_requests_total":           {dto.MetricType_COUNTER, "method,model,path,status"},
				"http_request_duration_seconds": {dto.MetricType_HISTOGRAM, "method,model,path,status"},
				"http_requests_in_flight":       {dto.MetricType_GAUGE, "method,model,path"},
				"http_request_body_bytes":       {dto.MetricType_HISTOGRAM, "method,model,path"},
			})
		}},
		{"Streaming latency table; timed at engine token steps, not SSE frames; vLLM buckets; http_* keep their own", func(t *testing.T) {
			e := newEnv(t, "off", nil)
			e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":3}`)
			fams := e.scrape(t)
			checkTable(t, fams, map[string]familyShape{
				"mistralrs_time_to_first_token_seconds": {dto.MetricType_HISTOGRAM, "method,model,path,status"},
				"mistralrs_inter_token_latency_seconds": {dto.MetricType_HISTOGRAM, "method,model,path,status"},
			})
			// 3 steps, plus a keep-alive and [DONE] written by the handler.
			if fams["mistralrs_time_to_first_token_seconds"].Metric[0].GetHistogram().GetSampleCount() != 1 ||
				fams["mistralrs_inter_token_latency_seconds"].Metric[0].GetHistogram().GetSampleCount() != 2 {
				t.Error("samples do not follow token steps")
			}
		}},
		{"Engine metrics table: names, types, labels; reason values", func(t *testing.T) {
			e := newEnv(t, "off", nil)
			checkTable(t, e.scrape(t), map[string]familyShape{
				"mistralrs_tokens_processed_total":       {dto.MetricType_COUNTER, ""},
				"mistralrs_prefix_cache_lookups_total":   {dto.MetricType_COUNTER, ""},
				"mistralrs_prefix_cache_hits_total":      {dto.MetricType_COUNTER, ""},
				"mistralrs_prefix_cache_evictions_total": {dto.MetricType_COUNTER, ""},
				"mistralrs_encoder_cache_hits_total":     {dto.MetricType_COUNTER, ""},
				"mistralrs_encoder_cache_misses_total":   {dto.MetricType_COUNTER, ""},
				"mistralrs_sequences_running":            {dto.MetricType_GAUGE, ""},
				"mistralrs_sequences_waiting":            {dto.MetricType_GAUGE, ""},
				"mistralrs_sequences_completed_total":    {dto.MetricType_COUNTER, "reason"},
				"mistralrs_kv_cache_blocks_used":         {dto.MetricType_GAUGE, ""},
				"mistralrs_kv_cache_blocks_total":        {dto.MetricType_GAUGE, ""},
			})
			if strings.Join(CompletionReasons, ",") != "stop,length,canceled,generated_image,generated_speech,tool_calls,error" {
				t.Error(CompletionReasons)
			}
		}},
		{"Speculative decoding (MTP) table: names, types, labels", func(t *testing.T) {
			e := newEnv(t, "off", nil)
			checkTable(t, e.scrape(t), map[string]familyShape{
				"mistralrs_speculative_drafts_total":                        {dto.MetricType_COUNTER, ""},
				"mistralrs_speculative_draft_tokens_proposed_total":         {dto.MetricType_COUNTER, ""},
				"mistralrs_speculative_draft_tokens_accepted_total":         {dto.MetricType_COUNTER, ""},
				"mistralrs_speculative_draft_tokens_accepted_per_pos_total": {dto.MetricType_COUNTER, "position"},
				"mistralrs_speculative_staged_drops_total":                  {dto.MetricType_COUNTER, ""},
				"mistralrs_paged_preemptions_total":                         {dto.MetricType_COUNTER, ""},
			})
		}},
		{"The PromQL examples' series exist", func(t *testing.T) {
			e := newEnv(t, "off", nil)
			e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":2}`)
			fams := e.scrape(t)
			for _, n := range []string{"mistralrs_speculative_draft_tokens_accepted_total", "mistralrs_speculative_draft_tokens_proposed_total",
				"mistralrs_speculative_drafts_total", "mistralrs_time_to_first_token_seconds", "mistralrs_inter_token_latency_seconds",
				"mistralrs_kv_cache_blocks_used", "mistralrs_kv_cache_blocks_total"} {
				if fams[n] == nil {
					t.Error(n)
				}
			}
			if series(fams, "mistralrs_inter_token_latency_seconds", labels("method", "POST", "path", "/v1/chat/completions", "model", "qwen3-0.6b", "status", "200")) == nil {
				t.Error(`ITL has no path="/v1/chat/completions" series`)
			}
		}},
		{"The path label is the matched route pattern, such as /v1/responses/{response_id}, not the raw URI", func(t *testing.T) {
			o, _ := New(DefaultOptions())
			mux := http.NewServeMux()
			mux.HandleFunc("GET /v1/responses/{response_id}", func(w http.ResponseWriter, r *http.Request) {})
			mux.Handle("GET /metrics", o.MetricsHandler())
			h := o.Handler(mux)
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/responses/resp_123", nil))
			e := &testEnv{o: o, h: h}
			if series(e.scrape(t), "http_requests_total", labels("method", "GET", "path", "/v1/responses/{response_id}", "model", "none", "status", "200")) == nil {
				t.Error("pattern label missing")
			}
		}},
		{"model label: resolved id, server default when omitted, explicit model_id, unknown when unparsable, none for routes without a model", func(t *testing.T) {
			res := testModels
			cases := []struct {
				src  ModelSource
				body string
				want string
			}{
				{SourceBody, `{"model":"llama-3.2-1b"}`, "llama-3.2-1b"},
				{SourceBody, `{}`, "qwen3-0.6b"},
				{SourceModelID, `{"model_id":"llama-3.2-1b"}`, "llama-3.2-1b"},
				{SourceBody, `not json`, "unknown"},
				{SourceNone, `{"model":"llama-3.2-1b"}`, "none"},
			}
			for _, c := range cases {
				if got := modelLabel(c.src, res, []byte(c.body), ""); got != c.want {
					t.Errorf("%v %s: %s", c.src, c.body, got)
				}
			}
		}},
		{"Unmatched requests are labeled <unmatched>; housekeeping endpoints are excluded from HTTP metrics", func(t *testing.T) {
			e := newEnv(t, "off", nil)
			e.do("GET", "/zzz", "")
			e.do("GET", "/health", "")
			fams := e.scrape(t)
			if len(fams["http_requests_total"].Metric) != 1 ||
				series(fams, "http_requests_total", labels("method", "GET", "path", "<unmatched>", "model", "none", "status", "404")) == nil {
				t.Error(fams["http_requests_total"])
			}
		}},
		{"--disable-metrics: the recorder is not installed and GET /metrics returns 503", func(t *testing.T) {
			e := newEnv(t, "off", func(o *Options) { o.Metrics = false })
			if rec := e.do("GET", "/metrics", ""); rec.Code != 503 || e.o.Metrics() != nil {
				t.Error(rec.Code)
			}
		}},
	} {
		t.Run(c.statement, c.check)
	}
}

type familyShape struct {
	typ    dto.MetricType
	labels string // sorted, comma-separated
}

func checkTable(t *testing.T, fams map[string]*dto.MetricFamily, want map[string]familyShape) {
	t.Helper()
	for name, shape := range want {
		f := fams[name]
		if f == nil || len(f.Metric) == 0 {
			t.Errorf("%s missing", name)
			continue
		}
		if f.GetType() != shape.typ {
			t.Errorf("%s: type %v, want %v", name, f.GetType(), shape.typ)
		}
		var names []string
		for _, lp := range f.Metric[0].Label {
			names = append(names, lp.GetName())
		}
		if strings.Join(names, ",") != shape.labels {
			t.Errorf("%s: labels %v, want %s", name, names, shape.labels)
		}
	}
}
