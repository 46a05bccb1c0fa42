package kvcache

import "fmt"

// Manager is how the engine's scheduler meets the KV cache: one interface,
// one implementation per mode (Paged: a pool of blocks with a block-level
// prefix cache; Contiguous: a cache per sequence with a store of finished
// ones; Recompute: no cache kept between tokens).
//
// A sequence's positions go through three states. Reserve makes room for
// them; the forward pass writes them (through State.Cache); Commit marks the
// first n as final, which is when full blocks enter the prefix cache.
// Positions written but not committed are speculative: Rollback drops them,
// giving back the blocks it empties, and the prefix cache never sees them.
//
// The scheduler goroutine owns a manager and its states: nothing here is
// safe for concurrent use.
type Manager interface {
	// NewState is the KV state of a new sequence of at most maxLen
	// positions; it holds no memory until Admit.
	NewState(maxLen int) *State
	// Capacity is the most positions one sequence can ever hold with the
	// cache all its own (paged: the whole pool), 0 when only the context
	// length limits it.
	Capacity() int
	// Need is the number of free blocks that admitting a sequence with these
	// tokens would take, computing at most budget of them after its cached
	// prefix (0 for caches that are not paged).
	Need(s *State, tokens []int32, budget int) int
	// Admit starts (or restarts, after a preemption) a sequence whose tokens
	// are tokens: it takes the longest cached prefix of all but the last
	// token (whose logits must be computed) and reserves room for the next
	// min(budget, rest) tokens. It changes nothing and reports false when
	// the free blocks cannot hold them.
	Admit(s *State, tokens []int32, budget int) (Admission, bool)
	// Reserve makes room for positions [0, n), reporting false (nothing
	// taken) when there is not enough.
	Reserve(s *State, n int) bool
	// Commit marks the first n positions of tokens as computed and final,
	// and returns how many positions the cache keeps: n, or 0 for a cache
	// that recomputes everything once the last token's logits are out.
	Commit(s *State, tokens []int32, n int) int
	// Rollback forgets the positions past the committed ones.
	Rollback(s *State)
	// Fork starts dst, a new state, with the first n positions of src,
	// which are committed (the choices of one request share their prompt):
	// a paged pool shares src's full blocks and copies the rows of a
	// partial last one, a contiguous cache copies. It reports false, with
	// nothing taken, when the cache cannot hold the copy (or, recomputing,
	// keeps nothing to share).
	Fork(dst, src *State, n int) bool
	// Release gives back a sequence's memory; finished (it ended without
	// error) lets a contiguous cache enter the prefix store. The state can
	// be admitted again.
	Release(s *State, tokens []int32, finished bool)
	// Reclaimable is the number of blocks releasing s would free (blocks
	// shared with other sequences stay in use).
	Reclaimable(s *State) int
	// DropPrefixes empties the prefix store of finished caches (after a
	// failed forward pass, as mistral.rs does; blocks in a paged pool are
	// kept).
	DropPrefixes()
	// Usage is the cache's occupancy now.
	Usage() Usage
}

// Admission is what Admit did.
type Admission struct {
	// Cached is the number of positions taken from the prefix cache.
	Cached int
	// Counted is how many of them count as processed tokens: mistral.rs's
	// default (non-paged) scheduler counts a prompt's whole length, cached
	// prefix included; the paged one counts what it computes.
	Counted int
}

// Usage is a cache's occupancy.
type Usage struct {
	// Paged pools only (all 0 otherwise): blocks in use by sequences, all
	// blocks, free ones (cached blocks that no sequence uses count as free),
	// and positions per block.
	BlocksUsed, BlocksTotal, BlocksFree, BlockSize int
	// Evictions counts prefix-cache entries dropped so far: paged, cached
	// blocks reused for new data; contiguous, finished caches pushed out of
	// the store or dropped with it.
	Evictions int64
}

// State is one sequence's KV state, owned by the Manager that made it.
type State struct {
	maxLen    int
	committed int // positions committed
	noPrefix  bool
	salt      string // besides the tokens, what its keys and values depend on (Salt)
	root      *Hash  // paged: the first block's parent, from the manager's root and the salt

	paged  *Seq // Paged
	hashes []Hash
	blocks int // full blocks registered in the prefix cache

	cont *ContiguousCache // Contiguous, Recompute
}

// Cache is the sequence's storage for the forward pass (nil before Admit).
func (s *State) Cache() Cache {
	if s.paged != nil {
		return s.paged
	}
	if s.cont != nil {
		return s.cont
	}
	return nil
}

// Committed is the number of positions committed.
func (s *State) Committed() int { return s.committed }

// NoPrefix makes the sequence compute every position: Admit takes nothing
// from the prefix cache (an embedding pools the states of all its tokens),
// and its blocks never enter it, so that they go back to the free blocks
// when it ends: an embeddings request of many long inputs leaves no cache
// of them holding memory.
func (s *State) NoPrefix() { s.noPrefix = true }

// Salt says what the sequence's keys and values depend on besides the
// model and the tokens (a LoRA adapter's generation and scale, as a key):
// the prefix cache shares positions only between states of the same salt,
// so the same prompt under two adapters, or an adapter and the base model,
// never shares KV. Call it before the first Admit; "" is the base model's.
func (s *State) Salt(key string) {
	s.salt = key
	s.root = nil
	s.hashes = s.hashes[:0]
}

// Paged is the Manager over a Pool: sequences hold blocks, full committed
// blocks are registered under the hash of their prefix, and a sequence
// starts from the blocks of the longest cached prefix of its tokens.
type Paged struct {
	pool   *Pool
	root   Hash
	prefix bool // reuse cached blocks
}

// NewPaged manages pool. identity is what changes the keys and values
// besides the tokens (the model's identity), so that blocks are never reused
// across models; prefix false turns block reuse off.
func NewPaged(pool *Pool, identity []byte, prefix bool) *Paged {
	return &Paged{pool: pool, root: RootHash(identity), prefix: prefix}
}

// Pool is the managed pool.
func (m *Paged) Pool() *Pool { return m.pool }

// NewState implements Manager.
func (m *Paged) NewState(maxLen int) *State { return &State{maxLen: maxLen} }

// Capacity implements Manager.
func (m *Paged) Capacity() int { return m.pool.Tokens() }

// fit returns the cached blocks a sequence can start from, the tokens it
// would compute first and the free blocks that takes.
func (m *Paged) fit(s *State, tokens []int32, budget int) (hit []int32, n, need int) {
	bs := m.pool.bs
	if m.prefix && !s.noPrefix {
		// Whole blocks before the last token: that one is always computed,
		// for its logits.
		limit := (len(tokens) - 1) / bs
		m.hashTo(s, tokens, limit)
		hit = m.pool.Match(s.hashes[:limit])
	}
	cached := len(hit) * bs
	n = min(len(tokens)-cached, budget)
	// Taking back a cached block nobody uses removes it from the free ones.
	need = (cached+n+bs-1)/bs - len(hit) + m.pool.FreeAmong(hit)
	return hit, n, need
}

// hashTo extends s.hashes to cover the first n full blocks of tokens.
func (m *Paged) hashTo(s *State, tokens []int32, n int) {
	bs := m.pool.bs
	for b := len(s.hashes); b < n; b++ {
		parent := m.rootOf(s)
		if b > 0 {
			parent = s.hashes[b-1]
		}
		s.hashes = append(s.hashes, BlockHash(parent, tokens[b*bs:(b+1)*bs]))
	}
}

// rootOf is the parent hash of s's first block: the manager's root (the
// model's identity) for an unsalted state, else a hash of the root and the
// salt, made once per state.
func (m *Paged) rootOf(s *State) Hash {
	if s.salt == "" {
		return m.root
	}
	if s.root == nil {
		buf := append(append(make([]byte, 0, len(m.root)+len(s.salt)+6), m.root[:]...), "salt:"...)
		h := RootHash(append(buf, s.salt...))
		s.root = &h
	}
	return *s.root
}

// Need implements Manager.
func (m *Paged) Need(s *State, tokens []int32, budget int) int {
	_, _, need := m.fit(s, tokens, budget)
	return need
}

// Admit implements Manager.
func (m *Paged) Admit(s *State, tokens []int32, budget int) (Admission, bool) {
	hit, n, need := m.fit(s, tokens, budget)
	if need > m.pool.Free() {
		return Admission{}, false
	}
	if s.paged == nil {
		s.paged = m.pool.NewSeq()
	}
	cached := len(hit) * m.pool.bs
	s.paged.Adopt(hit)
	s.blocks, s.committed = len(hit), cached
	if !s.paged.Reserve(cached + n) {
		panic("kvcache: blocks counted free vanished during admission")
	}
	return Admission{Cached: cached}, true
}

// Reserve implements Manager.
func (m *Paged) Reserve(s *State, n int) bool { return s.paged.Reserve(n) }

// Commit implements Manager: the newly completed full blocks enter the
// prefix cache.
func (m *Paged) Commit(s *State, tokens []int32, n int) int {
	if n > s.paged.Len() {
		panic(fmt.Sprintf("kvcache: committing %d positions of a sequence holding %d", n, s.paged.Len()))
	}
	s.committed = n
	if !m.prefix || s.noPrefix {
		return n
	}
	full := n / m.pool.bs
	if s.blocks < full {
		m.hashTo(s, tokens, full)
		for ; s.blocks < full; s.blocks++ {
			s.paged.Commit(s.blocks, s.hashes[s.blocks])
		}
	}
	return n
}

// Rollback implements Manager: blocks past the committed positions go back
// to the pool, and hashes computed past them are forgotten (the tokens may
// change).
func (m *Paged) Rollback(s *State) {
	if s.paged == nil {
		return
	}
	s.paged.Shrink(s.committed)
	s.hashes = s.hashes[:min(len(s.hashes), s.committed/m.pool.bs)]
}

// Fork implements Manager: the full blocks are shared (one more reference
// each); the rows of a partial block are copied into a block of dst's own.
// dst takes src's salt, as its keys and values are src's.
func (m *Paged) Fork(dst, src *State, n int) bool {
	if src.paged == nil || n > src.committed || dst.paged != nil && dst.paged.Len() != 0 {
		return false
	}
	bs := m.pool.bs
	full := n / bs
	if n%bs != 0 && m.pool.Free() == 0 || !m.pool.slidingReady(src.paged.blocks[:full]) {
		return false
	}
	if dst.paged == nil {
		dst.paged = m.pool.NewSeq()
	}
	dst.paged.Adopt(src.paged.blocks[:full])
	if rows := n % bs; rows > 0 {
		if err := dst.paged.Extend(n); err != nil {
			panic("kvcache: the free block counted for a fork vanished")
		}
		m.pool.copyRows(dst.paged.blocks[full], src.paged.blocks[full], rows)
	}
	dst.salt, dst.root = src.salt, src.root
	dst.hashes = append(dst.hashes[:0], src.hashes[:min(full, len(src.hashes))]...)
	dst.blocks = min(full, src.blocks)
	dst.committed = n
	return true
}

// Release implements Manager. The sequence's committed full blocks stay in
// the prefix cache while the pool can keep them; its hashes are kept for a
// re-admission.
func (m *Paged) Release(s *State, tokens []int32, finished bool) {
	if s.paged != nil {
		s.paged.Release()
	}
	s.blocks, s.committed = 0, 0
}

// Reclaimable implements Manager.
func (m *Paged) Reclaimable(s *State) int {
	n := 0
	if s.paged != nil {
		for _, b := range s.paged.Blocks() {
			if m.pool.Refs(b) == 1 {
				n++
			}
		}
	}
	return n
}

// DropPrefixes implements Manager: a paged pool keeps its blocks.
func (m *Paged) DropPrefixes() {}

// Usage implements Manager.
func (m *Paged) Usage() Usage {
	p := m.pool
	return Usage{BlocksUsed: p.Used(), BlocksTotal: p.Total(), BlocksFree: p.Free(), BlockSize: p.bs, Evictions: p.Evictions()}
}

// Contiguous is the Manager of per-sequence contiguous caches with
// mistral.rs's non-paged prefix cache: the caches of the last N finished
// sequences, from which a new sequence copies its longest shared prefix.
type Contiguous struct {
	shape     Shape
	f16       bool
	store     *PrefixStore
	evictions int64
}

// NewContiguous manages caches of rows of shape sh (halves with f16),
// keeping the last prefixN finished ones for reuse (0: none).
func NewContiguous(sh Shape, f16 bool, prefixN int) *Contiguous {
	return &Contiguous{shape: sh, f16: f16, store: NewPrefixStore(prefixN)}
}

// Recompute is the Manager of --no-kv-cache: each sequence has a cache for
// one step, and every token recomputes the whole sequence.
type Recompute struct{ Contiguous }

// NewRecompute manages caches of rows of shape sh (halves with f16) that
// keep nothing between tokens.
func NewRecompute(sh Shape, f16 bool) *Recompute {
	return &Recompute{Contiguous{shape: sh, f16: f16, store: NewPrefixStore(0)}}
}

// Commit implements Manager: once every token is computed (its logits are
// out), nothing is kept; the next token recomputes them all. (Prompt chunks
// before that stay, as the step they belong to is not over.)
func (m *Recompute) Commit(s *State, tokens []int32, n int) int {
	if n < len(tokens) {
		s.committed = n
		return n
	}
	s.committed = 0
	s.cont.Truncate(0)
	return 0
}

// NewState implements Manager.
func (m *Contiguous) NewState(maxLen int) *State { return &State{maxLen: maxLen} }

// Capacity implements Manager.
func (m *Contiguous) Capacity() int { return 0 }

// Need implements Manager: no blocks.
func (m *Contiguous) Need(*State, []int32, int) int { return 0 }

// Admit implements Manager: a cache is made on first admission, filled
// from the stored cache sharing the longest prefix with tokens.
func (m *Contiguous) Admit(s *State, tokens []int32, budget int) (Admission, bool) {
	if s.cont == nil {
		s.cont = NewContiguousCache(m.shape, s.maxLen, m.f16)
	}
	s.cont.Truncate(0)
	s.committed = 0
	if s.noPrefix {
		return Admission{}, true
	}
	src, n := m.store.Match(s.salt, tokens, len(tokens)-1)
	if n == 0 || CopyPrefix(s.cont, src, m.shape, n) != nil {
		return Admission{}, true
	}
	s.committed = n
	return Admission{Cached: n, Counted: n}, true
}

// Reserve implements Manager: a contiguous cache grows as it is written,
// up to its sequence's length.
func (m *Contiguous) Reserve(*State, int) bool { return true }

// Commit implements Manager.
func (m *Contiguous) Commit(s *State, tokens []int32, n int) int {
	s.committed = n
	return n
}

// Fork implements Manager: a copy of src's first n positions.
func (m *Contiguous) Fork(dst, src *State, n int) bool {
	if src.cont == nil || n > src.committed || src.cont.Len() < n {
		return false
	}
	if dst.cont == nil {
		dst.cont = NewContiguousCache(m.shape, dst.maxLen, m.f16)
	}
	dst.cont.Truncate(0)
	if CopyPrefix(dst.cont, src.cont, m.shape, n) != nil {
		return false
	}
	dst.salt = src.salt
	dst.committed = n
	return true
}

// Fork implements Manager: nothing is kept to share.
func (m *Recompute) Fork(dst, src *State, n int) bool { return false }

// Rollback implements Manager.
func (m *Contiguous) Rollback(s *State) {
	if s.cont != nil {
		s.cont.Truncate(s.committed)
	}
}

// Release implements Manager: a finished sequence's committed positions
// enter the prefix store, pushing out its oldest entry past the limit.
func (m *Contiguous) Release(s *State, tokens []int32, finished bool) {
	if s.cont != nil && finished {
		s.cont.Truncate(s.committed)
		m.evictions += int64(m.store.Add(s.salt, tokens, s.cont))
	}
	s.cont, s.committed = nil, 0
}

// Reclaimable implements Manager: no blocks.
func (m *Contiguous) Reclaimable(*State) int { return 0 }

// DropPrefixes implements Manager.
func (m *Contiguous) DropPrefixes() { m.evictions += int64(m.store.Clear()) }

// Usage implements Manager: only evictions.
func (m *Contiguous) Usage() Usage { return Usage{Evictions: m.evictions} }

var (
	_ Manager = (*Paged)(nil)
	_ Manager = (*Contiguous)(nil)
	_ Manager = (*Recompute)(nil)
)
