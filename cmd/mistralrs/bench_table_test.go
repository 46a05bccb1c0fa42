package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
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

// Lists of KV cache types run every test for each: --cache-type alone
// pairs keys and values of each type, -k and -v lists combine; the table
// then names the types. A speculative benchmark refuses a list.
func TestBenchKVLists(t *testing.T) {
	for _, c := range []struct {
		args []string
		want [][2]string
	}{
		{[]string{"--cache-type", "f16,q8_0"}, [][2]string{{"f16", "f16"}, {"q8_0", "q8_0"}}},
		{[]string{"--cache-type-k", "f16, q8_0", "--cache-type", "f32"}, [][2]string{{"f16", "f32"}, {"q8_0", "f32"}}},
		{[]string{"--cache-type-k", "f16,q8_0", "--cache-type-v", "f32,q4_0"}, [][2]string{{"f16", "f32"}, {"f16", "q4_0"}, {"q8_0", "f32"}, {"q8_0", "q4_0"}}},
	} {
		out, _, err := execute(t, "", append([]string{"bench", "-p", "4", "-n", "2", "-r", "1", "-t", "1", "--no-warmup", "--json"}, c.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var rows []benchResult
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2*len(c.want) {
			t.Fatalf("%v: %d rows, want %d", c.args, len(rows), 2*len(c.want))
		}
		for i, r := range rows {
			if w := c.want[i/2]; r.TypeK != w[0] || r.TypeV != w[1] {
				t.Errorf("%v: row %d is %s/%s, want %s/%s", c.args, i, r.TypeK, r.TypeV, w[0], w[1])
			}
		}
	}
	out, _, err := execute(t, "", "bench", "-p", "4", "-n", "0", "-r", "1", "-t", "1", "--cache-type", "f16,q8_0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "type_k") || !strings.Contains(out, "| q8_0   | q8_0   |") {
		t.Errorf("the table does not name the types:\n%s", out)
	}
	if out, _, _ = execute(t, "", "bench", "-p", "4", "-n", "0", "-r", "1", "-t", "1", "--cache-type", "q8_0"); strings.Contains(out, "type_k") {
		t.Errorf("one type, and the table has type columns:\n%s", out)
	}
	if _, _, err := execute(t, "", "bench", "--spec-ngram", "-n", "4", "-r", "1", "--cache-type", "f16,q8_0"); err == nil || !strings.Contains(err.Error(), "one KV cache type") {
		t.Errorf("speculative bench with two types: %v", err)
	}
	if _, _, err := execute(t, "", "bench", "--cache-type-k", "f16,bogus"); err == nil || !strings.Contains(err.Error(), "--cache-type-k") {
		t.Errorf("unknown type in a list: %v", err)
	}
}

// --interleave runs the repetitions round-robin over the tests (each
// filled and warmed up first) and reports the same rows as without.
func TestBenchInterleave(t *testing.T) {
	var order []string
	benchRepHook = func(r *benchResult) { order = append(order, fmt.Sprintf("%s/%d/%d", r.TypeK, r.NPrompt, r.NGen)) }
	defer func() { benchRepHook = nil }()
	args := []string{"bench", "-p", "4", "-n", "2", "-d", "3", "-r", "2", "-t", "1", "--cache-type", "f16,q8_0", "--json"}
	out, _, err := execute(t, "", append(args, "--interleave")...)
	if err != nil {
		t.Fatal(err)
	}
	round := []string{"f16/4/0", "f16/0/2", "q8_0/4/0", "q8_0/0/2"}
	if want := append(append([]string(nil), round...), round...); strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("repetitions ran %v, want %v", order, want)
	}
	var rows []benchResult
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rows))
	}
	for i, r := range rows {
		if got := fmt.Sprintf("%s/%d/%d", r.TypeK, r.NPrompt, r.NGen); got != round[i] || len(r.SamplesTs) != 2 || r.NDepth != 3 || r.AvgTs <= 0 {
			t.Errorf("row %d: %s, %d samples, depth %d, %v t/s", i, got, len(r.SamplesTs), r.NDepth, r.AvgTs)
		}
	}
	order = nil
	if _, _, err := execute(t, "", args...); err != nil {
		t.Fatal(err)
	}
	if want := "f16/4/0 f16/4/0 f16/0/2 f16/0/2 q8_0/4/0 q8_0/4/0 q8_0/0/2 q8_0/0/2"; strings.Join(order, " ") != want {
		t.Errorf("without --interleave the repetitions ran %v, want %s", order, want)
	}
}
