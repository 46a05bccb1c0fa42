package kvcache

import (
	"testing"
)

// slidingShape: layers 0 and 2 slide over a window of 8, layer 1 sees all.
func slidingShape() Shape {
	return Shape{Layers: 3, KDim: 2, VDim: 2, Window: 8, Sliding: []bool{true, false, true}}
}

func rowOf(layer, pos int) []float32 { return []float32{float32(layer), float32(pos)} }

// writeRows extends s to n positions, writing every layer's rows.
func writeRows(t *testing.T, s *Seq, n int) {
	t.Helper()
	from := s.Len()
	if err := s.Extend(n); err != nil {
		t.Fatal(err)
	}
	for pos := from; pos < n; pos++ {
		for l := range 3 {
			s.Put(l, pos, rowOf(l, pos), rowOf(l, -pos))
		}
	}
}

// readable checks the rows a query at position q reads: every earlier
// position of the global layer, the window of the sliding ones.
func readable(t *testing.T, s *Seq, q int) {
	t.Helper()
	for l := range 3 {
		lo := 0
		if l != 1 {
			lo = max(0, q-8+1)
		}
		for pos := lo; pos <= q; pos++ {
			sp := s.Span(l, pos)
			if sp.K[0] != float32(l) || sp.K[1] != float32(pos) || sp.V[1] != float32(-pos) {
				t.Fatalf("layer %d position %d (query at %d): key %v value %v", l, pos, q, sp.K[:2], sp.V[:2])
			}
		}
	}
}

// A long sequence keeps the global layer's rows of every position and the
// sliding layers' rows of about one window: the blocks behind the window
// give their sliding part back (to be reused by new blocks).
func TestSlidingWindowFreesBlocks(t *testing.T) {
	p := NewPool(slidingShape(), 4, 64, false)
	s := p.NewSeq()
	steps := []int{5, 1, 3, 1, 1, 7, 2, 1}
	most := 0
	for i, n := 0, 0; n < 200; i++ {
		n = min(200, n+steps[i%len(steps)])
		writeRows(t, s, n)
		readable(t, s, n-1)
		if err := p.Check(); err != nil {
			t.Fatalf("at %d positions: %v", n, err)
		}
		most = max(most, p.SlidingResident())
	}
	// A step of up to 7 new positions plus the 7 before them: 4 blocks of 4,
	// and one more when the step straddles.
	if most > 5 || p.Resident() != 50 {
		t.Errorf("sliding parts held at most %d (want <= 5), blocks resident %d (want 50)", most, p.Resident())
	}
	if p.wdropped < 40 {
		t.Errorf("%d sliding parts given back", p.wdropped)
	}
	// A rewind that the window still covers is fine (the last step wrote
	// position 199 alone: its query read from 192 on); past it, a caller
	// bug.
	s.Truncate(199)
	writeRows(t, s, 200)
	readable(t, s, 199)
	defer func() {
		if recover() == nil {
			t.Error("truncating behind the window did not panic")
		}
	}()
	s.Truncate(100)
}

// Prefix hits need the sliding parts of the window before the hit's end:
// blocks that cache a prefix keep theirs (up to a quarter of the pool, the
// oldest dropped first), so a hit is taken only as far as they reach.
func TestSlidingWindowPrefixHits(t *testing.T) {
	p := NewPool(slidingShape(), 4, 16, false) // keeps at most 4 parts nobody needs
	a := p.NewSeq()
	var hashes []Hash
	for n := 4; n <= 60; n += 4 {
		writeRows(t, a, n)
		h := Hash{byte(n / 4)}
		hashes = append(hashes, h)
		a.Commit(n/4-1, h)
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	if p.nkept != 4 {
		t.Fatalf("%d sliding parts kept, want the cap of 4", p.nkept)
	}
	// a's last step read from position 49 on: blocks 12-14 are in its
	// window, 8-11 kept theirs (the last four to leave it), 0-7 gave
	// theirs back. A hit of k blocks needs those from (4k-7)/4 on.
	match := func(when string, cases [][2]int) {
		for _, c := range cases {
			if got := len(p.Match(hashes[:c[0]])); got != c[1] {
				t.Errorf("%s: match of %d blocks: %d, want %d", when, c[0], got, c[1])
			}
		}
	}
	match("running", [][2]int{{15, 15}, {13, 13}, {12, 12}, {11, 11}, {10, 10}, {9, 0}, {3, 0}})
	// Released, 12-14 are kept too: the oldest kept ones (8-10) go.
	a.Release()
	match("released", [][2]int{{15, 15}, {13, 13}, {12, 0}, {10, 0}})
	// b starts from 13 cached blocks and goes on.
	b := p.NewSeq()
	b.Adopt(p.Match(hashes[:13]))
	readable(t, b, 51)
	writeRows(t, b, 60)
	readable(t, b, 59)
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
	b.Release()
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

// A pool without sliding layers (or with none flagged) has no sliding
// state, and a fork of a sequence whose window moved on is refused.
func TestSlidingWindowFork(t *testing.T) {
	m := NewPaged(NewPool(slidingShape(), 4, 32, false), nil, true)
	src := m.NewState(100)
	toks := make([]int32, 41)
	if _, ok := m.Admit(src, toks, 41); !ok {
		t.Fatal("admit")
	}
	writeRows(t, src.paged, 30) // two steps: the second reads from 23 on
	writeRows(t, src.paged, 41)
	m.Commit(src, toks, 41)
	dst := m.NewState(100)
	if !m.Fork(dst, src, 41) {
		t.Fatal("fork at the end of the sequence refused")
	}
	readable(t, dst.paged, 40)
	late := m.NewState(100)
	if m.Fork(late, src, 12) {
		t.Error("fork behind the window accepted")
	}
	m.Release(src, toks, true)
	m.Release(dst, toks, true)
	if err := m.Pool().Check(); err != nil {
		t.Fatal(err)
	}
	plain := NewPool(Shape{Layers: 3, KDim: 2, VDim: 2, Window: 8, Sliding: []bool{false, false, false}}, 4, 8, false)
	if plain.windowed() {
		t.Error("a pool with no sliding layer keeps sliding parts")
	}
}
