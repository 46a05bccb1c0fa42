package observe

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// LevelTrace is tracing's TRACE level (below slog's Debug), enabled by -vv.
const LevelTrace = slog.Level(-8)

// levelOff is above every level a record can carry: the target is silenced.
const levelOff = slog.Level(math.MaxInt32)

// Log targets. Records carry a tracing-style target so RUST_LOG directives
// written for mistral.rs select the same lines here (matching is by prefix,
// so `mistralrs=debug` covers all of them).
const (
	// TargetKey is the attribute key that names a record's target
	// (logger.With(observe.TargetKey, observe.TargetServer)).
	TargetKey = "target"
	// TargetAccessLog is the target of access-log lines, as in mistral.rs.
	TargetAccessLog = "mistralrs_server_core::metrics"
	// TargetServer is the HTTP server (routes, handlers, startup lines).
	TargetServer = "mistralrs_server_core"
	// TargetEngine is the inference engine and scheduler.
	TargetEngine = "mistralrs_core"
	// TargetCLI is the command line front end.
	TargetCLI = "mistralrs_cli"
	// TargetDefault is used for records that carry no target.
	TargetDefault = "mistralrs"
)

// Filter is a parsed RUST_LOG filter (tracing-subscriber EnvFilter syntax):
// comma-separated directives `level`, `target`, `target=level`; the most
// specific directive (longest matching target prefix) decides. Directives
// that select spans or fields parse but never match, since slog has no spans.
type Filter struct {
	src    string
	dirs   []directive // most specific first
	lowest slog.Level  // the lowest level any directive enables
}

type directive struct {
	target    string
	hasTarget bool
	dynamic   bool // [span{field}] part: never matches outside a span
	level     slog.Level
}

// ParseFilter parses a RUST_LOG value. Any invalid directive makes the whole
// value invalid, as EnvFilter::try_from_default_env does.
func ParseFilter(s string) (*Filter, error) {
	f := &Filter{src: s}
	for _, part := range strings.Split(s, ",") {
		if part == "" {
			continue
		}
		d, err := parseDirective(part)
		if err != nil {
			return nil, err
		}
		// Like tracing's directive set, a repeated target replaces the earlier one.
		if i := slices.IndexFunc(f.dirs, func(o directive) bool {
			return o.hasTarget == d.hasTarget && o.target == d.target && o.dynamic == d.dynamic
		}); i >= 0 {
			f.dirs[i] = d
		} else {
			f.dirs = append(f.dirs, d)
		}
	}
	f.lowest = levelOff
	for _, d := range f.dirs {
		if !d.dynamic && d.level < f.lowest {
			f.lowest = d.level
		}
	}
	slices.SortStableFunc(f.dirs, func(a, b directive) int {
		la, lb := -1, -1
		if a.hasTarget {
			la = len(a.target)
		}
		if b.hasTarget {
			lb = len(b.target)
		}
		if la != lb {
			return lb - la
		}
		return strings.Compare(b.target, a.target)
	})
	return f, nil
}

// parseDirective follows tracing-subscriber's directive grammar:
// a lone level, or up to two parts (a target of [\w:-]+ or a [span{fields}])
// followed by an optional `=level` (missing level: trace).
func parseDirective(s string) (directive, error) {
	if lv, ok := parseLevel(s); ok && s != "" {
		return directive{level: lv}, nil
	}
	rest := s
	var d directive
	parts := 0
	for rest != "" && rest[0] != '=' && parts < 2 {
		if rest[0] == '[' {
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return d, fmt.Errorf("invalid filter directive %q", s)
			}
			d.dynamic = true
			rest = rest[end+1:]
		} else {
			n := 0
			for _, r := range rest {
				if r == '_' || r == ':' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) {
					n += utf8.RuneLen(r)
					continue
				}
				break
			}
			if n == 0 {
				return d, fmt.Errorf("invalid filter directive %q", s)
			}
			// A target that reads as a level is no target (tracing's rule).
			if _, isLevel := parseLevel(rest[:n]); !isLevel {
				d.target, d.hasTarget = rest[:n], true
			}
			rest = rest[n:]
		}
		parts++
	}
	d.level = LevelTrace
	if rest != "" {
		if rest[0] != '=' {
			return d, fmt.Errorf("invalid filter directive %q", s)
		}
		if lvl := rest[1:]; lvl != "" {
			lv, ok := parseLevel(lvl)
			if !ok {
				return d, fmt.Errorf("invalid filter directive %q: bad level %q", s, lvl)
			}
			d.level = lv
		}
	}
	if parts == 0 {
		return d, fmt.Errorf("invalid filter directive %q", s)
	}
	return d, nil
}

// parseLevel reads tracing's level names (any case) and digits 0 (off) to 5 (trace).
func parseLevel(s string) (slog.Level, bool) {
	switch strings.ToLower(s) {
	case "off", "0":
		return levelOff, true
	case "error", "1":
		return slog.LevelError, true
	case "warn", "2":
		return slog.LevelWarn, true
	case "info", "3":
		return slog.LevelInfo, true
	case "debug", "4":
		return slog.LevelDebug, true
	case "trace", "5":
		return LevelTrace, true
	}
	return 0, false
}

// DefaultFilter is mistral.rs's filter when RUST_LOG is absent or invalid:
// warn everywhere, our own targets at info (-v: debug, -vv: trace, which also
// lets hf_hub log at info).
func DefaultFilter(verbosity int) *Filter {
	var src string
	switch {
	case verbosity <= 0:
		src = "warn,mistralrs=info"
	case verbosity == 1:
		src = "warn,mistralrs=debug"
	default:
		src = "warn,hf_hub=info,mistralrs=trace"
	}
	f, err := ParseFilter(src)
	if err != nil {
		panic(err) // constant input
	}
	return f
}

// ChooseFilter picks the filter as mistral.rs does: a RUST_LOG that parses
// wins verbatim; otherwise the -v default applies and the parse error is
// returned for the caller to report. An empty RUST_LOG counts as unset
// (tracing would read it as "log nothing at all").
func ChooseFilter(verbosity int, rustLog string, set bool) (*Filter, error) {
	if set && strings.TrimSpace(rustLog) != "" {
		f, err := ParseFilter(rustLog)
		if err == nil {
			return f, nil
		}
		return DefaultFilter(verbosity), fmt.Errorf("RUST_LOG ignored: %w", err)
	}
	return DefaultFilter(verbosity), nil
}

// MinLevel is the lowest level enabled for target.
func (f *Filter) MinLevel(target string) slog.Level {
	for _, d := range f.dirs {
		if d.dynamic {
			continue
		}
		if !d.hasTarget || strings.HasPrefix(target, d.target) {
			return d.level
		}
	}
	return levelOff
}

// Enabled reports whether a record of level for target passes the filter.
func (f *Filter) Enabled(target string, level slog.Level) bool {
	return level >= f.MinLevel(target)
}

// String returns the filter as given.
func (f *Filter) String() string { return f.src }

// Logger returns the default logger bound to target.
func Logger(target string) *slog.Logger {
	return slog.Default().With(TargetKey, target)
}

// syncWriter serialises whole lines from every handler sharing one output.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) write(p []byte) {
	s.mu.Lock()
	_, _ = s.w.Write(p)
	s.mu.Unlock()
}

// TracingHandler is a slog.Handler that prints tracing-subscriber's default
// line shape: `<RFC3339 UTC µs>Z <LEVEL right-aligned to 5> <target>: <message> key=value…`.
// The target comes from the TargetKey attribute; the Filter decides per target.
type TracingHandler struct {
	out    *syncWriter
	filter *Filter
	target string
	min    slog.Level
	attrs  []byte // preformatted " key=value" pairs from WithAttrs
	group  string // "a.b." prefix from WithGroup
}

// NewTracingHandler writes to w, filtered by f (nil: the info default).
func NewTracingHandler(w io.Writer, f *Filter) *TracingHandler {
	if f == nil {
		f = DefaultFilter(0)
	}
	return &TracingHandler{out: &syncWriter{w: w}, filter: f, target: TargetDefault, min: f.MinLevel(TargetDefault)}
}

// Filter returns the filter in use.
func (h *TracingHandler) Filter() *Filter { return h.filter }

// ForTarget returns a handler for target sharing h's output and filter.
func (h *TracingHandler) ForTarget(target string) *TracingHandler {
	h2 := *h
	h2.target = target
	h2.min = h.filter.MinLevel(target)
	return &h2
}

// Enabled implements slog.Handler. A record may name its own target, so a
// level some directive enables passes here and Handle decides exactly.
func (h *TracingHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.min || (h.group == "" && l >= h.filter.lowest)
}

// WithAttrs implements slog.Handler; a TargetKey attribute sets the target.
func (h *TracingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h2 := *h
	h2.attrs = slices.Clip(h.attrs)
	for _, a := range as {
		if a.Key == TargetKey && h.group == "" {
			h2.target = a.Value.String()
			h2.min = h.filter.MinLevel(h2.target)
			continue
		}
		h2.attrs = appendAttr(h2.attrs, h.group, a)
	}
	return &h2
}

// WithGroup implements slog.Handler: later keys are prefixed "name.".
func (h *TracingHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	h2 := *h
	h2.group = h.group + name + "."
	return &h2
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Handle implements slog.Handler.
func (h *TracingHandler) Handle(_ context.Context, r slog.Record) error {
	target, min := h.target, h.min
	if h.group == "" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == TargetKey {
				target = a.Value.String()
				min = h.filter.MinLevel(target)
				return false
			}
			return true
		})
	}
	if r.Level < min {
		return nil
	}
	bp := bufPool.Get().(*[]byte)
	b := appendPrefix((*bp)[:0], r.Time, r.Level, target)
	b = append(b, r.Message...)
	b = append(b, h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == TargetKey && h.group == "" {
			return true
		}
		b = appendAttr(b, h.group, a)
		return true
	})
	b = append(b, '\n')
	h.out.write(b)
	*bp = b
	bufPool.Put(bp)
	return nil
}

// writeLine prints a preformatted message at level, for the access log's
// allocation-free path. The caller checked Enabled.
func (h *TracingHandler) writeLine(t time.Time, level slog.Level, msg []byte) {
	bp := bufPool.Get().(*[]byte)
	b := appendPrefix((*bp)[:0], t, level, h.target)
	b = append(b, msg...)
	b = append(b, '\n')
	h.out.write(b)
	*bp = b
	bufPool.Put(bp)
}

// writeRaw prints line as is (JSON access-log lines). The caller checked Enabled.
func (h *TracingHandler) writeRaw(line []byte) { h.out.write(line) }

// appendTime writes tracing's timestamp: RFC 3339, UTC, microseconds, Z.
// Hand-formatted with the date and clock cached per second: AppendFormat
// parses its layout on every call, which cost more than the rest of a line.
func appendTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		t = time.Now()
	}
	sec := t.Unix()
	c := tsCache.Load()
	if c == nil || c.sec != sec {
		c = &tsSecond{sec: sec}
		u := t.UTC()
		year, month, day := u.Date()
		hour, minute, s := u.Clock()
		p := appendDigits(c.text[:0], year, 4)
		p = append(p, '-')
		p = appendDigits(p, int(month), 2)
		p = append(p, '-')
		p = appendDigits(p, day, 2)
		p = append(p, 'T')
		p = appendDigits(p, hour, 2)
		p = append(p, ':')
		p = appendDigits(p, minute, 2)
		p = append(p, ':')
		p = appendDigits(p, s, 2)
		c.n = len(p)
		tsCache.Store(c)
	}
	b = append(b, c.text[:c.n]...)
	b = append(b, '.')
	b = appendDigits(b, t.Nanosecond()/1000, 6)
	return append(b, 'Z')
}

type tsSecond struct {
	sec  int64
	text [24]byte
	n    int
}

var tsCache atomic.Pointer[tsSecond]

// appendDigits writes v (non-negative) zero-padded to width digits.
func appendDigits(b []byte, v, width int) []byte {
	var d [20]byte
	i := len(d)
	for v >= 10 || width > 1 {
		i--
		d[i] = byte('0' + v%10)
		v /= 10
		width--
	}
	i--
	d[i] = byte('0' + v)
	return append(b, d[i:]...)
}

func levelName(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "ERROR"
	case l >= slog.LevelWarn:
		return "WARN"
	case l >= slog.LevelInfo:
		return "INFO"
	case l >= slog.LevelDebug:
		return "DEBUG"
	}
	return "TRACE"
}

func appendPrefix(b []byte, t time.Time, l slog.Level, target string) []byte {
	b = appendTime(b, t)
	b = append(b, ' ')
	name := levelName(l)
	for i := len(name); i < 5; i++ {
		b = append(b, ' ')
	}
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, target...)
	return append(b, ": "...)
}

func appendAttr(b []byte, group string, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return b
	}
	if a.Value.Kind() == slog.KindGroup {
		g := group
		if a.Key != "" {
			g += a.Key + "."
		}
		for _, ga := range a.Value.Group() {
			b = appendAttr(b, g, ga)
		}
		return b
	}
	b = append(b, ' ')
	b = append(b, group...)
	b = append(b, a.Key...)
	b = append(b, '=')
	var s string
	switch a.Value.Kind() {
	case slog.KindString:
		s = a.Value.String()
	case slog.KindTime:
		s = a.Value.Time().Format(time.RFC3339Nano)
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok {
			s = err.Error()
		} else {
			s = a.Value.String()
		}
	default:
		return append(b, a.Value.String()...)
	}
	if needsQuote(s) {
		return appendRustDebug(b, s)
	}
	return append(b, s...)
}

func needsQuote(s string) bool {
	if s == "" {
		return true
	}
	for _, r := range s {
		if r == ' ' || r == '"' || r == '=' || r == '\\' || !strconv.IsPrint(r) {
			return true
		}
	}
	return false
}

// appendRustDebug quotes s as Rust's `{:?}` does for strings: \" \\ \n \r \t
// \0 escaped, other non-printable characters as \u{hex}.
func appendRustDebug(b []byte, s string) []byte {
	b = append(b, '"')
	for i, r := range s {
		switch r {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case 0:
			b = append(b, '\\', '0')
		default:
			if r == utf8.RuneError {
				if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
					// Invalid UTF-8 cannot reach a Rust string; mistral.rs
					// would have replaced it (from_utf8_lossy).
					b = append(b, "\ufffd"...)
					continue
				}
			}
			if strconv.IsPrint(r) {
				b = utf8.AppendRune(b, r)
			} else {
				b = append(b, `\u{`...)
				b = strconv.AppendUint(b, uint64(r), 16)
				b = append(b, '}')
			}
		}
	}
	return append(b, '"')
}
