//go:build amd64 && !purego

package kernels

// installAccumKV installs the FlashAccumKV kernels of path name: the avx512
// paths' (AVX-512F and F16C) or the avx2 ones' (with F16C), as the
// generator's table lists them.
func installAccumKV(name string) {
	accumKVNow = [NumKVTypes]accumKVAsm{}
	switch name {
	case "avx512", "avx512bw":
		accumKVNow = avx512FlashKV().accum
	case "avx2", "avxvnni":
		accumKVNow = avx2FlashKV().accum
	}
}
