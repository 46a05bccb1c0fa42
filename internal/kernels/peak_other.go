//go:build !amd64 || purego

package kernels

// fmaPeak has no assembly loop here.
func fmaPeak(n int) int { return 0 }
