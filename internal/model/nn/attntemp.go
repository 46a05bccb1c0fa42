package nn

import "math"

// AttnTemperature multiplies each token's query row, after RoPE, by
// Llama 4's attention temperature for its position (Config.AttnTempScale;
// nothing without it): 1 + scale·ln(1 + floor(pos/AttnTempFloor)), as
// llama.cpp's attention-scale input computes it. Positions below the floor
// keep their queries as they are.
func (s *Step) AttnTemperature() {
	c := s.Cfg
	if c.AttnTempScale == 0 || c.AttnTempFloor <= 0 {
		return
	}
	qd := c.QDim()
	for t := range s.T {
		f := AttnTempFactor(s.tokPos[t], c.AttnTempScale, c.AttnTempFloor)
		if f == 1 {
			continue
		}
		q := s.Q[t*qd : (t+1)*qd]
		for i := range q {
			q[i] *= f
		}
	}
}

// AttnTempFactor is the query factor of position pos (see AttnTemperature).
func AttnTempFactor(pos int, scale float64, floor int) float32 {
	return float32(1 + scale*math.Log(1+math.Floor(float64(pos)/float64(floor))))
}
