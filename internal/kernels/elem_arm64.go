//go:build arm64 && !purego

package kernels

//go:noescape
func hadamardNEON(x *float32, runs, n int, scale float32)

// hadamardAsm is hadamardSIMD's kernel (a block of 64 in sixteen registers).
var hadamardAsm = hadamardNEON
