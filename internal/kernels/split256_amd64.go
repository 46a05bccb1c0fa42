//go:build amd64 && !purego

package kernels

// The avx2 path's four-input kernels of the quantized types but Q6_K
// (whose kernel is on 256-bit registers only) have two forms: on 256-bit
// registers (the Y forms: dot4Q8_0AVX2Y, ...) and on 128-bit ones (the X
// forms). The entry points the tables call (dot4Q8_0AVX2, ...) jump to one
// or the other by split256. Both give the same bits (exact integer sums
// per block, then the same float steps).
//
// The 128-bit forms were measured fastest on Zen 1, whose vector pipes are
// 128 bits wide: there a 256-bit VPMADDUBSW is two micro-ops on the one
// pipe that multiplies, and a 256-bit loop of the same products ran at
// 24.0 cycles a block of 4×32 against 21.5 (docs/performance.md,
// "Measured (2026-11-29)"). Every later AVX2 core multiplies 256 bits at
// once (Zen 2 on: 184-186 GMAC/s of VPMADDUBSW+VPMADDWD on 256-bit
// registers against 92-95 on 128-bit ones, Zen 3, 2 threads), and there the
// 256-bit forms run BenchmarkMatMul64 1.4-1.5× (Q8_0), 1.2-1.5× (Q4_K) and
// 1.2-1.6× (Q4_0, Q5_0, Q5_1) faster.

// split256 is true on the CPUs whose vector units are 128 bits wide:
// AMD family 17h below model 30h (Zen, Zen+) and Hygon family 18h (Zen).
var split256 = splits256(cpuidSignature())

// cpuidSignature returns EAX of CPUID leaf 1.
func cpuidSignature() uint32

// splits256 reports whether the CPU of CPUID signature sig (leaf 1's EAX)
// has 128-bit vector units (split256).
func splits256(sig uint32) bool {
	family := sig >> 8 & 0xf
	model := sig >> 4 & 0xf
	if family == 0xf {
		family += sig >> 20 & 0xff
		model |= sig >> 12 & 0xf0
	}
	return family == 0x17 && model < 0x30 || family == 0x18
}

//go:noescape
func dot4Q8_0AVX2X(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q8_0AVX2Y(w *byte, qs *[4]*int8, d *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q4_KAVX2X(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q4_KAVX2Y(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q5_KAVX2X(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q5_KAVX2Y(w *byte, qs *[4]*int8, d, s *[4]*float32, nsb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q4_0AVX2X(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q4_0AVX2Y(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q4_1AVX2X(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q4_1AVX2Y(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q5_0AVX2X(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q5_0AVX2Y(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q5_1AVX2X(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)

//go:noescape
func dot4Q5_1AVX2Y(w *byte, qs *[4]*int8, d, s *[4]*float32, nb int, tab *float32, rows int, out *float32, stride int)
