package nn

import (
	"math"

	"mistralrs/internal/kernels"
)

// RopeParams are the settings of one rotary embedding. Models use one for
// every layer, except gemma3 whose sliding layers have their own base.
type RopeParams struct {
	Dim     int     // rotated dims per head
	Neox    bool    // pairing (x[i], x[i+dim/2]) instead of (x[2i], x[2i+1])
	Base    float64 // rope.freq_base
	Scaling string  // "none", "linear" or "yarn"
	Scale   float64 // context extension factor
	OrigCtx int     // yarn: original context length
	Factors []float32
	// yarn: the correction range in rotations (rope.scaling.yarn_beta_fast
	// and _slow; 0: llama.cpp's 32 and 1) and mscale_all_dim
	// (rope.scaling.yarn_log_multiplier; 0: none).
	BetaFast, BetaSlow, LogMul float64
}

// Rope returns the model's rotary embedding settings (factors: the
// optional rope_freqs.weight divisors).
func (c *Config) Rope(factors []float32) RopeParams {
	return RopeParams{Dim: c.RopeDim, Neox: c.RopeNeox, Base: c.RopeBase, Scaling: c.RopeScaling,
		Scale: c.RopeScale, OrigCtx: c.RopeOrigCtx, Factors: factors,
		BetaFast: c.YarnBetaFast, BetaSlow: c.YarnBetaSlow, LogMul: c.YarnLogMul}
}

// Rope holds what rotary embeddings need besides the position: one angle
// per rotated pair (pos * invFreq[i]) and the yarn blend.
type Rope struct {
	dim     int
	neox    bool
	invFreq []float64 // per pair: freqScale * base^(-2i/dim) / freqFactor[i]
	extFreq []float64 // yarn: unscaled frequencies, nil otherwise
	ramp    []float64 // yarn: per pair, weight of the unscaled frequency
	mscale  float64   // yarn: magnitude correction of cos/sin
}

// NewRope precomputes the frequencies of p.
func NewRope(p RopeParams) *Rope {
	half := p.Dim / 2
	r := &Rope{dim: p.Dim, neox: p.Neox, invFreq: make([]float64, half), mscale: 1}
	freqScale := 1.0
	if p.Scaling != "none" && p.Scaling != "" {
		freqScale = 1 / p.Scale
	}
	ext := make([]float64, half)
	for i := range half {
		f := math.Pow(p.Base, -2*float64(i)/float64(p.Dim))
		if p.Factors != nil {
			f /= float64(p.Factors[i])
		}
		ext[i] = f
		r.invFreq[i] = f * freqScale
	}
	if p.Scaling == "yarn" {
		// As ggml's rope_yarn with ext_factor 1: high frequencies keep
		// their unscaled value, low ones are interpolated, with a linear
		// ramp between the correction dims of beta_fast and beta_slow.
		corr := func(nRot float64) float64 {
			return float64(p.Dim) * math.Log(float64(p.OrigCtx)/(nRot*2*math.Pi)) / (2 * math.Log(p.Base))
		}
		fast, slow := p.BetaFast, p.BetaSlow
		if fast == 0 {
			fast = 32
		}
		if slow == 0 {
			slow = 1
		}
		lo := math.Max(0, math.Floor(corr(fast)))
		hi := math.Min(float64(p.Dim-1), math.Ceil(corr(slow)))
		r.extFreq = ext
		r.ramp = make([]float64, half)
		for i := range half {
			y := (float64(i) - lo) / math.Max(0.001, hi-lo)
			r.ramp[i] = 1 - math.Min(1, math.Max(0, y))
		}
		r.mscale = yarnMScale(p.Scale, p.LogMul)
	}
	return r
}

// yarnMScale is the magnitude yarn gives cos and sin for the extension
// factor: llama.cpp's get_mscale(factor, 1) / get_mscale(factor,
// mscale_all_dim), 1 + 0.1·ln(factor) without a log multiplier.
func yarnMScale(factor, logMul float64) float64 {
	m := func(mul float64) float64 {
		if factor <= 1 {
			return 1
		}
		return 1 + 0.1*mul*math.Log(factor)
	}
	return m(1) / m(logMul)
}

// Angles fills cos and sin (len dim/2 each) for position pos.
func (r *Rope) Angles(pos int, cos, sin []float32) {
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

// Apply rotates the first dims of each head of x (heads of size hd).
func (r *Rope) Apply(x []float32, hd int, cos, sin []float32) {
	kernels.Rope(x, hd, cos[:r.dim/2], sin[:r.dim/2], r.neox)
}
