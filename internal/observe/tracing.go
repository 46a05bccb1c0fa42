package observe

import (
	"net"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerScope is the instrumentation scope of the server spans.
const tracerScope = "mistralrs"

// propagator reads W3C traceparent/tracestate and baggage. It is fixed,
// not the otel global, so that nothing else in the process changes what a
// request's headers mean.
var propagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Tracing is the layer that starts one OpenTelemetry server span per API
// request, continuing the trace of an incoming traceparent (a malformed one
// starts a new root: the header is ignored, never an error), named by the
// route template ("POST /v1/chat/completions") and put in the request's
// context for the handler's child spans. The record gets the trace id when
// the span is sampled, for the access line, the payload log and exemplars.
// Housekeeping requests (probes, metrics, docs, preflights) get no span. A
// nil tp is tracing off: the layer is next itself, so a request pays
// nothing. Put it just inside Router, which names the route.
func Tracing(tp trace.TracerProvider) func(http.Handler) http.Handler {
	if tp == nil {
		return func(next http.Handler) http.Handler { return next }
	}
	tracer := tp.Tracer(tracerScope)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec, w, r, own := enter(w, r)
			if rec.Housekeeping {
				serveLayer(rec, own, next, w, r)
				return
			}
			ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
			ctx, span := tracer.Start(ctx, spanName(rec), trace.WithSpanKind(trace.SpanKindServer),
				trace.WithTimestamp(rec.Start), trace.WithAttributes(requestAttrs(r, rec)...))
			if sc := span.SpanContext(); sc.IsSampled() {
				rec.TraceID = sc.TraceID().String()
			}
			r = r.WithContext(ctx)
			serveSettled(rec, next, w, r, func() { endServerSpan(span, rec) })
		})
	}
}

// spanName is the HTTP conventions' "{method} {route}"; the method alone
// for a request no route matched (its path is the client's, not a template).
func spanName(rec *Record) string {
	if rec.Route == Unmatched {
		return methodLabel(rec.Method)
	}
	return rec.Method + " " + rec.Route
}

func requestAttrs(r *http.Request, rec *Record) []attribute.KeyValue {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs,
		attribute.String("http.request.method", methodLabel(rec.Method)),
		attribute.String("url.path", rec.Path),
		attribute.String("url.scheme", scheme))
	if rec.Route != Unmatched {
		attrs = append(attrs, attribute.String("http.route", rec.Route))
	}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		attrs = append(attrs, attribute.String("client.address", host))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, attribute.String("user_agent.original", ua))
	}
	return attrs
}

// endServerSpan records how the request was answered and ends the span.
// The server span is an error for a 5xx only (a 4xx is the client's).
func endServerSpan(span trace.Span, rec *Record) {
	status := rec.Status()
	attrs := []attribute.KeyValue{
		attribute.Int("http.response.status_code", status),
		attribute.Int64("http.response.body.size", rec.Written()),
		attribute.String("mistralrs.request_id", rec.ID),
		attribute.String("mistralrs.model", rec.Model()),
	}
	if rec.ContentLength >= 0 {
		attrs = append(attrs, attribute.Int64("http.request.body.size", rec.ContentLength))
	}
	span.SetAttributes(attrs...)
	if status >= 500 {
		msg := rec.errMsg
		if msg == "" {
			msg = rec.end.errMsg
		}
		span.SetAttributes(attribute.String("error.type", statusText(status)))
		span.SetStatus(codes.Error, msg)
	} else if rec.end.errMsg != "" {
		// A stream that failed after its 200.
		span.SetStatus(codes.Error, rec.end.errMsg)
	}
	span.End()
}
