package observe

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"
)

// Access-log formats (--access-log-format).
const (
	FormatText = "text"
	FormatJSON = "json"
)

// AccessLogOptions configure the AccessLog layer.
type AccessLogOptions struct {
	// Enabled writes the info-level lines; without it each request gets
	// only the debug-level completion line.
	Enabled bool
	// Format is FormatText (also for "") or FormatJSON.
	Format string
	// Health also logs housekeeping requests (OPTIONS, /health, /metrics, the docs).
	Health bool
	// Logger receives the lines; nil means slog.Default().
	Logger *slog.Logger
}

// AccessLog is the layer that writes mistral.rs's access lines: "request
// started" once the model label is known (at once, or after the body is read
// for the routes that name their model in it) and "request completed" when
// the handler returned, with the status, the duration, and for a stream its
// outcome and usage, for an error its message. An SSE response also gets a
// debug-level "stream accepted" line when its header is written.
func AccessLog(opts AccessLogOptions) func(http.Handler) http.Handler {
	a := newAccessLogger(opts.Logger, opts.Format == FormatJSON)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec, w, r, _ := enter(w, r)
			logged := opts.Enabled && (opts.Health || !rec.Housekeeping)
			if logged {
				rec.whenModel(func() { a.started(rec, rec.Start) })
			}
			rec.whenHeader(func(code int) {
				if rec.sse {
					now := time.Now()
					a.streamAccepted(rec, statusText(code), now.Sub(rec.Start), now)
				}
			})
			ctx := r.Context()
			serveSettled(rec, next, w, r, func() {
				now := time.Now()
				c := completionOf(rec, ctx, now)
				if logged {
					a.completed(rec, &c, now)
				} else {
					a.fallback(rec, c.status, c.duration, now)
				}
			})
		})
	}
}

// completionOf is what the completed line says about a settled request.
func completionOf(rec *Record, ctx context.Context, now time.Time) completion {
	c := completion{status: statusText(rec.rw.status), duration: now.Sub(rec.Start)}
	e := &rec.end
	if rec.sse {
		switch {
		case e.errMsg != "":
			c.outcome, c.err = "error", e.errMsg
		case rec.rw.writeErr != nil:
			c.outcome = "client_disconnected"
		case e.done:
			c.outcome = "completed"
		case ctx.Err() != nil:
			c.outcome = "client_disconnected"
		default:
			c.outcome = "completed"
		}
		c.usage, c.hasUsage = e.usage, e.hasUsage
	} else if rec.rw.status >= 400 {
		c.err = rec.errMsg
		if c.err == "" {
			body := rec.rw.errBody
			if len(body) > errorCaptureLimit {
				body = body[:errorCaptureLimit]
			}
			c.err = errorMessage(body)
		}
	}
	return c
}

// accessLogger renders mistral.rs's access lines ("request started: …",
// "request completed: …") on the target mistralrs_server_core::metrics. Text
// lines are one preformatted message, as in mistral.rs. JSON lines are a
// deliberate difference: each line is one complete JSON object (time, level,
// then mistral.rs's keys in its order)
// instead of JSON text behind a tracing prefix.
type accessLogger struct {
	json bool
	h    slog.Handler    // bound to TargetAccessLog
	th   *TracingHandler // same handler when it is ours: allocation-free path
}

func newAccessLogger(l *slog.Logger, jsonFormat bool) accessLogger {
	if l == nil {
		l = slog.Default()
	}
	if th, ok := l.Handler().(*TracingHandler); ok {
		th = th.ForTarget(TargetAccessLog)
		return accessLogger{json: jsonFormat, h: th, th: th}
	}
	return accessLogger{json: jsonFormat, h: l.Handler().WithAttrs([]slog.Attr{slog.String(TargetKey, TargetAccessLog)})}
}

func (a *accessLogger) enabled(l slog.Level) bool {
	if a.th != nil {
		return l >= a.th.min
	}
	return a.h.Enabled(context.Background(), l)
}

// completion is what a completed line reports besides the request's identity.
type completion struct {
	status   string
	duration time.Duration
	outcome  string // SSE only
	usage    Usage
	hasUsage bool
	err      string
}

// durationMs rounds as mistral.rs: round(seconds × 1000 × 1000) / 1000.
func durationMs(d time.Duration) float64 {
	return math.Round(d.Seconds()*1000*1000) / 1000
}

func (a *accessLogger) started(rec *Record, now time.Time) {
	if !a.enabled(slog.LevelInfo) {
		return
	}
	bp := bufPool.Get().(*[]byte)
	b := (*bp)[:0]
	if a.json {
		b = appendJSONHead(b, now, slog.LevelInfo, "request_started", rec)
		b = appendJSONField(b, "path", rec.Path)
		b = appendJSONField(b, "model", rec.model)
		b = append(b, `,"content_length":`...)
		if rec.ContentLength >= 0 {
			b = strconv.AppendInt(b, rec.ContentLength, 10)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, "}\n"...)
		a.emitJSON(b, now, slog.LevelInfo, "request started", func(r *slog.Record) {
			r.AddAttrs(slog.String("event", "request_started"), slog.String("request_id", rec.ID))
			addTraceAttr(r, rec)
			r.AddAttrs(
				slog.String("method", rec.Method), slog.String("route", rec.Route), slog.String("path", rec.Path),
				slog.String("model", rec.model))
			if rec.ContentLength >= 0 {
				r.AddAttrs(slog.Int64("content_length", rec.ContentLength))
			} else {
				r.AddAttrs(slog.Any("content_length", nil))
			}
		})
	} else {
		b = append(b, "request started: request_id="...)
		b = append(b, rec.ID...)
		b = appendTraceText(b, rec)
		b = append(b, " method="...)
		b = append(b, rec.Method...)
		b = append(b, " route="...)
		b = append(b, rec.Route...)
		b = append(b, " path="...)
		b = append(b, rec.Path...)
		b = append(b, " model="...)
		b = append(b, rec.model...)
		if rec.ContentLength >= 0 {
			b = append(b, " content_length="...)
			b = strconv.AppendInt(b, rec.ContentLength, 10)
		}
		a.emitText(b, now, slog.LevelInfo)
	}
	*bp = b
	bufPool.Put(bp)
}

func (a *accessLogger) completed(rec *Record, c *completion, now time.Time) {
	if !a.enabled(slog.LevelInfo) {
		return
	}
	ms := durationMs(c.duration)
	bp := bufPool.Get().(*[]byte)
	b := (*bp)[:0]
	if a.json {
		b = appendJSONHead(b, now, slog.LevelInfo, "request_completed", rec)
		b = appendJSONField(b, "model", rec.model)
		b = appendJSONField(b, "status", c.status)
		b = append(b, `,"duration_ms":`...)
		b = appendJSONFloat(b, ms)
		if c.outcome != "" {
			b = appendJSONField(b, "outcome", c.outcome)
		}
		if c.hasUsage {
			b = append(b, `,"prompt_tokens":`...)
			b = strconv.AppendInt(b, int64(c.usage.PromptTokens), 10)
			b = append(b, `,"completion_tokens":`...)
			b = strconv.AppendInt(b, int64(c.usage.CompletionTokens), 10)
			b = append(b, `,"prefill_tok_s":`...)
			b = appendJSONFloat(b, c.usage.PrefillTokPerSec)
			b = append(b, `,"decode_tok_s":`...)
			b = appendJSONFloat(b, c.usage.DecodeTokPerSec)
		}
		if c.err != "" {
			b = appendJSONField(b, "error", c.err)
		}
		b = append(b, "}\n"...)
		a.emitJSON(b, now, slog.LevelInfo, "request completed", func(r *slog.Record) {
			r.AddAttrs(slog.String("event", "request_completed"), slog.String("request_id", rec.ID))
			addTraceAttr(r, rec)
			r.AddAttrs(
				slog.String("method", rec.Method), slog.String("route", rec.Route), slog.String("model", rec.model),
				slog.String("status", c.status), slog.Float64("duration_ms", ms))
			if c.outcome != "" {
				r.AddAttrs(slog.String("outcome", c.outcome))
			}
			if c.hasUsage {
				r.AddAttrs(slog.Int("prompt_tokens", c.usage.PromptTokens), slog.Int("completion_tokens", c.usage.CompletionTokens),
					slog.Float64("prefill_tok_s", c.usage.PrefillTokPerSec), slog.Float64("decode_tok_s", c.usage.DecodeTokPerSec))
			}
			if c.err != "" {
				r.AddAttrs(slog.String("error", c.err))
			}
		})
	} else {
		b = appendCompletedText(b, rec, c.status)
		if c.outcome != "" {
			b = append(b, " outcome="...)
			b = append(b, c.outcome...)
		}
		b = append(b, " duration_ms="...)
		b = strconv.AppendFloat(b, ms, 'f', 3, 64)
		if c.hasUsage {
			b = append(b, " prompt_tokens="...)
			b = strconv.AppendInt(b, int64(c.usage.PromptTokens), 10)
			b = append(b, " completion_tokens="...)
			b = strconv.AppendInt(b, int64(c.usage.CompletionTokens), 10)
			b = append(b, " prefill_tok_s="...)
			b = strconv.AppendFloat(b, c.usage.PrefillTokPerSec, 'f', 1, 64)
			b = append(b, " decode_tok_s="...)
			b = strconv.AppendFloat(b, c.usage.DecodeTokPerSec, 'f', 1, 64)
		}
		if c.err != "" {
			b = append(b, " error="...)
			b = appendRustDebug(b, c.err)
		}
		a.emitText(b, now, slog.LevelInfo)
	}
	*bp = b
	bufPool.Put(bp)
}

// fallback is the debug-level completion line used when the request is not
// access-logged (disabled, or housekeeping without --access-log-health):
// fixed text form, no outcome, usage or error.
func (a *accessLogger) fallback(rec *Record, status string, d time.Duration, now time.Time) {
	if !a.enabled(slog.LevelDebug) {
		return
	}
	bp := bufPool.Get().(*[]byte)
	b := appendCompletedText((*bp)[:0], rec, status)
	b = append(b, " duration_ms="...)
	b = strconv.AppendFloat(b, durationMs(d), 'f', 3, 64)
	a.emitText(b, now, slog.LevelDebug)
	*bp = b
	bufPool.Put(bp)
}

// streamAccepted is the debug line logged when an SSE response starts.
func (a *accessLogger) streamAccepted(rec *Record, status string, d time.Duration, now time.Time) {
	if !a.enabled(slog.LevelDebug) {
		return
	}
	bp := bufPool.Get().(*[]byte)
	b := append((*bp)[:0], "stream accepted: request_id="...)
	b = append(b, rec.ID...)
	b = append(b, " method="...)
	b = append(b, rec.Method...)
	b = append(b, " route="...)
	b = append(b, rec.Route...)
	b = append(b, " model="...)
	b = append(b, rec.model...)
	b = append(b, " status="...)
	b = append(b, status...)
	b = append(b, " accepted_ms="...)
	b = strconv.AppendFloat(b, durationMs(d), 'f', 3, 64)
	a.emitText(b, now, slog.LevelDebug)
	*bp = b
	bufPool.Put(bp)
}

func appendCompletedText(b []byte, rec *Record, status string) []byte {
	b = append(b, "request completed: request_id="...)
	b = append(b, rec.ID...)
	b = appendTraceText(b, rec)
	b = append(b, " method="...)
	b = append(b, rec.Method...)
	b = append(b, " route="...)
	b = append(b, rec.Route...)
	b = append(b, " model="...)
	b = append(b, rec.model...)
	b = append(b, " status="...)
	return append(b, status...)
}

func (a *accessLogger) emitText(msg []byte, now time.Time, l slog.Level) {
	if a.th != nil {
		a.th.writeLine(now, l, msg)
		return
	}
	_ = a.h.Handle(context.Background(), slog.NewRecord(now, l, string(msg), 0))
}

// emitJSON writes the prepared line through our handler, or hands a foreign
// handler a record with the same keys as attributes, in order.
func (a *accessLogger) emitJSON(line []byte, now time.Time, l slog.Level, msg string, attrs func(*slog.Record)) {
	if a.th != nil {
		a.th.writeRaw(line)
		return
	}
	r := slog.NewRecord(now, l, msg, 0)
	attrs(&r)
	_ = a.h.Handle(context.Background(), r)
}

func appendJSONHead(b []byte, now time.Time, l slog.Level, event string, rec *Record) []byte {
	b = append(b, `{"time":"`...)
	b = appendTime(b, now)
	b = append(b, `","level":"`...)
	b = append(b, levelName(l)...)
	b = append(b, `","event":"`...)
	b = append(b, event...)
	b = append(b, '"')
	b = appendJSONField(b, "request_id", rec.ID)
	if rec.TraceID != "" {
		b = appendJSONField(b, "trace_id", rec.TraceID)
	}
	b = appendJSONField(b, "method", rec.Method)
	return appendJSONField(b, "route", rec.Route)
}

func appendJSONField(b []byte, key, val string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return appendJSONString(b, val)
}

// appendJSONFloat writes a finite float as serde_json does for f64: the
// shortest representation, with ".0" on integral values.
func appendJSONFloat(b []byte, v float64) []byte {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return append(b, "null"...)
	}
	start := len(b)
	b = strconv.AppendFloat(b, v, 'f', -1, 64)
	for _, c := range b[start:] {
		if c == '.' {
			return b
		}
	}
	return append(b, ".0"...)
}

const hexDigits = "0123456789abcdef"

func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// appendTraceText adds the trace id to a text line: only for a request with
// a sampled server span, so the id always names a trace the backend has.
func appendTraceText(b []byte, rec *Record) []byte {
	if rec.TraceID == "" {
		return b
	}
	b = append(b, " trace_id="...)
	return append(b, rec.TraceID...)
}

func addTraceAttr(r *slog.Record, rec *Record) {
	if rec.TraceID != "" {
		r.AddAttrs(slog.String("trace_id", rec.TraceID))
	}
}
