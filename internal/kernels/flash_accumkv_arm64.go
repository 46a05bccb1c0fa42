//go:build arm64 && !purego

package kernels

// installAccumKV installs the FlashAccumKV kernels of path name: the neon
// path's (simd_accumkv_arm64.s, as the generator's table lists them),
// which dotprod and i8mm run too.
func installAccumKV(name string) {
	accumKVNow = [NumKVTypes]accumKVAsm{}
	if pathIndex(name) >= pathIndex("neon") {
		accumKVNow = neonFlashKV().accum
	}
}
