package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// --cpuprofile writes one profile per test of the table (the first to
// FILE, the second to FILE.2), each a gzipped pprof profile, and no more.
func TestBenchCPUProfilePerTest(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cpu.prof")
	if _, _, err := execute(t, "", "bench", "-p", "4", "-n", "4", "-d", "8", "-r", "2", "-t", "1", "--cpuprofile", path); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{path, path + ".2"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: not a gzipped profile: %v", filepath.Base(name), err)
		}
		if raw, err := io.ReadAll(zr); err != nil || len(raw) == 0 {
			t.Fatalf("%s: %d bytes of profile, %v", filepath.Base(name), len(raw), err)
		}
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Fatalf("two tests wrote a third profile (%v)", err)
	}
}
