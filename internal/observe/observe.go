// Package observe is the server's observability layer: request ids, CORS,
// the body limit, access logs, HTTP and streaming-latency metrics, engine
// metrics, logging setup and the -l payload log. It follows mistral.rs's
// observe_http middleware (see docs/observability.md for the differences
// made on purpose).
package observe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
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
	// Logger receives the access lines; nil means slog.Default() at New.
	Logger *slog.Logger
	// Models resolves model labels; nil: every named model is unknown and
	// the default is "default".
	Models ModelResolver
	// ModelSources maps path patterns to where they name their model; nil
	// means DefaultModelSources().
	ModelSources map[string]ModelSource
	// BodyLimit caps request bodies; 0 means DefaultBodyLimit.
	BodyLimit int64
	// AllowedOrigins restricts CORS to these origins; nil allows any ("*").
	AllowedOrigins []string
	// ErrorWriters maps path patterns to the error envelope of routes that
	// do not answer errors in OpenAI's shape (the Anthropic routes). The
	// layer uses it for the errors it answers itself on those routes: a body
	// over the limit (413), an unreadable body, a wrong method (405).
	ErrorWriters map[string]ErrorWriter
	// Guard, when set, wraps the routes inside CORS (so its refusals carry
	// the CORS headers and preflights never reach it) and inside the
	// observability layer (so they are logged and counted): the server's
	// API-key and content-type checks. Route tells it the matched route.
	Guard func(http.Handler) http.Handler
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

// HTTPLayer is the configured HTTP observability layer (request ids, CORS,
// body limit, access log, HTTP metrics) and the metrics registry it owns.
type HTTPLayer struct {
	opts    Options
	metrics *Metrics
	access  accessLogger
	sources map[string]ModelSource
	limit   int64
	origins map[string]bool
}

// New builds the layer. With Options.Metrics false no registry exists.
func New(opts Options) (*HTTPLayer, error) {
	switch opts.AccessLogFormat {
	case "", FormatText, FormatJSON:
	default:
		return nil, fmt.Errorf("access log format %q: want text or json", opts.AccessLogFormat)
	}
	o := &HTTPLayer{
		opts:    opts,
		access:  newAccessLogger(opts.Logger, opts.AccessLogFormat == FormatJSON),
		sources: opts.ModelSources,
		limit:   opts.BodyLimit,
	}
	if o.sources == nil {
		o.sources = DefaultModelSources()
	}
	if o.limit <= 0 {
		o.limit = DefaultBodyLimit
	}
	if opts.AllowedOrigins != nil {
		o.origins = make(map[string]bool, len(opts.AllowedOrigins))
		for _, s := range opts.AllowedOrigins {
			o.origins[s] = true
		}
	}
	if opts.Metrics {
		o.metrics = NewMetrics()
	}
	return o, nil
}

// AllowedOrigins returns the origins CORS answers, nil for any.
func (o *HTTPLayer) AllowedOrigins() []string {
	if o.origins == nil {
		return nil
	}
	return append([]string(nil), o.opts.AllowedOrigins...)
}

// Metrics returns the registry holder, nil when metrics are disabled.
func (o *HTTPLayer) Metrics() *Metrics { return o.metrics }

// Engine returns the engine metrics (*EngineMetrics has engine.Observer's method set).
// It is nil when metrics are disabled; its methods then do nothing.
func (o *HTTPLayer) Engine() *EngineMetrics {
	if o.metrics == nil {
		return nil
	}
	return o.metrics.engine
}

// MetricsHandler serves GET /metrics, or 503 "metrics disabled".
func (o *HTTPLayer) MetricsHandler() http.Handler {
	if o.metrics == nil {
		return http.HandlerFunc(disabledMetrics)
	}
	return o.metrics.Handler()
}

// Handler wraps mux in the layers of mistral.rs's router, innermost first:
// Options.Guard, CORS (answers every OPTIONS), the body limit, then the observability layer
// outermost, so it also sees 404s, 405s, 413s and preflights. The mux is
// consulted first to learn the matched pattern (the `route`/`path` label);
// register "GET /{$}" rather than "/" for the root, since "/" matches every
// path in a ServeMux.
func (o *HTTPLayer) Handler(mux *http.ServeMux) http.Handler {
	var next http.Handler = &dispatch{mux: mux}
	if o.opts.Guard != nil {
		next = o.opts.Guard(next)
	}
	next = &cors{next: next, origins: o.origins}
	next = &bodyLimit{next: next, o: o}
	return &observeLayer{o: o, mux: mux, next: next}
}

// Unmatched is the route label of requests no pattern matched.
const Unmatched = "<unmatched>"

// reqState is everything the layer knows about one request.
type reqState struct {
	o             *HTTPLayer
	ctx           context.Context
	start         time.Time
	id            string
	method        string
	route         string
	path          string
	model         string
	contentLength int64 // -1: unknown
	housekeeping  bool
	logAccess     bool
	buffered      bool // body read by the layer (r.Body replaced)
	finished      bool

	rw     ResponseWriter
	sse    bool
	stream Stream
	errMsg string // attached by the handler (SetError, WriteError)

	series *startSeries // nil without metrics or for housekeeping

	// The handler the mux chose, when it can be called without routing
	// again (a pattern without wildcards, so no path values are needed).
	handler http.Handler
	pattern string
}

type ctxKey struct{}

func stateFrom(ctx context.Context) *reqState {
	st, _ := ctx.Value(ctxKey{}).(*reqState)
	return st
}

// Route returns the request's route label: the path of the ServeMux
// pattern it matched ("/v1/chat/completions"), Unmatched, or "" outside the
// middleware.
func Route(ctx context.Context) string {
	if st := stateFrom(ctx); st != nil {
		return st.route
	}
	return ""
}

// IsHousekeeping reports whether a request is housekeeping (an OPTIONS
// request, /, /health, /metrics, the docs, the web UI): no access line by
// default and no HTTP metrics. Outside the middleware it is false.
func IsHousekeeping(ctx context.Context) bool {
	if st := stateFrom(ctx); st != nil {
		return st.housekeeping
	}
	return false
}

// RequestID returns the request's id ("" outside the middleware).
func RequestID(ctx context.Context) string {
	if st := stateFrom(ctx); st != nil {
		return st.id
	}
	return ""
}

type observeLayer struct {
	o    *HTTPLayer
	mux  *http.ServeMux
	next http.Handler
}

func (l *observeLayer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o := l.o
	st := &reqState{o: o, start: time.Now(), method: r.Method, contentLength: -1}
	st.stream.st = st
	src := SourceNone
	st.route, src = l.route(r, st)
	st.path = r.URL.EscapedPath()
	st.id = requestIDFrom(r.Header)
	st.housekeeping = isHousekeeping(r.Method, st.route, st.path)
	if v := r.Header["Content-Length"]; len(v) > 0 {
		if n, err := strconv.ParseUint(v[0], 10, 63); err == nil {
			st.contentLength = int64(n)
		}
	}

	// Model extraction may read the whole body, as mistral.rs's access log
	// does; a body over the limit or unreadable is answered here, without
	// calling the handler, and labelled unknown.
	status := 0 // set when the layer answers itself
	var body []byte
	if src.readsBody() {
		var err error
		body, err = readBody(r, o.limit)
		switch {
		case errors.Is(err, errBodyTooLarge):
			status = http.StatusRequestEntityTooLarge
			st.model = ModelUnknown
		case err != nil:
			status = http.StatusBadRequest
			st.model = ModelUnknown
			st.errMsg = "failed to read request body: " + err.Error()
		default:
			st.buffered = true
			st.contentLength = int64(len(body))
		}
	}
	if st.model == "" {
		st.model = modelLabel(src, o.opts.Models, body, r.URL.RawQuery)
	}

	st.logAccess = o.opts.AccessLog && (o.opts.AccessLogHealth || !st.housekeeping)
	if st.logAccess {
		o.access.started(st, st.start)
	}
	if o.metrics != nil && !st.housekeeping {
		st.series = o.metrics.http.start(st.method, st.route, st.model)
		st.series.inflight.Inc()
		if st.contentLength >= 0 {
			st.series.observeBodyBytes(float64(st.contentLength))
		}
	}

	st.rw = ResponseWriter{w: w, st: st}
	st.ctx = context.WithValue(r.Context(), ctxKey{}, st)
	r = r.WithContext(st.ctx)
	if st.buffered {
		// The handler reads the bytes the layer buffered (set on the copy:
		// the caller's request is not modified).
		bb := &bufferedBody{b: body}
		bb.Reset(body)
		r.Body = bb
		r.ContentLength = int64(len(body))
	}
	defer func() {
		if p := recover(); p != nil {
			// The handler panicked: account for the request, then let
			// net/http deal with the panic as usual.
			if !st.rw.wroteHeader {
				st.rw.status = http.StatusInternalServerError
			}
			st.finish()
			panic(p)
		}
	}()
	switch status {
	case 0:
		l.next.ServeHTTP(&st.rw, r)
	case http.StatusRequestEntityTooLarge:
		o.corsHeaders(w.Header(), r)
		o.writeLayerError(&st.rw, r, st.route, status, "")
	default:
		o.corsHeaders(w.Header(), r)
		o.writeLayerError(&st.rw, r, st.route, status, st.errMsg)
	}
	if !st.rw.wroteHeader {
		// Nothing written: net/http sends 200 with the header map after we
		// return, so only record it (calling WriteHeader would log an error
		// if the handler hijacked the connection).
		st.rw.wroteHeader = true
		st.rw.status = http.StatusOK
		st.onHeader(&st.rw, http.StatusOK)
	}
	st.finish()
}

// route returns the path label and the route's model source.
func (l *observeLayer) route(r *http.Request, st *reqState) (string, ModelSource) {
	// CONNECT paths are not canonicalised and may redirect to a
	// client-chosen path: never a label.
	if r.Method == http.MethodConnect {
		return Unmatched, SourceNone
	}
	h, pat := l.mux.Handler(r)
	if !strings.Contains(pat, "{") && r.RequestURI != "*" {
		st.handler, st.pattern = h, pat
	}
	if pat == "" {
		// 405: the path exists under another method and keeps its label.
		r2 := *r
		for _, m := range probeMethods {
			if m == r.Method {
				continue
			}
			r2.Method = m
			if _, pat = l.mux.Handler(&r2); pat != "" {
				break
			}
		}
		if pat == "" {
			return Unmatched, SourceNone
		}
	}
	p := patternPath(pat)
	return p, l.o.sources[p]
}

var probeMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch}

// patternPath strips the method and host of a ServeMux pattern.
func patternPath(pat string) string {
	if i := strings.IndexByte(pat, '/'); i >= 0 {
		return pat[i:]
	}
	return pat
}

// isHousekeeping: every OPTIONS request, the probe, metrics and docs routes,
// and the web UI, as in mistral.rs. Housekeeping requests get no access line
// (unless --access-log-health) and no HTTP metrics.
func isHousekeeping(method, route, path string) bool {
	if method == http.MethodOptions {
		return true
	}
	switch route {
	case "/", "/{$}", "/health", "/metrics", "/docs", "/api-doc/openapi.json":
		return true
	}
	return strings.HasPrefix(route, "/docs/") || underUI(route) || underUI(path)
}

func underUI(p string) bool {
	return p == "/ui" || strings.HasPrefix(p, "/ui/")
}

// corsHeaders adds the non-preflight CORS headers to a response the layer
// writes itself (413), so browsers can read it.
func (o *HTTPLayer) corsHeaders(h http.Header, r *http.Request) {
	(&cors{origins: o.origins}).allowOrigin(h, r)
	h["Vary"] = varyValue
	h["Access-Control-Expose-Headers"] = exposeHeaders
}

// writeLayerError answers an error the layer detects itself, in the route's
// envelope (Options.ErrorWriters) or OpenAI's; a 413's message is fixed.
func (o *HTTPLayer) writeLayerError(w http.ResponseWriter, r *http.Request, route string, status int, msg string) {
	ew := o.opts.ErrorWriters[route]
	switch {
	case ew != nil && status == http.StatusRequestEntityTooLarge:
		ew(w, r, status, bodyTooLargeMessage)
	case ew != nil:
		ew(w, r, status, msg)
	case status == http.StatusRequestEntityTooLarge:
		WriteBodyTooLarge(w, r)
	default:
		WriteErrorMessage(w, r, status, msg)
	}
}

// onHeader runs when the response status is decided.
func (st *reqState) onHeader(rw *ResponseWriter, code int) {
	h := rw.w.Header()
	if st.o.opts.RequestIDHeader {
		h[HeaderRequestID] = []string{st.id}
	}
	if ct := h["Content-Type"]; len(ct) > 0 && strings.HasPrefix(ct[0], "text/event-stream") {
		st.sse = true
		now := time.Now()
		status := statusText(code)
		st.o.access.streamAccepted(st, status, now.Sub(st.start), now)
		var ds *doneSeries
		if st.series != nil {
			ds = st.series.status(code)
		}
		st.stream.arm(ds)
	}
}

// finish does the completion accounting exactly once, for streams and other
// responses alike, as mistral.rs does: the request counter and duration
// histogram, the in-flight gauge released, then the access line (or the
// debug fallback line).
func (st *reqState) finish() {
	if st.finished {
		return
	}
	st.finished = true
	now := time.Now()
	c := completion{status: statusText(st.rw.status), duration: now.Sub(st.start)}
	errMsg, usage, hasUsage, done := st.stream.finish()
	if st.sse {
		switch {
		case errMsg != "":
			c.outcome, c.err = "error", errMsg
		case st.rw.writeErr != nil:
			c.outcome = "client_disconnected"
		case done:
			c.outcome = "completed"
		case st.ctx != nil && st.ctx.Err() != nil:
			c.outcome = "client_disconnected"
		default:
			c.outcome = "completed"
		}
		c.usage, c.hasUsage = usage, hasUsage
	} else if st.rw.status >= 400 {
		c.err = st.errMsg
		if c.err == "" {
			body := st.rw.errBody
			if len(body) > errorCaptureLimit {
				body = body[:errorCaptureLimit]
			}
			c.err = errorMessage(body)
		}
	}
	if st.series != nil {
		ds := st.series.status(st.rw.status).done()
		ds.requests.Inc()
		ds.duration.observe(c.duration.Seconds(), st.id, now)
		st.series.inflight.Dec()
	}
	if st.logAccess {
		st.o.access.completed(st, &c, now)
	} else {
		st.o.access.fallback(st, c.status, c.duration, now)
	}
}

// dispatch is the innermost layer: it calls the handler the mux chose during
// routing, sparing a second route lookup, or lets the mux route when path
// values are needed.
type dispatch struct{ mux *http.ServeMux }

func (d *dispatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if st := stateFrom(r.Context()); st != nil && st.handler != nil {
		r.Pattern = st.pattern
		if st.pattern == "" {
			// The mux's own 404/405 answer in plain text; clients of an
			// OpenAI-style API expect every error as JSON.
			w = &jsonFallback{ResponseWriter: w, r: r, write: st.o.opts.ErrorWriters[st.route]}
		}
		st.handler.ServeHTTP(w, r)
		return
	}
	d.mux.ServeHTTP(w, r)
}

// jsonFallback turns the ServeMux's plain-text 404 and 405 responses into
// OpenAI-style JSON errors (the Allow header of a 405 is kept).
type jsonFallback struct {
	http.ResponseWriter
	r        *http.Request
	write    ErrorWriter // the route's envelope, nil for OpenAI's
	replaced bool
}

func (j *jsonFallback) WriteHeader(code int) {
	var msg string
	switch code {
	case http.StatusNotFound:
		msg = fmt.Sprintf("no route for %s %s", j.r.Method, j.r.URL.Path)
	case http.StatusMethodNotAllowed:
		msg = fmt.Sprintf("method %s is not allowed for %s (allowed: %s)", j.r.Method, j.r.URL.Path, j.Header().Get("Allow"))
	default:
		j.ResponseWriter.WriteHeader(code)
		return
	}
	j.replaced = true
	j.Header().Del("X-Content-Type-Options")
	if j.write != nil {
		j.write(j.ResponseWriter, j.r, code, msg)
		return
	}
	WriteErrorMessage(j.ResponseWriter, j.r, code, msg)
}

func (j *jsonFallback) Write(b []byte) (int, error) {
	if j.replaced {
		return len(b), nil // the plain-text body, already replaced
	}
	return j.ResponseWriter.Write(b)
}

func (j *jsonFallback) Unwrap() http.ResponseWriter { return j.ResponseWriter }

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

// bodyLimit caps what a handler can read from the body (the layer's own
// buffered bodies are already within the limit). A declared length over the
// limit is answered with 413 before the handler runs.
type bodyLimit struct {
	next http.Handler
	o    *HTTPLayer
}

func (b *bodyLimit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := stateFrom(r.Context())
	if st == nil || !st.buffered {
		// Unmatched requests go on to the 404 (the fallback reads no body);
		// OPTIONS goes on to the preflight answer.
		if r.ContentLength > b.o.limit && r.Method != http.MethodOptions && (st == nil || st.route != Unmatched) {
			b.o.corsHeaders(w.Header(), r)
			route := ""
			if st != nil {
				route = st.route
			}
			b.o.writeLayerError(w, r, route, http.StatusRequestEntityTooLarge, "")
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			base := w
			if st != nil {
				base = st.rw.w // lets MaxBytesReader mark the connection for closing
			}
			r.Body = http.MaxBytesReader(base, r.Body, b.o.limit)
		}
	}
	b.next.ServeHTTP(w, r)
}
