//go:build !(amd64 || arm64) || purego

package kernels

// No assembly Hadamard here: elem.go's Go loop runs.
func hadamardSIMD(x []float32, n int, scale float32) bool { return false }
