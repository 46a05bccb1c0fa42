package kernels

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// Benchmarks build their data on first use so that plain `go test` stays
// fast. Weight matrices are 4096x4096; the matrix-matrix case uses 1024
// rows (n=64 in pure Go is slow enough as it is). GB/s counts weight bytes
// read once per call, tok/s counts input rows per second.

var (
	benchMu       sync.Mutex
	benchMatrices = map[string]*Matrix{}
)

// benchMatrix returns a rows x cols matrix of t. Quantizing 16M values with
// the reference K-quantizers takes seconds, so 64 distinct rows are
// quantized and repeated: the memory traffic is the same.
func benchMatrix(t Type, rows, cols int) *Matrix {
	benchMu.Lock()
	defer benchMu.Unlock()
	// Packed on the path in use, in its layout (packKernels.inter).
	key := fmt.Sprintf("%s/%dx%d/%v/%v", t, rows, cols, packTable[t] != nil, packTable[t] != nil && packTable[t].inter)
	if m := benchMatrices[key]; m != nil {
		return m
	}
	r := rand.New(rand.NewPCG(10, 10))
	const distinct = 64
	rb := t.RowSize(cols)
	seed := quantized(t, randRow(r, distinct*cols))
	data := make([]byte, rows*rb)
	for i := 0; i < rows; i++ {
		copy(data[i*rb:(i+1)*rb], seed[(i%distinct)*rb:])
	}
	m, err := NewMatrix(t, rows, cols, data)
	if err != nil {
		panic(err)
	}
	benchMatrices[key] = m
	return m
}

func benchMatMul(b *testing.B, t Type, rows, cols, n, threads int) {
	m := benchMatrix(t, rows, cols)
	x := randRow(rand.New(rand.NewPCG(11, 11)), n*cols)
	out := make([]float32, n*rows)
	p := NewPool(threads)
	defer p.Close()
	MatMul(p, out, m, x, n) // warm up scratch and caches
	b.SetBytes(int64(len(m.Data)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		MatMul(p, out, m, x, n)
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(len(m.Data))*float64(b.N)/sec/1e9, "GB/s")
	b.ReportMetric(float64(n)*float64(b.N)/sec, "tok/s")
	gmac := float64(rows) * float64(cols) * float64(n) * float64(b.N) / sec / 1e9
	b.ReportMetric(gmac, "GMAC/s")
	if n > 1 {
		if c := ceiling(b, t, threads); c > 0 {
			b.ReportMetric(gmac/c, "of-ceiling")
		}
	}
}

// BenchmarkMatVec is decoding: one input row, so the speed is bound by how
// fast the weights stream from memory.
func BenchmarkMatVec(b *testing.B) {
	for _, t := range allTypes {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", t, threads), func(b *testing.B) {
				benchMatMul(b, t, 4096, 4096, 1, threads)
			})
		}
	}
}

// BenchmarkMatMul64 is prefill: 64 input rows share each pass over the
// weights, so the speed is bound by arithmetic.
func BenchmarkMatMul64(b *testing.B) {
	for _, t := range allTypes {
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", t, threads), func(b *testing.B) {
				benchMatMul(b, t, 1024, 4096, 64, threads)
			})
		}
	}
}

// BenchmarkDot is one row of 4096 against one activation row, in cache:
// the kernels' arithmetic speed without memory stalls.
func BenchmarkDot(b *testing.B) {
	for _, t := range allTypes {
		b.Run(t.String(), func(b *testing.B) {
			const n = 4096
			r := rand.New(rand.NewPCG(12, 12))
			w := quantized(t, randRow(r, n))
			a := prepAct(t, randRow(r, n))
			dot := dotTable[t].dot
			b.SetBytes(int64(len(w)))
			var s float32
			for i := 0; i < b.N; i++ {
				s += dot(w, a, n)
			}
			benchSink = s
		})
	}
}

var benchSink float32

var (
	bandwidthOnce sync.Once
	bandwidthBuf  []uint64
)

// BenchmarkMemoryReadBandwidth sums 256 MiB of uint64 with 1 and 2
// goroutines: the practical ceiling for BenchmarkMatVec's GB/s.
func BenchmarkMemoryReadBandwidth(b *testing.B) {
	bandwidthOnce.Do(func() {
		bandwidthBuf = make([]uint64, 256<<20/8)
		for i := range bandwidthBuf {
			bandwidthBuf[i] = uint64(i)
		}
	})
	buf := bandwidthBuf
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			p := NewPool(threads)
			defer p.Close()
			sums := make([]uint64, threads*8) // one cache line apart per chunk start
			var mu sync.Mutex
			b.SetBytes(int64(len(buf) * 8))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var total uint64
				p.For(threads, func(lo, hi int) {
					for c := lo; c < hi; c++ {
						part := buf[c*len(buf)/threads : (c+1)*len(buf)/threads]
						var s0, s1, s2, s3 uint64
						for j := 0; j+8 <= len(part); j += 8 {
							v := (*[8]uint64)(part[j:])
							s0 += v[0] + v[4]
							s1 += v[1] + v[5]
							s2 += v[2] + v[6]
							s3 += v[3] + v[7]
						}
						sums[c*8] = s0 + s1 + s2 + s3
						mu.Lock()
						total += sums[c*8]
						mu.Unlock()
					}
				})
				if total == 1 {
					b.Fatal("impossible sum")
				}
			}
			b.ReportMetric(float64(len(buf)*8)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

// BenchmarkInt8MulCeiling is the most int8 multiply-adds per second the
// cores can do with the instructions the quantized kernels of the path in
// use run: VPMADDUBSW then VPMADDWD (16 products per pair) on the avx2
// path, VPDPBUSD on 512-bit registers (64 products) on the avx512 path.
// It is the compute ceiling for BenchmarkMatMul64's GMAC/s, as
// MemoryReadBandwidth is for MatVec's GB/s (BenchmarkMatMul64 reports its
// ratio to it). On Zen 1 both AVX2 instructions run on one 128-bit pipe:
// 8 per cycle per core.
func BenchmarkInt8MulCeiling(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("%s/threads=%d", Path(), threads), func(b *testing.B) {
			g := int8Ceiling(b, threads, b.N)
			b.ReportMetric(g, "GMAC/s")
		})
	}
}

// BenchmarkFMACeiling is the float multiply-adds per second of the path's
// widest FMA (VFMADD231PS on 256-bit registers on avx2, 512-bit on the
// avx512 paths): the ceiling BenchmarkMatMul64 compares the float types
// with.
func BenchmarkFMACeiling(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("%s/threads=%d", Path(), threads), func(b *testing.B) {
			b.ReportMetric(peakRate(b, fmaPeak, threads, b.N), "GMAC/s")
		})
	}
}

// int8Ceiling runs the int8 ceiling loop iters times on threads threads
// and returns its GMAC/s (skipping b where the path has no loop).
func int8Ceiling(b *testing.B, threads, iters int) float64 {
	return peakRate(b, int8MulPeak, threads, iters)
}

// peakRate runs a ceiling loop (rounds of it, returning multiply-adds per
// round) iters times on threads threads and returns its GMAC/s.
func peakRate(b *testing.B, peak func(n int) int, threads, iters int) float64 {
	const rounds = 1 << 18
	macs := peak(1)
	if macs == 0 {
		b.Skip("no assembly kernels on this path")
	}
	p := NewPool(threads)
	defer p.Close()
	start := time.Now()
	for range iters {
		p.For(threads, func(lo, hi int) {
			for range hi - lo {
				peak(rounds)
			}
		})
	}
	return float64(threads) * rounds * float64(macs) * float64(iters) / time.Since(start).Seconds() / 1e9
}

var (
	ceilingMu sync.Mutex
	ceilings  = map[string]float64{}
)

// ceiling returns the GMAC/s ceiling for type t (int8 for the quantized
// types, float FMA for the others) with threads threads on the path in
// use, measured once per process.
func ceiling(b *testing.B, t Type, threads int) float64 {
	ceilingMu.Lock()
	defer ceilingMu.Unlock()
	peak, kind := int8MulPeak, "int8"
	if t.BlockSize() == 1 {
		peak, kind = fmaPeak, "fma"
	}
	key := fmt.Sprintf("%s/%s/%d", kind, Path(), threads)
	if _, ok := ceilings[key]; !ok && peak(1) > 0 {
		// The best of a few runs: a core that is still clocking up, or
		// busy elsewhere for a moment, would lower the ceiling and
		// flatter the ratio.
		for range 5 {
			ceilings[key] = max(ceilings[key], peakRate(b, peak, threads, 20))
		}
	}
	return ceilings[key]
}

// BenchmarkPoolFor is the fixed cost of one parallel loop (the model runs
// about a hundred per token).
func BenchmarkPoolFor(b *testing.B) {
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			p := NewPool(threads)
			defer p.Close()
			var sink [64]int
			fn := func(lo, hi int) { sink[lo%64] += hi - lo }
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				p.For(64, fn)
			}
		})
	}
}

// BenchmarkQuantize is the reference quantizers' speed (in-situ
// quantization at load time), in input bytes per second.
func BenchmarkQuantize(b *testing.B) {
	x := randRow(rand.New(rand.NewPCG(14, 14)), 1<<16)
	for _, t := range allTypes {
		b.Run(t.String(), func(b *testing.B) {
			dst := make([]byte, t.RowSize(len(x)))
			b.SetBytes(int64(4 * len(x)))
			for i := 0; i < b.N; i++ {
				Quantize(t, x, dst)
			}
		})
	}
}

// BenchmarkQuantizeAct is the per-call preparation of MatMul's input.
func BenchmarkQuantizeAct(b *testing.B) {
	x := randRow(rand.New(rand.NewPCG(15, 15)), 4096)
	var a Act
	b.SetBytes(int64(4 * len(x)))
	for i := 0; i < b.N; i++ {
		quantizeAct(x, &a)
	}
}
