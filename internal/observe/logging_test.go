package observe

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestParseFilter(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"info", true},
		{"INFO", true},
		{"3", true},
		{"warn,mistralrs=debug", true},
		{"mistralrs_server_core::metrics=trace", true},
		{"mistralrs", true},
		{"mistralrs=", true},
		{"my-crate=off", true},
		{"info,", true},
		{"mistralrs[span{field=1}]=debug", true},
		{"foo=bar", false},
		{"=info", false},
		{" mistralrs=debug", false},
		{"mistralrs=debug extra", false},
		{"a.b=info", false},
		{"6", true}, // a target named "6", as tracing reads it
		{"a b", false},
	} {
		_, err := ParseFilter(c.in)
		if (err == nil) != c.ok {
			t.Errorf("ParseFilter(%q): err %v, want ok=%v", c.in, err, c.ok)
		}
	}
}

func TestFilterLevels(t *testing.T) {
	for _, c := range []struct {
		filter, target string
		want           slog.Level
	}{
		// The defaults of -v counts.
		{"warn,mistralrs=info", TargetAccessLog, slog.LevelInfo},
		{"warn,mistralrs=info", TargetEngine, slog.LevelInfo},
		{"warn,mistralrs=info", "hf_hub", slog.LevelWarn},
		{"warn,mistralrs=debug", TargetServer, slog.LevelDebug},
		{"warn,hf_hub=info,mistralrs=trace", "hf_hub::api", slog.LevelInfo},
		{"warn,hf_hub=info,mistralrs=trace", TargetCLI, LevelTrace},
		// The most specific (longest) target prefix decides.
		{"mistralrs=debug,mistralrs_server_core::metrics=off", TargetAccessLog, levelOff},
		{"mistralrs=debug,mistralrs_server_core::metrics=off", TargetServer, slog.LevelDebug},
		{"mistralrs_server_core=error,info", TargetAccessLog, slog.LevelError},
		// A bare target enables everything for it; no match: off.
		{"mistralrs_core", TargetEngine, LevelTrace},
		{"mistralrs_core", TargetServer, levelOff},
		// Later duplicates replace earlier ones; span directives never match.
		{"mistralrs=debug,mistralrs=warn", TargetServer, slog.LevelWarn},
		{"mistralrs[req]=trace,info", TargetServer, slog.LevelInfo},
		{"INFO=debug", "anything", slog.LevelDebug},
	} {
		f, err := ParseFilter(c.filter)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.MinLevel(c.target); got != c.want {
			t.Errorf("%q for %s: %v, want %v", c.filter, c.target, got, c.want)
		}
	}
	if DefaultFilter(0).String() != "warn,mistralrs=info" || DefaultFilter(1).String() != "warn,mistralrs=debug" ||
		DefaultFilter(2).String() != "warn,hf_hub=info,mistralrs=trace" || DefaultFilter(5).String() != DefaultFilter(2).String() {
		t.Error("default filters")
	}
}

// -v/-vv set the default; a RUST_LOG that parses wins verbatim; an invalid
// one falls back to the default (reported to the caller).
func TestChooseFilter(t *testing.T) {
	f, err := ChooseFilter(2, "mistralrs=warn", true)
	if err != nil || f.String() != "mistralrs=warn" || f.Enabled(TargetServer, slog.LevelInfo) {
		t.Errorf("valid RUST_LOG: %v %v", f, err)
	}
	f, err = ChooseFilter(1, "mistralrs=loud", true)
	if err == nil || f.String() != "warn,mistralrs=debug" {
		t.Errorf("invalid RUST_LOG: %v %v", f, err)
	}
	f, err = ChooseFilter(0, "", false)
	if err != nil || f.String() != "warn,mistralrs=info" {
		t.Errorf("unset: %v %v", f, err)
	}
	f, _ = ChooseFilter(1, "  ", true)
	if f.String() != "warn,mistralrs=debug" {
		t.Errorf("empty RUST_LOG: %v", f)
	}
}

// The tracing line shape: RFC 3339 UTC µs timestamp, level right-aligned to
// 5, target, message, fields.
func TestTracingHandlerFormat(t *testing.T) {
	var buf logBuf
	f, _ := ParseFilter("trace")
	h := NewTracingHandler(&buf, f)
	log := slog.New(h)
	ts := time.Date(2026, 8, 22, 10, 11, 12, 123456789, time.FixedZone("X", 2*3600))
	rec := func(l slog.Level, msg string, attrs ...slog.Attr) {
		r := slog.NewRecord(ts, l, msg, 0)
		r.AddAttrs(attrs...)
		_ = log.With(TargetKey, TargetServer).Handler().Handle(context.Background(), r)
	}
	rec(LevelTrace, "t")
	rec(slog.LevelDebug, "d")
	rec(slog.LevelInfo, "listening", slog.String("addr", "0.0.0.0:1234"))
	rec(slog.LevelWarn, "w", slog.String("why", `has "quotes" and spaces`), slog.Int("n", 3))
	rec(slog.LevelError, "e", slog.Any("err", errors.New("bad\nthing")), slog.Group("g", slog.Bool("ok", true)))
	want := []string{
		"2026-08-22T08:11:12.123456Z TRACE mistralrs_server_core: t",
		"2026-08-22T08:11:12.123456Z DEBUG mistralrs_server_core: d",
		"2026-08-22T08:11:12.123456Z  INFO mistralrs_server_core: listening addr=0.0.0.0:1234",
		`2026-08-22T08:11:12.123456Z  WARN mistralrs_server_core: w why="has \"quotes\" and spaces" n=3`,
		`2026-08-22T08:11:12.123456Z ERROR mistralrs_server_core: e err="bad\nthing" g.ok=true`,
	}
	if got := buf.Lines(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Filtering by target, including a per-record target attribute.
	buf.Reset()
	f, _ = ParseFilter("warn,mistralrs_core=debug")
	log = slog.New(NewTracingHandler(&buf, f))
	log.Info("dropped: default target at info")
	log.Warn("kept")
	log.With(TargetKey, TargetEngine).Debug("engine debug")
	log.Debug("per-record target", TargetKey, TargetEngine)
	log.With(TargetKey, TargetServer).Info("server info dropped")
	log.WithGroup("grp").With("k", "v").Warn("grouped")
	got := maskAll(buf.Lines())
	want = []string{
		"TS  WARN mistralrs: kept",
		"TS DEBUG mistralrs_core: engine debug",
		"TS DEBUG mistralrs_core: per-record target",
		"TS  WARN mistralrs: grouped grp.k=v",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The process-wide logger as the CLI installs it (ChooseFilter on RUST_LOG,
// a TracingHandler, slog.SetDefault): Logger(target) follows the filter, and
// access lines share the stream with the other logs.
func TestDefaultLoggerSharedStream(t *testing.T) {
	oldDefault := slog.Default()
	defer slog.SetDefault(oldDefault)
	var buf logBuf
	f, err := ChooseFilter(0, "mistralrs_server_core=info", true)
	if err != nil || f.String() != "mistralrs_server_core=info" {
		t.Fatalf("%v %v", f, err)
	}
	slog.SetDefault(slog.New(NewTracingHandler(&buf, f)))
	Logger(TargetServer).Info("startup line")
	Logger(TargetEngine).Info("engine line filtered out by RUST_LOG")
	o, _ := New(DefaultOptions())
	a := newAccessLogger(o.opts.Logger, false)
	a.started(&Record{ID: "x", Method: "GET", Route: "/v1/models", Path: "/v1/models", model: "none", ContentLength: -1}, time.Now())
	lines := maskAll(buf.Lines())
	want := []string{
		"TS  INFO mistralrs_server_core: startup line",
		"TS  INFO mistralrs_server_core::metrics: request started: request_id=x method=GET route=/v1/models path=/v1/models model=none",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s", strings.Join(lines, "\n"))
	}
}
