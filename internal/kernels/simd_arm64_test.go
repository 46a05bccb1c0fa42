//go:build arm64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The checks of the arm64 paths (simd_test.go has those of both
// architectures' kernels, with its helpers).

// TestNEONPeak runs the int8 ceiling loop of BenchmarkInt8MulCeiling once
// per path: it reports its multiply-adds on the neon path, none on the
// generic one.
func TestNEONPeak(t *testing.T) {
	for _, name := range cpuPaths {
		if pathMissing(name) != "" {
			continue
		}
		prev, err := setPath(name)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{"generic": 0, "neon": 128, "dotprod": 256, "i8mm": 512}[name]
		if got := int8MulPeak(3); got != want {
			t.Errorf("path %s: int8MulPeak = %d multiply-adds a round, want %d", name, got, want)
		}
		if _, err := setPath(prev); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNEONPathsAgree checks the arm64 paths' kernels against each other
// bit for bit: the dotprod and i8mm kernels form the same exact integer
// sums as the neon ones and then run the same float operations, so that a
// model gives the same bits on any path. Within a path, dot4's output for
// input k is dot's for that input (which is what makes batches invariant).
// Odd row counts (the i8mm kernels take rows in pairs), one row, and short
// rows (one block or super-block) included; the outputs are a row longer
// than rows apart, and what lies between them must stay as it was.
func TestNEONPathsAgree(t *testing.T) {
	var paths []string
	for _, name := range cpuPaths[1:] {
		if why := pathMissing(name); why != "" {
			t.Logf("path %s skipped: %s", name, why)
			continue
		}
		paths = append(paths, name)
	}
	rng := rand.New(rand.NewPCG(53, 54))
	for typ := range pathKernels["neon"] {
		t.Run(typ.String(), func(t *testing.T) {
			for _, n := range simdLengths(typ)[:4] {
				rb := typ.RowSize(n)
				var acts [4]*Act
				for k := range acts {
					acts[k] = simdRandAct(n, rng)
				}
				for _, rows := range []int{1, 2, 3, 6} {
					w := simdRandWeights(typ, rows*n, rng)
					stride := rows + 1
					var first []float32
					for _, name := range paths {
						k := pathKernels[name][typ]
						out := make([]float32, 4*stride)
						for j := range acts {
							out[j*stride+rows] = -7 // the gap
						}
						k.dot4Rows(w, rows, &acts, n, out, stride)
						for j := range acts {
							if out[j*stride+rows] != -7 {
								t.Fatalf("%s n=%d rows=%d: dot4Rows wrote %g after input %d's outputs", name, n, rows, out[j*stride+rows], j)
							}
						}
						for r := 0; r < rows; r++ {
							for j := range acts {
								one := k.dot(w[r*rb:(r+1)*rb], acts[j], n)
								if math.Float32bits(one) != math.Float32bits(out[j*stride+r]) {
									t.Fatalf("%s n=%d rows=%d row %d input %d: dot %g, dot4Rows %g", name, n, rows, r, j, one, out[j*stride+r])
								}
							}
						}
						if first == nil {
							first = out
							continue
						}
						for i := range out {
							if math.Float32bits(out[i]) != math.Float32bits(first[i]) {
								t.Fatalf("n=%d rows=%d output %d: %s %g, %s %g", n, rows, i, paths[0], first[i], name, out[i])
							}
						}
					}
				}
			}
		})
	}
	t.Logf("paths compared: %v", paths)
}

// TestI8MMPairs checks the i8mm path's pair kernels (SMMLA: two weight
// rows × two activation rows; Q4_K, Q5_K, Q6_K and the 32-element block
// types) against the dotprod ones bit for bit, on row counts odd and even
// (an odd last row runs the dotprod kernel), several row lengths, an
// output stride with a gap that must stay as it was, and through MatMul on
// token counts that mix its four-input and one-input kernels.
func TestI8MMPairs(t *testing.T) {
	if why := pathMissing("i8mm"); why != "" {
		t.Skipf("path i8mm: %s", why)
	}
	rng := rand.New(rand.NewPCG(55, 56))
	mm, dp := pathKernels["i8mm"], pathKernels["dotprod"]
	for typ := range i8mmKernels() {
		t.Run(typ.String(), func(t *testing.T) {
			for _, n := range []int{256, 512, 768, 1024, 2304} {
				var acts [4]*Act
				for k := range acts {
					acts[k] = simdRandAct(n, rng)
				}
				for _, rows := range []int{1, 2, 3, 4, 5, 7, 10} {
					w := simdRandWeights(typ, rows*n, rng)
					stride := rows + 3
					got, want := make([]float32, 4*stride), make([]float32, 4*stride)
					for i := range got {
						got[i], want[i] = -7, -7
					}
					mm[typ].dot4Rows(w, rows, &acts, n, got, stride)
					dp[typ].dot4Rows(w, rows, &acts, n, want, stride)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("n=%d rows=%d: output %d (input %d, row %d) is %g on i8mm, %g on dotprod", n, rows, i, i/stride, i%stride, got[i], want[i])
						}
					}
				}
			}
			const rows, cols = 9, 768
			m, err := NewMatrix(typ, rows, cols, simdRandWeights(typ, rows*cols, rng))
			if err != nil {
				t.Fatal(err)
			}
			for _, tokens := range []int{1, 2, 3, 4, 5, 7, 8, 13} {
				x := make([]float32, tokens*cols)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				var outs [2][]float32
				for i, name := range []string{"dotprod", "i8mm"} {
					prev, err := setPath(name)
					if err != nil {
						t.Fatal(err)
					}
					outs[i] = make([]float32, tokens*rows)
					MatMul(nil, outs[i], m, x, tokens)
					if _, err := setPath(prev); err != nil {
						t.Fatal(err)
					}
				}
				for i := range outs[0] {
					if math.Float32bits(outs[0][i]) != math.Float32bits(outs[1][i]) {
						t.Fatalf("MatMul of %d tokens: output %d is %g on i8mm, %g on dotprod", tokens, i, outs[1][i], outs[0][i])
					}
				}
			}
		})
	}
}
