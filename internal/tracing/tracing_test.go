package tracing

import (
	"context"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"mistralrs/internal/tracing/tracingtest"
)

// noEnv keeps the process's OTEL_* variables out of a test.
func noEnv(t *testing.T) {
	for _, v := range []string{EnvEndpoint, EnvTracesEndpoint, EnvProtocol, EnvTracesProtocol,
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", EnvCaptureContent} {
		t.Setenv(v, "")
	}
}

func TestOffByDefault(t *testing.T) {
	noEnv(t)
	before := runtime.NumGoroutine()
	p, err := New(t.Context(), Config{})
	if err != nil || p != nil {
		t.Fatalf("no endpoint: provider %v, error %v", p, err)
	}
	if after := runtime.NumGoroutine(); after != before {
		t.Errorf("goroutines %d → %d with tracing off", before, after)
	}
	if p.TracerProvider() != nil || p.Dropped() != 0 || p.Shutdown(t.Context()) != nil || p.Target() != "" {
		t.Error("a nil provider is not inert")
	}
}

func TestExportToReceiver(t *testing.T) {
	noEnv(t)
	rc := tracingtest.Start(t)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=acme")
	p, err := New(t.Context(), Config{Endpoint: rc.URL}) // no path: /v1/traces
	if err != nil || p == nil {
		t.Fatalf("New: %v", err)
	}
	_, span := p.TracerProvider().Tracer(ScopeName).Start(context.Background(), "POST /v1/chat/completions")
	span.End()
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := rc.Spans()
	if len(spans) != 1 || spans[0].Name != "POST /v1/chat/completions" || spans[0].Scope != ScopeName {
		t.Fatalf("received %v", spans)
	}
	if spans[0].Service != DefaultServiceName {
		t.Errorf("service.name %q", spans[0].Service)
	}
	if rc.Paths()[0] != "/v1/traces" || rc.Headers()[0].Get("X-Tenant") != "acme" {
		t.Errorf("path %q, headers %v", rc.Paths()[0], rc.Headers()[0])
	}
	if p.Dropped() != 0 {
		t.Errorf("dropped %d", p.Dropped())
	}
}

// The standard variables turn tracing on and name the service; the
// sampler variable is the SDK's.
func TestEnvironment(t *testing.T) {
	noEnv(t)
	rc := tracingtest.Start(t)
	t.Setenv(EnvEndpoint, rc.URL)
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
	if spans := rc.Spans(); len(spans) != 0 {
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
	if spans := rc.Spans(); len(spans) != 1 || spans[0].Service != "replica-7" || rc.Paths()[0] != "/v1/traces" {
		t.Errorf("spans %v paths %v", spans, rc.Paths())
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
	rc := tracingtest.Start(t)
	rc.Status = http.StatusInternalServerError
	p, err := New(t.Context(), Config{Endpoint: rc.URL + "/v1/traces"})
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
	rc := tracingtest.Start(t)
	rc.Block, rc.Entered = make(chan struct{}), make(chan struct{}, 16)
	const queue = 4
	p, err := New(t.Context(), Config{Endpoint: rc.URL, QueueSize: queue})
	if err != nil {
		t.Fatal(err)
	}
	tr := p.TracerProvider().Tracer(ScopeName)
	_, first := tr.Start(context.Background(), "first")
	first.End()
	flushed := make(chan error, 1)
	go func() { flushed <- p.sdk.ForceFlush(context.Background()) }()
	<-rc.Entered // an export is in flight, and the collector holds it
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
	close(rc.Block)
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

// OTEL_EXPORTER_OTLP_PROTOCOL=grpc builds the gRPC exporter, which keeps
// the URL's host and port (no /v1/traces path).
func TestGRPCProtocol(t *testing.T) {
	noEnv(t)
	env := map[string]string{EnvTracesProtocol: "grpc"}
	p, err := New(t.Context(), Config{Endpoint: "http://127.0.0.1:4317", Getenv: func(k string) string { return env[k] }})
	if err != nil || p == nil {
		t.Fatalf("grpc: %v", err)
	}
	if p.Target() != "http://127.0.0.1:4317" {
		t.Errorf("target %q", p.Target())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // nothing to flush; do not wait on a collector that is not there
	_ = p.Shutdown(ctx)
}
