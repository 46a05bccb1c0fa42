package nn

import (
	"math"
	"testing"
)

func TestRopeAngles(t *testing.T) {
	base := Config{RopeDim: 16, RopeBase: 10000, RopeScaling: "none", RopeScale: 1, RopeOrigCtx: 4096}
	theta := func(r *Rope, pos, i int) float64 {
		cos, sin := make([]float32, 8), make([]float32, 8)
		r.Angles(pos, cos, sin)
		return math.Atan2(float64(sin[i]), float64(cos[i]))
	}
	mag := func(r *Rope, pos, i int) float64 {
		cos, sin := make([]float32, 8), make([]float32, 8)
		r.Angles(pos, cos, sin)
		return math.Hypot(float64(cos[i]), float64(sin[i]))
	}
	want := func(pos, i int, div float64) float64 {
		th := float64(pos) * math.Pow(10000, -2*float64(i)/16) / div
		return math.Atan2(math.Sin(th), math.Cos(th))
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-5 {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}

	r := NewRope(base.Rope(nil))
	near("none", theta(r, 3, 2), want(3, 2, 1))

	lin := base
	lin.RopeScaling, lin.RopeScale = "linear", 4
	r = NewRope(lin.Rope(nil))
	near("linear", theta(r, 7, 1), want(7, 1, 4))

	factors := []float32{1, 1, 2, 2, 4, 4, 8, 8}
	r = NewRope(base.Rope(factors))
	near("rope_freqs", theta(r, 5, 4), want(5, 4, 4))

	// yarn: the fastest pairs keep their frequency, the slowest are
	// interpolated; cos/sin are scaled by 1 + 0.1 ln(factor).
	y := base
	y.RopeScaling, y.RopeScale = "yarn", 4
	r = NewRope(y.Rope(nil))
	near("yarn fast pair", theta(r, 2, 0), want(2, 0, 1))
	near("yarn slow pair", theta(r, 2, 7), want(2, 7, 4))
	near("yarn mscale", mag(r, 2, 3), 1+0.1*math.Log(4))
}

func TestRopePairing(t *testing.T) {
	cos, sin := []float32{0, 1}, []float32{1, 0} // pair 0 rotated by 90°, pair 1 unchanged
	x := []float32{1, 2, 3, 4}
	r := &Rope{dim: 4}
	r.Apply(x, 4, cos, sin)
	if x[0] != -2 || x[1] != 1 || x[2] != 3 || x[3] != 4 {
		t.Errorf("normal pairing: %v", x)
	}
	x = []float32{1, 2, 3, 4}
	r.neox = true
	r.Apply(x, 4, cos, sin)
	if x[0] != -3 || x[2] != 1 || x[1] != 2 || x[3] != 4 {
		t.Errorf("neox pairing: %v", x)
	}
}
