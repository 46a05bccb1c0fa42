package kernels

// The per-type kernel code (dispatch tables, the assembly kernels'
// declarations and their direct callers: gen_*.go) is generated from the
// table of types × paths in internal/gen/main.go.
//go:generate go run ./internal/gen

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// Instruction-set paths. The dispatch picks the highest path that the CPU
// has and that MISTRALRS_CPU allows; each path's kernels replace the generic
// entries of dotTable (SetSIMD and setPath switch at run time, between
// kernel runs). A path needs the CPU features of the paths before it, but
// avxvnni's: AVX-512 CPUs without AVX-VNNI (Skylake-SP to Ice Lake) skip
// it.
//
// MISTRALRS_CPU caps the path (documented in docs/performance.md): generic
// runs the pure-Go kernels (the oracles of the assembly ones) everywhere.
// On amd64, avx2 runs the AVX2/FMA/F16C assembly, avxvnni that plus the
// packed-weight kernels in 256-bit registers with AVX-VNNI's VPDPBUSD
// (Alder Lake and later clients, Sierra Forest: AVX-VNNI without
// AVX-512; the avx512 path's bits), avx512 the AVX2 assembly plus the
// AVX-512 VNNI kernels over packed weights (pack.go) and the AVX-512
// attention kernels, avx512bw the same for CPUs with AVX-512 but without
// VNNI (Skylake-SP/X: VPMADDUBSW/VPMADDWD for VPDPBUSD; Q8_0 keeps the
// AVX2 kernels there). On arm64, neon runs the Advanced SIMD assembly (every ARMv8-A
// CPU has it), dotprod that with the quantized types' kernels that use the
// dot product instructions (SDOT; same results), i8mm that with four-input
// kernels that use the Int8 matrix multiply instructions (SMMLA; same
// results). MISTRALRS_NOASM=1 is the same as generic. An unknown name is
// reported on standard error and ignored.
var cpuPaths = cpuPathsOf(runtime.GOARCH)

// cpuPathsOf returns the paths of architecture goarch, lowest first; the
// index in the list is what MISTRALRS_CPU caps. Architectures without
// assembly kernels have the generic path only (so are the purego builds
// in effect: pathMissing refuses the others there).
func cpuPathsOf(goarch string) []string {
	switch goarch {
	case "amd64":
		return []string{"generic", "avx2", "avxvnni", "avx512bw", "avx512"}
	case "arm64":
		return []string{"generic", "neon", "dotprod", "i8mm"}
	}
	return []string{"generic"}
}

// pathIndex returns the index of path name in cpuPaths, -1 if none.
func pathIndex(name string) int {
	for i, p := range cpuPaths {
		if p == name {
			return i
		}
	}
	return -1
}

// cpuCapFrom returns the index in cpuPaths of the highest path the
// environment allows (getenv reads it), and an error for a name it does not
// know (the cap is then the highest path).
func cpuCapFrom(getenv func(string) string) (int, error) {
	top := len(cpuPaths) - 1
	if getenv("MISTRALRS_NOASM") != "" {
		return 0, nil
	}
	v := strings.ToLower(strings.TrimSpace(getenv("MISTRALRS_CPU")))
	if v == "" {
		return top, nil
	}
	if i := pathIndex(v); i >= 0 {
		return i, nil
	}
	return top, fmt.Errorf("kernels: MISTRALRS_CPU=%q is not one of %s; ignored", v, strings.Join(cpuPaths, ", "))
}

// cpuCap is the index of the highest path the dispatch may pick.
var cpuCap = func() int {
	c, err := cpuCapFrom(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return c
}()

// bestPath returns the highest path the CPU has within cpuCap.
func bestPath() string {
	for i := cpuCap; i > 0; i-- {
		if pathMissing(cpuPaths[i]) == "" {
			return cpuPaths[i]
		}
	}
	return cpuPaths[0]
}

// Paths returns the instruction-set paths this CPU and build can run,
// lowest first (the names MISTRALRS_CPU takes), whatever the cap: tests of
// other packages run their oracle comparisons under each.
func Paths() []string {
	var out []string
	for _, p := range cpuPaths {
		if pathMissing(p) == "" {
			out = append(out, p)
		}
	}
	return out
}
