//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// The packed kernels' tables and declarations (vnniPackKernels,
// bwPackKernels, avxvnniPackKernels) are generated into gen_pack_amd64.go
// from the table in internal/gen.

// The int8 multiply-add ceilings of the packed paths (BenchmarkInt8MulCeiling).

//go:noescape
func int8MulPeakVNNI(n int)

//go:noescape
func int8MulPeakBW(n int)

//go:noescape
func int8MulPeakAVXVNNI(n int)

//go:noescape
func actSumsAVX2(qs *int8, out *int32, n, per, mul int)

func init() {
	if !cpu.X86.HasAVX2 {
		return
	}
	actSumsAsm = func(a *Act, per int, mul int32) {
		if len(a.I) == 0 {
			return
		}
		_ = a.Qs[len(a.I)*per-1]
		actSumsAVX2(&a.Qs[0], &a.I[0], len(a.I), per, int(mul))
	}
}
