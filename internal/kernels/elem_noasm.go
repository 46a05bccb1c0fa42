//go:build !amd64 || purego

package kernels

// No assembly element-wise kernels here: the Go loops of elem.go run.

func siluMulSIMD(g, u []float32) bool                   { return false }
func softmaxSIMD(x []float32) bool                      { return false }
func sumSqSIMD(x []float32) (float64, bool)             { return 0, false }
func mulScaleSIMD(out, in, w []float32, s float32) bool { return false }

func dotsSIMD(out, q, k []float32, stride int, scale float32) bool                { return false }
func axpysSIMD(y, w, x []float32, stride int) bool                                { return false }
func dotsF16SIMD(out, q []float32, k []uint16, stride int, scale float32) bool    { return false }
func axpysF16SIMD(y, w []float32, x []uint16, stride int) bool                    { return false }
func dots4SIMD(out, q *[4][]float32, k []float32, stride int, scale float32) bool { return false }
func axpys4SIMD(y, w *[4][]float32, x []float32, stride int) bool                 { return false }

func ropeSIMD(x []float32, hd, half int, cos, sin []float32, neox bool) bool { return false }
