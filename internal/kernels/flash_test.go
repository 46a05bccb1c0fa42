package kernels

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"golang.org/x/sys/cpu"
)

// eachPath runs f under every path this CPU has (the generic one
// included), restoring the path in use after.
func eachPath(t *testing.T, f func(t *testing.T, path string)) {
	t.Helper()
	prev := Path()
	defer func() {
		if _, err := setPath(prev); err != nil {
			t.Fatal(err)
		}
	}()
	for _, p := range Paths() {
		if _, err := setPath(p); err != nil {
			t.Fatal(err)
		}
		t.Run(p, func(t *testing.T) { f(t, p) })
	}
}

func randF32(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d: %v, want %v (the Go oracle's)", what, i, got[i], want[i])
		}
	}
}

// fma32 rounds a·b+c once: against big.Float's exact sum, on random
// operands and on sums that fall halfway between two float32s in float64.
func TestFMA32(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	check := func(a, b, c float32) {
		if got, want := fma32(a, b, c), exact(a, b, c); math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
	}
	for range 20000 {
		check(float32(rng.NormFloat64()), float32(rng.NormFloat64()), float32(rng.NormFloat64()))
	}
	// c = 1, a·b = 2^-24 + 2^-47: the float64 sum rounds to the midpoint
	// 1 + 2^-24, the exact one lies above it
	a, b := float32(1+math.Ldexp(1, -23)), float32(math.Ldexp(1, -24))
	check(a, b, 1)
	check(-a, b, -1)
	check(a, -b, 1)
}

func TestFlashScoresOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	eachPath(t, func(t *testing.T, path string) {
		for _, hd := range []int{16, 64, 80, 128} {
			for _, nk := range []int{16, 32, 48, 64} {
				for _, nq := range []int{1, 3, 4, 5, 9} {
					ldq := hd + 16
					q, kt := randF32(rng, nq*ldq), randF32(rng, hd*nk)
					got, want := make([]float32, nq*nk), make([]float32, nq*nk)
					FlashScores(got, q, ldq, kt, nq, nk, hd, 0.125)
					flashScoresGo(want, q, ldq, kt, nq, nk, hd, 0.125)
					sameBits(t, fmt.Sprintf("hd %d nk %d nq %d", hd, nk, nq), got, want)
					// a row's bits do not depend on the rows around it
					one := make([]float32, nk)
					FlashScores(one, q[(nq-1)*ldq:], ldq, kt, 1, nk, hd, 0.125)
					sameBits(t, "last row alone", one, got[(nq-1)*nk:])
				}
			}
		}
	})
}

func TestFlashAccumOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	eachPath(t, func(t *testing.T, path string) {
		for _, vd := range []int{16, 64, 80, 128, 24} {
			for _, nk := range []int{1, 16, 64} {
				for _, nq := range []int{1, 3, 4, 7} {
					ldo := vd + 8
					o, p, v := randF32(rng, nq*ldo), randF32(rng, nq*nk), randF32(rng, nk*vd)
					for j := range p {
						if j%5 == 0 {
							p[j] = 0 // masked weights
						}
					}
					got, want := append([]float32(nil), o...), append([]float32(nil), o...)
					FlashAccum(got, ldo, p, v, nq, nk, vd)
					flashAccumGo(want, ldo, p, v, nq, nk, vd)
					sameBits(t, fmt.Sprintf("vd %d nk %d nq %d", vd, nk, nq), got, want)
				}
			}
		}
	})
}

func TestExpSumOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	eachPath(t, func(t *testing.T, path string) {
		for _, n := range []int{16, 64, 112, 17, 5} {
			x := randF32(rng, n)
			for i := range x {
				x[i] *= 30
				if i%7 == 3 {
					x[i] = float32(math.Inf(-1))
				}
			}
			x[0] = -200 // below exp's range: 0
			m := float32(math.Inf(-1))
			for _, v := range x {
				m = max(m, v)
			}
			got, want := append([]float32(nil), x...), append([]float32(nil), x...)
			if g, w := RowMax(x), rowMaxGo(x); g != w || w != m {
				t.Fatalf("n %d: RowMax %v, want %v", n, g, w)
			}
			gs, ws := ExpSum(got, m), expSumGo(want, m)
			sameBits(t, fmt.Sprintf("n %d", n), got, want)
			if math.Float32bits(gs) != math.Float32bits(ws) {
				t.Fatalf("n %d: sum %v, want %v", n, gs, ws)
			}
			var ref float64
			for i, v := range x {
				e := math.Exp(float64(v - m))
				ref += e
				if d := math.Abs(float64(got[i]) - e); d > 3e-7*e+1e-30 {
					t.Fatalf("n %d: exp(%g) = %g, want %g", n, v-m, got[i], e)
				}
			}
			if math.Abs(float64(gs)-ref) > 1e-6*ref {
				t.Fatalf("n %d: sum %g, want %g", n, gs, ref)
			}
		}
	})
}

// kvRowsOf stores rows (n values each) as t in a run of cached rows with
// stride words (or values) between them.
func kvRowsOf(t KVType, rows [][]float32, pad int) KVRows {
	n := len(rows[0])
	if t == KVF32 {
		stride := n + pad
		f := make([]float32, len(rows)*stride)
		for j, r := range rows {
			copy(f[j*stride:], r)
		}
		return KVRows{T: t, F32: f, Stride: stride}
	}
	words := t.Words(n)
	stride := words + pad
	w := make([]uint16, len(rows)*stride)
	for j, r := range rows {
		encodeKVRow(t, w[j*stride:j*stride+words], r)
	}
	return KVRows{T: t, W: w, Stride: stride}
}

// encodeKVRow is a test encoder: halves, bf16 truncation, the kernels'
// quantizers, and for f8e4m3 the nearest code to x/d by search.
func encodeKVRow(t KVType, dst []uint16, x []float32) {
	switch t {
	case KVF16:
		F32ToF16s(dst, x)
	case KVBF16:
		for i, v := range x {
			dst[i] = uint16(math.Float32bits(v) >> 16)
		}
	case KVQ8_0:
		Quantize(Q8_0, x, kvBytes(dst))
	case KVQ4_0:
		Quantize(Q4_0, x, kvBytes(dst))
	case KVF8E4M3:
		b := kvBytes(dst)
		for i := 0; i < len(x); i += 32 {
			var amax float32
			for _, v := range x[i : i+32] {
				amax = max(amax, float32(math.Abs(float64(v))))
			}
			h := FP32ToFP16(amax / E4M3Max)
			b[i/32*34], b[i/32*34+1] = byte(h), byte(h>>8)
			d := FP16ToFP32(h)
			for j, v := range x[i : i+32] {
				best := 0
				for c := range 256 {
					if math.Abs(float64(E4M3ToFP32(byte(c))*d-v)) < math.Abs(float64(E4M3ToFP32(byte(best))*d-v)) {
						best = c
					}
				}
				b[i/32*34+2+j] = byte(best)
			}
		}
	}
}

// KTile and VTile give the Go decoder's bits on every path, for every
// type, heads at block boundaries and inside blocks, runs of any length.
func TestKVTilesOracle(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	eachPath(t, func(t *testing.T, path string) {
		for typ := range NumKVTypes {
			for _, sh := range []struct{ n, off, w int }{{128, 64, 64}, {256, 128, 128}, {160, 80, 80}, {64, 16, 16}, {96, 0, 96}} {
				if bl := typ.BlockLen(); sh.n%bl != 0 {
					continue
				}
				for _, cnt := range []int{1, 16, 21, 64} {
					rows := make([][]float32, cnt)
					for j := range rows {
						rows[j] = randF32(rng, sh.n)
					}
					r := kvRowsOf(typ, rows, 3)
					r.Off = sh.off
					what := fmt.Sprintf("%d: rows of %d, head at %d of %d, %d rows", typ, sh.n, sh.off, sh.w, cnt)
					// the reference: each row decoded alone
					want := make([]float32, cnt*sh.w)
					for j := range cnt {
						decodeKVRow(want[j*sh.w:(j+1)*sh.w], &r, j, sh.w)
					}
					vld := sh.w + 6
					v := make([]float32, cnt*vld)
					VTile(v, vld, &r, sh.w, cnt)
					const ld = 70
					kt := make([]float32, sh.w*ld)
					KTile(kt, ld, &r, sh.w, cnt)
					for j := range cnt {
						sameBits(t, "VTile "+what, v[j*vld:j*vld+sh.w], want[j*sh.w:(j+1)*sh.w])
						for d := range sh.w {
							if g, w := kt[d*ld+j], want[j*sh.w+d]; math.Float32bits(g) != math.Float32bits(w) {
								t.Fatalf("KTile %s: key %d value %d: %v, want %v", what, j, d, g, w)
							}
						}
					}
					// the decoded values are the stored ones
					if typ == KVF32 {
						sameBits(t, "f32 "+what, want[:sh.w], rows[0][sh.off:sh.off+sh.w])
					}
				}
			}
		}
	})
}

// kvColsOf stores rows (n values each) of type t by column: word c of
// row j at W[c*stride+j] (stride >= len(rows)), as a paged cache keeps
// f16 and q8_0 keys.
func kvColsOf(t KVType, rows [][]float32, stride int) KVRows {
	byRow := kvRowsOf(t, rows, 0)
	n := byRow.Stride
	w := make([]uint16, n*stride)
	for j := range rows {
		for c, v := range byRow.W[j*n : (j+1)*n] {
			w[c*stride+j] = v
		}
	}
	return KVRows{T: t, W: w, Stride: stride, Col: true}
}

// Rows stored by column decode, with KTile and VTile on every path, to the
// bits of the same rows stored by row, for every type but f32: heads at
// any offset (f16; block types on whole blocks), of widths the decoders
// take and do not, runs that are and are not multiples of 16.
func TestKVTilesByColumn(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	eachPath(t, func(t *testing.T, path string) {
		for typ := KVF16; typ < NumKVTypes; typ++ {
			for _, sh := range []struct{ n, off, w int }{{512, 64, 64}, {512, 448, 64}, {256, 128, 128}, {256, 32, 96}, {160, 80, 80}, {40, 8, 24}} {
				if bl := typ.BlockLen(); sh.off%bl != 0 || sh.w%bl != 0 {
					continue
				}
				for _, cnt := range []int{1, 15, 16, 21, 32, 48, 64} {
					rows := make([][]float32, cnt)
					for j := range rows {
						rows[j] = randF32(rng, sh.n)
					}
					byRow := kvRowsOf(typ, rows, 0)
					byRow.Off = sh.off
					byCol := kvColsOf(typ, rows, cnt+5)
					byCol.Off = sh.off
					what := fmt.Sprintf("%d: rows of %d, head at %d of %d, %d rows", typ, sh.n, sh.off, sh.w, cnt)
					const ld = 70
					want, got := make([]float32, sh.w*ld), make([]float32, sh.w*ld)
					KTile(want, ld, &byRow, sh.w, cnt)
					KTile(got, ld, &byCol, sh.w, cnt)
					sameBits(t, "KTile "+what, got, want)
					vld := sh.w + 6
					want, got = make([]float32, cnt*vld), make([]float32, cnt*vld)
					VTile(want, vld, &byRow, sh.w, cnt)
					VTile(got, vld, &byCol, sh.w, cnt)
					sameBits(t, "VTile "+what, got, want)
					if sh.w == 64 && FlashAccumKV(make([]float32, 4*64), 64, make([]float32, 4*cnt), cnt, &byCol, 4, cnt, 64) {
						t.Fatalf("FlashAccumKV took rows by column")
					}
				}
			}
		}
	})
	if !KeysByColumn(KVF16) || KeysByColumn(KVF32) || KeysByColumn(KVQ4_0) {
		t.Fatal("KeysByColumn: f16 always, f32 and q4_0 never")
	}
}

// hasKVKernels reports whether path has the kernels that read f16 and
// q8_0 cache rows in place (FlashTileKV, FlashAccumKV): the avx512 paths,
// and the avx2 ones with F16C.
func hasKVKernels(path string) bool {
	return path == "avx512" || path == "avx512bw" || (path == "avx2" || path == "avxvnni") && cpu.X86.HasF16C
}

// hasAccumKV reports whether path has FlashAccumKV's kernels: those with
// the others of hasKVKernels, and the neon paths.
func hasAccumKV(path string) bool {
	return hasKVKernels(path) || runtime.GOARCH == "arm64" && pathIndex(path) >= pathIndex("neon")
}

// The paths that hasKVKernels names keep q8_0 keys by column and have
// FlashTileKV for every pairing of f16 and q8_0 keys and values (the
// generator's flashKVs table); the others keep q8_0 keys by row. A path
// that lost its kernels would still give the right bits, the Go ones.
func TestKVKernelsOfPaths(t *testing.T) {
	eachPath(t, func(t *testing.T, path string) {
		want := hasKVKernels(path)
		if got := KeysByColumn(KVQ8_0); got != want {
			t.Errorf("KeysByColumn(q8_0) = %v, want %v", got, want)
		}
		for _, kt := range []KVType{KVF16, KVQ8_0} {
			for _, vt := range []KVType{KVF16, KVQ8_0} {
				if got := flashNow.tile[kt][vt] != nil; got != want {
					t.Errorf("FlashTileKV of %v keys and %v values: %v, want %v", kt, vt, got, want)
				}
			}
			if got := accumKVNow[kt] != nil; got != hasAccumKV(path) {
				t.Errorf("FlashAccumKV of %v values: %v, want %v", kt, got, hasAccumKV(path))
			}
		}
	})
}

// FlashTileKV gives the bits of the calls it stands for (KTile, FlashScores,
// FlashSoftmax, FlashAccumKV) where the path has it, for keys and values
// of f16 and q8_0, from any state (a first tile, m growing, m staying),
// and refuses what is not its own.
func TestFlashTileKV(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const hd, ldq, ldo, bs = 64, 80, 72, 32
	eachPath(t, func(t *testing.T, path string) {
		took := 0
		for trial := range 24 {
			kty, vty := []KVType{KVF16, KVQ8_0}[trial/3%2], []KVType{KVF16, KVQ8_0}[trial/6%2]
			var k, v [2]KVRows
			for h := range 2 {
				rows := make([][]float32, bs)
				for j := range rows {
					rows[j] = randF32(rng, 256)
					for i := range rows[j] {
						rows[j][i] *= float32(1 + trial%3)
					}
				}
				k[h] = kvColsOf(kty, rows, bs)
				k[h].Off = 128
				v[h] = kvRowsOf(vty, rows, 0)
				v[h].Off = 64
			}
			q := randF32(rng, 3*ldq+hd)
			m0, l0, o0 := make([]float32, 4), make([]float32, 4), randF32(rng, 3*ldo+hd)
			for i := range m0 {
				switch trial % 3 {
				case 0:
					m0[i], l0[i] = float32(math.Inf(-1)), 0
					clear(o0)
				case 1:
					m0[i], l0[i] = -20, 3 // the tile's max is above
				default:
					m0[i], l0[i] = 20, 3 // it is not
				}
			}
			m, l, o := slices.Clone(m0), slices.Clone(l0), slices.Clone(o0)
			s := make([]float32, 4*FlashTile)
			if !FlashTileKV(s, q, ldq, &k, &v, &k, &v, hd, m, l, o, ldo, 0.125) {
				continue
			}
			took++
			wm, wl, wo := slices.Clone(m0), slices.Clone(l0), slices.Clone(o0)
			kt, ws := make([]float32, hd*FlashTile), make([]float32, 4*FlashTile)
			KTile(kt, FlashTile, &k[0], hd, bs)
			KTile(kt[bs:], FlashTile, &k[1], hd, bs)
			FlashScores(ws, q, ldq, kt, 4, FlashTile, hd, 0.125)
			FlashSoftmax(ws, 4, wm, wl, wo, ldo, hd)
			for h := range 2 {
				if !FlashAccumKV(wo, ldo, ws[h*bs:], FlashTile, &v[h], 4, bs, hd) {
					vt := make([]float32, bs*hd)
					VTile(vt, hd, &v[h], hd, bs)
					FlashAccum(wo, ldo, ws[h*bs:], vt, 4, bs, hd)
				}
			}
			what := fmt.Sprintf("trial %d, keys %d, values %d", trial, kty, vty)
			sameBits(t, "s "+what, s, ws)
			sameBits(t, "m "+what, m, wm)
			sameBits(t, "l "+what, l, wl)
			sameBits(t, "o "+what, o, wo)
		}
		want := 0 // tiles the path has the kernel for: every pairing where it has them
		if hasKVKernels(path) {
			want = 24
		}
		if took != want {
			t.Fatalf("took %d of 24 tiles, want %d", took, want)
		}
		// not its own: keys by row, a head of 128
		var k, v [2]KVRows
		rows := make([][]float32, bs)
		for j := range rows {
			rows[j] = randF32(rng, 256)
		}
		k[0], k[1], v[0], v[1] = kvRowsOf(KVF16, rows, 0), kvRowsOf(KVF16, rows, 0), kvRowsOf(KVF16, rows, 0), kvRowsOf(KVF16, rows, 0)
		if FlashTileKV(make([]float32, 4*FlashTile), make([]float32, 4*ldq), ldq, &k, &v, &k, &v, hd, make([]float32, 4), make([]float32, 4), make([]float32, 4*ldo), ldo, 1) {
			t.Fatal("took keys stored by row")
		}
		// rows one word short of the head's: refused with an index out of
		// range, never read past
		for _, typ := range []KVType{KVF16, KVQ8_0} {
			for cut := range 4 {
				for h := range 2 {
					k[h], v[h] = kvColsOf(typ, rows, bs), kvRowsOf(typ, rows, 0)
					k[h].Off, v[h].Off = 192, 192
				}
				pk, pv := k, v
				switch r := [...]*KVRows{&k[1], &v[1], &pk[1], &pv[1]}[cut]; r.Col {
				case true:
					r.W = r.W[:(typ.Words(256)-1)*bs+bs-1]
				default:
					r.W = r.W[:(bs-1)*r.Stride+typ.Words(256)-1]
				}
				e, ok := outOfRange(func() {
					FlashTileKV(make([]float32, 4*FlashTile), make([]float32, 4*ldq), ldq, &k, &v, &pk, &pv, hd, make([]float32, 4), make([]float32, 4), make([]float32, 4*ldo), ldo, 1)
				})
				if flashNow.tile[typ][typ] != nil && !ok {
					t.Errorf("%v, cut %d: %v, want an index out of range", typ, cut, e)
				}
			}
		}
	})
}

// BenchmarkFlashTileKV: one tile step of four query rows of a head of 64
// from L1, keys by column and values by row of each type pair (where the
// path has the kernel), against the calls it stands for.
func BenchmarkFlashTileKV(b *testing.B) {
	rng := rand.New(rand.NewPCG(15, 16))
	const hd, bs = 64, 32
	for _, kty := range []KVType{KVF16, KVQ8_0} {
		for _, vty := range []KVType{KVF16, KVQ8_0} {
			var k, v [2]KVRows
			for h := range 2 {
				rows := make([][]float32, bs)
				for j := range rows {
					rows[j] = randF32(rng, hd)
				}
				k[h], v[h] = kvColsOf(kty, rows, bs), kvRowsOf(vty, rows, 0)
			}
			q, s := randF32(rng, 4*hd), make([]float32, 4*FlashTile)
			m, l, o := make([]float32, 4), make([]float32, 4), make([]float32, 4*hd)
			kt := make([]float32, hd*FlashTile)
			name := fmt.Sprintf("%d-%d/", kty, vty)
			b.Run(name+"FlashTileKV", func(b *testing.B) {
				if !FlashTileKV(s, q, hd, &k, &v, &k, &v, hd, m, l, o, hd, 0.125) {
					b.Skip("no kernel on this path")
				}
				for b.Loop() {
					FlashTileKV(s, q, hd, &k, &v, &k, &v, hd, m, l, o, hd, 0.125)
				}
			})
			b.Run(name+"calls", func(b *testing.B) {
				for b.Loop() {
					KTile(kt, FlashTile, &k[0], hd, bs)
					KTile(kt[bs:], FlashTile, &k[1], hd, bs)
					FlashScores(s, q, hd, kt, 4, FlashTile, hd, 0.125)
					FlashSoftmax(s, 4, m, l, o, hd, hd)
					for h := range 2 {
						FlashAccumKV(o, hd, s[h*bs:], FlashTile, &v[h], 4, bs, hd)
					}
				}
			})
		}
	}
}
