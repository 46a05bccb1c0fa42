package observe

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Each layer of the stack works alone over a trivial handler: these tests
// use one layer each (wrapping one route's handler inside a ServeMux where
// the layer needs a route label).

func gather(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func TestRouterAlone(t *testing.T) {
	type seen struct {
		route string
		hk    bool
	}
	var got seen
	mux := http.NewServeMux()
	for _, p := range []string{"GET /v1/models", "GET /v1/files/{id}", "GET /health", "POST /v1/chat/completions"} {
		mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	h := Router(mux, testRoutes())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = seen{Route(r.Context()), IsHousekeeping(r.Context())}
	}))
	for _, c := range []struct {
		method, path string
		want         seen
	}{
		{"GET", "/v1/models", seen{"/v1/models", false}},
		{"GET", "/v1/files/abc", seen{"/v1/files/{id}", false}},
		{"GET", "/v1/chat/completions", seen{"/v1/chat/completions", false}}, // wrong method: the path's label
		{"GET", "/nope", seen{Unmatched, false}},
		{"GET", "/health", seen{"/health", true}},
		{"OPTIONS", "/v1/models", seen{"/v1/models", true}},
		{"CONNECT", "/v1/models", seen{Unmatched, false}},
	} {
		got = seen{}
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, c.path, nil))
		if got != c.want {
			t.Errorf("%s %s: %+v, want %+v", c.method, c.path, got, c.want)
		}
	}
}

func TestRequestIDsAlone(t *testing.T) {
	var id string
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id = RequestID(r.Context())
		w.Header().Set(HeaderRequestID, "the-handler's")
		w.WriteHeader(http.StatusNoContent)
	})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/x", nil)
	req.Header.Set(HeaderRequestID, "from-edge-1")
	RequestIDs(true)(next).ServeHTTP(rec, req)
	if id != "from-edge-1" || rec.Header().Values(HeaderRequestID)[0] != "from-edge-1" || len(rec.Header().Values(HeaderRequestID)) != 1 {
		t.Errorf("incoming: id %q, header %q", id, rec.Header().Values(HeaderRequestID))
	}
	rec = httptest.NewRecorder()
	req = httptest.NewRequest("GET", "/x", nil)
	req.Header.Set(HeaderRequestID, "bad id with spaces")
	RequestIDs(false)(next).ServeHTTP(rec, req)
	if !regexpMatch(`^req_[0-9a-f]{32}$`, id) || rec.Header().Get(HeaderRequestID) != "the-handler's" {
		t.Errorf("generated: id %q, header %q", id, rec.Header().Get(HeaderRequestID))
	}
}

func TestModelLabelsAndBufferBodyAlone(t *testing.T) {
	var model, body string
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rec := RecordFrom(r.Context()); rec != nil {
			model = rec.Model()
		}
		b, _ := ReadBody(r)
		body = string(b)
	})
	labels := ModelLabels(testRoutes(), testModels)
	buffer := BufferBody(64, nil)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", labels(buffer(handler)))
	mux.Handle("GET /v1/lora_adapters", labels(handler))
	mux.Handle("GET /v1/models", labels(handler))
	for _, c := range []struct {
		method, target, body string
		status               int
		model, seen          string
	}{
		{"POST", "/v1/chat/completions", `{"model":"llama-3.2-1b"}`, 200, "llama-3.2-1b", `{"model":"llama-3.2-1b"}`},
		{"POST", "/v1/chat/completions", `{"model":"not-served"}`, 200, ModelUnknown, `{"model":"not-served"}`},
		{"POST", "/v1/chat/completions", `{}`, 200, "qwen3-0.6b", `{}`},
		{"POST", "/v1/chat/completions", `{"model":"` + strings.Repeat("x", 70) + `"}`, 413, "", ""},
		{"GET", "/v1/lora_adapters?model=my-alias", "", 200, "my-alias", ""},
		{"GET", "/v1/models?model=my-alias", "", 200, ModelNone, ""},
	} {
		model, body = "", ""
		var rd io.Reader
		if c.body != "" {
			rd = strings.NewReader(c.body)
		}
		req := httptest.NewRequest(c.method, c.target, rd)
		req.ContentLength = -1 // read, not declared
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != c.status || model != c.model || body != c.seen {
			t.Errorf("%s %s: %d model %q body %q, want %d %q %q", c.method, c.target, rec.Code, model, body, c.status, c.model, c.seen)
		}
		if c.status == 413 && !strings.Contains(rec.Body.String(), `"code":"request_body_too_large"`) {
			t.Errorf("413 body %s", rec.Body.String())
		}
	}
	// BufferBody alone: nothing waits for the body, so it is left unread.
	req := httptest.NewRequest("POST", "/x", strings.NewReader(strings.Repeat("y", 100)))
	rec := httptest.NewRecorder()
	buffer(handler).ServeHTTP(rec, req)
	if rec.Code != 200 || len(body) != 100 {
		t.Errorf("alone: %d, handler read %d bytes", rec.Code, len(body))
	}
}

func TestAccessLogAlone(t *testing.T) {
	logs := &logBuf{}
	f, _ := ParseFilter("info")
	log := AccessLog(AccessLogOptions{Enabled: true, Logger: slog.New(NewTracingHandler(logs, f))})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/things", log(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteErrorMessage(w, r, http.StatusConflict, "already there")
	})))
	mux.Handle("GET /health", log(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	// Which routes are housekeeping is a fact of the route table, which only
	// Router is given: it names the route here and nothing else.
	h := Router(mux, []RouteFacts{{Method: "GET", Pattern: "/health", Housekeeping: true}})(mux)
	req := httptest.NewRequest("POST", "/v1/things", strings.NewReader("abc"))
	req.Header.Set("Content-Length", "3")
	h.ServeHTTP(httptest.NewRecorder(), req)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/health", nil))
	want := []string{
		"TS  INFO mistralrs_server_core::metrics: request started: request_id= method=POST route=/v1/things path=/v1/things model=none content_length=3",
		`TS  INFO mistralrs_server_core::metrics: request completed: request_id= method=POST route=/v1/things model=none status=409 duration_ms=D error="already there"`,
	}
	if got := maskAll(logs.Lines()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestHTTPMetricsAlone(t *testing.T) {
	m := NewMetrics()
	var inflight float64
	h := HTTPMetrics(m)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inflight = series(gather(t, m), "http_requests_in_flight", labels("method", "POST", "path", Unmatched, "model", "none")).GetGauge().GetValue()
		w.WriteHeader(http.StatusCreated)
	}))
	req := httptest.NewRequest("POST", "/anything", strings.NewReader("12345"))
	req.Header.Set("Content-Length", "5")
	h.ServeHTTP(httptest.NewRecorder(), req)
	fams := gather(t, m)
	done := labels("method", "POST", "path", Unmatched, "model", "none", "status", "201")
	if v := series(fams, "http_requests_total", done).GetCounter().GetValue(); v != 1 || inflight != 1 {
		t.Errorf("requests %v, in flight during the request %v", v, inflight)
	}
	if v := series(fams, "http_requests_in_flight", labels("method", "POST", "path", Unmatched, "model", "none")).GetGauge().GetValue(); v != 0 {
		t.Errorf("in flight after: %v", v)
	}
	if hs := series(fams, "http_request_body_bytes", labels("method", "POST", "path", Unmatched, "model", "none")).GetHistogram(); hs.GetSampleCount() != 1 || hs.GetSampleSum() != 5 {
		t.Errorf("body bytes %v", hs)
	}
	if hs := series(fams, "http_request_duration_seconds", done).GetHistogram(); hs.GetSampleCount() != 1 {
		t.Errorf("duration %v", hs)
	}
	// A handler that panics is counted as a 500 before the panic goes on.
	func() {
		defer func() { _ = recover() }()
		HTTPMetrics(m)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })).
			ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/p", nil))
	}()
	if v := series(gather(t, m), "http_requests_total", labels("method", "GET", "path", Unmatched, "model", "none", "status", "500")).GetCounter().GetValue(); v != 1 {
		t.Errorf("panic: %v", v)
	}
	if HTTPMetrics(nil)(ok) == nil {
		t.Error("nil metrics")
	}
}

var ok = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

func TestStreamLatencyAlone(t *testing.T) {
	m := NewMetrics()
	h := StreamLatency(m)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := StreamFromContext(r.Context())
		s.TokenStep(time.Now()) // before the header: kept until it is written
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for range 3 {
			s.TokenStep(time.Now())
			_, _ = io.WriteString(w, "data: {}\n\n")
		}
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/s", nil))
	fams := gather(t, m)
	want := labels("method", "POST", "path", Unmatched, "model", "none", "status", "200")
	if n := series(fams, "mistralrs_time_to_first_token_seconds", want).GetHistogram().GetSampleCount(); n != 1 {
		t.Errorf("TTFT samples %d, want 1", n)
	}
	if n := series(fams, "mistralrs_inter_token_latency_seconds", want).GetHistogram().GetSampleCount(); n != 3 {
		t.Errorf("ITL samples %d, want 3", n)
	}
	// A response that is not a stream gives no samples.
	m2 := NewMetrics()
	StreamLatency(m2)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		StreamFromContext(r.Context()).TokenStep(time.Now())
	})).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/s", nil))
	if f := gather(t, m2)["mistralrs_time_to_first_token_seconds"]; f != nil && len(f.GetMetric()) > 0 {
		t.Errorf("samples for a JSON response: %v", f)
	}
}
