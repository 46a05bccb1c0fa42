package nn

import "mistralrs/internal/kernels"

// Rotated caches. llama.cpp, before a quantized KV cache (q8_0, q4_0) and
// by default, multiplies each head's keys and queries by an orthonormal
// Walsh-Hadamard matrix H (of the largest power of two dividing the head
// dim, at least 64), and each head's values by a 64×64 one, then the
// attention output by the same H again (H·H = I, so the output is what it
// would be unrotated). Scores do not change: (Hq)·(Hk) = q·k. What changes
// is what the cache quantizes: an outlier channel, which would set the
// scale of its block of 32 and flatten the other 31 values to a few
// levels, is spread over the whole head first. A cache that stores rows
// rotated says so (kvcache.Seq.Rotated); PositionQK rotates what it stores
// and the queries, Attention rotates its output back.

// rotatedCache is a cache whose rows are stored rotated.
type rotatedCache interface{ Rotated() (k, v bool) }

// rotation returns the sizes of the Hadamard blocks of the keys and of
// the values of batch sequence i (0: not rotated): llama.cpp's, whose
// rule asks for head dims that are multiples of 64.
func (s *Step) rotation(i int) (nk, nv int) {
	rc, ok := s.b.Seqs[i].Cache.(rotatedCache)
	if !ok {
		return 0, 0
	}
	k, v := rc.Rotated()
	c := s.Cfg
	if k && c.HeadDim%64 == 0 {
		nk = c.HeadDim & -c.HeadDim // the largest power of two dividing it
	}
	if v && c.ValueDim%64 == 0 {
		nv = 64
	}
	return nk, nv
}

// unrotate rotates the attention output of the tokens whose values are
// stored rotated back (PositionQK recorded their block size in vrot;
// Prepare empties it, for callers that fill the caches themselves).
func (s *Step) unrotate() {
	w := s.Cfg.ODim()
	for t, n := range s.vrot {
		if n > 0 {
			kernels.Hadamard(s.Att[t*w:(t+1)*w], n)
		}
	}
}
