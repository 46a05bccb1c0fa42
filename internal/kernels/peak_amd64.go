//go:build amd64 && !purego

package kernels

//go:noescape
func fmaPeakAVX2(n int)

//go:noescape
func fmaPeakAVX512(n int)

// fmaPeak runs n rounds of the float multiply-add ceiling loop of the path
// in use and returns the multiply-adds of a round (0: no loop).
func fmaPeak(n int) int {
	switch Path() {
	case "avx512", "avx512bw":
		fmaPeakAVX512(n)
		return 128
	case "avx2", "avxvnni":
		fmaPeakAVX2(n)
		return 64
	}
	return 0
}
