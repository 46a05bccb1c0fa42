//go:build amd64 && !purego

package kernels

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"golang.org/x/sys/cpu"
)

// packExact lists the packed kernels that give the AVX2 kernels' bits
// (the same float operations in the same order); the others agree with
// them within rounding (Q4_K: the AVX2 kernel sums its sub-blocks in
// lanes, then across them).
var packExact = map[Type]bool{Q8_0: true, Q4_0: true, Q4_1: true, Q5_0: true, Q5_1: true}

// TestPackedMatMul checks the packed kernels of the avx512 and avxvnni
// paths on token counts that use the four-token and one-token kernels,
// rows that leave a partial group and threads that split the groups:
// against the float64 oracle (testMatrix.check), against the avx2 path's
// kernels on the file layout (the same bits where packExact says so), and
// batched against each token alone (the same bits always: a token's
// result does not depend on its batch).
func TestPackedMatMul(t *testing.T) {
	if why := pathMissing("avx2"); why != "" {
		t.Skip("path avx2:", why)
	}
	for _, path := range []string{"avx512", "avxvnni"} {
		t.Run(path, func(t *testing.T) {
			if why := pathMissing(path); why != "" {
				t.Skipf("path %s: %s", path, why)
			}
			testPackedMatMul(t, path)
		})
	}
}

func testPackedMatMul(t *testing.T, path string) {
	prev, err := setPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer setPath(prev)
	r := rand.New(rand.NewPCG(31, 31))
	p := NewPool(2)
	defer p.Close()
	table := packTable
	for ty, pk := range table {
		for _, shape := range [][2]int{{1, 32}, {15, 64}, {16, 96}, {17, 256}, {33, 800}, {130, 768}, {256, 2048}, {40, 1280}} {
			rows, cols := shape[0], shape[1]
			if cols%ty.BlockSize() != 0 {
				continue
			}
			for _, n := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 17, 64} {
				setPath(path)
				tm := newTestMatrix(t, r, ty, rows, cols, n)
				if tm.m.pk == nil {
					t.Fatalf("%s: NewMatrix on the %s path did not pack", ty, path)
				}
				tm.reference(n)
				what := fmt.Sprintf("%s %s %dx%d n=%d", path, ty, rows, cols, n)
				alone := tm.alone(n)
				for _, pool := range []*Pool{nil, p} {
					setPath(path)
					got := packedOut(n * rows)
					MatMul(pool, got, tm.m, tm.input, n)
					setPath("avx2")
					want := packedOut(n * rows)
					MatMul(pool, want, tm.m, tm.input, n)
					checkPacked(t, what, got, want, alone, packExact[ty], "avx2")
					tm.checkWith(t, got[:n*rows], n, what, pk.bf16)
				}
			}
		}
	}
}

// alone returns the matrix's outputs for each of the first n input rows
// by itself (MatMul of one token).
func (tm *testMatrix) alone(n int) []float32 {
	rows, cols := tm.m.Rows, tm.m.Cols
	out := make([]float32, n*rows)
	for i := range n {
		MatMul(nil, out[i*rows:(i+1)*rows], tm.m, tm.input[i*cols:(i+1)*cols], 1)
	}
	return out
}

// packedOut returns an output buffer of n values and 7 more set to 42: a
// padding row's output is 0, so a kernel that writes past its rows shows
// only against another value.
func packedOut(n int) []float32 {
	out := make([]float32, n+7)
	for i := n; i < len(out); i++ {
		out[i] = 42
	}
	return out
}

// checkPacked checks a packed product's outputs got (packedOut; alone are
// the same outputs token by token): the same bits as alone, the same as
// want (the product by ref) where exact, and nothing written past them.
func checkPacked(t *testing.T, what string, got, want, alone []float32, exact bool, ref string) {
	t.Helper()
	for k := range got {
		if k < len(alone) && got[k] != alone[k] {
			t.Fatalf("%s: out[%d] = %g in the batch, %g alone", what, k, got[k], alone[k])
		}
		if k >= len(alone) && got[k] != 42 {
			t.Fatalf("%s: wrote past its output (out[%d] = %g)", what, k, got[k])
		}
		if exact && got[k] != want[k] {
			t.Fatalf("%s: out[%d] = %g (packed), %g (%s)", what, k, got[k], want[k], ref)
		}
	}
}

// TestSmallBatchKernels: on the avx512 path, Q8_0 products of 2-24
// tokens go through the gemmT kernels, in passes of at most 8 tokens
// (TestPackedMatMul checks their bits against each token alone), and the
// other paths have none.
func TestSmallBatchKernels(t *testing.T) {
	if why := pathMissing("avx512"); why != "" {
		t.Skip("path avx512:", why)
	}
	prev, err := setPath("avx512")
	if err != nil {
		t.Fatal(err)
	}
	defer setPath(prev)
	for n := 0; n <= 25; n++ {
		want := 0
		if n >= 2 && n <= 24 {
			want = (n + 7) / 8
		}
		if got := (&matmulJob{n: n, pk: packTable[Q8_0]}).smallParts(); got != want {
			t.Errorf("Q8_0 with %d tokens: %d one-pass parts, want %d", n, got, want)
		}
	}
	if (&matmulJob{n: 2, pk: packTable[Q4_0]}).smallParts() != 0 {
		t.Error("Q4_0 has one-pass kernels")
	}
	for _, path := range []string{"avx512bw", "avxvnni"} {
		if pathMissing(path) == "" {
			setPath(path)
			if (&matmulJob{n: 2, pk: packTable[Q8_0]}).smallParts() != 0 {
				t.Errorf("path %s has one-pass Q8_0 kernels", path)
			}
		}
	}
}

// TestBF16Kernels: on the avx512 path with AVX512-BF16, BF16 matrices go
// through the VDPBF16PS kernels (TestPackedMatMul checks their results),
// and the activations' conversion gives bf16RNE's bits, specials included.
func TestBF16Kernels(t *testing.T) {
	if why := pathMissing("avx512"); why != "" {
		t.Skip("path avx512:", why)
	}
	if !cpu.X86.HasAVX512BF16 {
		t.Skip("the CPU lacks AVX512-BF16: BF16 keeps the FMA kernels")
	}
	prev, err := setPath("avx512")
	if err != nil {
		t.Fatal(err)
	}
	defer setPath(prev)
	if packTable[BF16] != bf16DPKernels || packTable[F16] != vnniPackKernels[F16] {
		t.Fatal("the avx512 path does not use the VDPBF16PS kernels for BF16 (only)")
	}
	if FloatActivations(BF16) || !FloatActivations(F16) || FloatActivations(Q8_0) {
		t.Error("FloatActivations: BF16 rounds its activations here, F16 does not, Q8_0 quantizes them")
	}
	setPath("avx2")
	if !FloatActivations(BF16) {
		t.Error("FloatActivations(BF16) is false on the avx2 path")
	}
	setPath("avx512")
	r := rand.New(rand.NewPCG(36, 36))
	src := make([]float32, 1000)
	for i := range src {
		src[i] = float32(r.NormFloat64() * math.Pow(2, float64(r.IntN(60)-30)))
	}
	specials := []float32{0, float32(math.Copysign(0, -1)), 1, -1, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0x00000001), math.Float32frombits(0x807fffff), math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000),
		math.Float32frombits(0x3f807fff), math.Float32frombits(0x7f7fffff), math.Float32frombits(0x00800000)}
	copy(src[100:], specials)
	got := make([]uint16, len(src))
	toBF16(got, src)
	for i, f := range src {
		if want := bf16RNE(f); got[i] != want {
			t.Fatalf("toBF16(%g = %#x) = %#x, want %#x", f, math.Float32bits(f), got[i], want)
		}
	}
	if toBF16Asm == nil {
		t.Fatal("no assembly conversion on a CPU with AVX512-BF16")
	}
}

// TestPackedAVXVNNI: the avxvnni kernels (two 8-row halves in 256-bit
// registers) give the avx512 ones' bits on the same packed matrices, for
// every type they cover and every partial last group.
func TestPackedAVXVNNI(t *testing.T) {
	for _, path := range []string{"avx512", "avxvnni"} {
		if why := pathMissing(path); why != "" {
			t.Skipf("path %s: %s (the avxvnni kernels are compared with the avx512 ones)", path, why)
		}
	}
	if len(avxvnniPackKernels) != 7 {
		t.Fatalf("%d avxvnni kernels, want the 7 quantized types but Q6_K", len(avxvnniPackKernels))
	}
	var shapes [][2]int
	for _, rows := range []int{1, 7, 8, 9, 16, 23, 24, 31, 48} {
		shapes = append(shapes, [2]int{rows, 512})
	}
	samePackedBits(t, 35, avxvnniPackKernels, "avxvnni", shapes, []int{1, 3, 4, 6, 9})
}

// samePackedBits checks that the kernels of table give vnniPackKernels'
// bits (the reference is that table itself, not the avx512 path's, whose
// BF16 entry may be the VDPBF16PS kernels) on the same matrices, packed on
// the avx512 path, of each shape (rows, cols) against each token count in
// ns; name is table's in the messages.
func samePackedBits(t *testing.T, seed uint64, table map[Type]*packKernels, name string, shapes [][2]int, ns []int) {
	t.Helper()
	prev, err := setPath("avx512")
	if err != nil {
		t.Fatal(err)
	}
	defer setPath(prev)
	r := rand.New(rand.NewPCG(seed, seed))
	p := NewPool(2)
	defer p.Close()
	for ty, k := range table {
		ref := vnniPackKernels[ty]
		if ref == nil || k.gemm4 == nil || k.gemm1 == nil || k.sumsPer != ref.sumsPer || k.sumsMul != ref.sumsMul {
			t.Fatalf("%s: the %s kernels are missing, have no avx512 twin or take other sums", ty, name)
		}
		for _, shape := range shapes {
			rows, cols := shape[0], shape[1]
			for _, n := range ns {
				packTable = vnniPackKernels
				tm := newTestMatrix(t, r, ty, rows, cols, n)
				want := make([]float32, n*rows+8)
				MatMul(p, want, tm.m, tm.input, n)
				packTable = table
				got := make([]float32, n*rows+8)
				MatMul(p, got, tm.m, tm.input, n)
				for i := range got {
					if got[i] != want[i] {
						t.Fatalf("%s %dx%d n=%d: out[%d] = %g (%s), %g (avx512)", ty, rows, cols, n, i, got[i], name, want[i])
					}
				}
			}
		}
	}
}

// TestPackedLayoutSwitch: a matrix packed for the avx512 path's
// interleaved kernels, multiplied while a table of the file order's
// kernels is in use (the path switched after the load), goes through the
// file layout's kernels: right results, never the wrong layout's.
func TestPackedLayoutSwitch(t *testing.T) {
	if why := pathMissing("avx512"); why != "" {
		t.Skip("path avx512:", why)
	}
	prev, err := setPath("avx512")
	if err != nil {
		t.Fatal(err)
	}
	defer setPath(prev)
	r := rand.New(rand.NewPCG(37, 37))
	for _, ty := range []Type{Q8_0, Q4_K, Q6_K} {
		if !packTable[ty].inter {
			t.Fatalf("%s: the avx512 path's kernels do not read the interleaved layout", ty)
		}
		for _, n := range []int{1, 5} {
			tm := newTestMatrix(t, r, ty, 40, 512, n)
			tm.reference(n)
			packTable = vnniPackKernels
			got := make([]float32, n*40)
			MatMul(nil, got, tm.m, tm.input, n)
			setPath("avx512")
			tm.checkWith(t, got, n, fmt.Sprintf("%s n=%d, file-order kernels", ty, n), false)
		}
	}
}

// TestSubRows: a view of rows keeps the packed copy when it starts on a
// group, and gives the full matrix's bits for its rows either way.
func TestSubRows(t *testing.T) {
	if why := pathMissing("avx512"); why != "" {
		t.Skip("path avx512:", why)
	}
	prev, err := setPath("avx512")
	if err != nil {
		t.Fatal(err)
	}
	defer setPath(prev)
	r := rand.New(rand.NewPCG(32, 32))
	const rows, cols, n = 75, 96, 5
	tm := newTestMatrix(t, r, Q8_0, rows, cols, n)
	full := make([]float32, n*rows)
	MatMul(nil, full, tm.m, tm.input, n)
	for _, c := range []struct {
		lo, hi int
		packed bool
	}{{0, 16, true}, {16, 75, true}, {32, 48, true}, {64, 75, true}, {3, 16, false}, {16, 40, false}, {0, 0, false}} {
		s := tm.m.SubRows(c.lo, c.hi)
		if (s.pk != nil) != c.packed {
			t.Errorf("SubRows(%d, %d): packed %v, want %v", c.lo, c.hi, s.pk != nil, c.packed)
		}
		got := make([]float32, n*s.Rows)
		MatMul(nil, got, s, tm.input, n)
		for i := 0; i < n; i++ {
			for k := 0; k < s.Rows; k++ {
				if got[i*s.Rows+k] != full[i*rows+c.lo+k] {
					t.Fatalf("SubRows(%d, %d): input %d row %d = %g, full matrix %g", c.lo, c.hi, i, k, got[i*s.Rows+k], full[i*rows+c.lo+k])
				}
			}
		}
	}
}

// TestPackedBW: the kernels without VPDPBUSD (avx512bw path) give the
// VNNI kernels' bits on the same packed matrices.
func TestPackedBW(t *testing.T) {
	if why := pathMissing("avx512"); why != "" {
		t.Skipf("path avx512: %s (the BW kernels are compared with the VNNI ones)", why)
	}
	samePackedBits(t, 33, bwPackKernels, "BW", [][2]int{{17, 256}, {40, 768}}, []int{1, 3, 4, 9})
	if bwPackKernels[Q8_0] != nil {
		t.Error("Q8_0 has a BW kernel: its w+128 pairs overflow VPMADDUBSW")
	}
}

// TestActSums: the assembly sums equal the Go ones, runs of 16 and 32,
// extreme quants included.
func TestActSums(t *testing.T) {
	r := rand.New(rand.NewPCG(34, 34))
	for _, n := range []int{32, 64, 96, 4096, 8192 + 32} {
		a := &Act{Qs: make([]int8, n)}
		for i := range a.Qs {
			a.Qs[i] = int8(r.IntN(256) - 128)
			if i%7 == 0 {
				a.Qs[i] = -128
			}
			if i%11 == 0 {
				a.Qs[i] = 127
			}
		}
		for _, c := range []struct {
			per int
			mul int32
		}{{16, 32}, {32, 128}, {16, 1}} {
			want := &Act{Qs: a.Qs, I: make([]int32, n/c.per)}
			got := &Act{Qs: a.Qs, I: make([]int32, n/c.per)}
			actSumsGo(want, c.per, c.mul)
			actSums(got, c.per, c.mul)
			for g := range want.I {
				if got.I[g] != want.I[g] {
					t.Fatalf("n=%d per=%d: sum %d = %d, want %d", n, c.per, g, got.I[g], want.I[g])
				}
			}
		}
	}
}

// BenchmarkMatVecDRAM is decoding from memory: one token through a matrix
// of 70-80 MB, twice the largest L3 cache here, packed as the path packs
// it; GB/s counts the file's bytes. cpu-GB/s divides by the process's CPU
// time instead of the wall clock (per thread), steadier on a shared
// machine where the wall clock counts the time other processes ran.
func BenchmarkMatVecDRAM(b *testing.B) {
	for _, t := range []Type{Q8_0, Q4_K, Q5_K, Q6_K} {
		cols := 2048
		if t.BlockSize() == 256 {
			cols = 4096
		}
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", t, threads), func(b *testing.B) {
				benchRowsCPU(b, t, 32768, cols, 1, threads)
			})
		}
	}
}

// BenchmarkDecodeAB runs a path's one-token kernels over two layouts,
// the old one and the new one after the other in one run: from L2 (256
// rows: the kernels' arithmetic) and from memory (BenchmarkMatVecDRAM's
// matrices). On the avx512 path Q4_K, Q6_K and Q8_0 over the interleaved
// layout (new) against the generated table's over the file order's
// groups, which the avx512bw and avxvnni paths keep (old); on the avx2
// path its packed kernels (new) against the kernels over the file's rows
// (old). BENCH_PATH picks the path (default: the CPU's best of the two).
func BenchmarkDecodeAB(b *testing.B) {
	path := os.Getenv("BENCH_PATH")
	if path == "" {
		path = "avx512"
		if pathMissing(path) != "" {
			path = "avx2"
		}
	}
	if why := pathMissing(path); why != "" {
		b.Skip("path", path, why)
	}
	prev, _ := setPath(path)
	defer setPath(prev)
	cur := packTable
	for _, t := range []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, Q8_0} {
		if cur[t] == nil || path == "avx512" && cur[t] == vnniPackKernels[t] {
			continue // not packed, or no second layout on avx512
		}
		for _, c := range []struct {
			name          string
			rows, threads int
		}{{"L2", 256, 1}, {"L2h", 96, 1}, {"DRAM", 32768, 1}, {"DRAM", 32768, 2}} {
			cols := 4096
			if c.rows > 256 && t == Q8_0 {
				cols = 2048
			}
			for _, v := range []string{"old", "new"} {
				b.Run(fmt.Sprintf("%s/%s/%s/threads=%d/%s", path, t, c.name, c.threads, v), func(b *testing.B) {
					tab := maps.Clone(cur)
					if v == "old" {
						tab[t] = nil
						if path == "avx512" {
							tab[t] = vnniPackKernels[t]
						}
					}
					packTable = tab
					defer func() { packTable = cur }()
					benchRowsCPU(b, t, c.rows, cols, 1, c.threads)
				})
			}
		}
	}
}

// BenchmarkVerifyRows is a speculative verification's product: n tokens
// (k+1 for k guesses) through a Q8_0 matrix of 71 MB. On the avx512 path
// n = 2..8 read the weights once (the gemmT kernels; more tokens in up to
// three passes, from the cache after the first): their time over
// n=1's is the verification's cost in decodes.
func BenchmarkVerifyRows(b *testing.B) {
	for _, n := range []int{1, 2, 3, 4, 5, 6, 8, 9, 12, 16} {
		b.Run(fmt.Sprintf("%s/n=%d", Path(), n), func(b *testing.B) {
			benchRowsCPU(b, Q8_0, 32768, 2048, n, 1)
		})
	}
}

// benchRowsCPU is benchMatMul with the cpu-GB/s metric.
func benchRowsCPU(b *testing.B, t Type, rows, cols, n, threads int) {
	m := benchMatrix(t, rows, cols)
	x := randRow(rand.New(rand.NewPCG(11, 11)), n*cols)
	out := make([]float32, n*rows)
	p := NewPool(threads)
	defer p.Close()
	MatMul(p, out, m, x, n)
	b.SetBytes(int64(len(m.Data)))
	b.ResetTimer()
	c0 := processCPU()
	for i := 0; i < b.N; i++ {
		MatMul(p, out, m, x, n)
	}
	cpu := processCPU() - c0
	bytes := float64(len(m.Data)) * float64(b.N)
	b.ReportMetric(bytes/b.Elapsed().Seconds()/1e9, "GB/s")
	if cpu > 0 {
		b.ReportMetric(bytes/(cpu.Seconds()/float64(threads))/1e9, "cpu-GB/s")
	}
}

// BenchmarkDecodeLayers is decoding through the products of a 1.2B
// llama's layers (Llama 3.2 1B's shapes: Q, K, V, O of 2048 wide with 8
// of 32 heads for K and V, gate and up of 8192, down), 4 layers of
// distinct matrices (145 MB of Q8_0, more than any L3 here), one token
// through each in order as a forward pass does: the weights' stream
// broken into the pieces the model reads.
func BenchmarkDecodeLayers(b *testing.B) {
	for _, t := range []Type{Q8_0, Q4_K} {
		var ms []*Matrix
		for l := range 4 {
			for _, s := range [][2]int{{2048, 2048}, {512, 2048}, {512, 2048}, {2048, 2048}, {8192, 2048}, {8192, 2048}, {2048, 8192}} {
				// Distinct shapes per layer: benchMatrix caches by shape.
				ms = append(ms, benchMatrix(t, s[0]+16*l, s[1]))
			}
		}
		bytes := 0
		for _, m := range ms {
			bytes += len(m.Data)
		}
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/threads=%d", t, threads), func(b *testing.B) {
				x := randRow(rand.New(rand.NewPCG(11, 11)), 8192)
				out := make([]float32, 8192+64)
				p := NewPool(threads)
				defer p.Close()
				pass := func() {
					for _, m := range ms {
						MatMul(p, out, m, x, 1)
					}
				}
				pass()
				b.SetBytes(int64(bytes))
				b.ResetTimer()
				c0 := processCPU()
				for i := 0; i < b.N; i++ {
					pass()
				}
				cpu := processCPU() - c0
				all := float64(bytes) * float64(b.N)
				b.ReportMetric(all/b.Elapsed().Seconds()/1e9, "GB/s")
				if cpu > 0 {
					b.ReportMetric(all/(cpu.Seconds()/float64(threads))/1e9, "cpu-GB/s")
				}
			})
		}
	}
}

// TestPackedAVX2 checks the avx2 path's kernels over packed weights
// (every quantized type, where split256 is false) on shapes with partial
// groups, token counts that use the four-token, small-batch (Q8_0) and
// one-token kernels, one thread and two: against the float64 oracle, against the path's
// kernels over the file's rows (the same bits where packExact says so),
// and batched against each token alone (the same bits).
func TestPackedAVX2(t *testing.T) {
	if why := pathMissing("avx2"); why != "" {
		t.Skip("path avx2:", why)
	}
	prev, err := setPath("avx2")
	if err != nil {
		t.Fatal(err)
	}
	defer setPath(prev)
	if len(packTable) == 0 {
		t.Skip("the avx2 path packs no weights on this CPU (split256 or no F16C)")
	}
	for _, ty := range []Type{Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K} {
		if packTable[ty] == nil {
			t.Fatalf("the avx2 path does not pack %s", ty)
		}
	}
	r := rand.New(rand.NewPCG(47, 48))
	p := NewPool(2)
	defer p.Close()
	for ty := range packTable {
		for _, shape := range [][2]int{{1, 256}, {15, 512}, {16, 768}, {17, 256}, {33, 1024}, {130, 768}, {40, 1280}} {
			rows, cols := shape[0], shape[1]
			// 2-24 tokens go through the small-batch kernels, 28 and 29
			// through the four-token one (and one one-token pass).
			for _, n := range []int{1, 2, 3, 4, 5, 8, 9, 13, 28, 29} {
				tm := newTestMatrix(t, r, ty, rows, cols, n)
				if tm.m.pk == nil {
					t.Fatalf("%s: NewMatrix on the avx2 path did not pack", ty)
				}
				fileM, err := NewLookupMatrix(ty, rows, cols, tm.m.Data)
				if err != nil {
					t.Fatal(err)
				}
				tm.reference(n)
				what := fmt.Sprintf("%s %dx%d n=%d", ty, rows, cols, n)
				alone := tm.alone(n)
				for _, pool := range []*Pool{nil, p} {
					got, want := packedOut(n*rows), packedOut(n*rows)
					MatMul(pool, got, tm.m, tm.input, n)
					MatMul(pool, want, fileM, tm.input, n)
					checkPacked(t, what, got, want, alone, packExact[ty], "the file's rows")
					tm.checkWith(t, got[:n*rows], n, what, false)
				}
			}
		}
	}
}
