//go:build !(amd64 || arm64) || purego

package kernels

const prefetchAsm = false

func prefetchRows(src *byte, stride, n, cnt int) {}
