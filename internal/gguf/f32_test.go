package gguf

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"mistralrs/internal/kernels"
)

func TestAddTensorF32(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	w := NewWriter()
	values := map[kernels.Type][]float32{}
	for _, typ := range testTypes() {
		if !typ.Supported() {
			continue
		}
		dims := []uint64{uint64(typ.BlockSize()) * 2, 3}
		v := make([]float32, dims[0]*dims[1])
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		if err := w.AddTensorF32(typ.String(), typ, dims, v); err != nil {
			t.Fatal(err)
		}
		values[typ] = v
	}
	f := mustParse(t, encode(t, w))
	if len(f.Tensors) != len(values) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(values))
	}
	for _, ti := range f.Tensors {
		v := values[ti.Type]
		want := make([]byte, ti.Type.RowSize(len(v)))
		kernels.Quantize(ti.Type, v, want)
		if !bytes.Equal(ti.Data, want) {
			t.Errorf("%s: data is not kernels.Quantize's", ti.Name)
		}
		got := make([]float32, len(v))
		kernels.Dequantize(ti.Type, ti.Data, got)
		var worst float64
		for i := range v {
			worst = max(worst, math.Abs(float64(got[i]-v[i])))
		}
		limit := 0.5 // 4-bit types: a step is a fraction of the block's range
		switch ti.Type {
		case kernels.F32:
			limit = 0
		case kernels.F16, kernels.BF16, kernels.Q8_0:
			limit = 0.05
		}
		if worst > limit {
			t.Errorf("%s: largest error %g > %g", ti.Name, worst, limit)
		}
	}

	for _, c := range []struct {
		typ  kernels.Type
		dims []uint64
		n    int
		msg  string
	}{
		{kernels.F32, []uint64{4}, 3, "3 values"},
		{kernels.Q8_0, []uint64{16}, 16, "block size"},
		{kernels.Q2_K, []uint64{256}, 256, "cannot encode type Q2_K"},
	} {
		err := w.AddTensorF32("bad", c.typ, c.dims, make([]float32, c.n))
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s %v: %v, want %q", c.typ, c.dims, err, c.msg)
		}
	}
}
