package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/loader"
)

// A model file truncated in place while served fails the request that
// touches it with a 503 saying so (the process lives on); the model is
// retired, and the next request loads it again from the file now at the
// path (replaced the safe way: a new file renamed over it).
func TestModelFileChangedWhileServing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tiny.gguf")
	data := modelBytes(t, tinyConfig)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(o *Options) {
		o.Models = []ModelSpec{{ID: "tiny", Load: func() (*loader.Model, error) { return loader.Load(path, loader.Options{ID: "tiny"}) }}}
	})
	complete := func(prompt string) (int, string) {
		r, body := ts.post("/v1/completions", map[string]any{"model": "tiny", "prompt": prompt, "max_tokens": 4, "temperature": 0})
		return r.StatusCode, string(body)
	}
	if code, body := complete("before"); code != 200 {
		t.Fatalf("before the change: %d %s", code, body)
	}
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	code, body := complete("after the truncation, a prompt not in the prefix cache")
	if code != 503 || !strings.Contains(body, "changed on disk while in use") || !strings.Contains(body, path) {
		t.Fatalf("after truncation: %d %s", code, body)
	}
	if lines := ts.log.waitLines(t, 1, "retired"); !strings.Contains(lines[0], "WARN") {
		t.Errorf("retirement line %q", lines[0])
	}
	// Retired, it is not ready until a request loads it again.
	if r, body := ts.get("/health?model=tiny"); r.StatusCode != 503 || string(body) != "model tiny is unloaded: the next request to it loads it again" {
		t.Errorf("readiness of the retired model: %d %s", r.StatusCode, body)
	}
	// The safe way to deploy: write a new file, rename it over the path.
	if err := os.WriteFile(path+".new", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	if code, body := complete("after the replacement"); code != 200 {
		t.Fatalf("after the replacement: %d %s", code, body)
	}
	if r, body := ts.get("/health?model=tiny"); r.StatusCode != 200 {
		t.Errorf("readiness once loaded again: %d %s", r.StatusCode, body)
	}
}
