package gguf

import (
	"bytes"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"mistralrs/internal/kernels"
)

// writeWeights writes a GGUF file with one F32 tensor of 64 KiB.
func writeWeights(t *testing.T, path string, fill float32) {
	t.Helper()
	w := NewWriter()
	w.AddKV("general.architecture", "llama")
	vals := make([]float32, 16384)
	for i := range vals {
		vals[i] = fill
	}
	if err := w.AddTensorF32("w", kernels.F32, []uint64{16384}, vals); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// captureLog sends slog's default logger to a buffer for the test.
func captureLog(t *testing.T) *bytes.Buffer {
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &buf
}

// checkNow runs CheckMapped past its once-a-second limit.
func checkNow() {
	live.Lock()
	live.checked = time.Time{}
	live.Unlock()
	CheckMapped()
}

// A file renamed over the mapped one leaves the map intact (a WARN, no
// error); a file truncated in place is an error, logged once, and a read
// fault inside its map is recognised and names it.
func TestMappedFileChanges(t *testing.T) {
	logs := captureLog(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	writeWeights(t, path, 1)
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Check(); err != nil {
		t.Fatalf("fresh file: %v", err)
	}

	// The safe deployment: a new file renamed over the path.
	next := filepath.Join(dir, "m.gguf.new")
	writeWeights(t, next, 2)
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(); err != nil {
		t.Errorf("after rename over the path: %v", err)
	}
	checkNow()
	checkNow()
	if got := strings.Count(logs.String(), "model file replaced on disk"); got != 1 || strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("after rename: log %q, want one WARN", logs.String())
	}
	x, _ := f.Tensor("w")
	if v := math.Float32frombits(le.Uint32(x.Data[400:])); v != 1 {
		t.Errorf("mapped weights read %v after the rename, want the old 1", v)
	}

	// An in-place change: the file now at the path, opened and cut short.
	g, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := os.Truncate(path, 100); err != nil {
		t.Fatal(err)
	}
	var ce *ChangedError
	if err := g.Check(); !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), "size now 100 bytes") {
		t.Errorf("after truncation: %v", err)
	}
	logs.Reset()
	checkNow()
	checkNow()
	if got := strings.Count(logs.String(), "level=ERROR"); got != 1 || !strings.Contains(logs.String(), "changed on disk while in use") {
		t.Errorf("after truncation: log %q, want one ERROR", logs.String())
	}

	// A read of the truncated map faults; Fault names the file.
	y, _ := g.Tensor("w")
	v := func() (v any) {
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() { v = recover() }()
		var sink byte
		for i := 0; i < len(y.Data); i += 4096 {
			sink ^= y.Data[i]
		}
		return sink
	}()
	err = Fault(v)
	if !errors.As(err, &ce) || ce.Path != path || !strings.Contains(err.Error(), "reload the model") {
		t.Fatalf("Fault(%v) = %v", v, err)
	}
	// Wrapped in an error chain (a kernels.PanicError from a worker) too.
	if err := Fault(&kernels.PanicError{Value: v}); !errors.As(err, &ce) {
		t.Errorf("Fault through PanicError: %v", err)
	}
	// Anything else is not a model file's fault.
	if Fault("boom") != nil || Fault(errors.New("x")) != nil {
		t.Error("Fault accepted a panic that is not a fault")
	}
	g.Close()
	if err := Fault(v); err != nil {
		t.Errorf("Fault after Close: %v (the mapping is gone)", err)
	}
}
