package observe

import (
	"context"
	"net/http"
	"strconv"
	"time"
)

// Record is what the layers of one request share: who the request is
// (start, method, route, path, id, housekeeping, model label, body size),
// how it was answered (the ResponseWriter's status and bytes, the error
// message, the stream tracker), and the hooks by which a layer learns when
// the model label and the status are known. The first layer to see a request
// makes its Record (see enter); the layers below find it in the context.
type Record struct {
	Start         time.Time
	Method        string
	Route         string // the route label: the matched pattern's path, or Unmatched
	Path          string // the escaped request path
	ID            string // the request id ("" without RequestIDs)
	echoID        bool   // RequestIDs: send ID as x-request-id when the status is written
	Housekeeping  bool   // no HTTP metrics and, by default, no access line
	ContentLength int64  // body bytes: declared, or counted once buffered; -1 unknown
	TraceID       string // the hex trace id of the request's sampled server span; "" without

	model    string
	pending  func(body []byte) string // set by ModelLabels when the body names the model
	fallback string                   // the label when the body is never read

	series *startSeries // HTTPMetrics' series of (method, route, model); nil without

	rw     ResponseWriter
	errMsg string // attached by the handler (SetError, WriteError)
	sse    bool   // the response is an SSE stream
	stream Stream

	onModel  []func()
	onHeader []func(code int)
	// Room for the hooks of the usual stack, so adding them allocates nothing.
	modelRoom  [2]func()
	headerRoom [3]func(code int)

	settled bool
	end     streamEnd

	// Set by Router: the handler the mux chose, when it can be called without
	// routing again (a pattern without wildcards).
	handler http.Handler
	pattern string
	// Set by Router: no pattern matches (a 404 or 405 of the mux's own).
	unrouted bool
}

// streamEnd is what the stream tracker reported when the response ended.
type streamEnd struct {
	errMsg   string
	usage    Usage
	hasUsage bool
	done     bool
}

type ctxKey struct{}

// RecordFrom returns the request's record, nil outside the layers.
func RecordFrom(ctx context.Context) *Record {
	rec, _ := ctx.Value(ctxKey{}).(*Record)
	return rec
}

// enter returns the request's record. When no layer above made one, it
// makes one, wraps w in its ResponseWriter and puts it in the request's
// context; own is then true and the caller, the outermost layer, must call
// rec.settle once the handler returned. A record made here has the route
// label of the ServeMux pattern that chose the handler when the layer wraps
// one route's handler, else Unmatched (Router names the routes of a whole mux).
func enter(w http.ResponseWriter, r *http.Request) (rec *Record, _ http.ResponseWriter, _ *http.Request, own bool) {
	if rec := RecordFrom(r.Context()); rec != nil {
		return rec, w, r, false
	}
	rec = &Record{Start: time.Now(), Method: r.Method, Route: Unmatched, Path: r.URL.EscapedPath(), ContentLength: -1}
	if r.Pattern != "" {
		// A layer wrapping one route's handler inside a ServeMux.
		rec.Route = patternPath(r.Pattern)
	}
	// Without Router, which knows the routes, only preflights are.
	rec.Housekeeping = r.Method == http.MethodOptions
	if v := r.Header["Content-Length"]; len(v) > 0 {
		if n, err := strconv.ParseUint(v[0], 10, 63); err == nil {
			rec.ContentLength = int64(n)
		}
	}
	rec.onModel, rec.onHeader = rec.modelRoom[:0], rec.headerRoom[:0]
	rec.rw = ResponseWriter{w: w, rec: rec}
	rec.stream.rec = rec
	return rec, &rec.rw, r.WithContext(context.WithValue(r.Context(), ctxKey{}, rec)), true
}

// Model returns the model label, "" until it is known.
func (rec *Record) Model() string { return rec.model }

// Status returns the response status, 0 until the header is written.
func (rec *Record) Status() int { return rec.rw.status }

// Written returns the body bytes sent.
func (rec *Record) Written() int64 { return rec.rw.written }

// SetModel fixes the model label (once; later calls do nothing) and runs the
// layers' model hooks, in the order they were added.
func (rec *Record) SetModel(label string) {
	if rec.model != "" {
		return
	}
	rec.model = label
	rec.pending = nil
	hooks := rec.onModel
	rec.onModel = nil
	for _, f := range hooks {
		f()
	}
}

// resolveModel gives a label never resolved its fallback.
func (rec *Record) resolveModel() {
	if rec.model == "" {
		label := rec.fallback
		if label == "" {
			label = ModelNone
		}
		rec.SetModel(label)
	}
}

// whenModel runs f once the model label is known: now, unless ModelLabels
// left it to the body (then when BufferBody reads it, or when the response
// ends without it). Without ModelLabels the label is ModelNone.
func (rec *Record) whenModel(f func()) {
	if rec.model == "" && rec.pending == nil {
		rec.model = ModelNone
	}
	if rec.model != "" {
		f()
		return
	}
	rec.onModel = append(rec.onModel, f)
}

// whenHeader runs f when the response status is decided.
func (rec *Record) whenHeader(f func(code int)) {
	rec.onHeader = append(rec.onHeader, f)
}

// headerWritten runs when the status is decided (ResponseWriter).
func (rec *Record) headerWritten(rw *ResponseWriter, code int) {
	if rec.echoID {
		rw.w.Header()[HeaderRequestID] = []string{rec.ID}
	}
	if ct := rw.w.Header()["Content-Type"]; len(ct) > 0 && len(ct[0]) >= 17 && ct[0][:17] == "text/event-stream" {
		rec.sse = true
	}
	rec.resolveModel() // a refusal before the body was read: the fallback label
	for _, f := range rec.onHeader {
		f(code)
	}
}

// settle closes the request's accounting once the handler returned: a
// response with nothing written counts as net/http's implicit 200 (500 when
// the handler panicked), a label never resolved gets its fallback, and the
// stream tracker is closed. It runs once; every layer calls it before its
// own completion work.
func (rec *Record) settle(panicked bool) {
	if rec.settled {
		return
	}
	rec.settled = true
	if !rec.rw.wroteHeader {
		if panicked {
			rec.rw.status = http.StatusInternalServerError
		} else {
			// Nothing written: net/http sends 200 with the header map after
			// we return, so only record it (calling WriteHeader would log an
			// error if the handler hijacked the connection).
			rec.rw.wroteHeader = true
			rec.rw.status = http.StatusOK
			rec.headerWritten(&rec.rw, http.StatusOK)
		}
	}
	rec.resolveModel()
	e := &rec.end
	e.errMsg, e.usage, e.hasUsage, e.done = rec.stream.finish()
}

// serveSettled calls next and settles rec, also when next panics (the
// panic goes on after after has run).
func serveSettled(rec *Record, next http.Handler, w http.ResponseWriter, r *http.Request, after func()) {
	defer func() {
		if p := recover(); p != nil {
			rec.settle(true)
			after()
			panic(p)
		}
	}()
	next.ServeHTTP(w, r)
	rec.settle(false)
	after()
}

// serveLayer calls next; a layer that made the record settles it.
func serveLayer(rec *Record, own bool, next http.Handler, w http.ResponseWriter, r *http.Request) {
	if own {
		serveSettled(rec, next, w, r, func() {})
		return
	}
	next.ServeHTTP(w, r)
}

// Route returns the request's route label: the path of the ServeMux
// pattern it matched ("/v1/chat/completions"), Unmatched, or "" outside the
// layers.
func Route(ctx context.Context) string {
	if rec := RecordFrom(ctx); rec != nil {
		return rec.Route
	}
	return ""
}

// IsHousekeeping reports whether a request is housekeeping (an OPTIONS
// request, a route with RouteFacts.Housekeeping, a path in a housekeeping
// subtree): no access line by default and no HTTP metrics. Outside the
// layers it is false.
func IsHousekeeping(ctx context.Context) bool {
	if rec := RecordFrom(ctx); rec != nil {
		return rec.Housekeeping
	}
	return false
}

// RequestID returns the request's id ("" outside the layers).
func RequestID(ctx context.Context) string {
	if rec := RecordFrom(ctx); rec != nil {
		return rec.ID
	}
	return ""
}

// TraceID returns the request's trace id in hex: set when tracing is on and
// the request's server span is sampled, "" otherwise (and outside the layers).
func TraceID(ctx context.Context) string {
	if rec := RecordFrom(ctx); rec != nil {
		return rec.TraceID
	}
	return ""
}
