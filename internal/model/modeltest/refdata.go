package modeltest

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"mistralrs/internal/testutil"
)

// Reading and comparing the reference outputs of ../shared (llama.cpp's
// log-probabilities, float64 references' logits).

// LogSoftmax returns log(softmax(x)) in float64.
func LogSoftmax(x []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v) - mx)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - mx - math.Log(sum)
	}
	return out
}

// ReadF32 reads a file of little-endian float32.
func ReadF32(t testing.TB, path string) []float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// MaxAbsDiff is max |got[i] - want[i]| over arrays of the same length.
func MaxAbsDiff(t testing.TB, got []float64, want []float32) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, the reference has %d", len(got), len(want))
	}
	var d float64
	for i := range want {
		d = math.Max(d, math.Abs(got[i]-float64(want[i])))
	}
	return d
}

// XrefModel is one model of shared/testdata/reference-archs/reference.json
// (what llama.cpp computed on it; see the README there).
type XrefModel struct {
	File         string       `json:"file"`
	Top10        [][2]float64 `json:"first_step_top10_logprob"`
	LogprobsFile string       `json:"first_step_logprobs_file"`
	Greedy       []int32      `json:"greedy_32_tokens"`
	Margins      []float64    `json:"greedy_step_margin"`
}

// XrefLoad reads the reference of model name (skipping without ../shared)
// and its first-step log-probabilities.
func XrefLoad(t *testing.T, name string) (dir string, prompt []int32, ref XrefModel, logprobs []float32) {
	t.Helper()
	dir = testutil.SharedFile(t, "testdata", "reference-archs")
	raw, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all struct {
		PromptTokens []int32              `json:"prompt_tokens"`
		Models       map[string]XrefModel `json:"models"`
	}
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	ref, ok := all.Models[name]
	if !ok {
		t.Fatalf("reference.json has no model %s", name)
	}
	return dir, all.PromptTokens, ref, ReadF32(t, filepath.Join(dir, ref.LogprobsFile))
}

// XrefLogSoftmaxF32 is logSoftmax rounded to float32.
func XrefLogSoftmaxF32(logits []float32) []float32 {
	lp := LogSoftmax(logits)
	out := make([]float32, len(lp))
	for i, v := range lp {
		out[i] = float32(v)
	}
	return out
}

// XrefSameGreedy is how many leading ids of got equal want.
func XrefSameGreedy(got, want []int32) int {
	n := 0
	for n < len(got) && n < len(want) && got[n] == want[n] {
		n++
	}
	return n
}
