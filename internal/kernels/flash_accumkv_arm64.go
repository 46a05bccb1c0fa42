//go:build arm64 && !purego

package kernels

//go:noescape
func accumKVF16NEON(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)

//go:noescape
func accumKVQ8NEON(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)

// installAccumKV installs the FlashAccumKV kernels of path name: f16 and
// q8_0 on the neon paths (simd_accumkv_arm64.s; dotprod and i8mm run
// neon's).
func installAccumKV(name string) {
	accumKVNow = [NumKVTypes]accumKVAsm{}
	if pathIndex(name) >= pathIndex("neon") {
		accumKVNow[KVF16], accumKVNow[KVQ8_0] = accumKVF16NEON, accumKVQ8NEON
	}
}
