package server

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"mistralrs/internal/observe"
	"mistralrs/internal/tracing"
)

// otlpReceiver keeps the spans an OTLP/HTTP exporter sends it.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []*tracepb.Span
}

func (rc *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			rc.spans = append(rc.spans, ss.Spans...)
		}
	}
	rc.mu.Unlock()
	b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(b)
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if v := kv.Value.GetStringValue(); v != "" {
				return v
			}
			return kv.Value.String()
		}
	}
	return ""
}

// Through the real setup (tracing.New, the observe layer's server span,
// OTLP/HTTP): a client's traceparent continues into the server span, the
// generation span is its child, and with content capture on the prompt
// and completion are there, cut to the bound.
func TestTraceThroughOTLP(t *testing.T) {
	rc := &otlpReceiver{}
	col := httptest.NewServer(rc)
	defer col.Close()
	noenv := func(string) string { return "" }
	p, err := tracing.New(t.Context(), tracing.Config{Endpoint: col.URL, CaptureContent: true, CaptureBytes: 8, Getenv: noenv})
	if err != nil || p == nil {
		t.Fatalf("tracing.New: %v", err)
	}
	t.Cleanup(func() { // content capture is process-wide: off again
		q, _ := tracing.New(context.Background(), tracing.Config{Endpoint: col.URL, Getenv: noenv})
		_ = q.Shutdown(context.Background())
	})
	plPath := filepath.Join(t.TempDir(), "requests.log")
	pl, err := observe.OpenPayloadLog(plPath)
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	ts := startServer(t, func(o *Options) { o.Tracing = p; o.PayloadLog = pl })
	const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	resp, body := ts.post("/v1/chat/completions", map[string]any{"model": "tiny", "max_tokens": 3, "ignore_eos": true,
		"messages": []map[string]any{{"role": "user", "content": "hello there, a prompt longer than eight bytes"}}},
		"traceparent", "00-"+parentTrace+"-"+parentSpan+"-01")
	if resp.StatusCode != 200 {
		t.Fatalf("%d: %s", resp.StatusCode, body)
	}
	if err := p.Shutdown(t.Context()); err != nil { // flushes
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var server, gen *tracepb.Span
	for _, s := range rc.spans {
		switch {
		case s.Kind == tracepb.Span_SPAN_KIND_SERVER:
			server = s
		case strings.HasPrefix(s.Name, "chat "):
			gen = s
		}
	}
	if server == nil || gen == nil {
		t.Fatalf("spans %v", rc.spans)
	}
	if hex.EncodeToString(server.TraceId) != parentTrace || hex.EncodeToString(server.ParentSpanId) != parentSpan {
		t.Errorf("server span trace %x parent %x", server.TraceId, server.ParentSpanId)
	}
	if hex.EncodeToString(gen.TraceId) != parentTrace || hex.EncodeToString(gen.ParentSpanId) != hex.EncodeToString(server.SpanId) {
		t.Errorf("generation span trace %x parent %x, server span %x", gen.TraceId, gen.ParentSpanId, server.SpanId)
	}
	if gen.Name != "chat tiny" || spanAttr(gen, "gen_ai.operation.name") != "chat" {
		t.Errorf("generation span %q, operation %q", gen.Name, spanAttr(gen, "gen_ai.operation.name"))
	}
	if p := spanAttr(gen, "mistralrs.prompt"); p == "" || len(p) > 8 {
		t.Errorf("captured prompt %q, want at most 8 bytes", p)
	}
	// The -l payload log's request and response entries lead to the trace.
	logged, _ := os.ReadFile(plPath)
	if n := strings.Count(string(logged), "trace_id="+parentTrace); n < 2 {
		t.Errorf("%d payload log entries with the trace id:\n%s", n, logged)
	}
}
