package model

import (
	"encoding/binary"
	"math"
	"os"
	"testing"
)

// Reading and comparing the reference outputs of ../shared (llama.cpp's
// log-probabilities, float64 references' logits).

// logSoftmax returns log(softmax(x)) in float64.
func logSoftmax(x []float32) []float64 {
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

// readF32 reads a file of little-endian float32.
func readF32(t *testing.T, path string) []float32 {
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

// maxAbsDiff is max |got[i] - want[i]| over arrays of the same length.
func maxAbsDiff(t testing.TB, got []float64, want []float32) float64 {
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
