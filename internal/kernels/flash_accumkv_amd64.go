//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

//go:noescape
func accumKVF16AVX512(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)

//go:noescape
func accumKVQ8AVX512(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)

// installAccumKV installs the FlashAccumKV kernels of path name: f16 and
// q8_0 on the avx512 paths (AVX-512F and F16C) and on the avx2 ones (with
// F16C).
func installAccumKV(name string) {
	accumKVNow = [NumKVTypes]accumKVAsm{}
	switch {
	case name == "avx512" || name == "avx512bw":
		accumKVNow[KVF16], accumKVNow[KVQ8_0] = accumKVF16AVX512, accumKVQ8AVX512
	case (name == "avx2" || name == "avxvnni") && cpu.X86.HasF16C:
		accumKVNow[KVF16], accumKVNow[KVQ8_0] = accumKVF16AVX2, accumKVQ8AVX2
	}
}
