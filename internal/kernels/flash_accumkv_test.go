package kernels

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// FlashAccumKV gives the bits of VTile then FlashAccum over the same rows
// (the oracle), for every type and shape it takes on every path, heads at
// an offset in rows with padding between them, p's rows wider than the
// run; what it does not take it leaves alone and reports.
func TestFlashAccumKV(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 29))
	took := map[string]bool{}
	eachPath(t, func(t *testing.T, path string) {
		for typ := range NumKVTypes {
			for _, s := range []struct{ nq, cnt, vd, ldp int }{{4, 32, 64, 64}, {8, 17, 128, 64}, {4, 1, 64, 3}, {3, 16, 64, 64}, {4, 16, 80, 64}} {
				const heads = 4
				rows := make([][]float32, s.cnt)
				for j := range rows {
					rows[j] = randF32(rng, heads*s.vd)
				}
				r := kvRowsOf(typ, rows, 2*typ.Words(32))
				r.Off = s.vd // head 1
				p := randF32(rng, s.nq*s.ldp)
				ldo := s.vd + 16
				o0 := randF32(rng, s.nq*ldo)
				got := append([]float32(nil), o0...)
				ok := FlashAccumKV(got, ldo, p, s.ldp, &r, s.nq, s.cnt, s.vd)
				what := fmt.Sprintf("%v nq %d cnt %d vd %d", typ, s.nq, s.cnt, s.vd)
				if !ok {
					sameBits(t, what+" (not taken: left alone)", got, o0)
					continue
				}
				took[fmt.Sprint(path, typ)] = true
				vt := make([]float32, s.cnt*s.vd)
				VTile(vt, s.vd, &r, s.vd, s.cnt)
				pc := make([]float32, s.nq*s.cnt)
				for i := range s.nq {
					copy(pc[i*s.cnt:], p[i*s.ldp:i*s.ldp+s.cnt])
				}
				want := append([]float32(nil), o0...)
				flashAccumGo(want, ldo, pc, vt, s.nq, s.cnt, s.vd)
				sameBits(t, what, got, want)
			}
		}
	})
	// the kernels each path has: f16 and q8_0 where it has them, none
	// elsewhere
	for _, path := range cpuPaths {
		if pathMissing(path) != "" {
			continue
		}
		for _, typ := range []KVType{KVF16, KVQ8_0} {
			want := hasAccumKV(path)
			if took[fmt.Sprint(path, typ)] != want {
				t.Errorf("%s: FlashAccumKV took %v rows: %v, want %v", path, typ, took[fmt.Sprint(path, typ)], want)
			}
		}
	}
}
