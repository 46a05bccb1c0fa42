package nn

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
)

// loraMatrix is a random matrix of type t and its values as the kernels
// see them (F32, F16; a quantized type's values are not returned).
func loraMatrix(t *testing.T, rng *rand.Rand, typ kernels.Type, rows, cols int) (*kernels.Matrix, []float32) {
	t.Helper()
	v := make([]float32, rows*cols)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	var data []byte
	switch typ {
	case kernels.F32:
		data = unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
	case kernels.F16:
		h := make([]uint16, len(v))
		kernels.F32ToF16s(h, v)
		kernels.F16ToF32s(v, h)
		data = unsafe.Slice((*byte)(unsafe.Pointer(&h[0])), 2*len(h))
	default:
		data = make([]byte, rows*typ.RowSize(cols))
		kernels.Quantize(typ, v, data)
	}
	m, err := kernels.NewMatrix(typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return m, v
}

// refLoRA is row x through w (kernels.MatMul: a quantized w quantizes x)
// plus the terms of the (pair, factor) list in float64 on the float32 x,
// with llama.cpp's half-precision roundings of the low-rank products'
// inputs when the pair is F16.
func refLoRA(w *kernels.Matrix, x []float32, terms []refTerm) []float64 {
	rows, cols := w.Rows, w.Cols
	base := make([]float32, rows)
	kernels.MatMul(nil, base, w, x, 1)
	out := make([]float64, rows)
	for r, v := range base {
		out[r] = float64(v)
	}
	for _, tm := range terms {
		xin := x
		if tm.f16 {
			xin = append([]float32(nil), x...)
			roundInput(kernels.F16, xin)
		}
		ax := make([]float32, tm.rank)
		for i := range tm.rank {
			var s float64
			for c := range cols {
				s += float64(tm.a[i*cols+c]) * float64(xin[c])
			}
			ax[i] = float32(s)
		}
		if tm.f16 {
			roundInput(kernels.F16, ax)
		}
		for r := range rows {
			var s float64
			for i := range tm.rank {
				s += float64(tm.b[r*tm.rank+i]) * float64(ax[i])
			}
			out[r] += tm.f * s
		}
	}
	return out
}

type refTerm struct {
	a, b []float32
	rank int
	f    float64
	f16  bool
}

// Each sequence of a batch gets its own adapters' terms (none, one, two,
// the same adapter at other scales, scale 0, sequences of one adapter not
// adjacent), through MatMul and MatMuls, for F32 and F16 pairs, on an F32
// and a Q4_K weight.
func TestLoRAProducts(t *testing.T) {
	for _, typ := range []kernels.Type{kernels.F32, kernels.F16} {
		t.Run(typ.String(), func(t *testing.T) { testLoRAProducts(t, typ) })
	}
}

func testLoRAProducts(t *testing.T, typ kernels.Type) {
	c := &Config{Layers: 1, Embd: 256, Heads: 4, KVHeads: 2, HeadDim: 16, ValueDim: 16, Vocab: 32, RMSEps: 1e-6}
	rng := rand.New(rand.NewPCG(3, 4))
	const in, out1, out2 = 256, 48, 32
	w1, _ := loraMatrix(t, rng, kernels.F32, out1, in)
	w2, _ := loraMatrix(t, rng, kernels.Q4_K, out2, in) // the terms go on a quantized product too
	type pairV struct{ a, b []float32 }
	mk := func(w *kernels.Matrix, rank int, alpha float32) (LowRank, pairV) {
		a, av := loraMatrix(t, rng, typ, rank, in)
		b, bv := loraMatrix(t, rng, typ, w.Rows, rank)
		return LowRank{A: a, B: b, Rank: rank, Scale: alpha / float32(rank)}, pairV{av, bv}
	}
	adA, adB := &Adapter{Deltas: map[*kernels.Matrix]LowRank{}}, &Adapter{Deltas: map[*kernels.Matrix]LowRank{}}
	vals := map[*Adapter]map[*kernels.Matrix]pairV{adA: {}, adB: {}}
	for _, ad := range []*Adapter{adA, adB} {
		for k, w := range []*kernels.Matrix{w1, w2} {
			if ad == adB && k == 1 {
				continue // B adapts w1 only
			}
			lr, v := mk(w, 4+4*k, 8)
			if ad == adA { // A's pairs take the transposed path, B's the product by B
				lr.BT = make([]float32, lr.Rank*w.Rows)
				for o := range w.Rows {
					for k := range lr.Rank {
						lr.BT[k*w.Rows+o] = v.b[o*lr.Rank+k]
					}
				}
			}
			ad.Deltas[w] = lr
			vals[ad][w] = v
		}
	}
	loras := [][]Active{
		{{adA, 1}},
		nil,
		{{adB, -0.5}, {adA, 2}},
		{{adA, 0}},
		{{adA, 0.5}},
		{{adB, 1}},
	}
	b := &Batch{}
	T := 0
	for i, l := range loras {
		n := 1 + i%3
		b.Seqs = append(b.Seqs, &SeqInput{Tokens: make([]int32, n), Cache: kvcache.NewContiguousCache(c.KVShape(), 8, false), LoRA: l})
		T += n
	}
	x := make([]float32, T*in)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	var s Step
	if err := s.Prepare(c, nil, b); err != nil {
		t.Fatal(err)
	}
	got1, got2 := make([]float32, T*out1), make([]float32, T*out2)
	check := func(how string) {
		t.Helper()
		row := 0
		for si, sq := range b.Seqs {
			for range sq.Tokens {
				for k, w := range []*kernels.Matrix{w1, w2} {
					got := [][]float32{got1, got2}[k]
					var terms []refTerm
					for _, a := range loras[si] {
						lr, ok := a.Adapter.Deltas[w]
						if !ok || a.Scale == 0 {
							continue
						}
						v := vals[a.Adapter][w]
						terms = append(terms, refTerm{a: v.a, b: v.b, rank: lr.Rank, f: float64(a.Scale * lr.Scale), f16: typ == kernels.F16})
					}
					want := refLoRA(w, x[row*in:(row+1)*in], terms)
					for j, v := range want {
						if d := math.Abs(float64(got[row*w.Rows+j]) - v); d > 1e-4*(1+math.Abs(v)) {
							t.Fatalf("%s: sequence %d row %d weight %d [%d]: got %v, want %v", how, si, row, k, j, got[row*w.Rows+j], v)
						}
					}
				}
				row++
			}
		}
	}
	s.MatMul(got1, w1, x)
	s.MatMul(got2, w2, x)
	check("MatMul")
	clear(got1)
	clear(got2)
	s.MatMuls(x, Prod(got1, w1), Prod(got2, w2))
	check("MatMuls")
	if !s.HasLoRA(w2) {
		t.Fatal("HasLoRA(w2) = false")
	}
	s.Done()
	if len(s.loraGroups) != 0 || cap(s.loraGroups) > 0 && s.loraGroups[:1][0].a != nil {
		t.Error("Done keeps the batch's adapters")
	}
}

// A step without adapters runs the base product alone and allocates
// nothing more; adapters at scale 0 make no group.
func TestLoRANone(t *testing.T) {
	c := &Config{Layers: 1, Embd: 32, Heads: 2, KVHeads: 2, HeadDim: 16, ValueDim: 16, Vocab: 32, RMSEps: 1e-6}
	rng := rand.New(rand.NewPCG(5, 6))
	w, _ := loraMatrix(t, rng, kernels.F32, 16, 32)
	a, _ := loraMatrix(t, rng, kernels.F32, 2, 32)
	bm, _ := loraMatrix(t, rng, kernels.F32, 16, 2)
	ad := &Adapter{Deltas: map[*kernels.Matrix]LowRank{w: {A: a, B: bm, Rank: 2, Scale: 1}}}
	b := &Batch{Seqs: []*SeqInput{
		{Tokens: []int32{1, 2}, Cache: kvcache.NewContiguousCache(c.KVShape(), 8, false)},
		{Tokens: []int32{3}, Cache: kvcache.NewContiguousCache(c.KVShape(), 8, false), LoRA: []Active{{ad, 0}}},
	}}
	var s Step
	if err := s.Prepare(c, nil, b); err != nil {
		t.Fatal(err)
	}
	if len(s.loraGroups) != 0 || s.HasLoRA(w) {
		t.Fatalf("scale 0 made %d groups", len(s.loraGroups))
	}
	x := make([]float32, 3*32)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	got, want := make([]float32, 3*16), make([]float32, 3*16)
	kernels.MatMul(nil, want, w, x, 3)
	if n := testing.AllocsPerRun(10, func() { s.MatMul(got, w, x) }); n != 0 && !raceEnabled {
		t.Errorf("MatMul without adapters: %v allocations", n)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("[%d] = %v, want the base product's %v", i, got[i], want[i])
		}
	}
}

// A decode step with adapters (one of them on rows that are not adjacent,
// F16 pairs rounded in the scratch) allocates nothing once the scratch is
// sized. (Products of four rows or more on F32 weights allocate in the
// kernels, adapters or not.)
func TestLoRADecodeAllocs(t *testing.T) {
	c := &Config{Layers: 1, Embd: 64, Heads: 4, KVHeads: 2, HeadDim: 16, ValueDim: 16, Vocab: 32, RMSEps: 1e-6}
	rng := rand.New(rand.NewPCG(7, 8))
	w, _ := loraMatrix(t, rng, kernels.Q8_0, 64, 64)
	pair := func(typ kernels.Type) LowRank {
		a, _ := loraMatrix(t, rng, typ, 8, 64)
		b, _ := loraMatrix(t, rng, typ, 64, 8)
		return LowRank{A: a, B: b, Rank: 8, Scale: 2}
	}
	adA := &Adapter{Deltas: map[*kernels.Matrix]LowRank{w: pair(kernels.F32)}}
	adB := &Adapter{Deltas: map[*kernels.Matrix]LowRank{w: pair(kernels.F16)}}
	seq := func(l ...Active) *SeqInput {
		return &SeqInput{Tokens: []int32{1}, Cache: kvcache.NewContiguousCache(c.KVShape(), 8, false), LoRA: l}
	}
	b := &Batch{Seqs: []*SeqInput{seq(Active{adA, 1}), seq(), seq(Active{adB, 1}, Active{adA, -1})}}
	var s Step
	if err := s.Prepare(c, nil, b); err != nil {
		t.Fatal(err)
	}
	x, out := make([]float32, 3*64), make([]float32, 3*64)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	s.MatMul(out, w, x)
	if raceEnabled {
		t.Skip("allocations are not measured under -race")
	}
	if n := testing.AllocsPerRun(10, func() { s.MatMul(out, w, x) }); n != 0 {
		t.Errorf("a decode step's product with adapters: %v allocations", n)
	}
}
