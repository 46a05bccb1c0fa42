package kernels

import (
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// refDot is the oracle: dequantize the weights, dot in float64 with the
// float activations.
func refDot(w []float32, x []float32) (dot, absSum float64) {
	for i := range w {
		p := float64(w[i]) * float64(x[i])
		dot += p
		absSum += math.Abs(p)
	}
	return dot, absSum
}

// dotTolerance bounds the error a kernel may make on top of the exact
// product: activation quantization (each x moves by at most half its block
// step) for quantized types, plus float32 rounding.
func dotTolerance(t Type, w, x []float32, absSum float64) float64 {
	tol := 1e-5*absSum + 1e-6
	if t.BlockSize() == 1 {
		return tol
	}
	for b := 0; b < len(x)/32; b++ {
		var amax, wsum float64
		for i := b * 32; i < b*32+32; i++ {
			amax = max(amax, math.Abs(float64(x[i])))
			wsum += math.Abs(float64(w[i]))
		}
		tol += wsum * amax / 127 / 2
	}
	return tol
}

func prepAct(t Type, x []float32) *Act {
	a := new(Act)
	if t.BlockSize() == 1 {
		a.F = x
	} else {
		quantizeAct(x, a)
	}
	return a
}

func TestQuantizeAct(t *testing.T) {
	x := randRow(rand.New(rand.NewPCG(3, 3)), 256)
	x[40] = 0
	for i := 64; i < 96; i++ {
		x[i] = 0 // an all-zero block
	}
	a := prepAct(Q8_0, x)
	for b := 0; b < 8; b++ {
		var amax float32
		var sum int32
		for i := b * 32; i < b*32+32; i++ {
			amax = max(amax, abs32(x[i]))
			sum += int32(a.Qs[i])
		}
		if want := FP16ToFP32(FP32ToFP16(amax / 127)); a.D[b] != want {
			t.Fatalf("block %d: D = %g, want %g (amax/127 as fp16)", b, a.D[b], want)
		}
		if a.S[b] != a.D[b]*float32(sum) {
			t.Fatalf("block %d: S = %g, want %g", b, a.S[b], a.D[b]*float32(sum))
		}
		for i := b * 32; i < b*32+32; i++ {
			if a.D[b] == 0 {
				if a.Qs[i] != 0 {
					t.Fatalf("zero block: q[%d] = %d", i, a.Qs[i])
				}
				continue
			}
			// Half a step, plus up to 127 times the fp16 rounding of D.
			if e := math.Abs(float64(a.D[b])*float64(a.Qs[i]) - float64(x[i])); e > float64(a.D[b])*(0.5+127.0/2048)*1.0001 {
				t.Fatalf("element %d: %g quantized to %d*%g", i, x[i], a.Qs[i], a.D[b])
			}
		}
	}
}

// TestDotMatchesDequantized checks the pure-Go kernels and the ones in use
// (assembly where the CPU has it).
func TestDotMatchesDequantized(t *testing.T) {
	t.Run("generic", func(t *testing.T) { testDots(t, genericKernels()) })
	t.Run("installed", func(t *testing.T) { testDots(t, dotTable) })
}

func testDots(t *testing.T, table map[Type]*typeKernels) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, ty := range allTypes {
		for _, n := range []int{256, 512, 4096} {
			for trial := 0; trial < 4; trial++ {
				wf := randRow(r, n)
				x := randRow(r, n)
				wb := quantized(ty, wf)
				wd := dequantized(ty, wb, n)
				want, absSum := refDot(wd, x)
				tol := dotTolerance(ty, wd, x, absSum)
				a := prepAct(ty, x)
				got := float64(table[ty].dot(wb, a, n))
				if math.Abs(got-want) > tol {
					t.Errorf("%s n=%d: dot %g, want %g ± %g", ty, n, got, want, tol)
				}
				// dot4 must agree with dot on each of its rows.
				if d4 := table[ty].dot4; d4 != nil {
					var acts [4]*Act
					var xs [4][]float32
					for k := range acts {
						xs[k] = randRow(r, n)
						acts[k] = prepAct(ty, xs[k])
					}
					var out [4]float32
					d4(wb, &acts, n, &out)
					for k := range acts {
						want, absSum := refDot(wd, xs[k])
						tol := dotTolerance(ty, wd, xs[k], absSum)
						if math.Abs(float64(out[k])-want) > tol {
							t.Errorf("%s n=%d: dot4[%d] %g, want %g ± %g", ty, n, k, out[k], want, tol)
						}
					}
				}
			}
		}
	}
}

type testMatrix struct {
	m     *Matrix
	deq   []float32 // dequantized weights, row-major
	input []float32
	want  []float64 // reference outputs, computed on first use
	tol   []float64
}

func newTestMatrix(t testing.TB, r *rand.Rand, ty Type, rows, cols, n int) *testMatrix {
	w := randRow(r, rows*cols)
	data := quantized(ty, w)
	m, err := NewMatrix(ty, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return &testMatrix{m: m, deq: dequantized(ty, data, rows*cols), input: randRow(r, n*cols)}
}

func (tm *testMatrix) reference(n int) {
	m := tm.m
	if len(tm.want) >= n*m.Rows {
		return
	}
	tm.want = make([]float64, n*m.Rows)
	tm.tol = make([]float64, n*m.Rows)
	for i := 0; i < n; i++ {
		x := tm.input[i*m.Cols : (i+1)*m.Cols]
		for r := 0; r < m.Rows; r++ {
			w := tm.deq[r*m.Cols : (r+1)*m.Cols]
			want, absSum := refDot(w, x)
			tm.want[i*m.Rows+r] = want
			tm.tol[i*m.Rows+r] = dotTolerance(m.Type, w, x, absSum)
		}
	}
}

// check compares out with the reference, within the kernels' tolerance
// (widened when the path's packed kernels of the type round the
// activations to bfloat16).
func (tm *testMatrix) check(t *testing.T, out []float32, n int, what string) {
	t.Helper()
	pk := packTable[tm.m.Type]
	tm.checkWith(t, out, n, what, tm.m.pk != nil && pk != nil && pk.bf16)
}

// checkWith is check, bf16 saying whether the activations were rounded
// to bfloat16 (a relative error up to 2^-9 each: the tolerance grows by
// Σ|w·x|/256).
func (tm *testMatrix) checkWith(t *testing.T, out []float32, n int, what string, bf16 bool) {
	t.Helper()
	m := tm.m
	for k := 0; k < n*m.Rows; k++ {
		tol := tm.tol[k]
		if bf16 {
			w, x := tm.deq[(k%m.Rows)*m.Cols:][:m.Cols], tm.input[(k/m.Rows)*m.Cols:][:m.Cols]
			for c := range w {
				tol += math.Abs(float64(w[c])*float64(x[c])) / 256
			}
		}
		if got := float64(out[k]); math.Abs(got-tm.want[k]) > tol {
			t.Fatalf("%s %s: out[%d,%d] = %g, want %g ± %g", what, m.Type, k/m.Rows, k%m.Rows, got, tm.want[k], tol)
		}
	}
}

func TestMatMul(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	pools := map[string]*Pool{"nil": nil, "1": NewPool(1), "2": NewPool(2), "3": NewPool(3)}
	defer func() {
		for _, p := range pools {
			p.Close()
		}
	}()
	ns := []int{1, 3, 4, 5, 9, 12}
	if raceEnabled {
		ns = []int{1, 5}
	}
	for _, ty := range allTypes {
		cols := 256
		for _, rows := range []int{1, 37, 130} {
			for _, n := range ns {
				tm := newTestMatrix(t, r, ty, rows, cols, n)
				tm.reference(n)
				for name, p := range pools {
					out := make([]float32, n*rows+1)
					out[n*rows] = 42 // must not be touched
					MatMul(p, out, tm.m, tm.input, n)
					tm.check(t, out, n, "pool "+name)
					if out[n*rows] != 42 {
						t.Fatalf("%s: MatMul wrote past its output", ty)
					}
				}
			}
		}
	}
}

// TestMatMulTiled uses rows large enough that a chunk spans several L2
// tiles, with n not a multiple of 4.
func TestMatMulTiled(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	p := NewPool(2)
	defer p.Close()
	rows := 300
	if raceEnabled {
		rows = 70
	}
	for _, ty := range []Type{F32, Q4_0, Q6_K} {
		// 4096 columns: 70 rows of F32 exceed one tile.
		tm := newTestMatrix(t, r, ty, rows, 4096, 7)
		tm.reference(7)
		for _, pool := range []*Pool{nil, p} { // nil: one range spanning every tile
			out := make([]float32, 7*rows)
			MatMul(pool, out, tm.m, tm.input, 7)
			tm.check(t, out, 7, "tiled")
		}
	}
}

func TestMatMulConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	p := NewPool(2)
	defer p.Close()
	tm := newTestMatrix(t, r, Q4_K, 256, 256, 5) // large enough to go parallel
	tm.reference(5)
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := 0; it < 20; it++ {
				n := 1 + (g+it)%5
				out := make([]float32, n*256)
				MatMul(p, out, tm.m, tm.input, n)
				tm.check(t, out, n, "concurrent")
			}
		}()
	}
	wg.Wait()
}

func TestMatMulAllocations(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	r := rand.New(rand.NewPCG(8, 8))
	p := NewPool(2)
	defer p.Close()
	tm := newTestMatrix(t, r, Q4_0, 256, 512, 1)
	out := make([]float32, 256)
	allocs := testing.AllocsPerRun(50, func() { MatMul(p, out, tm.m, tm.input, 1) })
	if allocs > 0.5 {
		t.Errorf("MatMul n=1 allocates %.1f times per call", allocs)
	}
}

func TestNewMatrixErrors(t *testing.T) {
	cases := []struct {
		t          Type
		rows, cols int
		bytes      int
		want       string
	}{
		{Q2_K, 1, 256, 84, "Q2_K is not supported"},
		{Type(99), 1, 32, 32, "unknown tensor type 99"},
		{Q4_0, 2, 48, 36, "not a multiple"},
		{Q4_0, 2, 64, 71, "needs 72 bytes, got 71"},
		{F32, 2, 3, 25, "needs 24 bytes, got 25"},
		{F16, 2, 0, 0, "invalid"},
	}
	for _, c := range cases {
		_, err := NewMatrix(c.t, c.rows, c.cols, make([]byte, c.bytes))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewMatrix(%s, %d, %d, %d bytes) = %v, want error containing %q", c.t, c.rows, c.cols, c.bytes, err, c.want)
		}
	}
	if _, err := NewMatrix(Q4_K, 3, 512, make([]byte, 3*288)); err != nil {
		t.Error(err)
	}
}

func TestMatrixRow(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, ty := range allTypes {
		tm := newTestMatrix(t, r, ty, 5, 256, 1)
		dst := make([]float32, 256)
		for row := 0; row < 5; row++ {
			tm.m.Row(row, dst)
			for c, v := range dst {
				if v != tm.deq[row*256+c] {
					t.Fatalf("%s row %d col %d: %g, want %g", ty, row, c, v, tm.deq[row*256+c])
				}
			}
		}
	}
}

func TestPoolFor(t *testing.T) {
	for _, threads := range []int{1, 2, 3, 8} {
		p := NewPool(threads)
		if p.Threads() != threads {
			t.Fatalf("Threads() = %d", p.Threads())
		}
		for _, n := range []int{0, 1, 2, 5, 31, 1000} {
			hits := make([]atomic.Int32, n)
			p.For(n, func(lo, hi int) {
				if lo >= hi {
					t.Errorf("empty range [%d,%d)", lo, hi)
				}
				for i := lo; i < hi; i++ {
					hits[i].Add(1)
				}
			})
			for i := range hits {
				if h := hits[i].Load(); h != 1 {
					t.Fatalf("threads=%d n=%d: index %d visited %d times", threads, n, i, h)
				}
			}
		}
		p.Close()
		p.Close() // idempotent
		ran := 0
		p.For(10, func(lo, hi int) { ran += hi - lo })
		if ran != 10 {
			t.Fatalf("For after Close covered %d of 10", ran)
		}
	}
	if NewPool(0).Threads() < 1 {
		t.Fatal("NewPool(0) has no threads")
	}
	var nilPool *Pool
	sum := 0
	nilPool.For(7, func(lo, hi int) { sum += hi - lo })
	if sum != 7 || nilPool.Threads() != 1 {
		t.Fatal("nil pool")
	}
}

func TestPoolNestedAndConcurrent(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	var total atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := 0; it < 50; it++ {
				p.For(16, func(lo, hi int) {
					// A nested loop must not deadlock.
					p.For(hi-lo, func(a, b int) { total.Add(int64(b - a)) })
				})
			}
		}()
	}
	wg.Wait()
	if got := total.Load(); got != 4*50*16 {
		t.Fatalf("covered %d, want %d", got, 4*50*16)
	}
}

// TestFloatKernelsMisaligned: weights at odd addresses (a tensor inside an
// in-memory file need not be aligned) give the same results.
func TestFloatKernelsMisaligned(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	const n = 100
	for _, ty := range []Type{F32, F16, BF16} {
		for name, table := range map[string]map[Type]*typeKernels{"generic": genericKernels(), "installed": dotTable} {
			w := quantized(ty, randRow(r, n))
			buf := make([]byte, len(w)+1)
			odd := buf[1:]
			copy(odd, w)
			var acts [4]*Act
			for k := range acts {
				acts[k] = prepAct(ty, randRow(r, n))
			}
			var want, got [4]float32
			table[ty].dot4(w, &acts, n, &want)
			table[ty].dot4(odd, &acts, n, &got)
			for k := range acts {
				d := table[ty].dot(odd, acts[k], n)
				if math.Abs(float64(got[k]-want[k])) > 1e-4 || math.Abs(float64(d-want[k])) > 1e-4 {
					t.Errorf("%s %s row %d: aligned %g, misaligned dot4 %g, dot %g", name, ty, k, want[k], got[k], d)
				}
			}
		}
	}
}

// TestPoolRunsInParallel: with two threads, two chunks run at the same time
// (each waits for the other to start).
func TestPoolRunsInParallel(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	var started sync.WaitGroup
	started.Add(2)
	done := make(chan struct{})
	go func() {
		p.For(2, func(lo, hi int) {
			started.Done()
			started.Wait()
		})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the two chunks of a 2-thread loop did not run concurrently")
	}
}

// TestMatMuls: products sharing one input give MatMul's bits, on every
// path the CPU has, whether they run as one parallel loop (one type and
// width) or one by one (mixed types), alone or on a pool.
func TestMatMuls(t *testing.T) {
	prev := Path()
	defer setPath(prev)
	p := NewPool(3)
	defer p.Close()
	for _, path := range Paths() {
		if _, err := setPath(path); err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(35, 35))
		for _, types := range [][]Type{{Q8_0, Q8_0, Q8_0}, {Q4_K, Q4_K}, {F16, F16}, {Q4_K, Q6_K, Q4_K}, {Q4_0}} {
			for _, n := range []int{1, 3, 16} {
				const cols = 512
				x := randRow(r, n*cols)
				var ps []Product
				for k, ty := range types {
					rows := []int{37, 64, 200, 16}[k]
					m, err := NewMatrix(ty, rows, cols, quantized(ty, randRow(r, rows*cols)))
					if err != nil {
						t.Fatal(err)
					}
					ps = append(ps, Product{Out: make([]float32, n*rows), M: m})
				}
				for _, pool := range []*Pool{nil, p} {
					MatMuls(pool, x, n, ps...)
					for k, q := range ps {
						want := make([]float32, len(q.Out))
						MatMul(pool, want, q.M, x, n)
						for i := range want {
							if q.Out[i] != want[i] {
								t.Fatalf("path %s %v n=%d product %d: out[%d] = %g, MatMul %g", path, types, n, k, i, q.Out[i], want[i])
							}
						}
						clear(q.Out)
					}
				}
			}
		}
	}
	t.Logf("paths: %v", Paths())
}
