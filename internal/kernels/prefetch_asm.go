//go:build (amd64 || arm64) && !purego

package kernels

const prefetchAsm = true

// prefetchRows prefetches the cache lines of bytes [0, n) of cnt rows from
// src on, stride bytes apart (simd_prefetch_*.s).
//
//go:noescape
func prefetchRows(src *byte, stride, n, cnt int)
