package tracing

import (
	"context"
	"sync/atomic"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"
)

// DefaultCaptureBytes bounds each captured prompt or completion.
const DefaultCaptureBytes = 4096

// EnvCaptureContent is the GenAI conventions' content-capture switch.
const EnvCaptureContent = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

// capture is the process's content-capture setting: 0 off, else the byte
// bound. It is process-wide like the provider, so the generation spans read
// it without a handle on the server's configuration.
var capture atomic.Int64

func setCapture(on bool, bytes int) {
	if !on {
		capture.Store(0)
		return
	}
	if bytes <= 0 {
		bytes = DefaultCaptureBytes
	}
	capture.Store(int64(bytes))
}

// CaptureContent reports whether prompts and completions may be recorded
// on spans, and the byte bound of each (0 when they may not).
func CaptureContent() (on bool, limit int) {
	n := capture.Load()
	return n > 0, int(n)
}

// Clip returns s cut to the capture bound on a rune boundary, and whether
// it was cut; "" when capture is off.
func Clip(s string) (string, bool) {
	on, limit := CaptureContent()
	if !on {
		return "", false
	}
	if len(s) <= limit {
		return s, false
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

// Tracer returns the tracer of the request's span: the server's provider
// when the HTTP layer started a span, a no-op one when tracing is off.
func Tracer(ctx context.Context) trace.Tracer {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(ScopeName)
}
