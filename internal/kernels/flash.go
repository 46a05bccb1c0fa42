package kernels

import (
	"fmt"
	"math"
)

// Flash attention's kernels: a tile of queries against a tile of keys
// (FlashScores), the softmax weights' exponentials and their sum (ExpSum),
// and the weighted sum of a tile of values (FlashAccum). Internal/model/nn
// runs the online softmax around them; the tile decoders (kvtile.go) give
// them float32 keys (transposed) and values (row-major) of every KV type.
//
// Every output element is one accumulation in a fixed order that depends
// only on the tile's shape, never on the number of queries (nq) or on
// where a query sits among them: a query's bits do not depend on how the
// queries were grouped (batch invariance). The accumulations are fused
// multiply-adds (one rounding each), in the Go oracles (fma32) as in the
// assembly, so that every path gives the oracle's bits.
//
// A path plugs in by registering its kernels under its name in
// flashPaths (from a package-level variable's initializer, so that it is
// there before the first setPath); installFlash picks, for the path in
// use, the registration of the highest path at or below it in cpuPaths.
// A nil entry means the Go oracle; the kernels are called after the
// public functions have checked the shapes.

// FlashTile is the most keys a flash tile holds (FlashScores' nk).
const FlashTile = 64

// flashKernels are one path's flash kernels; nil entries run the Go oracle.
type flashKernels struct {
	// scores is FlashScores for nq >= 1 (shapes checked).
	scores func(s, q []float32, ldq int, kt []float32, nq, nk, hd int, scale float32)
	// accum is FlashAccum for nq >= 1, vd a multiple of 16.
	accum func(o []float32, ldo int, p, v []float32, nq, nk, vd int)
	// expSum is ExpSum for len(x) a multiple of 16 (> 0).
	expSum func(x []float32, m float32) float32
	// rowMax is RowMax for len(x) a multiple of 16 (> 0).
	rowMax func(x []float32) float32
	// softmax is FlashSoftmax for nq >= 1, vd a multiple of 16; nil: the
	// Go composition of the path's RowMax, ExpSum and exp.
	softmax func(s []float32, nq int, m, l, o []float32, ldo, vd int)
	// exp is Exp (nil: the Go oracle).
	exp func(x float32) float32
	// kTile and vTile decode the first rows of r (a multiple of 16 of
	// them, w a multiple of 16) as KTile and VTile do and return how many
	// rows they did (0: none, the Go decoder does them all).
	kTile, vTile [NumKVTypes]func(dst []float32, ld int, r KVRows, w, cnt int) int
	// kColQ8 decodes the first rows of q8_0 rows by column (cnt a
	// multiple of 16, Off and w of 32) as KTile does and returns how many rows
	// it did (nil: the Go decoder).
	kColQ8 func(dst []float32, ld int, r KVRows, w, cnt int) int
	// tile is FlashTileKV for keys by column of the first type and values
	// of the second (shapes and rows checked; nil: none).
	tile [NumKVTypes][NumKVTypes]func(s, q []float32, ldq int, k, v, pk, pv *[2]KVRows, m, l, o []float32, ldo int, scale float32)
}

// flashPaths holds each path's registered flash kernels.
var flashPaths = map[string]*flashKernels{}

// flashNow is the installed path's kernels (read without a lock, as
// dotTable is: paths switch only between kernel runs).
var flashNow flashKernels

// registerFlash records path's flash kernels (from an initializer).
func registerFlash(path string, k *flashKernels) bool {
	flashPaths[path] = k
	return true
}

// installFlash installs the flash kernels for path name: those registered
// for it or, failing that, for the highest path below it. A tile decoder
// the chosen path lacks comes from the highest path below that has one (a
// path has the CPU features of the paths below it, and decoding is exact,
// so the bits are the same): avx512 has assembly for f32, f16 and q8_0
// only, and its bf16, q4_0 and f8e4m3 tiles ran in Go at a quarter of
// f16's speed before they fell back to avx2's.
func installFlash(name string) {
	flashNow = flashKernels{}
	found := false
	for i := pathIndex(name); i > 0; i-- {
		k, ok := flashPaths[cpuPaths[i]]
		if !ok {
			continue
		}
		if !found {
			flashNow, found = *k, true
			continue
		}
		for t := range k.kTile {
			if flashNow.kTile[t] == nil {
				flashNow.kTile[t] = k.kTile[t]
			}
			if flashNow.vTile[t] == nil {
				flashNow.vTile[t] = k.vTile[t]
			}
		}
	}
}

// FlashScores sets s[i*nk+j] = scale · Σ_d q[i*ldq+d]·kt[d*nk+j] for i < nq,
// j < nk: nq queries (rows ldq apart) against a tile of nk keys stored
// transposed (kt: hd rows of nk). nk is a multiple of 16 and at most
// FlashTile, hd a multiple of 16 (pad with zeros); every s[i][j] is one
// accumulation of fused multiply-adds over d = 0..hd-1 in order, then
// multiplied by scale, so its bits do not depend on nq.
func FlashScores(s, q []float32, ldq int, kt []float32, nq, nk, hd int, scale float32) {
	if nq <= 0 {
		return
	}
	if nk <= 0 || nk%16 != 0 || nk > FlashTile || hd <= 0 || hd%16 != 0 || ldq < hd {
		panic(fmt.Sprintf("kernels: FlashScores: nk %d, hd %d, ldq %d (want nk a multiple of 16 up to %d, hd a positive multiple of 16, ldq >= hd)", nk, hd, ldq, FlashTile))
	}
	_, _, _ = s[nq*nk-1], q[(nq-1)*ldq+hd-1], kt[hd*nk-1]
	if f := flashNow.scores; f != nil {
		f(s, q, ldq, kt, nq, nk, hd, scale)
		return
	}
	flashScoresGo(s, q, ldq, kt, nq, nk, hd, scale)
}

func flashScoresGo(s, q []float32, ldq int, kt []float32, nq, nk, hd int, scale float32) {
	for i := range nq {
		row := s[i*nk : (i+1)*nk]
		clear(row)
		qi := q[i*ldq : i*ldq+hd]
		for d, a := range qi {
			k := kt[d*nk : (d+1)*nk]
			for j := range row {
				row[j] = fma32(a, k[j], row[j])
			}
		}
		for j := range row {
			row[j] *= scale
		}
	}
}

// FlashAccum adds Σ_j p[i*nk+j]·v[j*vd+d] to o[i*ldo+d] for i < nq, d < vd,
// j in order 0..nk-1 (one fused multiply-add per term into the o element,
// so its bits do not depend on nq): a tile of nk values of width vd,
// row-major.
func FlashAccum(o []float32, ldo int, p, v []float32, nq, nk, vd int) {
	if nq <= 0 || nk <= 0 || vd <= 0 {
		return
	}
	if ldo < vd {
		panic(fmt.Sprintf("kernels: FlashAccum: ldo %d < vd %d", ldo, vd))
	}
	_, _, _ = o[(nq-1)*ldo+vd-1], p[nq*nk-1], v[nk*vd-1]
	if f := flashNow.accum; f != nil && vd%16 == 0 {
		f(o, ldo, p, v, nq, nk, vd)
		return
	}
	flashAccumGo(o, ldo, p, v, nq, nk, vd)
}

func flashAccumGo(o []float32, ldo int, p, v []float32, nq, nk, vd int) {
	for i := range nq {
		oi := o[i*ldo : i*ldo+vd]
		for j, a := range p[i*nk : (i+1)*nk] {
			vj := v[j*vd : (j+1)*vd]
			for d := range oi {
				oi[d] = fma32(a, vj[d], oi[d])
			}
		}
	}
}

// ExpSum sets x[j] = exp(x[j]-m) (flashExp: -Inf gives 0, NaN stays NaN)
// and returns Σ_j x[j], summed in a fixed order that depends only on
// len(x): sixteen partial sums, x[j] going to sum j%16 in order of j, then
// added pairwise (s[l] += s[l+8], then +4, +2, +1).
func ExpSum(x []float32, m float32) float32 {
	if len(x) == 0 {
		return 0
	}
	if f := flashNow.expSum; f != nil && len(x)%16 == 0 {
		return f(x, m)
	}
	return expSumGo(x, m)
}

func expSumGo(x []float32, m float32) float32 {
	var acc [16]float32
	for j, v := range x {
		e := flashExp(v - m)
		x[j] = e
		acc[j%16] += e
	}
	for w := 8; w >= 1; w /= 2 {
		for l := range w {
			acc[l] += acc[l+w]
		}
	}
	return acc[0]
}

// FlashSoftmax is the online softmax's step over one tile of FlashTile
// scores for nq rows, every entry of which the row sees: row i's scores
// s[i*FlashTile:(i+1)*FlashTile] become its weights exp(s - m[i]), where
// its running max m[i] first moves up to the row's maximum (its running
// sum l[i] and its output o[i*ldo:i*ldo+vd] are then multiplied by
// exp(old m - new m), unless the old m is -Inf: nothing was summed), and
// l[i] += the weights' sum (ExpSum's order). Row by row it is RowMax,
// Exp and ExpSum, with their bits; in one call for the tile it saves two
// calls and a scalar exp a row (prefill attention at depth: 128 rows a
// tile, each 64 scores).
func FlashSoftmax(s []float32, nq int, m, l, o []float32, ldo, vd int) {
	if nq <= 0 {
		return
	}
	if vd < 0 || ldo < vd {
		panic(fmt.Sprintf("kernels: FlashSoftmax: vd %d, ldo %d", vd, ldo))
	}
	_, _, _ = s[nq*FlashTile-1], m[nq-1], l[nq-1]
	if vd > 0 {
		_ = o[(nq-1)*ldo+vd-1]
	}
	if f := flashNow.softmax; f != nil && vd%16 == 0 {
		f(s, nq, m, l, o, ldo, vd)
		return
	}
	softmaxRows(s, nq, m, l, o, ldo, vd, RowMax, Exp, ExpSum)
}

// flashSoftmaxGo is FlashSoftmax's oracle.
func flashSoftmaxGo(s []float32, nq int, m, l, o []float32, ldo, vd int) {
	softmaxRows(s, nq, m, l, o, ldo, vd, rowMaxGo, flashExp, expSumGo)
}

// softmaxRows is FlashSoftmax row by row with the given kernels.
func softmaxRows(s []float32, nq int, m, l, o []float32, ldo, vd int,
	rowMax func([]float32) float32, exp func(float32) float32, expSum func([]float32, float32) float32) {
	for i := range nq {
		row := s[i*FlashTile : (i+1)*FlashTile]
		mt := rowMax(row)
		if mt > m[i] {
			if !math.IsInf(float64(m[i]), -1) {
				f := exp(m[i] - mt)
				l[i] *= f
				oi := o[i*ldo : i*ldo+vd]
				for d := range oi {
					oi[d] *= f
				}
			}
			m[i] = mt
		}
		l[i] += expSum(row, m[i])
	}
}

// RowMax returns the largest value of x (len(x) > 0; no NaNs): the online
// softmax's tile maximum (a maximum is exact, so any order gives its bits).
func RowMax(x []float32) float32 {
	if f := flashNow.rowMax; f != nil && len(x)%16 == 0 && len(x) > 0 {
		return f(x)
	}
	return rowMaxGo(x)
}

func rowMaxGo(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	return m
}

// Exp is ExpSum's exp of one value.
func Exp(x float32) float32 {
	if f := flashNow.exp; f != nil {
		return f(x)
	}
	return flashExp(x)
}

// flashExp is Cephes' expf (expGo's constants) in fused multiply-adds,
// the operations of the assembly on every path: n = round(x·log2 e) in
// one rounding (adding 1.5·2^23 rounds to an integer), r = x - n·ln 2 in
// two parts, e^r = 1 + r + r²·P(r) by Horner's rule to the end, times 2^n
// (n is within [-126, 127] on [expLo, expHi]: one rounding, the one
// AVX-512's VSCALEFPS makes). Within 2 ulp of exp. It takes about half
// the instructions of expGo's separate products and sums, which were a
// sixth of prefill attention's time at depth.
func flashExp(x float32) float32 {
	switch {
	case x != x:
		return x
	case x < expLo:
		return 0
	case x > expHi:
		return float32(math.Inf(1))
	}
	k := fma32(x, expLog2e, 0x1.8p23) - 0x1.8p23
	r := fma32(-k, expC1, x)
	r = fma32(-k, expC2, r)
	y := fma32(expP0, r, expP1)
	y = fma32(y, r, expP2)
	y = fma32(y, r, expP3)
	y = fma32(y, r, expP4)
	y = fma32(y, r, expP5)
	y = fma32(y, r, 1)
	y = fma32(y, r, 1)
	return y * math.Float32frombits(uint32(int32(k)+127)<<23)
}

// fma32 is a·b+c rounded once to float32 (the assembly's VFMADD231PS).
// The float64 fused multiply-add rounds a·b+c (a·b exact in float64) to 53
// bits first; rounding that to 24 bits is the single rounding except when
// it lands exactly halfway between two float32s and was rounded there:
// the exact sum's error (TwoSum) then says which way to go.
func fma32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b)) // exact: 48 bits
	cc := float64(c)
	s := float64(p + cc)
	f := float32(s)
	if float64(f) == s || math.IsInf(s, 0) {
		return f
	}
	bb := float64(s - p)
	err := float64(p-float64(s-bb)) + float64(cc-bb)
	if err == 0 {
		return f
	}
	// the other float32 neighbour of s
	o := math.Nextafter32(f, float32(math.Inf(1)))
	if float64(f) > s {
		o = math.Nextafter32(f, float32(math.Inf(-1)))
	}
	if 2*s != float64(f)+float64(o) { // not halfway: f is right
		return f
	}
	// halfway in float64, but the exact value lies on err's side
	if (err > 0) == (float64(o) > s) {
		return o
	}
	return f
}
