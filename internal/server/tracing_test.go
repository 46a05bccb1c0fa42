package server

import (
	"net/http"
	"strings"
	"testing"

	"mistralrs/internal/tracing"
	"mistralrs/internal/tracing/tracingtest"
)

const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"

// withTracing sends the server's spans to rc.
func withTracing(t *testing.T, rc *tracingtest.Receiver) testOpt {
	p, err := tracing.New(t.Context(), tracing.Config{Endpoint: rc.URL, Getenv: func(string) string { return "" }})
	if err != nil {
		t.Fatal(err)
	}
	return func(o *Options) { o.Tracing = p }
}

// stop shuts the server down as SIGTERM would and waits for Serve, which
// flushes the spans after the drain.
func (ts *testServer) stop() {
	ts.cancel()
	err := <-ts.served
	ts.served <- err // for the cleanup
}

// One server span per API request, continuing the client's trace, exported
// over OTLP by the time the drain ends; the trace id is in the access line.
func TestServerSpansOverOTLP(t *testing.T) {
	rc := tracingtest.Start(t)
	ts := startServer(t, withTracing(t, rc))
	body := `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":%s}`
	for _, stream := range []string{"false", "true"} {
		resp, data := ts.post("/v1/chat/completions", strings.Replace(body, "%s", stream, 1),
			"traceparent", "00-"+parentTrace+"-"+parentSpan+"-01", "X-Request-Id", "otlp-"+stream)
		if resp.StatusCode != 200 {
			t.Fatalf("stream %s: %d %s", stream, resp.StatusCode, data)
		}
	}
	if resp, _ := ts.post("/v1/chat/completions", strings.Replace(body, "%s", "false", 1), "traceparent", "00-zz-00-01"); resp.StatusCode != 200 {
		t.Fatalf("malformed traceparent: %d", resp.StatusCode)
	}
	ts.get("/health")
	if _, m := ts.get("/metrics"); !strings.Contains(string(m), "\n"+tracing.DroppedMetric+" 0\n") {
		t.Errorf("/metrics lacks %s", tracing.DroppedMetric)
	}
	ts.stop()

	var server []tracingtest.Span
	for _, s := range rc.Spans() {
		if s.Kind == 2 { // SPAN_KIND_SERVER
			server = append(server, s)
		}
	}
	if len(server) != 3 { // the /metrics scrape and /health are housekeeping
		t.Fatalf("%d server spans, want 3 (none for /health): %v", len(server), server)
	}
	for i, s := range server {
		if s.Name != "POST /v1/chat/completions" || s.Service != "mistralrs" {
			t.Errorf("span %d: %q service %q", i, s.Name, s.Service)
		}
		if s.Attr("http.response.status_code").GetIntValue() != http.StatusOK || s.Attr("http.route").GetStringValue() != "/v1/chat/completions" {
			t.Errorf("span %d attributes %v", i, s.Attributes)
		}
		continued := s.TraceID() == parentTrace && s.ParentID() == parentSpan
		if continued != (i < 2) {
			t.Errorf("span %d: trace %s parent %q", i, s.TraceID(), s.ParentID())
		}
		if i < 2 {
			id := s.Attr("mistralrs.request_id").GetStringValue()
			if lines := ts.log.lines("request completed: request_id=" + id + " trace_id=" + parentTrace); len(lines) != 1 {
				t.Errorf("no access line with request %s and the trace id:\n%s", id, ts.log.String())
			}
		}
	}
	if n := ts.srv.opts.Tracing.Dropped(); n != 0 {
		t.Errorf("%d spans dropped", n)
	}
}

// A collector that answers 500 fails no request; the spans are counted as
// dropped. (A hanging collector: tracing's TestReceiverHangs.)
func TestServerSpansCollectorFails(t *testing.T) {
	rc := tracingtest.Start(t)
	rc.Status = http.StatusInternalServerError
	ts := startServer(t, withTracing(t, rc))
	for i := 0; i < 3; i++ {
		if resp, data := ts.post("/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, data)
		}
	}
	p := ts.srv.opts.Tracing
	ts.stop()
	if p.Dropped() < 3 {
		t.Errorf("dropped %d, want at least the 3 server spans", p.Dropped())
	}
}
