package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedUpToDate regenerates the files into a temporary folder and
// compares them with the committed ones in internal/kernels: run
// `go generate ./internal/kernels/` after changing the table or templates.
// A file in internal/kernels with the generated header that the generator
// no longer writes is reported too.
func TestGeneratedUpToDate(t *testing.T) {
	tmp := t.TempDir()
	if err := write(tmp); err != nil {
		t.Fatal(err)
	}
	fresh, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh) == 0 {
		t.Fatal("the generator wrote nothing")
	}
	const pkg = "../.."
	made := map[string]bool{}
	for _, e := range fresh {
		made[e.Name()] = true
		want, err := os.ReadFile(filepath.Join(tmp, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(pkg, e.Name()))
		if err != nil {
			t.Errorf("%s: %v (run go generate ./internal/kernels/)", e.Name(), err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("internal/kernels/%s is not what the generator writes now: run go generate ./internal/kernels/", e.Name())
		}
	}
	committed, err := filepath.Glob(filepath.Join(pkg, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range committed {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(string(src), header) && !made[filepath.Base(f)] {
			t.Errorf("internal/kernels/%s carries the generated header but the generator no longer writes it", filepath.Base(f))
		}
	}
	t.Logf("%d generated files up to date", len(fresh))
}
