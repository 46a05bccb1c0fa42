//go:build linux

package kernels

import "golang.org/x/sys/unix"

// hugePages advises the kernel to back b with transparent huge pages
// (THP in "madvise" mode, the usual default, does so only where asked).
// It is advice: where the kernel refuses, b keeps its small pages.
func hugePages(b []byte) {
	if len(b) > 0 {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	}
}
