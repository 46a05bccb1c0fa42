// Package observe is the server's observability: the HTTP layers (Router,
// RequestIDs, ModelLabels, AccessLog, HTTPMetrics, StreamLatency,
// BufferBody: each a func(http.Handler) http.Handler sharing a per-request
// Record), engine metrics, logging setup and the -l payload log. HTTPLayer
// composes the layers, with httpguard's CORS and body limit, as mistral.rs's
// observe_http middleware and router do (see docs/observability.md for the
// differences made on purpose).
package observe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel/trace"

	"mistralrs/internal/httpguard"
)

// Options configure the layer; DefaultOptions has `mistralrs serve`'s defaults.
type Options struct {
	// AccessLog enables the info-level access lines (--disable-access-log clears it).
	AccessLog bool
	// AccessLogFormat is FormatText (also for "") or FormatJSON.
	AccessLogFormat string
	// AccessLogHealth logs housekeeping routes and OPTIONS requests too.
	AccessLogHealth bool
	// RequestIDHeader echoes x-request-id on responses
	// (--disable-request-id-header clears it; ids are still made for logs).
	RequestIDHeader bool
	// Metrics installs the registry (--disable-metrics clears it).
	Metrics bool
	// Registry is the registry to install when Metrics is set; nil: New
	// makes one. A server makes it first, so that its engines report to it
	// before the layer (which needs the served models) exists.
	Registry *Metrics
	// Logger receives the access lines; nil means slog.Default() at New.
	Logger *slog.Logger
	// Models resolves model labels; nil: every named model is unknown and
	// the default is "default".
	Models ModelResolver
	// Routes are the facts of the mux's routes: where each names its model,
	// whether it is housekeeping, its error envelope. A server gives one per
	// row of its route table; the layers know no route of their own (a
	// route not listed names no model, is not housekeeping and answers
	// errors in OpenAI's envelope).
	Routes []RouteFacts
	// BodyLimit caps request bodies; 0 means DefaultBodyLimit.
	BodyLimit int64
	// AllowedOrigins restricts CORS to these origins; nil allows any ("*").
	AllowedOrigins []string
	// Guard, when set, wraps the routes inside CORS (so its refusals carry
	// the CORS headers and preflights never reach it), inside the
	// observability layers (so they are logged and counted) and outside the
	// body limit and BufferBody (so a refused body is never read): the
	// server's Host, API-key and content-type checks. Route tells it the
	// matched route. A request it refuses on a route whose model label comes
	// from the body is labelled ModelUnknown.
	Guard func(http.Handler) http.Handler
	// Tracer, when set, starts a server span per API request (Tracing);
	// nil is tracing off, and then the layer costs nothing.
	Tracer trace.TracerProvider
}

// ErrorWriter writes an error response with status and msg in a route's own
// envelope; like WriteError, it attaches msg to the access-log line.
type ErrorWriter func(w http.ResponseWriter, r *http.Request, status int, msg string)

// DefaultOptions returns the defaults of mistral.rs: access log on in text
// format, housekeeping skipped, request-id header on, metrics on.
func DefaultOptions() Options {
	return Options{
		AccessLog:       true,
		AccessLogFormat: FormatText,
		RequestIDHeader: true,
		Metrics:         true,
		BodyLimit:       DefaultBodyLimit,
	}
}

// HTTPLayer is the configured HTTP stack (request ids, CORS, body limit,
// access log, HTTP metrics) and the metrics registry it owns.
type HTTPLayer struct {
	opts    Options
	metrics *Metrics
	routes  *routeTable
	limit   int64
}

// Validate reports options New would refuse.
func (opts *Options) Validate() error {
	switch opts.AccessLogFormat {
	case "", FormatText, FormatJSON:
	default:
		return fmt.Errorf("access log format %q: want text or json", opts.AccessLogFormat)
	}
	_, err := newRouteTable(opts.Routes)
	return err
}

// New builds the layer. With Options.Metrics false no registry exists.
func New(opts Options) (*HTTPLayer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	routes, err := newRouteTable(opts.Routes)
	if err != nil {
		return nil, err
	}
	o := &HTTPLayer{opts: opts, routes: routes, limit: opts.BodyLimit}
	if o.opts.Logger == nil {
		o.opts.Logger = slog.Default()
	}
	if o.limit <= 0 {
		o.limit = DefaultBodyLimit
	}
	if opts.AllowedOrigins != nil {
		o.opts.AllowedOrigins = append([]string{}, opts.AllowedOrigins...)
	}
	if opts.Metrics {
		o.metrics = opts.Registry
		if o.metrics == nil {
			o.metrics = NewMetrics()
		}
	}
	return o, nil
}

// AllowedOrigins returns the origins CORS answers, nil for any.
func (o *HTTPLayer) AllowedOrigins() []string {
	if o.opts.AllowedOrigins == nil {
		return nil
	}
	return append([]string(nil), o.opts.AllowedOrigins...)
}

// Metrics returns the registry holder, nil when metrics are disabled.
func (o *HTTPLayer) Metrics() *Metrics { return o.metrics }

// Engine returns the engine metric families. It is nil when metrics are
// disabled; its recorders then do nothing.
func (o *HTTPLayer) Engine() *EngineMetrics {
	if o.metrics == nil {
		return nil
	}
	return o.metrics.engine
}

// MetricsHandler serves GET /metrics, or 503 "metrics disabled".
func (o *HTTPLayer) MetricsHandler() http.Handler { return o.metrics.Handler() }

// Handler wraps mux in the layers of mistral.rs's router, outermost first:
// Router (the route label, so it also sees 404s, 405s, 413s and
// preflights), Tracing (the server span, named by the route), RequestIDs, ModelLabels, AccessLog, HTTPMetrics,
// StreamLatency, CORS (answers every OPTIONS), Options.Guard, the body
// limit, then BufferBody, so that a request the guard refuses is logged,
// counted and carries the CORS headers, but its body is never read. Register
// "GET /{$}" rather than "/" for the root, since "/" matches every path in a
// ServeMux.
func (o *HTTPLayer) Handler(mux *http.ServeMux) http.Handler {
	layers := []func(http.Handler) http.Handler{
		router(mux, o.routes),
		Tracing(o.opts.Tracer),
		RequestIDs(o.opts.RequestIDHeader),
		modelLabels(o.routes, o.opts.Models),
		AccessLog(AccessLogOptions{
			Enabled: o.opts.AccessLog,
			Format:  o.opts.AccessLogFormat,
			Health:  o.opts.AccessLogHealth,
			Logger:  o.opts.Logger,
		}),
		HTTPMetrics(o.metrics),
		StreamLatency(o.metrics),
		httpguard.CORS(o.opts.AllowedOrigins),
	}
	if o.opts.Guard != nil {
		layers = append(layers, o.opts.Guard)
	}
	// Unmatched requests go on to the 404 (which reads no body).
	matched := func(r *http.Request) bool { return Route(r.Context()) != Unmatched }
	layers = append(layers,
		httpguard.BodyLimit(o.limit, matched, o.guardError),
		bufferBody(o.limit, o.routes))
	return Chain(&dispatch{mux: mux, routes: o.routes}, layers...)
}

// guardError answers an httpguard refusal in the route's envelope.
func (o *HTTPLayer) guardError(w http.ResponseWriter, r *http.Request, status int, _, msg string) {
	writeLayerError(o.routes, w, r, status, msg)
}

// CORSAllowedHeaders and CORSExposedHeaders list the CORS header names
// (httpguard.CORS).
var (
	CORSAllowedHeaders = httpguard.CORSAllowedHeaders
	CORSExposedHeaders = httpguard.CORSExposedHeaders
)

// Chain wraps h in layers, the first outermost.
func Chain(h http.Handler, layers ...func(http.Handler) http.Handler) http.Handler {
	for i := len(layers) - 1; i >= 0; i-- {
		h = layers[i](h)
	}
	return h
}

// errBodyTooLarge reports a body over the limit.
var errBodyTooLarge = errors.New("request body too large")

// readBody buffers the body up to limit bytes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, errBodyTooLarge
	}
	size := int64(512)
	if r.ContentLength >= 0 {
		size = r.ContentLength + 1 // room for the read that returns EOF
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, errBodyTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			if IsBodyTooLarge(err) {
				return nil, errBodyTooLarge
			}
			return nil, err
		}
	}
}

// bufferedBody hands the buffered body back to the handler.
type bufferedBody struct {
	bytes.Reader
	b []byte
}

// ReadBody reads a request's whole body. A body the layer buffered is
// handed over as it is, without a copy (the handler then holds the only
// other reference: a large prompt costs its size once, not twice); any
// other body is read into a buffer sized from Content-Length.
func ReadBody(r *http.Request) ([]byte, error) {
	if bb, ok := r.Body.(*bufferedBody); ok && bb.Len() == len(bb.b) {
		b := bb.b
		bb.Reset(nil)
		bb.b = nil
		return b, nil
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 && r.ContentLength <= DefaultBodyLimit {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(r.Body)
	return buf.Bytes(), err
}

func (*bufferedBody) Close() error { return nil }
