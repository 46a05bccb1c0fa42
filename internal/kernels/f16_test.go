package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestFP16RoundTripAllHalves(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := FP16ToFP32(h)
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			if !math.IsNaN(float64(f)) {
				t.Fatalf("%#04x: want NaN, got %v", h, f)
			}
			back := FP32ToFP16(f)
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 || back&0x8000 != h&0x8000 {
				t.Fatalf("%#04x: NaN came back as %#04x", h, back)
			}
			continue
		}
		if back := FP32ToFP16(f); back != h {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
}

func TestFP16KnownValues(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{0, 0x0000},
		{float32(math.Copysign(0, -1)), 0x8000},
		{1, 0x3c00},
		{-2, 0xc000},
		{0.5, 0x3800},
		{65504, 0x7bff},
		{65519.99, 0x7bff},
		{65520, 0x7c00}, // tie between 65504 and 2^16 goes to even: infinity
		{1e10, 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
		{0x1p-14, 0x0400},     // smallest normal
		{0x1p-24, 0x0001},     // smallest subnormal
		{0x1p-25, 0x0000},     // tie with zero goes to even
		{0x1.8p-25, 0x0001},   // above the tie
		{0x3p-25, 0x0002},     // 1.5 ulp: tie goes to even (2)
		{0x1.ffcp-15, 0x0400}, // rounds up into the normals
		{1 + 0x1p-11, 0x3c00}, // tie: even (down)
		{1 + 0x3p-11, 0x3c02}, // tie: even (up)
		{1 + 0x1p-11 + 0x1p-20, 0x3c01},
		{0.1, 0x2e66},
		{-3.14159, 0xc248},
	}
	for _, c := range cases {
		if got := FP32ToFP16(c.f); got != c.h {
			t.Errorf("FP32ToFP16(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	if v := FP16ToFP32(0x0001); v != 0x1p-24 {
		t.Errorf("FP16ToFP32(1) = %g", v)
	}
	if v := FP16ToFP32(0x03ff); v != 0x3ffp-24 {
		t.Errorf("FP16ToFP32(0x3ff) = %g", v)
	}
	if v := FP16ToFP32(0x7c00); !math.IsInf(float64(v), 1) {
		t.Errorf("FP16ToFP32(inf) = %g", v)
	}
}

// TestFP32ToFP16Nearest checks random floats against the definition: the
// result is the nearest half, ties to the even one.
func TestFP32ToFP16Nearest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		// Exponents around the half range, subnormals and overflow included.
		f := float32(math.Ldexp(r.Float64()*2-1, r.IntN(44)-28))
		h := FP32ToFP16(f)
		got := float64(FP16ToFP32(h))
		if math.IsInf(got, 0) {
			if math.Abs(float64(f)) < 65520 {
				t.Fatalf("%g overflowed", f)
			}
			continue
		}
		err := math.Abs(got - float64(f))
		for _, nb := range []uint16{h + 1, h - 1} {
			v := float64(FP16ToFP32(nb))
			if nb&0x7fff >= 0x7c00 || (nb^h)&0x8000 != 0 {
				continue
			}
			e := math.Abs(v - float64(f))
			if e < err || (e == err && h&1 == 1) {
				t.Fatalf("FP32ToFP16(%g) = %#04x (%g), neighbour %#04x (%g) is nearer or even", f, h, got, nb, v)
			}
		}
	}
}

func TestBF16(t *testing.T) {
	cases := []struct {
		f float32
		h uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{math.Float32frombits(0x3f808000), 0x3f80}, // tie: even (down)
		{math.Float32frombits(0x3f818000), 0x3f82}, // tie: even (up)
		{math.Float32frombits(0x3f808001), 0x3f81},
		{math.Float32frombits(0x00018000), 0x0002}, // subnormals are rounded, not flushed
		{math.Float32frombits(0x7f7fffff), 0x7f80}, // overflow to infinity
		{float32(math.Inf(-1)), 0xff80},
	}
	for _, c := range cases {
		if got := FP32ToBF16(c.f); got != c.h {
			t.Errorf("FP32ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(c.f), got, c.h)
		}
	}
	nan := math.Float32frombits(0x7f800001)
	if h := FP32ToBF16(nan); !math.IsNaN(float64(BF16ToFP32(h))) {
		t.Errorf("NaN became %#04x", h)
	}
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := BF16ToFP32(h)
		if math.IsNaN(float64(f)) {
			continue
		}
		if back := FP32ToBF16(f); back != h {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, back)
		}
	}
}

// TestF16Bulk: the bulk conversions give the scalar ones' bits, with and
// without assembly, for every half and for float32 values around every
// rounding case (lengths that are and are not multiples of 8).
func TestF16Bulk(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		halves := make([]uint16, 1<<16)
		for i := range halves {
			halves[i] = uint16(i)
		}
		got := make([]float32, len(halves)+3)
		F16ToF32s(got, halves)
		for i, h := range halves {
			if want := FP16ToFP32(h); math.Float32bits(got[i]) != math.Float32bits(want) && !(math.IsNaN(float64(want)) && math.IsNaN(float64(got[i]))) {
				t.Fatalf("F16ToF32s(%#04x) = %v, want %v", h, got[i], want)
			}
		}
		rng := rand.New(rand.NewPCG(5, 6))
		for _, n := range []int{0, 1, 7, 8, 9, 64, 1001} {
			src := make([]float32, n)
			for i := range src {
				switch i % 3 {
				case 0:
					src[i] = float32(rng.NormFloat64())
				case 1: // near half-way between two halves
					src[i] = FP16ToFP32(uint16(rng.IntN(0x7c00))) * (1 + 1.0/2048)
				default:
					src[i] = math.Float32frombits(rng.Uint32())
				}
			}
			dst := make([]uint16, n)
			F32ToF16s(dst, src)
			for i, f := range src {
				want := FP32ToFP16(f)
				if dst[i] != want && !(math.IsNaN(float64(f)) && dst[i]&0x7c00 == 0x7c00 && dst[i]&0x3ff != 0) {
					t.Fatalf("n=%d: F32ToF16s(%v) = %#04x, want %#04x", n, f, dst[i], want)
				}
			}
		}
	})
}

// TestF16Rows: strided rows convert as F16ToF32s does row by row.
func TestF16Rows(t *testing.T) {
	bothModes(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(7, 8))
		for _, c := range []struct{ w, stride, rows int }{{64, 768, 5}, {8, 8, 1}, {12, 40, 3}, {128, 128, 2}, {80, 200, 4}} {
			src := make([]uint16, (c.rows-1)*c.stride+c.w)
			for i := range src {
				src[i] = FP32ToFP16(float32(rng.NormFloat64()))
			}
			got := make([]float32, c.rows*c.w)
			F16RowsToF32(got, src, c.stride, c.w, c.rows)
			for j := range c.rows {
				for i := range c.w {
					if want := FP16ToFP32(src[j*c.stride+i]); got[j*c.w+i] != want {
						t.Fatalf("%+v: row %d value %d = %v, want %v", c, j, i, got[j*c.w+i], want)
					}
				}
			}
		}
	})
}
