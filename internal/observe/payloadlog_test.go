package observe

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// -l/--log: appends every request, response and error as mistral.rs writes
// them, in a file of mode 0600.
func TestPayloadLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.log")
	p, err := OpenPayloadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	zone := time.FixedZone("CEST", 2*3600)
	times := []time.Time{
		time.Date(2026, 8, 22, 10, 11, 12, 123456789, zone),
		time.Date(2026, 8, 22, 10, 11, 13, 120000000, zone),
		time.Date(2026, 8, 22, 10, 11, 14, 0, zone),
	}
	i := 0
	p.now = func() time.Time { i++; return times[i-1] }
	loc := time.Local
	time.Local = zone // chrono prints local time
	defer func() { time.Local = loc }()

	if err := p.Request([]byte(`{"model":"default","messages":[{"role":"user","content":"secret"}]}`)); err != nil {
		t.Fatal(err)
	}
	if err := p.Response(map[string]any{"id": "1", "object": "chat.completion"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Error("Model failed with error: out of memory"); err != nil {
		t.Fatal(err)
	}
	p.Close()
	got, _ := os.ReadFile(path)
	want := `Request at 2026-08-22 10:11:12.123456789 +02:00: {"model":"default","messages":[{"role":"user","content":"secret"}]}

Response at 2026-08-22 10:11:13.120 +02:00: {"id":"1","object":"chat.completion"}

Error response at 2026-08-22 10:11:14 +02:00: Model failed with error: out of memory

`
	if string(got) != want {
		t.Errorf("file:\n%s\nwant:\n%s", got, want)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}

	// Reopening appends; an existing file is tightened to 0600.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err = OpenPayloadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Request(json.RawMessage(`{"n":2}`))
	p.Close()
	got, _ = os.ReadFile(path)
	if !regexp.MustCompile(`(?s)^Request at .*\n\nRequest at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{3}|\.\d{6}|\.\d{9})? [+-]\d\d:\d\d: \{"n":2\}\n\n$`).Match(got) {
		t.Errorf("appended file:\n%s", got)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode after reopen %v", st.Mode().Perm())
	}

	var nilLog *PayloadLog // no -l: nothing happens
	if nilLog.Request("x") != nil || nilLog.Close() != nil {
		t.Error("nil payload log")
	}
	if _, err := OpenPayloadLog(filepath.Join(t.TempDir(), "missing", "x.log")); err == nil {
		t.Error("opening in a missing directory succeeded")
	}
}

func TestChronoOffsets(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 1, 2, 3, 4, 5, 6000, time.FixedZone("", -(5*3600+30*60))), "2026-01-02 03:04:05.000006 -05:30"},
		{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "2026-01-02 03:04:05 +00:00"},
		{time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", 3600+61)), "2026-01-02 03:04:05 +01:01:01"},
	} {
		loc := time.Local
		time.Local = c.t.Location()
		got := string(appendChronoLocal(nil, c.t))
		time.Local = loc
		if got != c.want {
			t.Errorf("%s, want %s", got, c.want)
		}
	}
}

// The context variants add the request's trace id, and nothing without one.
func TestPayloadLogTraceID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.log")
	p, err := OpenPayloadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rec := &Record{TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
	ctx := context.WithValue(context.Background(), ctxKey{}, rec)
	_ = p.RequestCtx(ctx, `{"a":1}`)
	_ = p.ErrorCtx(context.Background(), "boom")
	_ = p.ResponseCtx(ctx, `{"b":2}`)
	b, _ := os.ReadFile(path)
	got := regexp.MustCompile(`at [^:]+:\d\d:\d\d[^ ]* [+-]\d\d:\d\d`).ReplaceAllString(string(b), "at T")
	want := "Request at T trace_id=4bf92f3577b34da6a3ce929d0e0e4736: {\"a\":1}\n\nError response at T: boom\n\n" +
		"Response at T trace_id=4bf92f3577b34da6a3ce929d0e0e4736: {\"b\":2}\n\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
