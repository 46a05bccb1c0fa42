//go:build !amd64 || purego

package kernels

// installAccumKV: only the avx512 paths have FlashAccumKV kernels.
func installAccumKV(string) { accumKVNow = [NumKVTypes]accumKVAsm{} }
