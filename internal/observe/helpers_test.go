package observe

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// logBuf collects log output; safe for concurrent writers.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := strings.TrimRight(l.b.String(), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func (l *logBuf) Reset() {
	l.mu.Lock()
	l.b.Reset()
	l.mu.Unlock()
}

var (
	tsRe       = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z `)
	durRe      = regexp.MustCompile(`(duration_ms|accepted_ms)=\d+\.\d{3}\b`)
	reqIDRe    = regexp.MustCompile(`req_[0-9a-f]{32}`)
	jsonTimeRe = regexp.MustCompile(`"time":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z"`)
	jsonDurRe  = regexp.MustCompile(`"duration_ms":\d+\.\d+`)
)

// mask replaces the parts of a line that vary between runs: the timestamp
// (checked for its exact shape), durations (shape checked: 3 decimals) and
// generated request ids.
func mask(line string) string {
	line = tsRe.ReplaceAllString(line, "TS ")
	line = durRe.ReplaceAllString(line, "$1=D")
	line = jsonTimeRe.ReplaceAllString(line, `"time":"TS"`)
	line = jsonDurRe.ReplaceAllString(line, `"duration_ms":D`)
	return reqIDRe.ReplaceAllString(line, "req_ID")
}

func maskAll(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = mask(l)
	}
	return out
}

var testModels = StaticModels{Default: "qwen3-0.6b", IDs: []string{"qwen3-0.6b", "llama-3.2-1b", "my-alias"}}

// mistralrsModelSources is mistral.rs's per-route table of model sources,
// keyed by path pattern: the routes of the test server are shaped like it.
func mistralrsModelSources() map[string]ModelSource {
	return map[string]ModelSource{
		"/v1/chat/completions":      SourceBody,
		"/v1/completions":           SourceBody,
		"/v1/responses":             SourceBody,
		"/v1/messages":              SourceBody,
		"/v1/messages/count_tokens": SourceBody,
		"/v1/embeddings":            SourceBody,
		"/v1/images/generations":    SourceBody,
		"/v1/audio/speech":          SourceBody,
		"/v1/load_lora_adapter":     SourceBodyTrimmed,
		"/v1/unload_lora_adapter":   SourceBodyTrimmed,
		"/v1/lora_adapters":         SourceQuery,
		"/v1/models/unload":         SourceModelID,
		"/v1/models/reload":         SourceModelID,
		"/v1/models/status":         SourceModelID,
		"/v1/models/tune":           SourceModelID,
	}
}

// testRoutes are the facts of the test server's routes (a new slice each
// call, for tests to change): mistral.rs's model sources, and its
// housekeeping routes as testMux registers them.
func testRoutes() []RouteFacts {
	var routes []RouteFacts
	for p, src := range mistralrsModelSources() {
		m := http.MethodPost
		if src == SourceQuery {
			m = http.MethodGet
		}
		routes = append(routes, RouteFacts{Method: m, Pattern: p, Model: src})
	}
	for _, p := range []string{"/health", "/{$}", "/metrics", "/docs/", "/api-doc/openapi.json", "/ui/"} {
		routes = append(routes, RouteFacts{Method: http.MethodGet, Pattern: p, Housekeeping: true})
	}
	return routes
}

// withTestRoutes returns opts with the test server's routes.
func withTestRoutes(opts Options) Options {
	opts.Routes = testRoutes()
	return opts
}

// testEnv is an observed test server: a tiny ServeMux with routes shaped
// like the real server's.
type testEnv struct {
	o    *HTTPLayer
	h    http.Handler
	logs *logBuf
}

func newEnv(t testing.TB, filter string, mod func(*Options)) *testEnv {
	t.Helper()
	logs := &logBuf{}
	f, err := ParseFilter(filter)
	if err != nil {
		t.Fatal(err)
	}
	th := NewTracingHandler(logs, f)
	opts := withTestRoutes(DefaultOptions())
	opts.Logger = slog.New(th)
	opts.Models = testModels
	if mod != nil {
		mod(&opts)
	}
	o, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &testEnv{o: o, h: o.Handler(testMux(o)), logs: logs}
}

// chatRequest is the part of a chat request the test handler reads.
type chatRequest struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
	Steps  int    `json:"steps"`   // token steps to stream
	StepMs int    `json:"step_ms"` // simulated gap between steps
	Fail   string `json:"fail"`    // stream error text
	Usage  bool   `json:"usage"`
}

func testMux(o *HTTPLayer) *http.ServeMux {
	mux := http.NewServeMux()
	health := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "OK")
	}
	mux.HandleFunc("GET /health", health)
	mux.HandleFunc("GET /{$}", health)
	mux.Handle("GET /metrics", o.MetricsHandler())
	mux.HandleFunc("GET /docs/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "<html>") })
	mux.HandleFunc("GET /api-doc/openapi.json", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "{}") })
	mux.HandleFunc("GET /ui/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "<html>") })
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	})
	mux.HandleFunc("GET /v1/files/{id}", func(w http.ResponseWriter, r *http.Request) {
		WriteErrorMessage(w, r, http.StatusNotFound, "file "+r.PathValue("id")+" not found")
	})
	mux.HandleFunc("POST /v1/models/status", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ModelID string `json:"model_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"model_id": req.ModelID, "status": "loaded"})
	})
	mux.HandleFunc("GET /v1/lora_adapters", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	})
	mux.HandleFunc("POST /v1/plain", func(w http.ResponseWriter, r *http.Request) {
		// A plain-text error body: the access log reads the message from it.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "  boom: \"quoted\"\nsecond line  \n")
	})
	mux.HandleFunc("POST /v1/upload", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		if IsBodyTooLarge(err) {
			WriteBodyTooLarge(w, r)
			return
		}
		_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req chatRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			WriteErrorMessage(w, r, http.StatusBadRequest, "invalid JSON body: "+err.Error())
			return
		}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"1","object":"chat.completion"}`)
			return
		}
		s := StreamFromContext(r.Context())
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		flusher := w.(http.Flusher)
		_, _ = io.WriteString(w, ":\n\n") // a keep-alive frame: not a token step
		flusher.Flush()
		for i := 0; i < req.Steps; i++ {
			if req.StepMs > 0 {
				select {
				case <-time.After(time.Duration(req.StepMs) * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
			s.TokenStep(time.Now())
			if _, err := io.WriteString(w, `data: {"object":"chat.completion.chunk"}`+"\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
		if req.Fail != "" {
			s.Error(req.Fail)
			_, _ = io.WriteString(w, `data: {"error":{"message":"`+req.Fail+`"}}`+"\n\n")
		} else if req.Usage {
			s.SetUsage(Usage{PromptTokens: 12, CompletionTokens: req.Steps, PrefillTokPerSec: 48.70000076293945, DecodeTokPerSec: 21.26})
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
		flusher.Flush()
		s.Done()
	})
	return mux
}

// do sends one request through the stack synchronously.
func (e *testEnv) do(method, target, body string, hdr ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	if body == "" {
		req.Header.Del("Content-Length")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}

// scrape fetches /metrics in the Prometheus text format and parses it.
func (e *testEnv) scrape(t testing.TB) map[string]*dto.MetricFamily {
	t.Helper()
	req := httptest.NewRequest("GET", "/metrics", nil)
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body.String())
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, rec.Body.String())
	}
	return fams
}

// series finds the metric of family name whose labels are exactly want.
func series(fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	f := fams[name]
	if f == nil {
		return nil
	}
	for _, m := range f.Metric {
		if len(m.Label) != len(want) {
			continue
		}
		ok := true
		for _, lp := range m.Label {
			if want[lp.GetName()] != lp.GetValue() {
				ok = false
				break
			}
		}
		if ok {
			return m
		}
	}
	return nil
}

func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func slogWith(h slog.Handler) *slog.Logger { return slog.New(h).With(TargetKey, TargetServer) }

// serve sends one request through o with an empty mux plus /v1/models.
func serve(o *HTTPLayer, method, target, body string) *httptest.ResponseRecorder {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {})
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	rec := httptest.NewRecorder()
	o.Handler(mux).ServeHTTP(rec, httptest.NewRequest(method, target, rd))
	return rec
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }
