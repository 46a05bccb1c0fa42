package kvcache

import (
	"slices"
	"testing"
)

var oneRow = Shape{Layers: 1, KDim: 1, VDim: 1}

func seqTokens(n int) []int32 {
	t := make([]int32, n)
	for i := range t {
		t[i] = int32(100 + i)
	}
	return t
}

// write pretends to run the forward pass over positions [0, n) of s.
func write(t *testing.T, s *State, n int) {
	t.Helper()
	c := s.Cache()
	if err := c.Extend(n); err != nil {
		t.Fatal(err)
	}
	for pos := range n {
		c.Put(0, pos, []float32{float32(pos)}, []float32{float32(-pos)})
	}
}

// Speculative positions (written, not committed) roll back: the blocks they
// emptied go back to the pool, and the prefix cache never holds them, even
// where they filled a block.
func TestPagedRollback(t *testing.T) {
	pool := NewPool(oneRow, 4, 8, false)
	m := NewPaged(pool, []byte("m"), true)
	toks := seqTokens(10)
	s := m.NewState(64)
	adm, ok := m.Admit(s, toks, 100)
	if !ok || adm.Cached != 0 || pool.Used() != 3 {
		t.Fatalf("admit: %+v %v, %d blocks used", adm, ok, pool.Used())
	}
	write(t, s, 10)
	if n := m.Commit(s, toks, 10); n != 10 || pool.Cached() != 2 {
		t.Fatalf("commit kept %d, %d blocks cached; want 10 and 2 full blocks", n, pool.Cached())
	}
	// Five draft tokens: positions 10..14, two more blocks.
	spec := append(slices.Clone(toks), 900, 901, 902, 903, 904)
	if !m.Reserve(s, 15) || pool.Used() != 4 {
		t.Fatalf("reserve for drafts: %d used", pool.Used())
	}
	write(t, s, 15)
	m.Commit(s, spec, 11) // one draft accepted: block 2 (positions 8..11) is not full
	m.Rollback(s)
	if s.Cache().Len() != 11 || pool.Used() != 3 || pool.Cached() != 2 {
		t.Fatalf("after roll-back: len %d, %d used, %d cached; want 11, 3, 2", s.Cache().Len(), pool.Used(), pool.Cached())
	}
	if err := pool.Check(); err != nil {
		t.Fatal(err)
	}
	// A sequence whose tokens are the rolled-back ones finds only the
	// committed blocks.
	other := m.NewState(64)
	adm, ok = m.Admit(other, append(slices.Clone(spec), 1), 100)
	if !ok || adm.Cached != 8 {
		t.Fatalf("second sequence: %+v %v, want 8 cached positions (the committed blocks)", adm, ok)
	}
	m.Release(other, nil, true)
	// Rolling back to a block boundary gives that block back too.
	m.Commit(s, spec, 8)
	m.Rollback(s)
	if s.Cache().Len() != 8 || pool.Used() != 2 || pool.Cached() != 2 {
		t.Fatalf("roll-back to 8: len %d, %d used, %d cached", s.Cache().Len(), pool.Used(), pool.Cached())
	}
	// Room reserved for drafts never written goes back too.
	if !m.Reserve(s, 16) || pool.Used() != 4 {
		t.Fatalf("reserve: %d used", pool.Used())
	}
	m.Rollback(s)
	if s.Cache().Len() != 8 || pool.Used() != 2 {
		t.Fatalf("roll-back of reserved room: len %d, %d used; want 8, 2", s.Cache().Len(), pool.Used())
	}
	// Nothing uncommitted: a no-op.
	m.Rollback(s)
	if s.Cache().Len() != 8 || pool.Used() != 2 {
		t.Fatalf("idle roll-back changed the sequence: len %d, %d used", s.Cache().Len(), pool.Used())
	}
	m.Release(s, spec, true)
	if pool.Used() != 0 || m.Usage().BlocksFree != 8 {
		t.Fatalf("after release: %+v", m.Usage())
	}
	if err := pool.Check(); err != nil {
		t.Fatal(err)
	}
}

// A token that changed after a roll-back is hashed anew: the block it
// completes is cached under the new tokens, not the drafts'.
func TestPagedRollbackRehashes(t *testing.T) {
	pool := NewPool(oneRow, 4, 8, false)
	m := NewPaged(pool, []byte("m"), true)
	draft := seqTokens(9) // admission hashes its first two blocks
	s := m.NewState(64)
	if _, ok := m.Admit(s, draft, 100); !ok {
		t.Fatal("admit")
	}
	write(t, s, 8)
	m.Commit(s, draft, 4)
	// Hashes of both blocks were computed for the admission; the second
	// block's tokens change.
	m.Rollback(s)
	fixed := append(slices.Clone(draft[:4]), 7, 7, 7, 7, 7)
	write(t, s, 8)
	m.Commit(s, fixed, 8)
	probe := m.NewState(64)
	if adm, _ := m.Admit(probe, fixed, 100); adm.Cached != 8 {
		t.Fatalf("the corrected tokens find %d cached positions, want 8", adm.Cached)
	}
	m.Release(probe, nil, true)
	probe = m.NewState(64)
	if adm, _ := m.Admit(probe, draft, 100); adm.Cached != 4 {
		t.Fatalf("the drafts find %d cached positions, want 4", adm.Cached)
	}
}

// Contiguous caches roll back to the committed positions, and only those
// enter the prefix store.
func TestContiguousRollbackAndStore(t *testing.T) {
	m := NewContiguous(oneRow, false, 2)
	toks := seqTokens(10)
	s := m.NewState(32)
	if adm, ok := m.Admit(s, toks, 100); !ok || adm.Cached != 0 {
		t.Fatalf("admit %+v %v", adm, ok)
	}
	write(t, s, 10)
	m.Commit(s, toks, 6)
	m.Rollback(s)
	if s.Cache().Len() != 6 {
		t.Fatalf("len %d after roll-back, want 6", s.Cache().Len())
	}
	m.Release(s, toks, true)
	next := m.NewState(32)
	adm, _ := m.Admit(next, toks, 100)
	if adm.Cached != 6 || adm.Counted != 6 || next.Cache().Len() != 6 {
		t.Fatalf("next sequence: %+v, cache len %d; want the 6 committed positions", adm, next.Cache().Len())
	}
	sp := next.Cache().Span(0, 0)
	if sp.K[5] != 5 || sp.V[5] != -5 {
		t.Fatalf("copied rows %v %v", sp.K[:6], sp.V[:6])
	}
	// A failed sequence does not enter the store; overflowing entries and a
	// drop count as evictions.
	m.Release(next, toks, false)
	for range 3 {
		s := m.NewState(32)
		m.Admit(s, seqTokens(4), 100)
		write(t, s, 4)
		m.Commit(s, seqTokens(4), 4)
		m.Release(s, seqTokens(4), true)
	}
	if u := m.Usage(); u.Evictions != 2 || u.BlocksTotal != 0 {
		t.Fatalf("usage %+v, want 2 evictions (store of 2 after 4 finished)", u)
	}
	m.DropPrefixes()
	if u := m.Usage(); u.Evictions != 4 {
		t.Fatalf("usage %+v after a drop, want 4 evictions", u)
	}
}

// Recompute keeps prompt chunks within a step and nothing once the last
// token's logits are out.
func TestRecompute(t *testing.T) {
	m := NewRecompute(oneRow, false)
	toks := seqTokens(6)
	s := m.NewState(16)
	m.Admit(s, toks, 4)
	write(t, s, 4)
	if n := m.Commit(s, toks, 4); n != 4 || s.Cache().Len() != 4 {
		t.Fatalf("chunk: kept %d, len %d", n, s.Cache().Len())
	}
	write(t, s, 6)
	if n := m.Commit(s, toks, 6); n != 0 || s.Cache().Len() != 0 {
		t.Fatalf("all computed: kept %d, len %d; want nothing", n, s.Cache().Len())
	}
	m.Release(s, toks, true)
	if adm, _ := m.Admit(m.NewState(16), toks, 100); adm.Cached != 0 {
		t.Fatalf("recompute reused a prefix: %+v", adm)
	}
}

// Forking shares the full blocks and copies the rows of the partial one;
// the two sequences then write their own positions.
func TestPagedFork(t *testing.T) {
	pool := NewPool(oneRow, 4, 8, false)
	m := NewPaged(pool, []byte("m"), true)
	toks := seqTokens(10)
	src := m.NewState(64)
	m.Admit(src, toks, 100)
	write(t, src, 10)
	m.Commit(src, toks, 10)
	dst := m.NewState(64)
	if !m.Fork(dst, src, 10) {
		t.Fatal("fork refused")
	}
	if pool.Used() != 4 || pool.Refs(src.paged.Blocks()[0]) != 2 || pool.Refs(src.paged.Blocks()[2]) != 1 || dst.Committed() != 10 {
		t.Fatalf("after the fork: %d used, refs %d/%d, committed %d; want 4 blocks (2 shared, 1 copied)",
			pool.Used(), pool.Refs(src.paged.Blocks()[0]), pool.Refs(src.paged.Blocks()[2]), dst.Committed())
	}
	for pos := 0; pos < 10; pos++ {
		a, b := src.Cache().Span(0, pos), dst.Cache().Span(0, pos)
		if a.K[0] != b.K[0] || a.V[0] != b.V[0] || b.K[0] != float32(pos) {
			t.Fatalf("position %d: %v/%v vs %v/%v", pos, a.K[0], a.V[0], b.K[0], b.V[0])
		}
	}
	// Each writes its own next position into its own third block.
	for i, s := range []*State{src, dst} {
		c := s.Cache()
		if err := c.Extend(11); err != nil {
			t.Fatal(err)
		}
		c.Put(0, 10, []float32{float32(100 + i)}, []float32{0})
	}
	if src.Cache().Span(0, 10).K[0] != 100 || dst.Cache().Span(0, 10).K[0] != 101 {
		t.Fatal("the forked sequences share a written row")
	}
	m.Release(src, toks, true)
	m.Release(dst, toks, true)
	if err := pool.Check(); err != nil || pool.Used() != 0 {
		t.Fatalf("after release: %d used, %v", pool.Used(), err)
	}
	// No free block for the partial one: refused, nothing taken.
	full := NewPool(oneRow, 4, 3, false)
	fm := NewPaged(full, []byte("m"), false)
	a := fm.NewState(64)
	fm.Admit(a, toks, 100)
	write(t, a, 10)
	fm.Commit(a, toks, 10)
	if b := fm.NewState(64); fm.Fork(b, a, 10) || full.Used() != 3 {
		t.Fatalf("fork without a free block: accepted or took blocks (%d used)", full.Used())
	}
}

func TestContiguousFork(t *testing.T) {
	m := NewContiguous(oneRow, false, 0)
	toks := seqTokens(6)
	src := m.NewState(16)
	m.Admit(src, toks, 100)
	write(t, src, 6)
	m.Commit(src, toks, 6)
	dst := m.NewState(16)
	if !m.Fork(dst, src, 6) || dst.Cache().Len() != 6 || dst.Cache().Span(0, 0).K[5] != 5 {
		t.Fatal("contiguous fork")
	}
	if NewRecompute(oneRow, false).Fork(m.NewState(16), src, 6) {
		t.Error("recompute forked")
	}
}

// A salted state (a LoRA adapter's generation) shares cached positions
// only with states of the same salt: the same tokens under another salt,
// or none, start from nothing. A fork keeps its source's salt.
func TestSaltSeparatesPrefixes(t *testing.T) {
	toks := seqTokens(13)
	for _, c := range []struct {
		name string
		mgr  func() Manager
		want int // positions a same-salt sequence takes from the cache
	}{
		{"paged", func() Manager { return NewPaged(NewPool(oneRow, 4, 32, false), []byte("m"), true) }, 12},
		{"contiguous", func() Manager { return NewContiguous(oneRow, false, 8) }, 12},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := c.mgr()
			run := func(salt string) int {
				t.Helper()
				s := m.NewState(64)
				if salt != "" {
					s.Salt(salt)
				}
				adm, ok := m.Admit(s, toks, 100)
				if !ok {
					t.Fatalf("salt %q: not admitted", salt)
				}
				write(t, s, len(toks))
				m.Commit(s, toks, len(toks))
				m.Release(s, toks, true)
				return adm.Cached
			}
			for i, step := range []struct {
				salt string
				want int
			}{
				{"lora:a@1", 0},
				{"lora:a@1", c.want}, // the same adapter generation: shared
				{"lora:a@2", 0},      // another generation of it
				{"", 0},              // the base model
				{"lora:b@1", 0},
				{"", c.want},
				{"lora:a@2", c.want},
			} {
				if got := run(step.salt); got != step.want {
					t.Errorf("step %d, salt %q: %d cached positions, want %d", i, step.salt, got, step.want)
				}
			}
			// A fork of a salted state registers its blocks under the salt.
			src := m.NewState(64)
			src.Salt("lora:c@1")
			m.Admit(src, toks[:8], 100)
			write(t, src, 8)
			m.Commit(src, toks[:8], 8)
			dst := m.NewState(64)
			if !m.Fork(dst, src, 8) {
				t.Fatal("fork refused")
			}
			if dst.salt != "lora:c@1" {
				t.Errorf("fork's salt %q", dst.salt)
			}
			m.Release(src, toks[:8], false)
			m.Release(dst, toks[:8], true)
			if got := run("lora:c@1"); got != 8 {
				t.Errorf("after the fork: %d cached positions under its salt, want 8", got)
			}
			if p, ok := m.(*Paged); ok {
				if err := p.Pool().Check(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
