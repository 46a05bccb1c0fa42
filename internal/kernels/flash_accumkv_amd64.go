//go:build amd64 && !purego

package kernels

//go:noescape
func accumKVF16AVX512(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)

//go:noescape
func accumKVQ8AVX512(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)

// installAccumKV installs the FlashAccumKV kernels of path name: the
// avx512 paths' (AVX-512F and F16C).
func installAccumKV(name string) {
	accumKVNow = [NumKVTypes]accumKVAsm{}
	if name == "avx512" || name == "avx512bw" {
		accumKVNow[KVF16], accumKVNow[KVQ8_0] = accumKVF16AVX512, accumKVQ8AVX512
	}
}
