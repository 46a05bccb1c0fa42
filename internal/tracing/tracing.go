// Package tracing builds the process's OpenTelemetry TracerProvider from
// the configuration (--otlp-traces-endpoint, [server] otlp_traces_endpoint)
// and the standard OTEL_* environment variables, which the SDK reads itself.
// Tracing is off unless an endpoint is set somewhere: then New returns a nil
// *Provider and nothing of the SDK runs (no exporter, no goroutine). Spans
// go through the SDK's batch processor behind a bounded queue of our own,
// so that a slow or unreachable collector never blocks a request: the spans
// that do not fit, or that the exporter fails to send, are counted
// (mistralrs_trace_spans_dropped_total) and the first loss is logged once at
// WARN.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every span the server makes.
const ScopeName = "mistralrs"

// DefaultServiceName is service.name unless OTEL_SERVICE_NAME or
// OTEL_RESOURCE_ATTRIBUTES name another.
const DefaultServiceName = "mistralrs"

// DefaultQueueSize bounds the spans waiting for export (the SDK's default).
const DefaultQueueSize = 2048

// The standard environment variables that turn tracing on and choose the
// protocol; the SDK's exporters read the rest (headers, timeout,
// compression, certificates) and the SDK the sampler and resource ones.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// Config is what the server's settings say about tracing.
type Config struct {
	// Endpoint is --otlp-traces-endpoint: the full URL spans are sent to
	// (http://collector:4318/v1/traces; for gRPC http://collector:4317).
	// An OTLP/HTTP URL without a path gets /v1/traces. Empty: the
	// environment decides.
	Endpoint string
	// CaptureContent records prompts and completions on the generation
	// spans (--otlp-capture-content), each clipped to CaptureBytes.
	CaptureContent bool
	CaptureBytes   int
	// QueueSize bounds the spans waiting for export; 0: DefaultQueueSize.
	QueueSize int
	// Logger receives the one WARN line about dropped spans and the SDK's
	// own errors (at DEBUG); nil: slog.Default().
	Logger *slog.Logger
	// Getenv reads the environment; nil: os.Getenv. The SDK's exporters
	// read the process environment themselves.
	Getenv func(string) string
}

// Provider is the process's tracer provider with its dropped-span count.
// A nil *Provider is tracing off: every method works and does nothing.
type Provider struct {
	sdk     *sdktrace.TracerProvider
	dropped atomic.Uint64
	pending atomic.Int64 // spans handed to the batch processor, not yet exported
	warn    sync.Once
	log     *slog.Logger
	target  string
}

// ValidateEndpoint checks an endpoint URL: http or https with a host.
func ValidateEndpoint(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("otlp traces endpoint %q: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("otlp traces endpoint %q: want an http:// or https:// URL", raw)
	}
	if u.Host == "" {
		return fmt.Errorf("otlp traces endpoint %q: no host", raw)
	}
	return nil
}

// Enabled reports whether cfg or the environment turns tracing on.
func Enabled(cfg Config) bool {
	getenv := cfg.getenv()
	return cfg.Endpoint != "" || getenv(EnvTracesEndpoint) != "" || getenv(EnvEndpoint) != ""
}

func (cfg Config) getenv() func(string) string {
	if cfg.Getenv == nil {
		return os.Getenv
	}
	return cfg.Getenv
}

// New builds the provider, or returns nil when tracing is off. A bad
// endpoint (the flag's or the environment's) or protocol is an error.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	setCapture(cfg.CaptureContent, cfg.CaptureBytes)
	if !Enabled(cfg) {
		return nil, nil
	}
	getenv := cfg.getenv()
	target := cfg.Endpoint
	for _, env := range []string{EnvTracesEndpoint, EnvEndpoint} {
		if v := getenv(env); v != "" {
			if err := ValidateEndpoint(v); err != nil {
				return nil, fmt.Errorf("%s: %w", env, err)
			}
			if target == "" {
				target = v
			}
		}
	}
	if cfg.Endpoint != "" {
		if err := ValidateEndpoint(cfg.Endpoint); err != nil {
			return nil, err
		}
	}
	protocol, err := protocolOf(getenv)
	if err != nil {
		return nil, err
	}
	exp, err := newExporter(ctx, protocol, cfg.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("otlp traces exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	p := &Provider{log: cfg.Logger, target: target}
	if p.log == nil {
		p.log = slog.Default()
	}
	queue := cfg.QueueSize
	if queue <= 0 {
		queue = DefaultQueueSize
	}
	bsp := sdktrace.NewBatchSpanProcessor(&countingExporter{SpanExporter: exp, p: p},
		sdktrace.WithMaxQueueSize(queue))
	bounded := &boundedProcessor{SpanProcessor: bsp, p: p, max: int64(queue)}
	p.sdk = sdktrace.NewTracerProvider( // the sampler: OTEL_TRACES_SAMPLER(_ARG), read by the SDK
		sdktrace.WithResource(res),
		sdktrace.WithSpanProcessor(bounded))
	// The SDK reports export errors through the global handler, which
	// would print each to stderr: they are counted and warned about once.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		p.log.Debug("opentelemetry: " + err.Error())
	}))
	return p, nil
}

// protocolOf reads OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (the default) or grpc.
func protocolOf(getenv func(string) string) (string, error) {
	for _, env := range []string{EnvTracesProtocol, EnvProtocol} {
		switch v := getenv(env); v {
		case "":
			continue
		case "http/protobuf", "grpc":
			return v, nil
		default:
			return "", fmt.Errorf("%s=%q: want http/protobuf or grpc", env, v)
		}
	}
	return "http/protobuf", nil
}

func newExporter(ctx context.Context, protocol, endpoint string) (sdktrace.SpanExporter, error) {
	if protocol == "grpc" {
		var opts []otlptracegrpc.Option
		if endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(endpoint))
		}
		return otlptracegrpc.New(ctx, opts...)
	}
	var opts []otlptracehttp.Option
	if endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(withTracesPath(endpoint)))
	}
	return otlptracehttp.New(ctx, opts...)
}

// withTracesPath gives an OTLP/HTTP URL without a path the signal's path,
// as the SDK does for OTEL_EXPORTER_OTLP_ENDPOINT.
func withTracesPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return raw
	}
	u.Path = "/v1/traces"
	return u.String()
}

// TracerProvider returns the provider for the HTTP layer; nil when off.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil {
		return nil
	}
	return p.sdk
}

// Target returns where spans go: the flag's URL or the environment's.
func (p *Provider) Target() string {
	if p == nil {
		return ""
	}
	return p.target
}

// Dropped returns the spans lost so far: refused by the full queue or not
// accepted by the collector.
func (p *Provider) Dropped() uint64 {
	if p == nil {
		return 0
	}
	return p.dropped.Load()
}

// Shutdown exports the spans still queued, within ctx, and stops the
// exporter. The server calls it after the HTTP drain.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	err := p.sdk.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("trace export to %s did not finish before the shutdown timeout: %w", p.target, err)
	}
	return err
}

// drop counts n lost spans; the first loss is logged once at WARN.
func (p *Provider) drop(n int, why string) {
	if n <= 0 {
		return
	}
	p.dropped.Add(uint64(n))
	p.warn.Do(func() {
		p.log.Warn(fmt.Sprintf("Trace spans dropped (%s) sending to %s; requests are unaffected. Further losses are counted in %s, not logged",
			why, p.target, DroppedMetric))
	})
}

// DroppedMetric is the Prometheus counter of lost spans.
const DroppedMetric = "mistralrs_trace_spans_dropped_total"

// Collector returns the counter for a metrics registry; on a nil *Provider
// it reads 0, so the family is there whether tracing is on or not.
func (p *Provider) Collector() prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: DroppedMetric,
		Help: "Trace spans lost: the export queue was full, or the collector did not accept them.",
	}, func() float64 { return float64(p.Dropped()) })
}

// boundedProcessor puts the SDK's batch processor behind our own bound on
// the spans not yet exported (queued, batched or in an export), so every
// span the batch processor would drop is refused, and counted, here.
type boundedProcessor struct {
	sdktrace.SpanProcessor
	p   *Provider
	max int64
}

func (b *boundedProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	if b.p.pending.Add(1) > b.max {
		b.p.pending.Add(-1)
		b.p.drop(1, "export queue full: the collector is slow or unreachable")
		return
	}
	b.SpanProcessor.OnEnd(s)
}

// countingExporter releases the bound as batches leave and counts the
// spans of a failed export as dropped.
type countingExporter struct {
	sdktrace.SpanExporter
	p *Provider
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	e.p.pending.Add(-int64(len(spans)))
	if err != nil {
		e.p.drop(len(spans), "the collector did not accept an export: "+firstLine(err.Error()))
	}
	return err
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
