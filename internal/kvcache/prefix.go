package kvcache

import (
	"slices"
)

// PrefixStore is the non-paged prefix cache (mistral.rs's PrefixCacheManagerV2):
// the caches of the last N finished sequences, keyed by their salt (State.Salt)
// and tokens. A new sequence starts from a copy of the longest prefix it
// shares with one of them of the same salt.
type PrefixStore struct {
	n       int
	entries []prefixEntry // oldest first
}

type prefixEntry struct {
	salt   string
	tokens []int32
	cache  *ContiguousCache
}

// NewPrefixStore keeps at most n caches (n <= 0: the store is off).
func NewPrefixStore(n int) *PrefixStore { return &PrefixStore{n: max(n, 0)} }

// Len is the number of stored caches.
func (s *PrefixStore) Len() int { return len(s.entries) }

// Add stores the cache of a finished sequence of salt whose first
// cache.Len() tokens are tokens, and evicts the oldest entries beyond the
// limit. It returns the number evicted.
func (s *PrefixStore) Add(salt string, tokens []int32, cache *ContiguousCache) (evicted int) {
	if s.n == 0 || cache.Len() == 0 {
		return 0
	}
	tokens = slices.Clone(tokens[:min(len(tokens), cache.Len())])
	s.entries = append(s.entries, prefixEntry{salt: salt, tokens: tokens, cache: cache})
	if over := len(s.entries) - s.n; over > 0 {
		clear(s.entries[:over])
		s.entries = append(s.entries[:0], s.entries[over:]...)
		evicted = over
	}
	return evicted
}

// Clear drops every entry and returns how many there were.
func (s *PrefixStore) Clear() int {
	n := len(s.entries)
	clear(s.entries)
	s.entries = s.entries[:0]
	return n
}

// Match returns the stored cache of salt sharing the longest prefix with
// tokens, limited to limit positions, and that length (0, nil: no match).
func (s *PrefixStore) Match(salt string, tokens []int32, limit int) (*ContiguousCache, int) {
	var best *ContiguousCache
	bestN := 0
	for i := len(s.entries) - 1; i >= 0; i-- { // newest first wins ties
		e := &s.entries[i]
		if e.salt != salt {
			continue
		}
		n := commonPrefix(e.tokens, tokens, limit)
		if n > bestN {
			best, bestN = e.cache, n
		}
	}
	return best, bestN
}

func commonPrefix(a, b []int32, limit int) int {
	n := min(len(a), len(b), limit)
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// CopyPrefix fills dst (empty) with the first n positions of src (both
// caches of one model, of either storage type: halves convert exactly).
func CopyPrefix(dst, src Cache, sh Shape, n int) error {
	layers, kdim, vdim := sh.Layers, sh.KDim, sh.VDim
	if err := dst.Extend(n); err != nil {
		return err
	}
	kb, vb := make([]float32, kdim), make([]float32, vdim) // rows converted from other types
	for l := range layers {
		for pos := 0; pos < n; {
			sp := src.Span(l, pos)
			cnt := min(sp.N, n-pos)
			for j := range cnt {
				if sp.K == nil || sp.V == nil {
					sp.KeyRows(kb, kdim, j, 1, 0, kdim)
					sp.ValueRows(vb, vdim, j, 1, 0, vdim)
					dst.Put(l, pos+j, kb, vb)
				} else {
					dst.Put(l, pos+j, sp.K[j*kdim:(j+1)*kdim], sp.V[j*vdim:(j+1)*vdim])
				}
			}
			pos += cnt
		}
	}
	return nil
}
