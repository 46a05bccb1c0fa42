package kvcache

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"mistralrs/internal/kernels"
)

// testRow is n values of mixed magnitudes, with an outlier per block as
// attention keys have.
func testRow(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Exp(rng.NormFloat64()))
		if i%32 == 7 {
			x[i] *= 20
		}
	}
	return x
}

func roundTrip(t Type, x []float32) []float32 {
	w := make([]uint16, t.Words(len(x)))
	EncodeRow(t, w, x)
	y := make([]float32, len(x))
	DecodeRows(y, t, w, len(w), 0, len(x), 1)
	return y
}

// TestTypeErrorBounds checks each type's decoded values against x in
// float64, within the rounding each format allows: half an f16/bf16 unit
// in the last place, half a quantization step of the block's scale (q8_0,
// q4_0: the scale itself rounded to f16), and for E4M3 half a unit of its
// 3-bit mantissa relative (or half its subnormal step) of the scaled value.
func TestTypeErrorBounds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x := testRow(rng, 32*64)
	for _, typ := range []Type{F32, F16, BF16, Q8_0, Q4_0, F8E4M3} {
		y := roundTrip(typ, x)
		for b := 0; b < len(x); b += 32 {
			var amax float64
			for _, v := range x[b : b+32] {
				amax = max(amax, math.Abs(float64(v)))
			}
			for i := b; i < b+32; i++ {
				v, got := float64(x[i]), float64(y[i])
				var bound float64
				switch typ {
				case F32:
					bound = 0
				case F16:
					bound = math.Abs(v) * 0x1p-11 * 1.0001
				case BF16:
					bound = math.Abs(v) * 0x1p-8 * 1.0001
				case Q8_0:
					d := float64(kernels.FP16ToFP32(kernels.FP32ToFP16(float32(amax / 127))))
					bound = d/2*1.001 + math.Abs(amax/127-d)*127
				case Q4_0:
					d := float64(kernels.FP16ToFP32(kernels.FP32ToFP16(float32(amax / 8))))
					// the block's largest value maps to -8: the other sign
					// ends at 7 steps, a whole step short
					bound = d*1.001 + math.Abs(amax/8-d)*8
				case F8E4M3:
					d := float64(kernels.FP16ToFP32(kernels.FP32ToFP16(float32(amax / 448))))
					bound = math.Max(math.Abs(v)/16, d*0x1p-10)*1.001 + math.Abs(amax/448-d)*448
				}
				if math.Abs(got-v) > bound {
					t.Fatalf("%s: value %d: %g decodes as %g, error %g over the bound %g", typ, i, v, got, math.Abs(got-v), bound)
				}
			}
		}
	}
}

// TestQ8AndQ4MatchTheGGUFQuantizer: the cache's q8_0 and q4_0 rows are the
// kernels' (ggml's reference) blocks, byte for byte, and read back as its
// dequantizer does.
func TestQ8AndQ4MatchTheGGUFQuantizer(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	x := testRow(rng, 32*16)
	for _, c := range []struct {
		t  Type
		kt kernels.Type
	}{{Q8_0, kernels.Q8_0}, {Q4_0, kernels.Q4_0}, {BF16, kernels.BF16}} {
		w := make([]uint16, c.t.Words(len(x)))
		EncodeRow(c.t, w, x)
		want := make([]byte, c.kt.RowSize(len(x)))
		kernels.Quantize(c.kt, x, want)
		if got := wordBytes(w); string(got) != string(want) {
			t.Fatalf("%s: blocks differ from kernels.Quantize's", c.t)
		}
		wantY := make([]float32, len(x))
		kernels.Dequantize(c.kt, want, wantY)
		for i, v := range roundTrip(c.t, x) {
			if math.Float32bits(v) != math.Float32bits(wantY[i]) {
				t.Fatalf("%s: value %d decodes as %g, kernels.Dequantize gives %g", c.t, i, v, wantY[i])
			}
		}
	}
}

// e4m3Oracle is the nearest E4M3 code to v (ties to the even code),
// searching all positive codes in float64, saturating at 448.
func e4m3Oracle(v float64) byte {
	var sign byte
	if math.Signbit(v) {
		sign, v = 0x80, -v
	}
	best, bestErr := 0, math.Inf(1)
	for c := 0; c <= 0x7e; c++ {
		e, m := c>>3, float64(c&7)
		val := math.Ldexp(m/8, -6)
		if e > 0 {
			val = math.Ldexp(1+m/8, e-7)
		}
		err := math.Abs(val - v)
		if err < bestErr || (err == bestErr && c&1 == 0) {
			best, bestErr = c, err
		}
	}
	return sign | byte(best)
}

func TestE4M3MatchesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	check := func(v float32) {
		t.Helper()
		got, want := e4m3(v), e4m3Oracle(float64(v))
		if v == 0 {
			want = e4m3Oracle(0)
			if math.Signbit(float64(v)) {
				want = 0
			}
		}
		if got != want {
			t.Fatalf("e4m3(%g) = %#x, want %#x", v, got, want)
		}
	}
	for c := 0; c <= 0x7e; c++ {
		v := e4m3Table[c]
		check(v)
		check(-v)
		if c < 0x7e { // the midpoint to the next code: a tie
			check((v + e4m3Table[c+1]) / 2)
		}
	}
	for range 20000 {
		check(float32(rng.NormFloat64() * math.Exp(3*rng.NormFloat64())))
	}
	for _, v := range []float32{448, 449, 464, 1e6, float32(math.Inf(1))} {
		if got := e4m3(v); got != 0x7e {
			t.Errorf("e4m3(%g) = %#x: saturates at 0x7e (448)", v, got)
		}
		if got := e4m3(-v); got != 0xfe {
			t.Errorf("e4m3(%g) = %#x: saturates at 0xfe (-448)", -v, got)
		}
	}
	for c := range 256 {
		if c&0x7f == 0x7f {
			continue
		}
		if e4m3(e4m3Value(byte(c))) != byte(c) && c != 0x80 {
			t.Errorf("code %#x does not survive a round trip", c)
		}
	}
}

// TestDecodeRowsUnaligned: a head narrower than a block (or straddling
// blocks) decodes as the same values of its whole rows.
func TestDecodeRowsUnaligned(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const n, rows = 128, 3
	for _, typ := range []Type{F32, F16, BF16, Q8_0, Q4_0, F8E4M3} {
		words := typ.Words(n)
		src := make([]uint16, rows*words)
		full := make([]float32, rows*n)
		for j := range rows {
			EncodeRow(typ, src[j*words:(j+1)*words], testRow(rng, n))
			DecodeRows(full[j*n:(j+1)*n], typ, src[j*words:], words, 0, n, 1)
		}
		for _, ow := range [][2]int{{0, 16}, {16, 16}, {8, 48}, {96, 32}, {40, 88}} {
			off, w := ow[0], ow[1]
			got := make([]float32, rows*w)
			DecodeRows(got, typ, src, words, off, w, rows)
			for j := range rows {
				for i := range w {
					if got[j*w+i] != full[j*n+off+i] {
						t.Fatalf("%s: values [%d, %d) of row %d: %d is %g, the whole row has %g", typ, off, off+w, j, i, got[j*w+i], full[j*n+off+i])
					}
				}
			}
		}
	}
}

func TestParseType(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Type
	}{{"", F16}, {"auto", F16}, {"f32", F32}, {"f16", F16}, {"bf16", BF16}, {"q8_0", Q8_0}, {"q4_0", Q4_0}, {"f8e4m3", F8E4M3}} {
		if got, err := ParseType(c.in); err != nil || got != c.want {
			t.Errorf("ParseType(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	_, err := ParseType("q5_k")
	if err == nil || !strings.Contains(err.Error(), "q8_0, q4_0, f8e4m3") || strings.Contains(err.Error(), "\n") {
		t.Errorf("unknown type: error %v, want one line listing the types", err)
	}
	if err := Q8_0.CheckRow(48); err == nil {
		t.Error("q8_0 rows of 48 values: no error")
	}
}

// TestTypedPoolRows: rows Put into a pool of every pair of types read back
// (Span, KeyRows, ValueRows) as their type's rounding of what was written,
// across blocks, with keys by row and by column (whatever the path would
// pick: kcol), a head inside a block too, and BlockBytes follows the types.
func TestTypedPoolRows(t *testing.T) {
	sh := Shape{Layers: 2, KDim: 64, VDim: 96}
	rng := rand.New(rand.NewPCG(9, 10))
	pairs := [][2]Type{{F32, F32}, {F16, F16}, {BF16, BF16}, {Q8_0, Q8_0}, {Q4_0, Q4_0}, {F8E4M3, F8E4M3}, {F16, Q8_0}, {Q8_0, F32}, {F32, Q4_0}}
	for i := range 2 * len(pairs) {
		kt, vt := pairs[i/2][0], pairs[i/2][1]
		if kt == F32 && i%2 == 1 {
			continue
		}
		p := NewTypedPool(sh, 4, 8, kt, vt)
		p.kcol = i%2 == 1
		s := p.NewSeq()
		const n = 10
		if err := s.Extend(n); err != nil {
			t.Fatal(err)
		}
		var ks, vs [2][n][]float32
		for l := range 2 {
			for pos := range n {
				ks[l][pos], vs[l][pos] = testRow(rng, sh.KDim), testRow(rng, sh.VDim)
				s.Put(l, pos, ks[l][pos], vs[l][pos])
			}
		}
		kb, vb := make([]float32, sh.KDim), make([]float32, sh.VDim)
		for l := range 2 {
			for pos := range n {
				sp := s.Span(l, pos)
				sp.KeyRows(kb, sh.KDim, 0, 1, 0, sh.KDim)
				sp.ValueRows(vb, sh.VDim, 0, 1, 0, sh.VDim)
				wk, wv := roundTrip(kt, ks[l][pos]), roundTrip(vt, vs[l][pos])
				var kh [16]float32
				sp.KeyRows(kh[:], sh.KDim, 0, 1, 16, 16)
				if !slices.Equal(kh[:], wk[16:32]) {
					t.Fatalf("%s/%s (by column %v) layer %d position %d: keys 16-31 %v, want %v", kt, vt, p.kcol, l, pos, kh, wk[16:32])
				}
				for i := range kb {
					if kb[i] != wk[i] {
						t.Fatalf("%s/%s layer %d position %d key %d: %g, want %g", kt, vt, l, pos, i, kb[i], wk[i])
					}
				}
				for i := range vb {
					if vb[i] != wv[i] {
						t.Fatalf("%s/%s layer %d position %d value %d: %g, want %g", kt, vt, l, pos, i, vb[i], wv[i])
					}
				}
			}
		}
		// a fork's copy of the first row of the partial block (positions
		// 8 and 9) copies that row of every layer, and only it
		c := p.NewSeq()
		if err := c.Extend(n); err != nil {
			t.Fatal(err)
		}
		for l := range 2 {
			for pos := range n {
				c.Put(l, pos, make([]float32, sh.KDim), make([]float32, sh.VDim))
			}
		}
		p.copyRows(c.blocks[2], s.blocks[2], 1)
		for l := range 2 {
			for pos := 8; pos < n; pos++ {
				sp, sc := s.Span(l, pos), c.Span(l, pos)
				sp.KeyRows(kb, sh.KDim, 0, 1, 0, sh.KDim)
				sp.ValueRows(vb, sh.VDim, 0, 1, 0, sh.VDim)
				ck, cv := make([]float32, sh.KDim), make([]float32, sh.VDim)
				sc.KeyRows(ck, sh.KDim, 0, 1, 0, sh.KDim)
				sc.ValueRows(cv, sh.VDim, 0, 1, 0, sh.VDim)
				if pos == 8 && (!slices.Equal(ck, kb) || !slices.Equal(cv, vb)) {
					t.Fatalf("%s/%s layer %d: the copied row differs from its source", kt, vt, l)
				}
				if pos == 9 && (slices.ContainsFunc(ck, func(x float32) bool { return x != 0 }) || slices.ContainsFunc(cv, func(x float32) bool { return x != 0 })) {
					t.Fatalf("%s/%s layer %d: a row past the copied one was copied", kt, vt, l)
				}
			}
		}
		c.Release()
		if err := p.Check(); err != nil {
			t.Fatal(err)
		}
		want := int64(2 * 4 * (kt.Bytes(64) + vt.Bytes(96)))
		if kt == F32 && vt == F32 {
			want = 2 * 4 * 4 * (64 + 96)
		}
		if got := TypedBlockBytes(sh, 4, kt, vt); got != want {
			t.Errorf("%s/%s: block of %d bytes, want %d", kt, vt, got, want)
		}
	}
	// q8_0 keys and values: 34 bytes per 32 values, 26.6 % of float32's.
	if r := float64(TypedBlockBytes(sh, 4, Q8_0, Q8_0)) / float64(TypedBlockBytes(sh, 4, F32, F32)); r > 0.27 {
		t.Errorf("q8_0 takes %.3f of f32's memory", r)
	}
}

// BenchmarkDecodeRows: a head of 64 values of 64 rows of 256 values, the
// tile attention decodes; SetBytes counts float32 values out (4 bytes each)
// so MB/s / 4 is values per microsecond.
func BenchmarkDecodeRows(b *testing.B) {
	const n, rows, hd = 256, 64, 64
	rng := rand.New(rand.NewPCG(11, 12))
	for _, typ := range []Type{F16, BF16, Q8_0, Q4_0, F8E4M3} {
		b.Run(typ.String(), func(b *testing.B) {
			words := typ.Words(n)
			src := make([]uint16, rows*words)
			for j := range rows {
				EncodeRow(typ, src[j*words:(j+1)*words], testRow(rng, n))
			}
			dst := make([]float32, rows*hd)
			b.SetBytes(4 * rows * hd)
			for b.Loop() {
				DecodeRows(dst, typ, src, words, 64, hd, rows)
			}
		})
	}
}
