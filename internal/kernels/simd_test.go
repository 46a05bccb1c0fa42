//go:build (amd64 || arm64) && !purego

package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

// The assembly kernels of both architectures are checked against two
// oracles: a float64 dot of the dequantized weights (Dequantize) with the
// dequantized activations, and the generic pure-Go kernel of dotTable when
// there is one. The arm64 build runs them under user-mode emulation in CI
// (.ci/run), where the timing means nothing but every result is exact.
// simd_arm64_test.go adds the checks of the arm64 paths against each
// other.

// noSIMD is why the tests skip when there are no assembly kernels to test.
var noSIMD = map[string]string{
	"amd64": "CPU lacks AVX2/FMA",
	"arm64": "no NEON kernels",
}[runtime.GOARCH]

func skipNoSIMD(t testing.TB) {
	if len(simdKernels) == 0 {
		t.Skip(noSIMD)
	}
}

// simdRandWeights returns a row of n elements of type t: random bytes with
// sane halves where the format has scales, so every bit pattern of the
// quants is exercised.
func simdRandWeights(t Type, n int, rng *rand.Rand) []byte {
	w := make([]byte, t.RowSize(n))
	for i := range w {
		w[i] = byte(rng.Uint32())
	}
	half := func(off int) {
		f := float32(rng.Float64()*0.02 + 0.001)
		if rng.IntN(4) == 0 {
			f = -f
		}
		binary.LittleEndian.PutUint16(w[off:], FP32ToFP16(f))
	}
	bs, ts := t.BlockSize(), t.TypeSize()
	for b := 0; b < n/bs; b++ {
		o := b * ts
		switch t {
		case F32:
			binary.LittleEndian.PutUint32(w[o:], math.Float32bits(float32(rng.NormFloat64())))
		case F16:
			binary.LittleEndian.PutUint16(w[o:], FP32ToFP16(float32(rng.NormFloat64())))
		case BF16:
			binary.LittleEndian.PutUint16(w[o:], FP32ToBF16(float32(rng.NormFloat64())))
		case Q4_0, Q5_0, Q8_0:
			half(o)
		case Q4_1, Q5_1, Q4_K, Q5_K:
			half(o)
			half(o + 2)
		case Q6_K:
			half(o + 208)
		}
	}
	return w
}

// simdRandAct returns activations of n elements in both forms.
func simdRandAct(n int, rng *rand.Rand) *Act {
	a := &Act{F: make([]float32, n), Qs: make([]int8, n)}
	for i := range a.F {
		a.F[i] = float32(rng.NormFloat64())
	}
	nb := (n + 31) / 32
	a.D = make([]float32, nb)
	a.S = make([]float32, nb)
	for b := 0; b < nb; b++ {
		d := float32(rng.Float64()*0.02 + 0.0005)
		sum := 0
		for i := b * 32; i < min(n, b*32+32); i++ {
			q := int8(rng.IntN(255) - 127)
			a.Qs[i] = q
			sum += int(q)
		}
		a.D[b] = d
		a.S[b] = d * float32(sum)
	}
	actSums16(a) // as MatMul gives kernels that ask for them
	return a
}

// simdOracle returns the float64 dot of row w with a and the sum of the
// magnitudes of the products (the scale of rounding errors).
func simdOracle(t Type, w []byte, a *Act, n int) (dot, mag float64) {
	wf := make([]float32, n)
	Dequantize(t, w, wf)
	for i, v := range wf {
		var x float64
		if t == F32 || t == F16 || t == BF16 {
			x = float64(a.F[i])
		} else {
			x = float64(a.D[i/32]) * float64(a.Qs[i])
		}
		p := float64(v) * x
		dot += p
		mag += math.Abs(p)
	}
	return dot, mag
}

func simdClose(got, want, mag float64) bool {
	return math.Abs(got-want) <= 5e-5*mag+1e-30
}

// simdLengths are the row lengths tried for type t: one block, odd block
// counts, the model sizes and a large one.
func simdLengths(t Type) []int {
	bs := t.BlockSize()
	if bs == 1 {
		return []int{1, 3, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 40, 63, 64, 65, 100, 576, 1000, 1536, 4096 + 5, 16384}
	}
	if bs == 256 {
		return []int{256, 512, 768, 1280, 1536, 4096, 16384}
	}
	return []int{32, 64, 96, 160, 224, 256, 288, 544, 576, 992, 1536, 4064, 16384}
}

func TestSIMDDot(t *testing.T) {
	skipNoSIMD(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for typ, p := range simdKernels {
		t.Run(typ.String(), func(t *testing.T) {
			for _, n := range simdLengths(typ) {
				for rep := 0; rep < 3; rep++ {
					w := simdRandWeights(typ, n, rng)
					a := simdRandAct(n, rng)
					want, mag := simdOracle(typ, w, a, n)
					got := p.simd.dot(w, a, n)
					if !simdClose(float64(got), want, mag) {
						t.Fatalf("n=%d: asm %g, oracle %g (mag %g)", n, got, want, mag)
					}
					if p.generic.dot != nil {
						g := p.generic.dot(w, a, n)
						if !simdClose(float64(got), float64(g), mag) {
							t.Fatalf("n=%d: asm %g, generic %g (mag %g)", n, got, g, mag)
						}
					}
				}
			}
		})
	}
}

func TestSIMDDot4(t *testing.T) {
	skipNoSIMD(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for typ, p := range simdKernels {
		if p.simd.dot4 == nil {
			continue
		}
		t.Run(typ.String(), func(t *testing.T) {
			for _, n := range simdLengths(typ) {
				w := simdRandWeights(typ, n, rng)
				var acts [4]*Act
				for k := range acts {
					acts[k] = simdRandAct(n, rng)
				}
				out := [4]float32{1, 2, 3, 4} // must be overwritten
				p.simd.dot4(w, &acts, n, &out)
				for k := range acts {
					want, mag := simdOracle(typ, w, acts[k], n)
					one := p.simd.dot(w, acts[k], n)
					if !simdClose(float64(out[k]), want, mag) || !simdClose(float64(out[k]), float64(one), mag) {
						t.Fatalf("n=%d row %d: dot4 %g, dot %g, oracle %g (mag %g)", n, k, out[k], one, want, mag)
					}
				}
			}
		})
	}
}

// TestSIMDDotRows checks the multi-row kernels: each row's result is
// exactly the one-row dot's (the same assembly), odd row counts and one row
// included, and nothing past rows is written.
func TestSIMDDotRows(t *testing.T) {
	skipNoSIMD(t)
	rng := rand.New(rand.NewPCG(15, 16))
	for typ, p := range simdKernels {
		if p.simd.dotRows == nil {
			continue
		}
		t.Run(typ.String(), func(t *testing.T) {
			lengths := simdLengths(typ)
			for _, n := range lengths[:len(lengths)-1] {
				rb := typ.RowSize(n)
				a := simdRandAct(n, rng)
				for _, rows := range []int{1, 2, 3, 5, 8} {
					w := simdRandWeights(typ, rows*n, rng)
					out := make([]float32, rows+1)
					out[rows] = 42
					p.simd.dotRows(w, rows, a, n, out)
					if out[rows] != 42 {
						t.Fatalf("n=%d rows=%d: wrote past the rows", n, rows)
					}
					for r := 0; r < rows; r++ {
						row := w[r*rb : (r+1)*rb]
						if one := p.simd.dot(row, a, n); out[r] != one {
							t.Fatalf("n=%d rows=%d row %d: dotRows %g, dot %g", n, rows, r, out[r], one)
						}
						want, mag := simdOracle(typ, row, a, n)
						if !simdClose(float64(out[r]), want, mag) {
							t.Fatalf("n=%d rows=%d row %d: dotRows %g, oracle %g (mag %g)", n, rows, r, out[r], want, mag)
						}
					}
				}
			}
		})
	}
}

// TestSIMDDot4Rows checks the multi-row four-input kernels against dot4 row
// by row (exactly: dot4 is the one-row case) and the oracle, and that they
// write only their rows of the strided output.
func TestSIMDDot4Rows(t *testing.T) {
	skipNoSIMD(t)
	rng := rand.New(rand.NewPCG(17, 18))
	for typ, p := range simdKernels {
		if p.simd.dot4Rows == nil {
			continue
		}
		t.Run(typ.String(), func(t *testing.T) {
			lengths := simdLengths(typ)
			for _, n := range lengths[:len(lengths)-1] {
				rb := typ.RowSize(n)
				var acts [4]*Act
				for k := range acts {
					acts[k] = simdRandAct(n, rng)
				}
				for _, rows := range []int{1, 2, 3, 5, 8} {
					w := simdRandWeights(typ, rows*n, rng)
					stride := rows + 1
					out := make([]float32, 4*stride)
					for i := range out {
						out[i] = 42
					}
					p.simd.dot4Rows(w, rows, &acts, n, out, stride)
					for r := 0; r < rows; r++ {
						row := w[r*rb : (r+1)*rb]
						var o [4]float32
						p.simd.dot4(row, &acts, n, &o)
						for k := range acts {
							got := out[k*stride+r]
							if got != o[k] {
								t.Fatalf("n=%d rows=%d row %d act %d: dot4Rows %g, dot4 %g", n, rows, r, k, got, o[k])
							}
							want, mag := simdOracle(typ, row, acts[k], n)
							if !simdClose(float64(got), want, mag) {
								t.Fatalf("n=%d rows=%d row %d act %d: dot4Rows %g, oracle %g (mag %g)", n, rows, r, k, got, want, mag)
							}
						}
					}
					for k := range acts {
						if out[k*stride+rows] != 42 {
							t.Fatalf("n=%d rows=%d: wrote past the rows of input %d", n, rows, k)
						}
					}
				}
			}
		})
	}
}

// simdInvariant lists the types whose assembly kernels compute every
// output with the same float operations whatever the kernel (dot, dotRows,
// dot4, dot4Rows): MatMul gives the same bits for a row alone or in a
// batch.
var simdInvariant = []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K}

// TestSIMDBatchInvariant checks that MatMul's results for an input row do
// not depend on how many rows it is batched with (and which kernels that
// picks), nor on the pool.
func TestSIMDBatchInvariant(t *testing.T) {
	skipNoSIMD(t)
	if !SIMD() {
		t.Skip("assembly kernels turned off (MISTRALRS_NOASM)")
	}
	rng := rand.New(rand.NewPCG(19, 20))
	p := NewPool(2)
	defer p.Close()
	for _, typ := range simdInvariant {
		const rows = 37
		cols := 512
		m, err := NewMatrix(typ, rows, cols, simdRandWeights(typ, rows*cols, rng))
		if err != nil {
			t.Fatal(err)
		}
		const n = 11
		x := make([]float32, n*cols)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		one := make([]float32, rows)
		all := make([]float32, n*rows)
		for _, pool := range []*Pool{nil, p} {
			for _, batch := range []int{n, 4, 5, 8} {
				for i0 := 0; i0 < n; i0 += batch {
					b := min(batch, n-i0)
					MatMul(pool, all[i0*rows:], m, x[i0*cols:(i0+b)*cols], b)
				}
				for i := 0; i < n; i++ {
					MatMul(nil, one, m, x[i*cols:(i+1)*cols], 1)
					for r := range one {
						if one[r] != all[i*rows+r] {
							t.Fatalf("%s batch %d: input %d row %d: %g alone, %g batched", typ, batch, i, r, one[r], all[i*rows+r])
						}
					}
				}
			}
		}
	}
}

// TestSIMDInstalled checks that the assembly kernels are the ones in
// dotTable (an init order mistake would silently leave the generic ones)
// and that SetSIMD switches back and forth.
func TestSIMDInstalled(t *testing.T) {
	skipNoSIMD(t)
	if !SIMD() {
		t.Skip("assembly kernels turned off (MISTRALRS_NOASM)")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for typ, p := range simdKernels {
		// Functions are not comparable; compare results on data where the
		// two kernels round differently often enough.
		n := 4096
		w := simdRandWeights(typ, n, rng)
		a := simdRandAct(n, rng)
		if dotTable[typ] == nil || dotTable[typ].dot == nil {
			t.Fatalf("%s: no dot kernel in dotTable", typ)
		}
		if got, want := dotTable[typ].dot(w, a, n), p.simd.dot(w, a, n); got != want {
			t.Fatalf("%s: dotTable has not the assembly kernel (%g vs %g)", typ, got, want)
		}
	}
	SetSIMD(false)
	for typ, p := range simdKernels {
		if p.generic.dot == nil {
			continue
		}
		n := 1024
		w := simdRandWeights(typ, n, rng)
		a := simdRandAct(n, rng)
		if got, want := dotTable[typ].dot(w, a, n), p.generic.dot(w, a, n); got != want {
			t.Errorf("%s: SetSIMD(false) left the assembly kernel in place", typ)
		}
	}
	if SetSIMD(true) {
		t.Error("SetSIMD(false) did not turn the assembly off")
	}
}

// BenchmarkSIMD measures a matrix-vector product (dot) and a matrix times
// four vectors (dot4) over a matrix larger than the caches, on 1 and 2
// goroutines, for the assembly and the generic kernels.
func BenchmarkSIMD(b *testing.B) {
	skipNoSIMD(b)
	const cols = 4096
	types := []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, typ := range types {
		p := simdKernels[typ]
		if p == nil {
			continue
		}
		rs := typ.RowSize(cols)
		var acts [4]*Act
		for k := range acts {
			acts[k] = simdRandAct(cols, rng)
		}
		// 64 MiB is well past the L3 (memory bound); 256 KiB stays in the L2
		// (compute bound).
		wall := simdRandWeights(typ, (64<<20)/rs*cols, rng)
		for _, size := range []string{"mem", "l2"} {
			w := wall
			if size == "l2" {
				w = wall[:(256<<10)/rs*rs]
			}
			rows := len(w) / rs
			for _, impl := range []string{"asm", "go"} {
				k := p.simd
				if impl == "go" {
					k = p.generic
				}
				if k.dot == nil || impl == "go" && size == "mem" {
					continue // the generic kernels are compute bound anyway
				}
				for _, threads := range []int{1, 2} {
					if threads > runtime.NumCPU() {
						continue
					}
					for _, four := range []bool{false, true} {
						kind := "dot"
						if four {
							kind = "dot4"
						}
						name := fmt.Sprintf("%s/%s/%s/%s/t%d", typ, size, impl, kind, threads)
						b.Run(name, func(b *testing.B) {
							flops := 2 * float64(rows) * cols
							if four {
								flops *= 4
							}
							b.SetBytes(int64(rows * rs))
							for b.Loop() {
								var wg sync.WaitGroup
								for th := 0; th < threads; th++ {
									wg.Add(1)
									go func(lo, hi int) {
										defer wg.Done()
										var out [4]float32
										for r := lo; r < hi; r++ {
											row := w[r*rs : (r+1)*rs]
											switch {
											case four && k.dot4 != nil:
												k.dot4(row, &acts, cols, &out)
											case four:
												for j := range acts {
													out[j] = k.dot(row, acts[j], cols)
												}
											default:
												out[0] = k.dot(row, acts[0], cols)
											}
										}
									}(rows*th/threads, rows*(th+1)/threads)
								}
								wg.Wait()
							}
							b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
						})
					}
				}
			}
		}
	}
}

// BenchmarkSIMDQuantizeAct compares the assembly activation quantizer with
// quantizeAct on one 4096-wide row (in cache).
func BenchmarkSIMDQuantizeAct(b *testing.B) {
	skipNoSIMD(b)
	const cols = 4096
	rng := rand.New(rand.NewPCG(9, 10))
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for _, impl := range []string{"asm", "go"} {
		q := simdQuantizeAct
		if impl == "go" {
			q = quantizeAct
		}
		b.Run(impl, func(b *testing.B) {
			var a Act
			for b.Loop() {
				q(x, &a)
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns/cols, "ns/elem")
			b.ReportMetric(4*cols/ns, "GB/s") // float32 input read
		})
	}
}

// BenchmarkSIMDDotRows runs the assembly kernels over 64 KiB of 768-wide rows
// (the small models' width, in cache): a loop of dot calls against one
// dotRows call, which keeps the activation in registers across rows.
func BenchmarkSIMDDotRows(b *testing.B) {
	skipNoSIMD(b)
	const n = 768
	types := []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K}
	rng := rand.New(rand.NewPCG(9, 10))
	for _, typ := range types {
		p := simdKernels[typ]
		if p == nil || p.simd.dotRows == nil {
			continue
		}
		rs := typ.RowSize(n)
		nrows := (64 << 10) / rs
		w := simdRandWeights(typ, nrows*n, rng)
		a := simdRandAct(n, rng)
		out := make([]float32, nrows)
		for _, kind := range []string{"loop", "dotRows"} {
			b.Run(typ.String()+"/"+kind, func(b *testing.B) {
				for b.Loop() {
					if kind == "dotRows" {
						p.simd.dotRows(w, nrows, a, n, out)
						continue
					}
					for r := 0; r < nrows; r++ {
						out[r] = p.simd.dot(w[r*rs:(r+1)*rs], a, n)
					}
				}
				sec := b.Elapsed().Seconds()
				b.ReportMetric(float64(nrows*rs)*float64(b.N)/sec/1e9, "GB/s") // weight bytes
				b.ReportMetric(2*float64(nrows*n)*float64(b.N)/sec/1e9, "GFLOP/s")
			})
		}
	}
}

// TestSIMDQuantizeAct checks that the assembly activation quantizer gives
// exactly quantizeAct's bytes, scales and sums, ties and zero blocks
// included.
func TestSIMDQuantizeAct(t *testing.T) {
	skipNoSIMD(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{32, 64, 96, 576, 1536, 4096 + 32} {
		for rep := 0; rep < 20; rep++ {
			x := make([]float32, n)
			scale := float32(math.Pow(10, float64(rng.IntN(8)-4)))
			for i := range x {
				x[i] = float32(rng.NormFloat64()) * scale
			}
			switch rep {
			case 1: // a zero block
				clear(x[:32])
			case 2: // exact halves after scaling: amax 127 makes id 1
				for i := range x {
					x[i] = float32(rng.IntN(254)-127) + 0.5
				}
				for b := 0; b < n/32; b++ {
					x[b*32] = 127
				}
			case 3: // values next to the rounding boundaries
				for i := range x {
					x[i] = math.Nextafter32(float32(rng.IntN(254)-127)+0.5, float32(math.Inf(rng.IntN(2)*2-1)))
				}
				for b := 0; b < n/32; b++ {
					x[b*32] = 127
				}
			}
			var want, got Act
			quantizeAct(x, &want)
			simdQuantizeAct(x, &got)
			for i := range want.Qs {
				if got.Qs[i] != want.Qs[i] {
					t.Fatalf("n=%d rep=%d: q[%d] = %d, want %d (x %g, d %g)", n, rep, i, got.Qs[i], want.Qs[i], x[i], want.D[i/32])
				}
			}
			for b := range want.D {
				if got.D[b] != want.D[b] || got.S[b] != want.S[b] {
					t.Fatalf("n=%d rep=%d block %d: d, S = %g, %g, want %g, %g", n, rep, b, got.D[b], got.S[b], want.D[b], want.S[b])
				}
			}
		}
	}
}

// TestSIMDNoAlloc checks that the kernels allocate nothing: they run once
// per weight row.
func TestSIMDNoAlloc(t *testing.T) {
	skipNoSIMD(t)
	rng := rand.New(rand.NewPCG(13, 14))
	const n = 512
	var acts [4]*Act
	for k := range acts {
		acts[k] = simdRandAct(n, rng)
	}
	for typ, p := range simdKernels {
		w := simdRandWeights(typ, n, rng)
		var out [4]float32
		if a := testing.AllocsPerRun(10, func() {
			p.simd.dot(w, acts[0], n)
			p.simd.dot4(w, &acts, n, &out)
			p.simd.dotRows(w, 1, acts[0], n, out[:])
			if p.simd.dot4Rows != nil {
				p.simd.dot4Rows(w, 1, &acts, n, out[:], 1)
			}
		}); a != 0 {
			t.Errorf("%s: %v allocations per dot, dot4, dotRows and dot4Rows", typ, a)
		}
	}
	x := make([]float32, n)
	var a Act
	simdQuantizeAct(x, &a)
	if allocs := testing.AllocsPerRun(10, func() { simdQuantizeAct(x, &a) }); allocs != 0 {
		t.Errorf("quantizeAct: %v allocations", allocs)
	}
}

// TestDot4Sums16Fallback: four-input kernels that take the activations'
// sums of 16 quants give the same bits without them (they then run the
// one-input kernel).
func TestDot4Sums16Fallback(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 52))
	for typ, k := range dotTable {
		if !k.sums16 {
			continue
		}
		const n, rows = 512, 5
		w := simdRandWeights(typ, rows*n, rng)
		var with, without [4]*Act
		for i := range with {
			with[i] = simdRandAct(n, rng)
			c := *with[i]
			c.B = nil
			without[i] = &c
		}
		got, want := make([]float32, 4*rows), make([]float32, 4*rows)
		k.dot4Rows(w, rows, &with, n, want, rows)
		k.dot4Rows(w, rows, &without, n, got, rows)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: output %d is %g without the sums, %g with", typ, i, got[i], want[i])
			}
		}
	}
}
