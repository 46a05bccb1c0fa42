//go:build amd64 && !purego

package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestSplits256 checks the CPUID signatures that pick the 128-bit forms.
func TestSplits256(t *testing.T) {
	for _, c := range []struct {
		name string
		sig  uint32
		want bool
	}{
		{"Zen 1 (EPYC 7601, family 17h model 01h)", 0x00800f12, true},
		{"Zen+ (Ryzen 2700X, 17h model 08h)", 0x00800f82, true},
		{"Zen 2 (EPYC 7002, 17h model 31h)", 0x00830f10, false},
		{"Zen 3 (EPYC 7003, 19h model 01h)", 0x00a00f11, false},
		{"Zen 5 (1Ah model 02h)", 0x00b00f21, false},
		{"Hygon Dhyana (18h)", 0x00900f01, true},
		{"Skylake (family 6 model 55h)", 0x00050654, false},
		{"Haswell (family 6 model 3Fh)", 0x000306f2, false},
	} {
		if got := splits256(c.sig); got != c.want {
			t.Errorf("%s: splits256(%#x) = %v, want %v", c.name, c.sig, got, c.want)
		}
	}
}

// TestSIMDBothWidths runs the four-input kernel checks with the 128-bit
// and the 256-bit forms of the quantized types' kernels (split256),
// whichever this CPU picks (TestSplit256Forms checks that the two give the
// same bits).
func TestSIMDBothWidths(t *testing.T) {
	skipNoSIMD(t)
	saved := split256
	defer func() { split256 = saved }()
	for _, s := range []bool{false, true} {
		split256 = s
		name := map[bool]string{false: "256-bit", true: "128-bit"}[s]
		t.Run(name+"/Dot4Rows", TestSIMDDot4Rows)
		t.Run(name+"/BatchInvariant", TestSIMDBatchInvariant)
	}
}

// TestSplit256Forms calls the 128-bit and 256-bit forms of each avx2
// four-input kernel directly (the entry points reach them by a jump) and
// checks that they give the same bits as each other and as the entry
// point.
func TestSplit256Forms(t *testing.T) {
	skipNoSIMD(t)
	type qdsForm func(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
	qds := map[Type][2]qdsForm{
		Q4_0: {dot4Q4_0AVX2X, dot4Q4_0AVX2Y},
		Q4_1: {dot4Q4_1AVX2X, dot4Q4_1AVX2Y},
		Q5_0: {dot4Q5_0AVX2X, dot4Q5_0AVX2Y},
		Q5_1: {dot4Q5_1AVX2X, dot4Q5_1AVX2Y},
		Q4_K: {dot4Q4_KAVX2X, dot4Q4_KAVX2Y},
		Q5_K: {dot4Q5_KAVX2X, dot4Q5_KAVX2Y},
	}
	rng := rand.New(rand.NewPCG(45, 46))
	for _, typ := range []Type{Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K} {
		p := simdKernels[typ]
		if p == nil || p.simd.dot4Rows == nil {
			t.Fatalf("%s: no four-input assembly kernel", typ)
		}
		for _, n := range simdLengths(typ) {
			for _, rows := range []int{1, 2, 3, 5, 6} {
				w := simdRandWeights(typ, rows*n, rng)
				var acts [4]*Act
				for k := range acts {
					acts[k] = simdRandAct(n, rng)
				}
				entry := make([]float32, 4*rows)
				p.simd.dot4Rows(w, rows, &acts, n, entry, rows)
				nb, sub := n/typ.BlockSize(), typ.BlockSize()/32
				for form := range 2 {
					out := make([]float32, 4*rows)
					if typ == Q8_0 {
						qs, d, _ := d4Args(w, rows, &acts, nb, sub, typ.RowSize(typ.BlockSize()), out, rows)
						f := [2]func(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int){dot4Q8_0AVX2X, dot4Q8_0AVX2Y}[form]
						f(&w[0], &qs, &d, nb, &f16Table[0], rows, &out[0], rows)
					} else {
						qs, d, s, _ := s4Args(w, rows, &acts, nb, sub, typ.RowSize(typ.BlockSize()), out, rows)
						qds[typ][form](&w[0], &qs, &d, &s, nb, &f16Table[0], rows, &out[0], rows)
					}
					for i := range out {
						if out[i] != entry[i] {
							t.Fatalf("%s n=%d rows=%d form %d output %d: %g, the entry point %g", typ, n, rows, form, i, out[i], entry[i])
						}
					}
				}
			}
		}
	}
}
