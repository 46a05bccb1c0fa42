//go:build !(amd64 || arm64) || purego

package kernels

// installAccumKV: only the amd64 and arm64 paths have FlashAccumKV kernels.
func installAccumKV(string) { accumKVNow = [NumKVTypes]accumKVAsm{} }
