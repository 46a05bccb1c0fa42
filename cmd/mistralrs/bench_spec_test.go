package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"mistralrs/internal/demo"
)

// benchJSON runs bench with args and --json and decodes its array.
func benchJSON(t *testing.T, args ...string) []map[string]any {
	t.Helper()
	out, _, err := execute(t, "", append(append([]string{"bench"}, args...), "--json")...)
	if err != nil {
		t.Fatalf("bench %s: %v", strings.Join(args, " "), err)
	}
	var res []map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("bench %s --json is not a JSON array: %v\n%s", strings.Join(args, " "), err, out)
	}
	return res
}

// checkSpecResult checks the keys and the sanity of one speculative row.
func checkSpecResult(t *testing.T, r map[string]any, specType string, k float64) {
	t.Helper()
	for _, key := range []string{"model_filename", "n_prompt", "n_gen", "n_threads", "avg_ts", "stddev_ts", "samples_ts",
		"spec_type", "spec_n_predict", "t/s_nospec", "samples_ts_nospec", "accept_rate", "mean_len", "speedup",
		"drafts", "proposed", "accepted", "same_output"} {
		if _, ok := r[key]; !ok {
			t.Errorf("missing key %q in %v", key, r)
		}
	}
	if r["spec_type"] != specType || r["spec_n_predict"] != k {
		t.Errorf("spec_type %v, spec_n_predict %v: want %s, %v", r["spec_type"], r["spec_n_predict"], specType, k)
	}
	num := func(key string) float64 { f, _ := r[key].(float64); return f }
	if num("avg_ts") <= 0 || num("t/s_nospec") <= 0 || num("speedup") <= 0 {
		t.Errorf("speeds not positive: %v", r)
	}
	if a := num("accept_rate"); a < 0 || a > 1 {
		t.Errorf("accept_rate %v outside [0, 1]", a)
	}
	if m := num("mean_len"); m < 1 || m > 1+k {
		t.Errorf("mean_len %v outside [1, %v]", m, 1+k)
	}
	if num("accepted") > num("proposed") || num("drafts") <= 0 {
		t.Errorf("counts: %v drafts, %v proposed, %v accepted", r["drafts"], r["proposed"], r["accepted"])
	}
	if r["same_output"] != true {
		t.Errorf("greedy output differs with speculation: %v", r)
	}
}

// bench --spec-ngram compares tg with and without prompt lookup on the demo
// model; a bare --spec-ngram is n-grams of 3, as serve's.
func TestBenchSpecNgram(t *testing.T) {
	res := benchJSON(t, "--spec-ngram", "-p", "16", "-n", "24", "-r", "1", "-t", "1")
	if len(res) != 1 {
		t.Fatalf("want one tg test, got %d", len(res))
	}
	checkSpecResult(t, res[0], "ngram", 4)
	if res[0]["spec_ngram"] != float64(3) || res[0]["n_prompt"] != float64(16) || res[0]["n_gen"] != float64(24) {
		t.Errorf("spec_ngram %v n_prompt %v n_gen %v: want 3, 16, 24", res[0]["spec_ngram"], res[0]["n_prompt"], res[0]["n_gen"])
	}

	out, _, err := execute(t, "", "bench", "--spec-ngram=2", "--mtp-n-predict", "2", "--prompt", "ab ab ab ab ab", "-n", "8", "-r", "1", "-t", "1", "--no-warmup")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"t/s nospec", "speedup", "accept", "mean len", "tg8 (text pp", "ngram2 k2", "±"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// bench --mtp-model with the target's own weights as the draft: greedy
// guesses of the same model are (nearly) all accepted.
func TestBenchSpecDraft(t *testing.T) {
	draft := filepath.Join(t.TempDir(), "draft.gguf")
	if err := os.WriteFile(draft, demo.GGUF(), 0o644); err != nil {
		t.Fatal(err)
	}
	res := benchJSON(t, "--mtp-model", draft, "--mtp-n-predict", "3", "-p", "8", "-n", "20", "-r", "1", "-t", "1")
	if len(res) != 1 {
		t.Fatalf("want one tg test, got %d", len(res))
	}
	checkSpecResult(t, res[0], "draft", 3)
	if res[0]["spec_draft"] != "draft.gguf" {
		t.Errorf("spec_draft = %v", res[0]["spec_draft"])
	}
	if a, _ := res[0]["accept_rate"].(float64); a < 0.9 {
		t.Errorf("the model as its own draft accepted %.0f%% of its guesses", 100*a)
	}
}

// Bad speculative settings fail with one line naming the cause.
func TestBenchSpecErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--spec-ngram", "--mtp-model", "x.gguf"}, "both"},
		{[]string{"--spec-ngram", "--mtp-n-predict", "0"}, "--mtp-n-predict"},
		{[]string{"--spec-ngram", "--mtp-n-predict", "99"}, "--mtp-n-predict"},
		{[]string{"--spec-ngram=99"}, "--spec-ngram"},
		{[]string{"--mtp-model", filepath.Join(t.TempDir(), "missing.gguf")}, "missing.gguf"},
		{[]string{"--spec-ngram", "-d", "16"}, "--n-depth"},
		{[]string{"--spec-ngram", "--verify-cost"}, "--verify-cost"},
		{[]string{"--verify-cost", "--verify-max-k", "0"}, "--verify-max-k"},
	} {
		_, _, err := execute(t, "", append([]string{"bench", "-r", "1", "-t", "1", "-p", "4", "-n", "4"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("bench %s: error %v, want one line naming %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if _, _, err := execute(t, "", "bench", "--spec-ngram", "-n", "0", "-r", "1"); err == nil || !strings.Contains(err.Error(), "-n") {
		t.Errorf("bench --spec-ngram -n 0: %v", err)
	}
}

// bench --verify-cost times k+1-token forward passes against a decode.
func TestBenchVerifyCost(t *testing.T) {
	res := benchJSON(t, "--verify-cost", "--verify-max-k", "3", "-d", "8", "-r", "1", "-t", "1")
	if len(res) != 3 {
		t.Fatalf("want k = 1..3, got %d rows", len(res))
	}
	for i, r := range res {
		if r["k"] != float64(i+1) || r["n_depth"] != float64(8) {
			t.Errorf("row %d: k %v depth %v", i, r["k"], r["n_depth"])
		}
		v, _ := r["verify_ms"].(float64)
		d, _ := r["decode_ms"].(float64)
		ratio, _ := r["ratio"].(float64)
		if v <= 0 || d <= 0 || ratio <= 0 {
			t.Errorf("row %d: verify %v ms, decode %v ms, ratio %v", i, v, d, ratio)
		}
	}
	out, _, err := execute(t, "", "bench", "--verify-cost", "--verify-max-k", "2", "-r", "1", "-t", "1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ms/verify", "ms/decode", "ratio", "|   256 |   2 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
