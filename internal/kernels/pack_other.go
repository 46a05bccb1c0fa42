//go:build !linux

package kernels

// hugePages does nothing where there is no madvise(MADV_HUGEPAGE).
func hugePages([]byte) {}
