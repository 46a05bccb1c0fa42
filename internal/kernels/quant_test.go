package kernels

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

var quantTypes = []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K}
var allTypes = append([]Type{F32, F16, BF16}, quantTypes...)

// randRow returns n values like weights or activations: roughly normal with
// a few outliers, which the block scales have to absorb.
func randRow(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
		if r.IntN(64) == 0 {
			x[i] *= 6
		}
	}
	return x
}

func quantized(t Type, x []float32) []byte {
	b := make([]byte, t.RowSize(len(x)))
	Quantize(t, x, b)
	return b
}

func dequantized(t Type, b []byte, n int) []float32 {
	y := make([]float32, n)
	Dequantize(t, b, y)
	return y
}

func TestF32RoundTripExact(t *testing.T) {
	x := randRow(rand.New(rand.NewPCG(1, 1)), 1024)
	x[3] = float32(math.Inf(1))
	x[5] = math.Float32frombits(1) // subnormal
	y := dequantized(F32, quantized(F32, x), len(x))
	for i := range x {
		if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
			t.Fatalf("element %d: %g became %g", i, x[i], y[i])
		}
	}
	// F16/BF16 round trip of representable values is exact too.
	for _, ty := range []Type{F16, BF16} {
		z := dequantized(ty, quantized(ty, x), len(x))
		w := dequantized(ty, quantized(ty, z), len(z))
		for i := range z {
			if math.Float32bits(z[i]) != math.Float32bits(w[i]) {
				t.Fatalf("%s element %d: %g became %g", ty, i, z[i], w[i])
			}
		}
	}
}

// TestQuantizeError bounds the relative RMS error of quantize→dequantize
// for each type (about what ggml's reference quantizers achieve).
func TestQuantizeError(t *testing.T) {
	limits := map[Type]float64{
		F16: 0.0003, BF16: 0.002,
		Q8_0: 0.0088, Q6_K: 0.026, Q5_K: 0.049, Q5_1: 0.05, Q5_0: 0.068,
		Q4_K: 0.098, Q4_1: 0.105, Q4_0: 0.14,
	}
	r := rand.New(rand.NewPCG(2, 2))
	x := randRow(r, 256*64)
	for ty, lim := range limits {
		y := dequantized(ty, quantized(ty, x), len(x))
		var se, ss float64
		for i := range x {
			d := float64(x[i] - y[i])
			se += d * d
			ss += float64(x[i]) * float64(x[i])
		}
		rel := math.Sqrt(se / ss)
		t.Logf("%s: relative RMS error %.5f", ty, rel)
		if rel > lim {
			t.Errorf("%s: relative RMS error %.5f above %.3f", ty, rel, lim)
		}
	}
}

// TestQuantizeEdgeCases: zero blocks, constant blocks and sign patterns
// must give valid blocks whose dequantization is close to the input.
func TestQuantizeEdgeCases(t *testing.T) {
	rows := map[string]func(i int) float32{
		"zero":     func(int) float32 { return 0 },
		"constant": func(int) float32 { return 0.75 },
		"negative": func(int) float32 { return -0.75 },
		"positive": func(i int) float32 { return float32(i%32) / 31 },
		"tiny":     func(i int) float32 { return float32(i%7) * 1e-9 },
		"spike":    func(i int) float32 { return map[bool]float32{true: 100, false: 0.01}[i%97 == 0] },
	}
	for name, f := range rows {
		x := make([]float32, 512)
		var amax float32
		for i := range x {
			x[i] = f(i)
			amax = max(amax, abs32(x[i]))
		}
		for _, ty := range allTypes {
			y := dequantized(ty, quantized(ty, x), len(x))
			for i := range x {
				if math.IsNaN(float64(y[i])) || abs32(y[i]-x[i]) > 0.1*amax+1e-6 {
					t.Errorf("%s %s: element %d: %g became %g", name, ty, i, x[i], y[i])
					break
				}
			}
		}
	}
}

func TestQuantizeQ8_0MatchesGGML(t *testing.T) {
	// Block: 0..31 scaled so that amax = 3.1: d = 3.1/127, q = round(x/d).
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(i-16) * 0.1
	}
	x[0] = -3.1
	b := quantized(Q8_0, x)
	d := float32(3.1) / 127
	if got, want := binary.LittleEndian.Uint16(b), FP32ToFP16(d); got != want {
		t.Fatalf("d = %#04x, want %#04x", got, want)
	}
	id := 1 / d
	for i, v := range x {
		if got, want := int8(b[2+i]), int8(math.Round(float64(v*id))); got != want {
			t.Errorf("q[%d] = %d, want %d", i, got, want)
		}
	}
}

func TestQuantizeQ4_0MatchesGGML(t *testing.T) {
	x := []float32{-8, 7, 0.49, 0.51, -0.5, 3.99, -7.6, 1}
	x = append(x, make([]float32, 24)...)
	b := quantized(Q4_0, x)
	// max magnitude is -8, so d = -8/-8 = 1 and q = min(15, trunc(x + 8.5)).
	if got := binary.LittleEndian.Uint16(b); got != 0x3c00 {
		t.Fatalf("d = %#04x, want 0x3c00", got)
	}
	want := []byte{0, 15, 8, 9, 8, 12, 0, 9}
	for i, w := range want {
		if got := b[2+i] & 15; got != w {
			t.Errorf("q[%d] = %d, want %d", i, got, w)
		}
	}
}

// The known-answer tests build blocks by hand and compare with values
// written out from ggml's layout description, element by element.

func TestDequantizeQ4_0Known(t *testing.T) {
	blk := make([]byte, 18)
	binary.LittleEndian.PutUint16(blk, 0x4000) // d = 2
	for j := 0; j < 16; j++ {
		blk[2+j] = byte(j) | byte(15-j)<<4
	}
	y := dequantized(Q4_0, blk, 32)
	for j := 0; j < 16; j++ {
		if y[j] != float32(2*(j-8)) || y[j+16] != float32(2*(15-j-8)) {
			t.Fatalf("element %d/%d: %g %g", j, j+16, y[j], y[j+16])
		}
	}
}

func TestDequantizeQ4_1Known(t *testing.T) {
	blk := make([]byte, 20)
	binary.LittleEndian.PutUint16(blk, 0x3800)     // d = 0.5
	binary.LittleEndian.PutUint16(blk[2:], 0xc000) // m = -2
	for j := 0; j < 16; j++ {
		blk[4+j] = byte(j) | byte(j/2)<<4
	}
	y := dequantized(Q4_1, blk, 32)
	for j := 0; j < 16; j++ {
		if y[j] != 0.5*float32(j)-2 || y[j+16] != 0.5*float32(j/2)-2 {
			t.Fatalf("element %d/%d: %g %g", j, j+16, y[j], y[j+16])
		}
	}
}

func TestDequantizeQ5Known(t *testing.T) {
	for _, ty := range []Type{Q5_0, Q5_1} {
		blk := make([]byte, ty.TypeSize())
		binary.LittleEndian.PutUint16(blk, 0x3c00) // d = 1
		off := 2
		m := float32(0)
		if ty == Q5_1 {
			binary.LittleEndian.PutUint16(blk[2:], 0x3c00) // m = 1
			off, m = 4, 1
		}
		qh := uint32(0xa5a5_0ff0)
		binary.LittleEndian.PutUint32(blk[off:], qh)
		for j := 0; j < 16; j++ {
			blk[off+4+j] = byte(j) | byte(3)<<4
		}
		y := dequantized(ty, blk, 32)
		for i := 0; i < 32; i++ {
			var lo int
			if i < 16 {
				lo = i
			} else {
				lo = 3
			}
			q := lo | int(qh>>i&1)<<4
			want := float32(q) + m
			if ty == Q5_0 {
				want = float32(q - 16)
			}
			if y[i] != want {
				t.Fatalf("%s element %d: %g, want %g", ty, i, y[i], want)
			}
		}
	}
}

func TestDequantizeQ8_0Known(t *testing.T) {
	blk := make([]byte, 34)
	binary.LittleEndian.PutUint16(blk, 0xb800) // d = -0.5
	for j := 0; j < 32; j++ {
		blk[2+j] = byte(int8(j*8 - 128))
	}
	y := dequantized(Q8_0, blk, 32)
	for j := range y {
		if y[j] != -0.5*float32(j*8-128) {
			t.Fatalf("element %d: %g", j, y[j])
		}
	}
}

// kScales packs eight 6-bit scales and mins as ggml's Q4_K/Q5_K do.
func kScales(sc, mn [8]uint8) [12]byte {
	var p [12]byte
	for j := 0; j < 4; j++ {
		p[j] = sc[j] | (sc[j+4]>>4)<<6
		p[j+4] = mn[j] | (mn[j+4]>>4)<<6
		p[j+8] = sc[j+4]&15 | (mn[j+4]&15)<<4
	}
	return p
}

func TestDequantizeQ4_KQ5_KKnown(t *testing.T) {
	sc := [8]uint8{1, 2, 63, 17, 33, 48, 5, 62}
	mn := [8]uint8{0, 63, 7, 16, 32, 49, 61, 3}
	packed := kScales(sc, mn)
	for _, ty := range []Type{Q4_K, Q5_K} {
		blk := make([]byte, ty.TypeSize())
		binary.LittleEndian.PutUint16(blk, 0x3400)     // d = 0.25
		binary.LittleEndian.PutUint16(blk[2:], 0x3000) // dmin = 0.125
		copy(blk[4:], packed[:])
		qsOff := 16
		if ty == Q5_K {
			for l := 0; l < 32; l++ {
				blk[16+l] = byte(l*37 + 11)
			}
			qsOff = 48
		}
		for i := 0; i < 128; i++ {
			blk[qsOff+i] = byte(i*13 + 5)
		}
		y := dequantized(ty, blk, 256)
		for i := 0; i < 256; i++ {
			j := i / 32 // sub-block: elements 64c..64c+31 are low nibbles of qs[32c..], the next 32 high
			l := i % 32
			b := blk[qsOff+32*(j/2)+l]
			q := int(b & 15)
			if j%2 == 1 {
				q = int(b >> 4)
			}
			if ty == Q5_K {
				q |= int(blk[16+l]>>j&1) << 4
			}
			want := float32(0.25*float32(sc[j])*float32(q)) - 0.125*float32(mn[j])
			if y[i] != want {
				t.Fatalf("%s element %d: %g, want %g", ty, i, y[i], want)
			}
		}
	}
}

func TestDequantizeQ6_KKnown(t *testing.T) {
	blk := make([]byte, 210)
	for i := 0; i < 128; i++ {
		blk[i] = byte(i*29 + 3)
	}
	for i := 0; i < 64; i++ {
		blk[128+i] = byte(i*71 + 1)
	}
	scales := []int8{1, -1, 127, -128, 5, 9, -17, 33, 64, -64, 2, 3, 4, 100, -100, 0}
	for i, s := range scales {
		blk[192+i] = byte(s)
	}
	binary.LittleEndian.PutUint16(blk[208:], 0x2c00) // d = 1/16
	y := dequantized(Q6_K, blk, 256)
	for i := 0; i < 256; i++ {
		h, k, l := i/128, (i%128)/32, i%32 // half, group of 32, position
		b := blk[64*h+32*(k%2)+l]
		lo := b & 15
		if k >= 2 {
			lo = b >> 4
		}
		hi := blk[128+32*h+l] >> (2 * k) & 3
		q := int(lo|hi<<4) - 32
		s := scales[i/16]
		want := float32(0.0625*float32(s)) * float32(q)
		if y[i] != want {
			t.Fatalf("element %d: %g, want %g", i, y[i], want)
		}
	}
}

func TestQuantizeArgumentChecks(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s: no panic", name)
			}
		}()
		f()
	}
	mustPanic("short dst", func() { Quantize(Q4_0, make([]float32, 64), make([]byte, 18)) })
	mustPanic("ragged row", func() { Quantize(Q4_K, make([]float32, 32), make([]byte, 144)) })
	mustPanic("unsupported", func() { Dequantize(Q2_K, make([]byte, 84), make([]float32, 256)) })
}
