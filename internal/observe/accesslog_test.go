package observe

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func checkLines(t *testing.T, got, want []string) {
	t.Helper()
	got = maskAll(got)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("log lines:\n got: %s\nwant: %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
}

// Access log, text format: the exact "request started: …" and "request
// completed: …" lines of mistral.rs's access log.
func TestAccessLogTextLines(t *testing.T) {
	e := newEnv(t, "warn,mistralrs=info", nil)
	body := `{"model":"llama-3.2-1b","messages":[]}`
	rec := e.do("POST", "/v1/chat/completions?x=1", body, "X-Request-Id", "abc-123")
	if rec.Code != 200 {
		t.Fatalf("status %d", rec.Code)
	}
	e.do("GET", "/v1/models", "", "X-Request-Id", "id2")
	e.do("GET", "/nope/x", "", "X-Request-Id", "id3")
	checkLines(t, e.logs.Lines(), []string{
		"TS  INFO mistralrs_server_core::metrics: request started: request_id=abc-123 method=POST route=/v1/chat/completions path=/v1/chat/completions model=llama-3.2-1b content_length=38",
		"TS  INFO mistralrs_server_core::metrics: request completed: request_id=abc-123 method=POST route=/v1/chat/completions model=llama-3.2-1b status=200 duration_ms=D",
		"TS  INFO mistralrs_server_core::metrics: request started: request_id=id2 method=GET route=/v1/models path=/v1/models model=none",
		"TS  INFO mistralrs_server_core::metrics: request completed: request_id=id2 method=GET route=/v1/models model=none status=200 duration_ms=D",
		"TS  INFO mistralrs_server_core::metrics: request started: request_id=id3 method=GET route=<unmatched> path=/nope/x model=none",
		`TS  INFO mistralrs_server_core::metrics: request completed: request_id=id3 method=GET route=<unmatched> model=none status=404 duration_ms=D error="no route for GET /nope/x"`,
	})
}

func TestDurationRounding(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{1234567 * time.Nanosecond, "1.235"},
		{1234499 * time.Nanosecond, "1.234"},
		{600 * time.Nanosecond, "0.001"},
		{400 * time.Nanosecond, "0.000"},
		{90 * time.Second, "90000.000"},
	} {
		if got := strconv.FormatFloat(durationMs(c.d), 'f', 3, 64); got != c.want {
			t.Errorf("%v: %s, want %s", c.d, got, c.want)
		}
	}
}

// Access log: SSE extras (outcome, usage quartet with tok/s) and stream errors.
func TestAccessLogStreamExtras(t *testing.T) {
	e := newEnv(t, "warn,mistralrs=info", nil)
	e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":3,"usage":true}`, "X-Request-Id", "s1")
	e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":1,"fail":"model failed: \"oom\"\nretry"}`, "X-Request-Id", "s2")
	e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":2}`, "X-Request-Id", "s3")
	lines := e.logs.Lines()
	var done []string
	for _, l := range lines {
		if strings.Contains(l, "request completed") {
			done = append(done, l)
		}
	}
	checkLines(t, done, []string{
		"TS  INFO mistralrs_server_core::metrics: request completed: request_id=s1 method=POST route=/v1/chat/completions model=qwen3-0.6b status=200 outcome=completed duration_ms=D prompt_tokens=12 completion_tokens=3 prefill_tok_s=48.7 decode_tok_s=21.3",
		`TS  INFO mistralrs_server_core::metrics: request completed: request_id=s2 method=POST route=/v1/chat/completions model=qwen3-0.6b status=200 outcome=error duration_ms=D error="model failed: \"oom\"\nretry"`,
		"TS  INFO mistralrs_server_core::metrics: request completed: request_id=s3 method=POST route=/v1/chat/completions model=qwen3-0.6b status=200 outcome=completed duration_ms=D",
	})
}

// A client that goes away mid-stream: outcome=client_disconnected.
func TestAccessLogClientDisconnected(t *testing.T) {
	e := newEnv(t, "warn,mistralrs=info", nil)
	srv := httptest.NewServer(e.h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"stream":true,"steps":1000,"step_ms":5}`))
	req.Header.Set("X-Request-Id", "gone")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	_, _ = resp.Body.Read(buf) // the stream started
	cancel()
	resp.Body.Close()
	line := waitLine(t, e.logs, "request completed: request_id=gone")
	want := "TS  INFO mistralrs_server_core::metrics: request completed: request_id=gone method=POST route=/v1/chat/completions model=qwen3-0.6b status=200 outcome=client_disconnected duration_ms=D"
	if mask(line) != want {
		t.Errorf("got  %s\nwant %s", mask(line), want)
	}
}

// waitLine waits for a log line containing s (the server finishes its
// accounting after the client has its response).
func waitLine(t *testing.T, l *logBuf, s string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range l.Lines() {
			if strings.Contains(line, s) {
				return line
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no log line with %q in:\n%s", s, strings.Join(l.Lines(), "\n"))
	return ""
}

// The debug-level fallback line: access log disabled, or housekeeping
// without --access-log-health. No start line, fixed text form.
func TestAccessLogDebugFallback(t *testing.T) {
	e := newEnv(t, "warn,mistralrs=debug", func(o *Options) { o.AccessLog = false })
	e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":1,"usage":true}`, "X-Request-Id", "f1")
	checkLines(t, e.logs.Lines(), []string{
		"TS DEBUG mistralrs_server_core::metrics: stream accepted: request_id=f1 method=POST route=/v1/chat/completions model=qwen3-0.6b status=200 accepted_ms=D",
		"TS DEBUG mistralrs_server_core::metrics: request completed: request_id=f1 method=POST route=/v1/chat/completions model=qwen3-0.6b status=200 duration_ms=D",
	})

	// Housekeeping with the access log on: only the debug line.
	e = newEnv(t, "warn,mistralrs=debug", nil)
	e.do("GET", "/health", "", "X-Request-Id", "h1")
	checkLines(t, e.logs.Lines(), []string{
		"TS DEBUG mistralrs_server_core::metrics: request completed: request_id=h1 method=GET route=/health model=none status=200 duration_ms=D",
	})

	// At the default level the fallback is not printed.
	e = newEnv(t, "warn,mistralrs=info", func(o *Options) { o.AccessLog = false })
	e.do("GET", "/v1/models", "")
	e.do("GET", "/health", "")
	if l := e.logs.Lines(); len(l) != 0 {
		t.Errorf("unexpected lines: %q", l)
	}
}

// Housekeeping routes and every OPTIONS request are skipped unless
// --access-log-health.
func TestAccessLogHousekeeping(t *testing.T) {
	reqs := [][2]string{
		{"GET", "/"}, {"GET", "/health"}, {"GET", "/metrics"}, {"GET", "/docs/"}, {"GET", "/docs/index.html"},
		{"GET", "/api-doc/openapi.json"}, {"GET", "/ui/"}, {"GET", "/ui/api/list_models"},
		{"OPTIONS", "/v1/chat/completions"}, {"OPTIONS", "/v1/models"}, {"OPTIONS", "/anything"},
	}
	e := newEnv(t, "warn,mistralrs=info", nil)
	for _, r := range reqs {
		e.do(r[0], r[1], "")
	}
	if l := e.logs.Lines(); len(l) != 0 {
		t.Errorf("housekeeping logged without --access-log-health: %q", l)
	}
	e = newEnv(t, "warn,mistralrs=info", func(o *Options) { o.AccessLogHealth = true })
	for _, r := range reqs {
		e.do(r[0], r[1], "", "X-Request-Id", "hk")
	}
	if l := e.logs.Lines(); len(l) != 2*len(reqs) {
		t.Fatalf("with --access-log-health: %d lines, want %d:\n%s", len(l), 2*len(reqs), strings.Join(l, "\n"))
	}
	checkLines(t, e.logs.Lines()[:2], []string{
		"TS  INFO mistralrs_server_core::metrics: request started: request_id=hk method=GET route=/{$} path=/ model=none",
		"TS  INFO mistralrs_server_core::metrics: request completed: request_id=hk method=GET route=/{$} model=none status=200 duration_ms=D",
	})
	last := maskAll(e.logs.Lines()[len(e.logs.Lines())-2:])
	if !strings.Contains(last[1], "method=OPTIONS route=<unmatched> model=none status=200") {
		t.Errorf("OPTIONS line: %s", last[1])
	}
}

// Error responses: the access line carries the error message, from the
// handler (WriteError) or read from the body (JSON message or raw text).
func TestAccessLogErrorMessage(t *testing.T) {
	e := newEnv(t, "warn,mistralrs=info", nil)
	e.do("GET", "/v1/files/f-1", "", "X-Request-Id", "e1")
	e.do("POST", "/v1/plain", "", "X-Request-Id", "e2")
	e.do("POST", "/v1/chat/completions", `{"model":`, "X-Request-Id", "e3")
	var done []string
	for _, l := range e.logs.Lines() {
		if strings.Contains(l, "request completed") {
			done = append(done, l)
		}
	}
	checkLines(t, done, []string{
		`TS  INFO mistralrs_server_core::metrics: request completed: request_id=e1 method=GET route=/v1/files/{id} model=none status=404 duration_ms=D error="file f-1 not found"`,
		`TS  INFO mistralrs_server_core::metrics: request completed: request_id=e2 method=POST route=/v1/plain model=none status=500 duration_ms=D error="boom: \"quoted\"\nsecond line"`,
		`TS  INFO mistralrs_server_core::metrics: request completed: request_id=e3 method=POST route=/v1/chat/completions model=unknown status=400 duration_ms=D error="invalid JSON body: unexpected EOF"`,
	})
	for _, c := range []struct{ body, want string }{
		{`{"message":"m1"}`, "m1"},
		{`{"error":{"message":"m2","type":"x"}}`, "m2"},
		{`{"Message":"not serde"}`, `{"Message":"not serde"}`},
		{"  text \n", "text"},
		{"", ""},
	} {
		if got := errorMessage([]byte(c.body)); got != c.want {
			t.Errorf("errorMessage(%q) = %q, want %q", c.body, got, c.want)
		}
	}
}

// --access-log-format json: each access line is one complete JSON object
// with time, level, then mistral.rs's keys in mistral.rs's order.
func TestAccessLogJSON(t *testing.T) {
	e := newEnv(t, "warn,mistralrs=info", func(o *Options) { o.AccessLogFormat = FormatJSON })
	e.do("POST", "/v1/chat/completions", `{"model":"llama-3.2-1b"}`, "X-Request-Id", "j1")
	e.do("GET", "/v1/models", "", "X-Request-Id", "j2")
	e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":2,"usage":true}`, "X-Request-Id", "j3")
	e.do("POST", "/v1/chat/completions", `{"stream":true,"steps":1,"fail":"bad \"x\""}`, "X-Request-Id", "j4")
	lines := e.logs.Lines()
	if len(lines) != 8 {
		t.Fatalf("%d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	startKeys := []string{"time", "level", "event", "request_id", "method", "route", "path", "model", "content_length"}
	doneKeys := []string{"time", "level", "event", "request_id", "method", "route", "model", "status", "duration_ms"}
	usageKeys := []string{"outcome", "prompt_tokens", "completion_tokens", "prefill_tok_s", "decode_tok_s"}
	wantKeys := [][]string{
		startKeys, doneKeys,
		startKeys, doneKeys,
		startKeys, append(append([]string{}, doneKeys...), usageKeys...),
		startKeys, append(append([]string{}, doneKeys...), "outcome", "error"),
	}
	for i, l := range lines {
		if keys := jsonKeys(t, l); !reflect.DeepEqual(keys, wantKeys[i]) {
			t.Errorf("line %d keys %v, want %v\n%s", i, keys, wantKeys[i], l)
		}
	}
	want := []string{
		`{"time":"TS","level":"INFO","event":"request_started","request_id":"j1","method":"POST","route":"/v1/chat/completions","path":"/v1/chat/completions","model":"llama-3.2-1b","content_length":24}`,
		`{"time":"TS","level":"INFO","event":"request_completed","request_id":"j1","method":"POST","route":"/v1/chat/completions","model":"llama-3.2-1b","status":"200","duration_ms":D}`,
		`{"time":"TS","level":"INFO","event":"request_started","request_id":"j2","method":"GET","route":"/v1/models","path":"/v1/models","model":"none","content_length":null}`,
		`{"time":"TS","level":"INFO","event":"request_completed","request_id":"j2","method":"GET","route":"/v1/models","model":"none","status":"200","duration_ms":D}`,
	}
	checkLines(t, lines[:4], want)
	var v map[string]any
	if err := json.Unmarshal([]byte(lines[5]), &v); err != nil {
		t.Fatal(err)
	}
	if v["outcome"] != "completed" || v["prompt_tokens"] != 12.0 || v["completion_tokens"] != 2.0 ||
		v["prefill_tok_s"] != 48.70000076293945 || v["decode_tok_s"] != 21.26 {
		t.Errorf("usage fields: %s", lines[5])
	}
	if err := json.Unmarshal([]byte(lines[7]), &v); err != nil {
		t.Fatal(err)
	}
	if v["outcome"] != "error" || v["error"] != `bad "x"` {
		t.Errorf("error fields: %s", lines[7])
	}
}

func jsonKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", line)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatalf("trailing data: %s", line)
	}
	return keys
}

// A foreign slog handler still gets the access lines: text as the message,
// JSON keys as ordered attributes.
func TestAccessLogForeignHandler(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(slog.NewJSONHandler(&buf, nil))
	o, err := New(Options{AccessLog: true, AccessLogFormat: FormatJSON, Logger: l})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {})
	o.Handler(mux).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/models", nil))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%q", lines)
	}
	keys := jsonKeys(t, lines[1])
	want := []string{"time", "level", "msg", "target", "event", "request_id", "method", "route", "model", "status", "duration_ms"}
	if !reflect.DeepEqual(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
}
