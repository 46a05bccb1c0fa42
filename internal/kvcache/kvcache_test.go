package kvcache

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"mistralrs/internal/kernels"
)

func row(n int, val float32) []float32 {
	r := make([]float32, n)
	for i := range r {
		r[i] = val + float32(i)/1000
	}
	return r
}

func TestSeqPutSpanAcrossBlocks(t *testing.T) {
	for _, f16 := range []bool{false, true} {
		t.Run(fmt.Sprintf("f16=%v", f16), func(t *testing.T) { testSeqPutSpan(t, f16) })
	}
}

// testSeqPutSpan: rows put into a paged sequence read back through spans
// (rounded to halves in an F16 pool).
func testSeqPutSpan(t *testing.T, f16 bool) {
	const layers, kd, vd, bs = 2, 3, 5, 4
	p := NewPool(Shape{Layers: layers, KDim: kd, VDim: vd}, bs, 8, f16)
	stored := func(x float32) float32 {
		if f16 {
			return kernels.FP16ToFP32(kernels.FP32ToFP16(x))
		}
		return x
	}
	// values through the span's slices (keys: KeyRows, whatever their layout)
	at := func(f32 []float32, h []uint16, i int) float32 {
		if f16 {
			return kernels.FP16ToFP32(h[i])
		}
		return f32[i]
	}
	s := p.NewSeq()
	if err := s.Extend(10); err != nil {
		t.Fatal(err)
	}
	if len(s.Blocks()) != 3 || p.Used() != 3 || p.Free() != 5 {
		t.Fatalf("blocks %v used %d free %d", s.Blocks(), p.Used(), p.Free())
	}
	for l := range layers {
		for pos := range 10 {
			s.Put(l, pos, row(kd, float32(100*l+pos)), row(vd, float32(-100*l-pos)))
		}
	}
	for l := range layers {
		for pos := 0; pos < 10; {
			sp := s.Span(l, pos)
			n := sp.N
			if n != bs-pos%bs || (sp.K16 != nil) != f16 || (sp.K != nil) == f16 {
				t.Fatalf("span at %d: %d rows, f32 %v f16 %v", pos, n, sp.K != nil, sp.K16 != nil)
			}
			if f16 && sp.KCol != bs {
				t.Fatalf("span at %d: keys by column of %d, want %d (the block's rows)", pos, sp.KCol, bs)
			}
			key := make([]float32, kd)
			for j := 0; j < n && pos+j < 10; j++ {
				sp.KeyRows(key, kd, j, 1, 0, kd)
				if got, want := key[1], stored(row(kd, float32(100*l+pos+j))[1]); got != want {
					t.Fatalf("layer %d pos %d: k %v want %v", l, pos+j, got, want)
				}
				if got, want := at(sp.V, sp.V16, j*vd+4), stored(row(vd, float32(-100*l-pos-j))[4]); got != want {
					t.Fatalf("layer %d pos %d: v %v want %v", l, pos+j, got, want)
				}
			}
			pos += n
		}
	}
	s.Truncate(5)
	if len(s.Blocks()) != 2 || p.Used() != 2 {
		t.Errorf("after truncate: blocks %v used %d", s.Blocks(), p.Used())
	}
	if err := s.Extend(40); err == nil {
		t.Error("extend past the pool succeeded")
	}
	if s.Len() != 5 || p.Used() != 2 {
		t.Errorf("failed extend changed the cache: len %d used %d", s.Len(), p.Used())
	}
	s.Release()
	if p.Used() != 0 {
		t.Errorf("used %d after release", p.Used())
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

func hashes(root Hash, tokens []int32, bs int) []Hash {
	var hs []Hash
	parent := root
	for i := 0; i+bs <= len(tokens); i += bs {
		parent = BlockHash(parent, tokens[i:i+bs])
		hs = append(hs, parent)
	}
	return hs
}

func TestPrefixHitAndLRUEviction(t *testing.T) {
	const bs = 4
	p := NewPool(Shape{Layers: 1, KDim: 2, VDim: 2}, bs, 6, false)
	root := RootHash([]byte("model-a"))
	prompt := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}
	hs := hashes(root, prompt, bs)

	a := p.NewSeq()
	if err := a.Extend(len(prompt)); err != nil {
		t.Fatal(err)
	}
	for i := range hs {
		a.Commit(i, hs[i])
	}
	if p.Cached() != 3 {
		t.Fatalf("cached %d, want 3", p.Cached())
	}
	// A second sequence shares the three full blocks while a runs.
	b := p.NewSeq()
	got := p.Match(hs)
	if len(got) != 3 || p.FreeAmong(got) != 0 {
		t.Fatalf("match %v (free among %d)", got, p.FreeAmong(got))
	}
	b.Adopt(got)
	if b.Len() != 12 || p.Refs(got[0]) != 2 || p.Used() != 4 {
		t.Fatalf("adopt: len %d refs %d used %d", b.Len(), p.Refs(got[0]), p.Used())
	}
	a.Release()
	b.Release()
	if p.Used() != 0 || p.Cached() != 3 || p.Free() != 6 {
		t.Fatalf("after release: used %d cached %d free %d", p.Used(), p.Cached(), p.Free())
	}
	// Another model's hashes never match.
	if m := p.Match(hashes(RootHash([]byte("model-b")), prompt, bs)); len(m) != 0 {
		t.Errorf("other model matched %v", m)
	}
	// Filling the pool evicts the cached blocks, the last block of the prefix first.
	c := p.NewSeq()
	if err := c.Extend(3 * bs); err != nil { // 3 uncached blocks are free first
		t.Fatal(err)
	}
	if p.Evictions() != 0 || p.Cached() != 3 {
		t.Fatalf("evictions %d cached %d before pressure", p.Evictions(), p.Cached())
	}
	if err := c.Extend(4 * bs); err != nil {
		t.Fatal(err)
	}
	if p.Evictions() != 1 || len(p.Match(hs)) != 2 {
		t.Errorf("evictions %d, match %d blocks: want the prefix's last block evicted", p.Evictions(), len(p.Match(hs)))
	}
	c.Release()
	if n, ok := p.ResetPrefixCache(); !ok || n != 2 || p.Evictions() != 3 {
		t.Errorf("reset: %d %v, evictions %d", n, ok, p.Evictions())
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

// Random sequences come, grow, share prefixes and go; the pool's invariants
// hold after every operation and nothing leaks.
func TestPoolProperty(t *testing.T) {
	const bs = 4
	rng := rand.New(rand.NewPCG(1, 2))
	p := NewPool(Shape{Layers: 1, KDim: 1, VDim: 1}, bs, 24, false)
	root := RootHash(nil)
	type live struct {
		s      *Seq
		tokens []int32
		done   int // blocks committed
	}
	var seqs []*live
	prefixes := [][]int32{{1, 2, 3, 4, 5, 6, 7, 8}, {9, 9, 9, 9}, {}}
	steps := 5000
	if testing.Short() {
		steps = 1000
	}
	for step := range steps {
		switch op := rng.IntN(10); {
		case op < 3 && len(seqs) < 8: // new sequence, maybe with a cached prefix
			tokens := append([]int32(nil), prefixes[rng.IntN(len(prefixes))]...)
			for range rng.IntN(10) + 1 {
				tokens = append(tokens, int32(rng.IntN(4)))
			}
			l := &live{s: p.NewSeq(), tokens: tokens}
			limit := (len(tokens) - 1) / bs
			hit := p.Match(hashes(root, tokens, bs)[:limit])
			if l.s.Need(len(tokens))-len(hit)+p.FreeAmong(hit) > p.Free() {
				continue
			}
			l.s.Adopt(hit)
			l.done = len(hit)
			if err := l.s.Extend(len(tokens)); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			seqs = append(seqs, l)
		case op < 7 && len(seqs) > 0: // grow one
			l := seqs[rng.IntN(len(seqs))]
			l.tokens = append(l.tokens, int32(rng.IntN(4)))
			if err := l.s.Extend(len(l.tokens)); err != nil {
				l.tokens = l.tokens[:len(l.tokens)-1]
				continue
			}
		case len(seqs) > 0: // finish or preempt one
			i := rng.IntN(len(seqs))
			seqs[i].s.Release()
			seqs = append(seqs[:i], seqs[i+1:]...)
		}
		for _, l := range seqs {
			hs := hashes(root, l.tokens[:l.s.Len()], bs)
			for ; l.done < len(hs); l.done++ {
				l.s.Commit(l.done, hs[l.done])
			}
		}
		if err := p.Check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		used := 0
		for _, l := range seqs {
			used += len(l.s.Blocks())
		}
		if p.Used() > used { // shared blocks count once
			t.Fatalf("step %d: pool uses %d blocks, sequences hold %d", step, p.Used(), used)
		}
	}
	for _, l := range seqs {
		l.s.Release()
	}
	if p.Used() != 0 || p.Free() != p.Total() {
		t.Fatalf("leak: used %d free %d of %d", p.Used(), p.Free(), p.Total())
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestPrefixStore(t *testing.T) {
	sh := Shape{Layers: 1, KDim: 2, VDim: 2}
	mk := func(n int) *ContiguousCache {
		c := NewContiguousCache(sh, 64, false)
		if err := c.Extend(n); err != nil {
			t.Fatal(err)
		}
		for pos := range n {
			c.Put(0, pos, []float32{float32(pos), 1}, []float32{2, float32(pos)})
		}
		return c
	}
	s := NewPrefixStore(2)
	if ev := s.Add("", []int32{1, 2, 3, 4}, mk(4)); ev != 0 {
		t.Fatal(ev)
	}
	s.Add("", []int32{1, 2, 9}, mk(3))
	c, n := s.Match("", []int32{1, 2, 3, 4, 5}, 4)
	if n != 4 || c == nil {
		t.Fatalf("match %d", n)
	}
	if _, n := s.Match("", []int32{1, 2, 3, 4}, 3); n != 3 {
		t.Errorf("limited match %d, want 3", n)
	}
	dst := NewContiguousCache(sh, 64, false)
	if err := CopyPrefix(dst, c, sh, 3); err != nil {
		t.Fatal(err)
	}
	if sp := dst.Span(0, 2); dst.Len() != 3 || sp.K[0] != 2 || sp.V[1] != 2 {
		t.Errorf("copied prefix: len %d k %v v %v", dst.Len(), sp.K, sp.V)
	}
	// Into an F16 cache and back: the values are exact in halves.
	half := NewContiguousCache(sh, 64, true)
	if err := CopyPrefix(half, c, sh, 3); err != nil {
		t.Fatal(err)
	}
	back := NewContiguousCache(sh, 64, false)
	if err := CopyPrefix(back, half, sh, 3); err != nil {
		t.Fatal(err)
	}
	if sp := back.Span(0, 2); back.Len() != 3 || sp.K[0] != 2 || sp.V[1] != 2 {
		t.Errorf("copied through halves: len %d k %v v %v", back.Len(), sp.K, sp.V)
	}
	if ev := s.Add("", []int32{7}, mk(1)); ev != 1 || s.Len() != 2 {
		t.Errorf("evicted %d, len %d", ev, s.Len())
	}
	if _, n := s.Match("", []int32{1, 2, 3}, 10); n != 2 {
		t.Errorf("after eviction match %d, want 2 (the oldest entry is gone)", n)
	}
	if NewPrefixStore(0).Add("", []int32{1}, mk(1)) != 0 {
		t.Error("disabled store evicted")
	}
}

func TestContiguousCache(t *testing.T) {
	c := NewContiguousCache(Shape{Layers: 2, KDim: 6, VDim: 4}, 100, false)
	if c.Cap() != 100 {
		t.Fatalf("Cap %d", c.Cap())
	}
	for n := 1; n <= 40; n++ {
		if err := c.Extend(n); err != nil {
			t.Fatal(err)
		}
		for l := range 2 {
			k := []float32{float32(n), 1, 2, 3, 4, float32(l)}
			v := []float32{float32(-n), 0, 0, float32(l)}
			c.Put(l, n-1, k, v)
		}
	}
	for l := range 2 {
		sp := c.Span(l, 5)
		k, v, cnt := sp.K, sp.V, sp.N
		if cnt != 35 || k[0] != 6 || v[0] != -6 || k[5] != float32(l) || v[3] != float32(l) || k[6*34] != 40 {
			t.Fatalf("layer %d: span of %d rows, k %v v %v", l, cnt, k[:6], v[:4])
		}
	}
	c.Truncate(10)
	if c.Len() != 10 {
		t.Fatalf("Len %d after Truncate(10)", c.Len())
	}
	c.Truncate(20)
	if c.Len() != 10 {
		t.Fatalf("Truncate past the end changed Len to %d", c.Len())
	}
	if err := c.Extend(101); err == nil {
		t.Fatal("Extend past capacity succeeded")
	}
}

// Blocks of 256 KiB and more are cut from shared slabs: every block's rows
// are its own (none overlaps another, of either type), and a slab serves
// no more blocks than the pool has.
func TestPoolSlabBlocks(t *testing.T) {
	for _, f16 := range []bool{false, true} {
		const layers, kd, vd, bs, n = 2, 2048, 2048, 32, 5
		p := NewPool(Shape{Layers: layers, KDim: kd, VDim: vd}, bs, n, f16)
		s := p.NewSeq()
		if err := s.Extend(n * bs); err != nil {
			t.Fatal(err)
		}
		for l := range layers {
			for pos := range n * bs {
				s.Put(l, pos, row(kd, float32(pos+1000*l)), row(vd, float32(-pos-1000*l)))
			}
		}
		for l := range layers {
			for pos := range n * bs {
				sp := s.Span(l, pos)
				var key [1]float32
				sp.KeyRows(key[:], kd, 0, 1, kd-1, 1)
				k, v := key[0], float32(0)
				if f16 {
					v = kernels.FP16ToFP32(sp.V16[vd-1])
				} else {
					v = sp.V[vd-1]
				}
				wk, wv := row(kd, float32(pos+1000*l))[kd-1], row(vd, float32(-pos-1000*l))[vd-1]
				if f16 {
					wk, wv = kernels.FP16ToFP32(kernels.FP32ToFP16(wk)), kernels.FP16ToFP32(kernels.FP32ToFP16(wv))
				}
				if k != wk || v != wv {
					t.Fatalf("f16 %v: layer %d pos %d: k %v v %v, want %v %v", f16, l, pos, k, v, wk, wv)
				}
			}
		}
		if len(p.slab) != 0 {
			t.Errorf("f16 %v: %d bytes of slab left over after the pool's %d blocks", f16, len(p.slab), n)
		}
	}
}
