package observe

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// tracedEnv is the test server with tracing on, its spans recorded in memory.
func tracedEnv(t *testing.T, format string) (*testEnv, *tracetest.SpanRecorder) {
	t.Helper()
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	e := newEnv(t, "info", func(o *Options) {
		o.Tracer = tp
		o.AccessLogFormat = format
	})
	return e, sr
}

func attrsOf(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func TestTracingServerSpan(t *testing.T) {
	e, sr := tracedEnv(t, FormatText)
	rec := e.do("POST", "/v1/chat/completions", `{"model":"default"}`, "traceparent", incoming,
		"X-Request-Id", "span-1", "User-Agent", "tester/1")
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	spans := sr.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Name() != "POST /v1/chat/completions" || s.SpanKind() != trace.SpanKindServer {
		t.Errorf("span %q kind %v", s.Name(), s.SpanKind())
	}
	if got := s.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id %s does not continue the traceparent", got)
	}
	if got := s.Parent().SpanID().String(); got != "00f067aa0ba902b7" || !s.Parent().IsRemote() {
		t.Errorf("parent %s remote=%v", got, s.Parent().IsRemote())
	}
	a := attrsOf(s)
	for k, want := range map[attribute.Key]string{
		"http.request.method": "POST", "http.route": "/v1/chat/completions", "url.path": "/v1/chat/completions",
		"mistralrs.request_id": "span-1", "client.address": "192.0.2.1", "user_agent.original": "tester/1",
		"mistralrs.model": "qwen3-0.6b",
	} {
		if a[k].AsString() != want {
			t.Errorf("%s = %q, want %q", k, a[k].AsString(), want)
		}
	}
	if a["http.response.status_code"].AsInt64() != 200 || a["http.request.body.size"].AsInt64() != int64(len(`{"model":"default"}`)) {
		t.Errorf("status %v body size %v", a["http.response.status_code"], a["http.request.body.size"])
	}
	if s.Status().Code == codes.Error {
		t.Error("a 200 marked as an error")
	}
	lines := e.logs.Lines()
	if len(lines) != 2 {
		t.Fatalf("access lines %q", lines)
	}
	for _, l := range lines {
		if !strings.Contains(l, "request_id=span-1 trace_id=4bf92f3577b34da6a3ce929d0e0e4736 method=POST") {
			t.Errorf("access line without the trace id: %s", l)
		}
	}
}

// A malformed traceparent is ignored: the request starts a new root.
func TestTracingMalformedTraceparent(t *testing.T) {
	e, sr := tracedEnv(t, FormatJSON)
	for _, tp := range []string{"garbage", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01"} {
		sr.Reset()
		e.logs.Reset()
		if rec := e.do("GET", "/v1/models", "", "traceparent", tp); rec.Code != 200 {
			t.Fatalf("%q: status %d", tp, rec.Code)
		}
		spans := sr.Ended()
		if len(spans) != 1 {
			t.Fatalf("%q: %d spans", tp, len(spans))
		}
		s := spans[0]
		if s.Parent().IsValid() || !s.SpanContext().IsValid() {
			t.Errorf("%q: parent %v, span %v: want a new root", tp, s.Parent(), s.SpanContext())
		}
		for _, l := range e.logs.Lines() {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%v: %s", err, l)
			}
			if m["trace_id"] != s.SpanContext().TraceID().String() {
				t.Errorf("JSON line trace_id %v, want %s", m["trace_id"], s.SpanContext().TraceID())
			}
		}
	}
}

// Housekeeping gets no span; an error status marks the span; a 404 is named
// by the method alone.
func TestTracingHousekeepingAndErrors(t *testing.T) {
	e, sr := tracedEnv(t, FormatText)
	e.do("GET", "/health", "")
	e.do("GET", "/metrics", "")
	if n := len(sr.Ended()); n != 0 {
		t.Errorf("%d spans for housekeeping", n)
	}
	e.do("POST", "/v1/plain", "x")
	e.do("GET", "/nowhere", "")
	spans := sr.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	if spans[0].Name() != "POST /v1/plain" || spans[0].Status().Code != codes.Error {
		t.Errorf("500: %q %v", spans[0].Name(), spans[0].Status())
	}
	if spans[1].Name() != "GET" || spans[1].Status().Code == codes.Error {
		t.Errorf("404: %q %v", spans[1].Name(), spans[1].Status())
	}
	if _, ok := attrsOf(spans[1])["http.route"]; ok {
		t.Error("an unmatched request has http.route")
	}
}

// The handler finds the span in its context; with tracing off it finds
// none and the record has no trace id.
func TestTracingContextAndOff(t *testing.T) {
	for _, on := range []bool{false, true} {
		var tp trace.TracerProvider
		if on {
			tp = sdktrace.NewTracerProvider()
		}
		var valid bool
		var traceID string
		h := Chain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			valid = trace.SpanFromContext(r.Context()).SpanContext().IsValid()
			traceID = TraceID(r.Context())
		}), Router(http.NewServeMux(), nil), Tracing(tp))
		req := httptest.NewRequest("POST", "/v1/x", nil)
		req.Header.Set("traceparent", incoming)
		h.ServeHTTP(httptest.NewRecorder(), req)
		if valid != on || (traceID != "") != on {
			t.Errorf("tracing %v: span in context %v, trace id %q", on, valid, traceID)
		}
	}
	next := &dispatch{}
	if got := Tracing(nil)(next); got != http.Handler(next) {
		t.Error("Tracing(nil) wraps the handler")
	}
}

var traceExemplarRe = regexp.MustCompile(`^(\w+)_bucket\{[^}]*\} \d+ # \{([^}]*)\}`)

// The latency histograms' exemplars carry the trace id beside the request id.
func TestTracingExemplar(t *testing.T) {
	e, _ := tracedEnv(t, FormatText)
	e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":2}`, "X-Request-Id", "ex-1", "traceparent", incoming)
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0; charset=utf-8")
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	found := map[string]string{}
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if m := traceExemplarRe.FindStringSubmatch(line); m != nil {
			found[m[1]] = m[2]
		}
	}
	for _, fam := range []string{"http_request_duration_seconds", "mistralrs_time_to_first_token_seconds"} {
		l := found[fam]
		if !strings.Contains(l, `trace_id="4bf92f3577b34da6a3ce929d0e0e4736"`) || !strings.Contains(l, `request_id="ex-1"`) {
			t.Errorf("%s exemplar {%s}, want trace and request ids", fam, l)
		}
	}
}

func TestExemplarLabelsBound(t *testing.T) {
	tid := strings.Repeat("a", 32)
	if l := exemplarLabels("", ""); l != nil {
		t.Errorf("no ids: %v", l)
	}
	if l := exemplarLabels("r", tid); len(l) != 2 {
		t.Errorf("both ids: %v", l)
	}
	long := strings.Repeat("r", 128-len("request_id"))
	if l := exemplarLabels(long, ""); l["request_id"] != long {
		t.Errorf("a request id of the whole budget: %v", l)
	}
	if l := exemplarLabels(long, tid); len(l) != 1 || l["trace_id"] != tid {
		t.Errorf("over the budget together: %v", l)
	}
	n := 0
	for k, v := range exemplarLabels("req-123", tid) {
		n += len(k) + len(v)
	}
	if n > 128 {
		t.Errorf("%d runes", n)
	}
}
