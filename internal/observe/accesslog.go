package observe

import (
	"context"
	"log/slog"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// Access-log formats (--access-log-format).
const (
	FormatText = "text"
	FormatJSON = "json"
)

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

func (a *accessLogger) started(st *reqState, now time.Time) {
	if !a.enabled(slog.LevelInfo) {
		return
	}
	bp := bufPool.Get().(*[]byte)
	b := (*bp)[:0]
	if a.json {
		b = appendJSONHead(b, now, slog.LevelInfo, "request_started", st)
		b = appendJSONField(b, "path", st.path)
		b = appendJSONField(b, "model", st.model)
		b = append(b, `,"content_length":`...)
		if st.contentLength >= 0 {
			b = strconv.AppendInt(b, st.contentLength, 10)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, "}\n"...)
		a.emitJSON(b, now, slog.LevelInfo, "request started", func(r *slog.Record) {
			r.AddAttrs(slog.String("event", "request_started"), slog.String("request_id", st.id),
				slog.String("method", st.method), slog.String("route", st.route), slog.String("path", st.path),
				slog.String("model", st.model))
			if st.contentLength >= 0 {
				r.AddAttrs(slog.Int64("content_length", st.contentLength))
			} else {
				r.AddAttrs(slog.Any("content_length", nil))
			}
		})
	} else {
		b = append(b, "request started: request_id="...)
		b = append(b, st.id...)
		b = append(b, " method="...)
		b = append(b, st.method...)
		b = append(b, " route="...)
		b = append(b, st.route...)
		b = append(b, " path="...)
		b = append(b, st.path...)
		b = append(b, " model="...)
		b = append(b, st.model...)
		if st.contentLength >= 0 {
			b = append(b, " content_length="...)
			b = strconv.AppendInt(b, st.contentLength, 10)
		}
		a.emitText(b, now, slog.LevelInfo)
	}
	*bp = b
	bufPool.Put(bp)
}

func (a *accessLogger) completed(st *reqState, c *completion, now time.Time) {
	if !a.enabled(slog.LevelInfo) {
		return
	}
	ms := durationMs(c.duration)
	bp := bufPool.Get().(*[]byte)
	b := (*bp)[:0]
	if a.json {
		b = appendJSONHead(b, now, slog.LevelInfo, "request_completed", st)
		b = appendJSONField(b, "model", st.model)
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
			r.AddAttrs(slog.String("event", "request_completed"), slog.String("request_id", st.id),
				slog.String("method", st.method), slog.String("route", st.route), slog.String("model", st.model),
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
		b = appendCompletedText(b, st, c.status)
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
func (a *accessLogger) fallback(st *reqState, status string, d time.Duration, now time.Time) {
	if !a.enabled(slog.LevelDebug) {
		return
	}
	bp := bufPool.Get().(*[]byte)
	b := appendCompletedText((*bp)[:0], st, status)
	b = append(b, " duration_ms="...)
	b = strconv.AppendFloat(b, durationMs(d), 'f', 3, 64)
	a.emitText(b, now, slog.LevelDebug)
	*bp = b
	bufPool.Put(bp)
}

// streamAccepted is the debug line logged when an SSE response starts.
func (a *accessLogger) streamAccepted(st *reqState, status string, d time.Duration, now time.Time) {
	if !a.enabled(slog.LevelDebug) {
		return
	}
	bp := bufPool.Get().(*[]byte)
	b := append((*bp)[:0], "stream accepted: request_id="...)
	b = append(b, st.id...)
	b = append(b, " method="...)
	b = append(b, st.method...)
	b = append(b, " route="...)
	b = append(b, st.route...)
	b = append(b, " model="...)
	b = append(b, st.model...)
	b = append(b, " status="...)
	b = append(b, status...)
	b = append(b, " accepted_ms="...)
	b = strconv.AppendFloat(b, durationMs(d), 'f', 3, 64)
	a.emitText(b, now, slog.LevelDebug)
	*bp = b
	bufPool.Put(bp)
}

func appendCompletedText(b []byte, st *reqState, status string) []byte {
	b = append(b, "request completed: request_id="...)
	b = append(b, st.id...)
	b = append(b, " method="...)
	b = append(b, st.method...)
	b = append(b, " route="...)
	b = append(b, st.route...)
	b = append(b, " model="...)
	b = append(b, st.model...)
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

func appendJSONHead(b []byte, now time.Time, l slog.Level, event string, st *reqState) []byte {
	b = append(b, `{"time":"`...)
	b = appendTime(b, now)
	b = append(b, `","level":"`...)
	b = append(b, levelName(l)...)
	b = append(b, `","event":"`...)
	b = append(b, event...)
	b = append(b, '"')
	b = appendJSONField(b, "request_id", st.id)
	b = appendJSONField(b, "method", st.method)
	return appendJSONField(b, "route", st.route)
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
