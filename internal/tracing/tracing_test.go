package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// receiver is a local OTLP/HTTP collector: it decodes every export.
type receiver struct {
	mu      sync.Mutex
	reqs    []*collectortrace.ExportTraceServiceRequest
	paths   []string
	headers []http.Header
	status  int           // answered status; 0: 200
	block   chan struct{} // when set, exports wait on it
	entered chan struct{} // when set, told of each export before it blocks
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if rc.entered != nil {
		rc.entered <- struct{}{}
	}
	if rc.block != nil {
		select {
		case <-rc.block:
		case <-r.Context().Done():
			return
		}
	}
	var req collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	rc.reqs = append(rc.reqs, &req)
	rc.paths = append(rc.paths, r.URL.Path)
	rc.headers = append(rc.headers, r.Header.Clone())
	rc.mu.Unlock()
	if rc.status != 0 {
		w.WriteHeader(rc.status)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

func (rc *receiver) spans() (spans []*tracepb.Span, service string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, req := range rc.reqs {
		for _, rs := range req.ResourceSpans {
			for _, kv := range rs.Resource.GetAttributes() {
				if kv.Key == "service.name" {
					service = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
	}
	return spans, service
}

// noEnv keeps the process's OTEL_* variables out of a test.
func noEnv(t *testing.T) {
	for _, v := range []string{EnvEndpoint, EnvTracesEndpoint, EnvProtocol, EnvTracesProtocol,
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", EnvCaptureContent} {
		t.Setenv(v, "")
	}
}

func TestOffByDefault(t *testing.T) {
	noEnv(t)
	p, err := New(t.Context(), Config{})
	if err != nil || p != nil {
		t.Fatalf("no endpoint: provider %v, error %v", p, err)
	}
	if p.TracerProvider() != nil || p.Dropped() != 0 || p.Shutdown(t.Context()) != nil || p.Target() != "" {
		t.Error("a nil provider is not inert")
	}
}

func TestExportToReceiver(t *testing.T) {
	noEnv(t)
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=acme")
	p, err := New(t.Context(), Config{Endpoint: srv.URL}) // no path: /v1/traces
	if err != nil || p == nil {
		t.Fatalf("New: %v", err)
	}
	_, span := p.TracerProvider().Tracer(ScopeName).Start(context.Background(), "POST /v1/chat/completions")
	span.End()
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans, service := rc.spans()
	if len(spans) != 1 || spans[0].Name != "POST /v1/chat/completions" {
		t.Fatalf("received %v", spans)
	}
	if service != DefaultServiceName {
		t.Errorf("service.name %q", service)
	}
	if rc.paths[0] != "/v1/traces" || rc.headers[0].Get("X-Tenant") != "acme" {
		t.Errorf("path %q, headers %v", rc.paths[0], rc.headers[0])
	}
	if p.Dropped() != 0 {
		t.Errorf("dropped %d", p.Dropped())
	}
}

// The standard variables turn tracing on and name the service; the
// sampler variable is the SDK's.
func TestEnvironment(t *testing.T) {
	noEnv(t)
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	t.Setenv(EnvEndpoint, srv.URL)
	t.Setenv("OTEL_SERVICE_NAME", "replica-7")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	p, err := New(t.Context(), Config{})
	if err != nil || p == nil {
		t.Fatalf("New: %v", err)
	}
	_, off := p.TracerProvider().Tracer(ScopeName).Start(context.Background(), "unsampled")
	off.End()
	if off.SpanContext().IsSampled() {
		t.Error("OTEL_TRACES_SAMPLER=always_off ignored")
	}
	_ = p.Shutdown(t.Context())
	if spans, _ := rc.spans(); len(spans) != 0 {
		t.Errorf("unsampled spans exported: %v", spans)
	}

	t.Setenv("OTEL_TRACES_SAMPLER", "")
	p, err = New(t.Context(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider().Tracer(ScopeName).Start(context.Background(), "x")
	span.End()
	_ = p.Shutdown(t.Context())
	if spans, service := rc.spans(); len(spans) != 1 || service != "replica-7" || rc.paths[0] != "/v1/traces" {
		t.Errorf("spans %d service %q path %v", len(spans), service, rc.paths)
	}
}

func TestBadSettings(t *testing.T) {
	noEnv(t)
	for _, c := range []struct {
		cfg  Config
		env  map[string]string
		want string
	}{
		{Config{Endpoint: "collector:4318"}, nil, "want an http:// or https:// URL"},
		{Config{Endpoint: "http://"}, nil, "no host"},
		{Config{Endpoint: "http://a b"}, nil, "invalid character"},
		{Config{}, map[string]string{EnvTracesEndpoint: "ftp://x"}, EnvTracesEndpoint},
		{Config{Endpoint: "http://x:4318"}, map[string]string{EnvProtocol: "thrift"}, "want http/protobuf or grpc"},
	} {
		env := c.env
		c.cfg.Getenv = func(k string) string { return env[k] }
		p, err := New(t.Context(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v %v: error %v, want one line with %q", c.cfg.Endpoint, env, err, c.want)
		}
		if p != nil {
			t.Error("a provider with an error")
		}
	}
}

// A collector that fails every export: spans are counted as dropped and
// the ending span never waits.
func TestReceiverFails(t *testing.T) {
	noEnv(t)
	rc := &receiver{status: http.StatusInternalServerError}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	p, err := New(t.Context(), Config{Endpoint: srv.URL + "/v1/traces"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		_, span := p.TracerProvider().Tracer(ScopeName).Start(context.Background(), "x")
		span.End()
	}
	_ = p.Shutdown(t.Context()) // the export fails: counted, not retried forever (500 is final)
	if p.Dropped() != 3 {
		t.Errorf("dropped %d, want 3", p.Dropped())
	}
}

// A collector that hangs: ending spans does not wait on it; once the queue
// bound is reached the rest are dropped and counted.
func TestReceiverHangs(t *testing.T) {
	noEnv(t)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "600000") // the export must stay blocked through the test
	rc := &receiver{block: make(chan struct{}), entered: make(chan struct{}, 16)}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	const queue = 4
	p, err := New(t.Context(), Config{Endpoint: srv.URL, QueueSize: queue})
	if err != nil {
		t.Fatal(err)
	}
	tr := p.TracerProvider().Tracer(ScopeName)
	_, first := tr.Start(context.Background(), "first")
	first.End()
	flushed := make(chan error, 1)
	go func() { flushed <- p.sdk.ForceFlush(context.Background()) }()
	<-rc.entered // an export is in flight, and the collector holds it
	const total = 20
	for i := 0; i < total; i++ {
		_, span := tr.Start(context.Background(), "x")
		span.End() // returns although the collector never answers
	}
	// At most queue spans are held for export while the collector hangs.
	if d := p.Dropped(); d < total-queue {
		t.Errorf("dropped %d of %d with a queue of %d", d, total, queue)
	}
	select {
	case err := <-flushed:
		t.Fatalf("the flush returned (%v) while the collector hangs", err)
	default:
	}
	close(rc.block)
	<-flushed
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_ = p.Shutdown(ctx)
}

func TestClip(t *testing.T) {
	setCapture(false, 0)
	if s, _ := Clip("secret"); s != "" {
		t.Errorf("capture off: %q", s)
	}
	setCapture(true, 5)
	defer setCapture(false, 0)
	if on, n := CaptureContent(); !on || n != 5 {
		t.Errorf("CaptureContent %v %d", on, n)
	}
	if s, cut := Clip("héllo wörld"); s != "héll" || !cut {
		t.Errorf("Clip: %q %v", s, cut)
	}
	if s, cut := Clip("abc"); s != "abc" || cut {
		t.Errorf("Clip short: %q %v", s, cut)
	}
}
