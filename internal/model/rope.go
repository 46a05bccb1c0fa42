package model

import (
	"math"

	"mistralrs/internal/kernels"
)

// rope holds what rotary embeddings need besides the position: one angle
// per rotated pair (pos * invFreq[i]) and the yarn blend.
type rope struct {
	dim     int       // rotated dims per head
	neox    bool      // pairing (x[i], x[i+dim/2]) instead of (x[2i], x[2i+1])
	invFreq []float64 // per pair: freqScale * base^(-2i/dim) / freqFactor[i]
	extFreq []float64 // yarn: unscaled frequencies, nil otherwise
	ramp    []float64 // yarn: per pair, weight of the unscaled frequency
	mscale  float64   // yarn: magnitude correction of cos/sin
}

func newRope(c *Config, factors []float32) rope {
	half := c.RopeDim / 2
	r := rope{dim: c.RopeDim, neox: c.RopeNeox, invFreq: make([]float64, half), mscale: 1}
	freqScale := 1.0
	if c.RopeScaling != "none" {
		freqScale = 1 / c.RopeScale
	}
	ext := make([]float64, half)
	for i := range half {
		f := math.Pow(c.RopeBase, -2*float64(i)/float64(c.RopeDim))
		if factors != nil {
			f /= float64(factors[i])
		}
		ext[i] = f
		r.invFreq[i] = f * freqScale
	}
	if c.RopeScaling == "yarn" {
		// As ggml's rope_yarn with ext_factor 1, beta_fast 32, beta_slow 1:
		// high frequencies keep their unscaled value, low ones are
		// interpolated, with a linear ramp between the correction dims.
		corr := func(nRot float64) float64 {
			return float64(c.RopeDim) * math.Log(float64(c.RopeOrigCtx)/(nRot*2*math.Pi)) / (2 * math.Log(c.RopeBase))
		}
		lo := math.Max(0, math.Floor(corr(32)))
		hi := math.Min(float64(c.RopeDim-1), math.Ceil(corr(1)))
		r.extFreq = ext
		r.ramp = make([]float64, half)
		for i := range half {
			y := (float64(i) - lo) / math.Max(0.001, hi-lo)
			r.ramp[i] = 1 - math.Min(1, math.Max(0, y))
		}
		r.mscale = 1 + 0.1*math.Log(1/freqScale)
	}
	return r
}

// angles fills cos and sin (len dim/2 each) for position pos.
func (r *rope) angles(pos int, cos, sin []float32) {
	p := float64(pos)
	for i, f := range r.invFreq {
		theta := p * f
		if r.ramp != nil {
			theta = theta*(1-r.ramp[i]) + p*r.extFreq[i]*r.ramp[i]
		}
		s, c := math.Sincos(theta)
		cos[i] = float32(c * r.mscale)
		sin[i] = float32(s * r.mscale)
	}
}

// apply rotates the first r.dim dims of each head of x (heads of size hd).
func (r *rope) apply(x []float32, hd int, cos, sin []float32) {
	kernels.Rope(x, hd, cos[:r.dim/2], sin[:r.dim/2], r.neox)
}
