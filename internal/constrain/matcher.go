package constrain

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Limits of the runtime. A state (the set of stacks one sequence may be
// in) holds at most MaxStacks stacks, each at most MaxStackDepth deep; a
// byte that would take a state past either is refused as if the grammar did
// not allow it (the mask drops the tokens that need it, Advance fails), so
// that an ambiguous or deeply nested grammar costs bounded memory rather
// than all of it.
const (
	MaxStacks     = 1 << 14
	MaxStackDepth = 1 << 13
)

// Budgets of a Matcher's caches (see Matcher), in bytes. Past the cache
// budget the automaton is dropped and rebuilt as states are met again; past
// the mask budget the cached masks are dropped (those of states first, then
// the relative walks). A single mask computation whose automaton grows past
// the walk budget refuses the tokens it has not reached yet (as the limits
// above do), so that no grammar takes more than about that.
const (
	defaultCacheBudget = 64 << 20
	defaultMaskBudget  = 32 << 20
	defaultWalkBudget  = 128 << 20
)

// budgets are a Matcher's cache budgets (fields, so tests can shrink them).
type budgets struct {
	cache, mask, walk int
}

// Element kinds of the flattened grammar.
const (
	kEnd  = iota // end of an alternative: return to the caller
	kByte        // one byte of set
	kRef         // expand rule
)

// pelem is one position of the flattened grammar: every alternative's
// elements laid end to end, each alternative followed by a kEnd.
type pelem struct {
	set  ByteSet
	kind uint8
	rule int32
}

// Matcher runs one grammar over a vocabulary: a pushdown automaton over
// bytes in the style of llama.cpp's GBNF runtime. A State is a set of
// stacks of grammar positions whose tops are all byte-set elements (the
// empty stack meaning the input so far is a whole sentence); consuming a
// byte keeps the stacks whose top holds it, moves them on and expands them
// again (a finished alternative returns to its caller, a rule reference
// pushes the position after it, or nothing when the reference ends its
// alternative, so right recursion runs in constant stack, and pushes one
// stack per alternative of the rule).
//
// Stacks are interned (hash-consed: a stack is a node id, a node is a
// position over a parent node) and sets of stacks are interned too, so
// that the automaton seen so far is a lazily built DFA over sets of stacks
// whose transitions are cached per byte class (bytes that every byte set of
// the grammar treats alike). Allowed walks the vocabulary trie depth first
// through that DFA, pruning a subtree as soon as its prefix is refused and
// accepting a whole subtree at once when every byte below it loops back to
// the same set (the inside of a string); masks are cached per set, since
// states repeat (every character of a JSON string leaves the automaton
// where it was).
//
// When all the stacks of a set run over a common stack (the context: the
// object member a string is the value of, say), the mask is computed
// relative to it and the relative walk is cached, so a string in a new
// context costs the tokens that leave the string, not a walk of the whole
// vocabulary (see Matcher.mask).
//
// A Matcher is safe for concurrent use: the caches are behind a mutex, so
// masks of sequences sharing a Matcher are computed one at a time (a cached
// mask is copied out after the lock is released). The caches are bounded
// (64 MiB of automaton, 32 MiB of masks) and dropped when full; States stay
// valid across that, since they keep their own stacks.
type Matcher struct {
	*program
	v *Vocab

	start  *State
	budget budgets

	mu sync.Mutex
	c  *cache
	// held is the Matcher's memory (Bytes), updated after each use.
	held atomic.Int64
}

// program is the part of a Matcher that depends on the grammar alone,
// built once per Grammar (Grammar.Prepare) and shared by its Matchers: the
// grammar flattened into positions, and the byte classes.
type program struct {
	elems []pelem
	alts  [][]int32 // per rule, the positions where its alternatives start

	classOf    [256]uint8
	classBytes []ByteSet
	classRep   []byte
	nclass     int32
}

// node is one frame of a persistent stack: the grammar position to match
// next and the stack to return to (nil: the bottom).
type node struct {
	pos    int32
	parent *node
}

// State is where one sequence stands in the grammar: a set of stacks. States
// are immutable values (Advance returns a new one, or the same one when the
// automaton is back where it was) and may be shared by sequences.
type State struct {
	m        *Matcher
	tops     []*node
	complete bool
	// gen and id name the State's set in the Matcher's cache generation
	// gen; read and written under the Matcher's lock.
	gen uint32
	id  int32
}

// Complete reports whether what was consumed is a whole sentence of the
// grammar, so the model may stop (EOS allowed).
func (st *State) Complete() bool { return st.complete }

// Final reports whether the State is Complete and no byte can follow, so
// generation must stop.
func (st *State) Final() bool { return st.complete && len(st.tops) == 0 }

// NewMatcher prepares g to run over v: a Matcher of its own, with empty
// caches (Grammar.Matcher shares one per vocabulary). It fails as Prepare
// does.
func NewMatcher(g *Grammar, v *Vocab) (*Matcher, error) {
	if g == nil || v == nil {
		return nil, errors.New("constrain: nil grammar or vocabulary")
	}
	p, err := g.program()
	if err != nil {
		return nil, err
	}
	m := &Matcher{program: p, v: v,
		budget: budgets{cache: defaultCacheBudget, mask: defaultMaskBudget, walk: defaultWalkBudget}}
	m.c = m.newCache(1)
	d, err := m.startSet()
	if err != nil {
		return nil, err
	}
	m.start = m.materialize(d)
	m.noteBytes()
	return m, nil
}

// newProgram validates g, drops the alternatives that can never finish
// (an empty byte set, a rule with no finite derivation), flattens the rest
// and checks that the start rule expands within the matcher's limits.
func newProgram(g *Grammar) (*program, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	prod := productiveRules(g.Rules)
	if !prod[g.Start] {
		return nil, fmt.Errorf("grammar: rule %s matches nothing", g.Rules[g.Start].Name)
	}
	p := &program{}
	// Position 0 calls the start rule; 1 ends it.
	p.elems = append(p.elems, pelem{kind: kRef, rule: int32(g.Start)}, pelem{kind: kEnd})
	p.alts = make([][]int32, len(g.Rules))
	var sets []ByteSet
	for r, rule := range g.Rules {
	alts:
		for _, a := range rule.Alts {
			for _, e := range a {
				if !elemProductive(e, prod) {
					continue alts
				}
			}
			p.alts[r] = append(p.alts[r], int32(len(p.elems)))
			for _, e := range a {
				if e.Rule < 0 {
					p.elems = append(p.elems, pelem{kind: kByte, set: e.Set, rule: -1})
					sets = append(sets, e.Set)
				} else {
					p.elems = append(p.elems, pelem{kind: kRef, rule: int32(e.Rule)})
				}
			}
			p.elems = append(p.elems, pelem{kind: kEnd})
		}
	}
	p.classes(sets)
	probe := &Matcher{program: p}
	probe.c = probe.newCache(1)
	if _, err := probe.startSet(); err != nil {
		return nil, err
	}
	return p, nil
}

// startSet expands the start rule into the set of the start state; it
// fails, naming the limit, when that takes more stacks or deeper ones than
// a state may hold.
func (m *Matcher) startSet() (int32, error) {
	c := m.c
	c.begin()
	m.expand(0, -1)
	slices.Sort(c.out)
	stacks := len(c.out)
	d := c.internSet(c.out, c.outComplete, false, c.overflow)
	switch {
	case d != deadID:
		return d, nil
	case stacks >= MaxStacks:
		return deadID, fmt.Errorf("grammar: more than %d alternatives are open at the start, "+
			"past the matcher's limit of %d at once (MaxStacks): group alternatives that share a beginning", MaxStacks, MaxStacks)
	case c.overflow:
		return deadID, fmt.Errorf("grammar: the start rule nests rules more than %d deep before its first byte, "+
			"past the matcher's limit (MaxStackDepth)", MaxStackDepth)
	}
	return deadID, errors.New("grammar: the start rule matches nothing within the matcher's limits")
}

func elemProductive(e Elem, prod []bool) bool {
	if e.Rule < 0 {
		return e.Set != ByteSet{}
	}
	return prod[e.Rule]
}

// classes partitions the bytes into classes that every set treats alike.
func (m *program) classes(sets []ByteSet) {
	slices.SortFunc(sets, func(a, b ByteSet) int {
		for w := range a {
			if a[w] != b[w] {
				if a[w] < b[w] {
					return -1
				}
				return 1
			}
		}
		return 0
	})
	sets = slices.Compact(sets)
	// Refine: a set splits every class into its members and the rest;
	// ids are renumbered densely, in order of first byte.
	var cls [256]int
	n := 1
	var remap [512]int
	for _, s := range sets {
		for i := range 2 * n {
			remap[i] = -1
		}
		next := 0
		for b := range 256 {
			k := 2 * cls[b]
			if s.Has(byte(b)) {
				k++
			}
			if remap[k] < 0 {
				remap[k] = next
				next++
			}
			cls[b] = remap[k]
		}
		n = next
	}
	m.nclass = int32(n)
	m.classBytes = make([]ByteSet, n)
	m.classRep = make([]byte, n)
	for b := 255; b >= 0; b-- {
		m.classOf[b] = uint8(cls[b])
		m.classBytes[cls[b]].Add(byte(b))
		m.classRep[cls[b]] = byte(b)
	}
}

// Start is the state before any byte.
func (m *Matcher) Start() *State { return m.start }

// Vocab is the vocabulary the Matcher masks.
func (m *Matcher) Vocab() *Vocab { return m.v }

// Allowed sets mask[id] to whether the whole of token id's bytes can be
// consumed from st, for every token; mask must have Vocab().Size()
// entries.
func (m *Matcher) Allowed(st *State, mask []bool) {
	if len(mask) != m.v.Size() {
		panic(fmt.Sprintf("constrain: mask of %d entries for a vocabulary of %d", len(mask), m.v.Size()))
	}
	m.mu.Lock()
	m.prepare()
	bits := m.mask(m.stateID(st))
	m.noteBytes()
	m.mu.Unlock()
	fillMask(mask, bits)
}

// Advance consumes token tok's bytes; it fails (nil, false) when they
// cannot be consumed, and for tokens that have no bytes.
func (m *Matcher) Advance(st *State, tok int32) (*State, bool) {
	b := m.v.Token(tok)
	if len(b) == 0 || len(b) > maxTokenLen {
		return nil, false
	}
	return m.AdvanceBytes(st, b)
}

// AdvanceBytes consumes b; it fails (nil, false) when b cannot be
// consumed from st.
func (m *Matcher) AdvanceBytes(st *State, b []byte) (*State, bool) {
	if len(b) == 0 {
		return st, true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	defer m.noteBytes()
	c := m.prepare()
	d := m.stateID(st)
	nc := m.nclass
	for _, x := range b {
		cls := int32(m.classOf[x])
		t := c.trans[d*nc+cls]
		if t == 0 {
			t = m.step(d, cls)
		}
		d = t>>1 - 1
		if d == deadID {
			return nil, false
		}
	}
	return m.materialize(d), true
}

// prepare drops the cache when it has outgrown its budget.
func (m *Matcher) prepare() *cache {
	if m.c.bytes > m.budget.cache {
		m.c = m.newCache(m.c.gen + 1)
	}
	return m.c
}

// stateID is st's set in the current cache, interning its stacks if the
// cache has not seen it.
func (m *Matcher) stateID(st *State) int32 {
	if st.m != m {
		panic("constrain: State of another Matcher")
	}
	c := m.c
	if st.gen == c.gen {
		return st.id
	}
	memo := map[*node]int32{}
	var intern func(n *node) int32
	intern = func(n *node) int32 {
		if n == nil {
			return -1
		}
		if id, ok := memo[n]; ok {
			return id
		}
		id := c.intern(n.pos, intern(n.parent))
		memo[n] = id
		return id
	}
	ids := make([]int32, len(st.tops))
	for i, n := range st.tops {
		ids[i] = intern(n)
	}
	slices.Sort(ids)
	d := c.internSet(ids, st.complete, false, false)
	st.gen, st.id = c.gen, d
	if c.states[d].st == nil {
		c.states[d].st = st
	}
	return d
}

// materialize is the State of set d, made once per set and cache.
func (m *Matcher) materialize(d int32) *State {
	c := m.c
	if st := c.states[d].st; st != nil {
		return st
	}
	s := &c.states[d]
	st := &State{m: m, complete: s.complete, gen: c.gen, id: d, tops: make([]*node, len(s.tops))}
	for i, t := range s.tops {
		st.tops[i] = c.ptr(t)
	}
	c.states[d].st = st
	return st
}

// Transitions are cached in cache.trans as 0 (not computed yet) or
// (target+1)<<1 | escaped, escaped telling that the target set returned to
// the bottom of a relative set (see relOf).

// step computes the transition of set d on byte class cls and returns it
// encoded as in cache.trans.
func (m *Matcher) step(d, cls int32) int32 {
	c := m.c
	c.begin()
	if c.bytes > m.budget.walk {
		c.overflow = true
	} else {
		rep := m.classRep[cls]
		for _, t := range c.states[d].tops {
			n := c.nodes[t]
			if m.elems[n.pos].set.Has(rep) {
				m.expand(n.pos+1, n.parent)
			}
		}
		slices.Sort(c.out)
	}
	r := c.internSet(c.out, c.outComplete, c.outEscaped, c.overflow)
	t := c.enc(r)
	c.trans[d*m.nclass+cls] = t
	s := &c.states[d]
	cb := &m.classBytes[cls]
	for w := range s.known {
		s.known[w] |= cb[w]
		if r == d {
			s.loop[w] |= cb[w]
		}
	}
	return t
}

// expand adds to c.out the stacks that position pos over stack parent
// stands for: a byte set is a stack; the end of an alternative returns to
// the parent; a reference pushes its continuation (unless the reference
// ends its alternative) and expands each alternative of the rule.
func (m *Matcher) expand(pos, parent int32) {
	c := m.c
	if c.overflow || !c.visit(pos, parent) {
		return
	}
	e := &m.elems[pos]
	switch e.kind {
	case kEnd:
		switch parent {
		case bottom:
			c.outComplete = true
		case relBottom:
			c.outEscaped = true
		default:
			p := c.nodes[parent]
			m.expand(p.pos, p.parent)
		}
	case kByte:
		if id := c.intern(pos, parent); id >= 0 {
			if len(c.out) == MaxStacks {
				c.overflow = true
				return
			}
			c.out = append(c.out, id)
		}
	case kRef:
		np := parent
		if m.elems[pos+1].kind != kEnd {
			if np = c.intern(pos+1, parent); np < 0 {
				return
			}
		}
		for _, a := range m.alts[e.rule] {
			m.expand(a, np)
		}
	}
}

// mask is the mask of set d as a bitset over token ids, cached.
//
// When every stack of d runs over one stack q (its tops share the proper
// ancestor q), the mask is computed relative to q: the set with q replaced
// by a bottom that marks where a path returns to q (relOf) is walked once
// and its result kept: the tokens that never return to q (certain, whatever
// q is) and the trie nodes where a path returned to q (escapes). The mask
// of d is then the certain tokens plus a walk below each escape from the
// set it stands for over q. The relative set is the same for every string
// of a document (q being the context the string is in), so the long walk
// inside a string is done once per grammar, not once per context.
func (m *Matcher) mask(d int32) []uint64 {
	c := m.c
	if bits := c.states[d].mask; bits != nil {
		return bits
	}
	var bits []uint64
	rel, q := m.relOf(d)
	if rel >= 0 {
		r := m.relWalk(rel)
		if c.nodes[q].depth+r.depth+1 <= MaxStackDepth {
			bits = slices.Clone(r.bits)
			ds := m.dstack()
			for _, e := range r.esc {
				nd := &m.v.nodes[e.node]
				ds[nd.depth] = m.concrete(e.set, q)
				m.walk(bits, e.node+1, nd.skip, ds, nil)
			}
		}
	}
	if bits == nil {
		bits = make([]uint64, (m.v.Size()+63)/64)
		ds := m.dstack()
		ds[0] = d
		m.walk(bits, 0, int32(len(m.v.nodes)-1), ds, nil)
	}
	m.keepMask(8*len(bits), false)
	c.states[d].mask = bits
	return bits
}

// keepMask makes room for n more bytes of cached masks (rel: of a
// relative walk), dropping the masks of states, then the relative walks.
func (m *Matcher) keepMask(n int, rel bool) {
	c := m.c
	if c.maskBytes+c.relBytes+n > m.budget.mask {
		drop := c.relBytes+n > m.budget.mask/2
		for i := range c.states {
			c.states[i].mask = nil
			if drop {
				c.states[i].rel = nil
			}
		}
		c.maskBytes = 0
		if drop {
			c.relBytes = 0
		}
	}
	if rel {
		c.relBytes += n
	} else {
		c.maskBytes += n
	}
}

func (m *Matcher) dstack() []int32 {
	c := m.c
	if len(c.dstack) < m.v.depth+1 {
		c.dstack = make([]int32, m.v.depth+1)
	}
	return c.dstack
}

// relOf is d relative to its stacks' deepest common proper ancestor q
// (see mask), or -1 when there is none (a stack at the bottom, or the
// empty stack in d).
func (m *Matcher) relOf(d int32) (rel, q int32) {
	c := m.c
	s := &c.states[d]
	if s.relKnown {
		return s.relID, s.relQ
	}
	rel, q = -1, -1
	if !s.complete && !s.escaped && len(s.tops) > 0 {
		q = c.nodes[s.tops[0]].parent
		for _, t := range s.tops[1:] {
			if q < 0 {
				break
			}
			q = c.lca(q, c.nodes[t].parent)
		}
		if q >= 0 {
			memo := map[int32]int32{q: relBottom}
			var reroot func(n int32) int32
			reroot = func(n int32) int32 {
				if id, ok := memo[n]; ok {
					return id
				}
				cn := c.nodes[n]
				id := c.intern(cn.pos, reroot(cn.parent))
				memo[n] = id
				return id
			}
			tops := make([]int32, len(s.tops))
			for i, t := range s.tops {
				tops[i] = reroot(t)
			}
			slices.Sort(tops)
			rel = c.internSet(tops, false, false, false)
		} else {
			q = -1
		}
	}
	s = &c.states[d]
	s.relKnown, s.relID, s.relQ = true, rel, q
	return rel, q
}

// lca is the deepest common ancestor of stacks a and b (themselves
// included), or -1.
func (c *cache) lca(a, b int32) int32 {
	for a != b {
		if a < 0 || b < 0 {
			return -1
		}
		da, db := c.nodes[a].depth, c.nodes[b].depth
		if da >= db {
			a = c.nodes[a].parent
		}
		if db >= da {
			b = c.nodes[b].parent
		}
	}
	return a
}

// relResult is the walk of a relative set: the certain tokens, the
// escapes, and the deepest stack met (relative to the bottom).
type relResult struct {
	bits  []uint64
	esc   []escape
	depth int32
}

// escape is a trie node where a path of a relative walk returned to the
// bottom, and the relative set there.
type escape struct {
	node, set int32
}

// relWalk walks relative set rel, cached.
func (m *Matcher) relWalk(rel int32) *relResult {
	c := m.c
	if r := c.states[rel].rel; r != nil {
		return r
	}
	r := &relResult{bits: make([]uint64, (m.v.Size()+63)/64)}
	ds := m.dstack()
	ds[0] = rel
	m.walk(r.bits, 0, int32(len(m.v.nodes)-1), ds, r)
	m.keepMask(8*len(r.bits)+8*len(r.esc), true)
	c.states[rel].rel = r
	return r
}

// concrete is relative set e over stack q: its stacks rerooted on q, and
// q's own stacks if a path of e returned to q.
func (m *Matcher) concrete(e, q int32) int32 {
	c := m.c
	k := uint64(uint32(e))<<32 | uint64(uint32(q))
	if id, ok := c.concrete[k]; ok {
		return id
	}
	c.begin()
	s := &c.states[e]
	if s.escaped {
		qn := c.nodes[q]
		m.expand(qn.pos, qn.parent)
	}
	memo := map[int32]int32{relBottom: q}
	var reroot func(n int32) int32
	reroot = func(n int32) int32 {
		if id, ok := memo[n]; ok {
			return id
		}
		cn := c.nodes[n]
		p := reroot(cn.parent)
		id := int32(-1)
		if p >= 0 {
			id = c.intern(cn.pos, p)
		}
		memo[n] = id
		return id
	}
	for _, t := range c.states[e].tops {
		if id := reroot(t); id >= 0 {
			c.out = append(c.out, id)
		}
	}
	slices.Sort(c.out)
	c.out = slices.Compact(c.out)
	if len(c.out) > MaxStacks {
		c.overflow = true
	}
	id := c.internSet(c.out, c.outComplete, false, c.overflow)
	c.concrete[k] = id
	c.bytes += 32
	return id
}

// walkThreshold is the number of tokens below a trie node from which the
// walk tries to accept the whole subtree at once.
const walkThreshold = 8

// walk marks in out the tokens of trie nodes i .. end-1 (one or more whole
// subtrees) that the sets in ds take, ds[depth-1] being the set at the
// parent of a node of that depth. A relative walk (r not nil) stops at the
// nodes whose set returned to the bottom, recording them in r.
func (m *Matcher) walk(out []uint64, i, end int32, ds []int32, r *relResult) {
	v, c := m.v, m.c
	nodes, order := v.nodes, v.order
	nc := m.nclass
	for i < end {
		nd := &nodes[i]
		pd := ds[nd.depth-1]
		cls := int32(m.classOf[nd.b])
		t := c.trans[pd*nc+cls]
		if t == 0 {
			t = m.step(pd, cls)
		}
		d := t>>1 - 1
		if d == deadID {
			i = nd.skip
			continue
		}
		tokEnd := nodes[i+1].tokOff
		for _, id := range order[nd.tokOff:tokEnd] {
			out[id>>6] |= 1 << (id & 63)
		}
		if r != nil && d != pd {
			r.depth = max(r.depth, c.states[d].depth)
		}
		if nd.skip > i+1 {
			if t&1 != 0 {
				r.esc = append(r.esc, escape{node: i, set: d})
				i = nd.skip
				continue
			}
			if nd.subEnd-tokEnd >= walkThreshold && m.loops(d, &v.sub[i]) {
				for _, id := range order[tokEnd:nd.subEnd] {
					out[id>>6] |= 1 << (id & 63)
				}
				i = nd.skip
				continue
			}
			ds[nd.depth] = d
		}
		i++
	}
}

// loops reports whether every byte of sub takes set d back to d, computing
// the transitions it does not know yet.
func (m *Matcher) loops(d int32, sub *ByteSet) bool {
	c := m.c
	s := &c.states[d]
	var need ByteSet
	var some, conflict uint64
	for w := range need {
		need[w] = sub[w] &^ s.loop[w]
		some |= need[w]
		conflict |= need[w] & s.known[w]
	}
	if some == 0 {
		return true
	}
	if conflict != 0 {
		return false
	}
	nc := m.nclass
	for w, x := range need {
		for x != 0 {
			b := w*64 + bits.TrailingZeros64(x)
			x &= x - 1
			cls := int32(m.classOf[b])
			t := c.trans[d*nc+cls]
			if t == 0 {
				t = m.step(d, cls)
			}
			if t>>1-1 != d {
				return false
			}
		}
	}
	return true
}

// spread[b] is b's eight bits as eight bools, little-endian.
var spread = func() (t [256]uint64) {
	for b := range 256 {
		for j := range 8 {
			if b>>j&1 != 0 {
				t[b] |= 1 << (8 * j)
			}
		}
	}
	return
}()

// allTrue is 64 true bools as bytes.
var allTrue = func() (t [64]byte) {
	for i := range t {
		t[i] = 1
	}
	return
}()

// fillMask writes bitset bits into mask, eight bools per store.
func fillMask(mask []bool, bits []uint64) {
	raw := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(mask))), len(mask))
	full := len(mask) / 64
	for w, x := range bits[:full] {
		dst := (*[64]byte)(raw[w*64:])
		switch x {
		case 0:
			*dst = [64]byte{}
		case ^uint64(0):
			*dst = allTrue
		default:
			le := binary.LittleEndian
			le.PutUint64(dst[0:8], spread[byte(x)])
			le.PutUint64(dst[8:16], spread[byte(x>>8)])
			le.PutUint64(dst[16:24], spread[byte(x>>16)])
			le.PutUint64(dst[24:32], spread[byte(x>>24)])
			le.PutUint64(dst[32:40], spread[byte(x>>32)])
			le.PutUint64(dst[40:48], spread[byte(x>>40)])
			le.PutUint64(dst[48:56], spread[byte(x>>48)])
			le.PutUint64(dst[56:64], spread[byte(x>>56)])
		}
	}
	for i := full * 64; i < len(mask); i++ {
		mask[i] = bits[i>>6]>>(i&63)&1 != 0
	}
}

// deadID is the empty set of stacks: nothing can follow.
const deadID = 0

// Parents of a bottom stack frame: the true bottom, and the bottom of a
// relative set (see Matcher.mask).
const (
	bottom    = -1
	relBottom = -2
)

// cache is a Matcher's lazily built automaton: interned stacks, interned
// sets of stacks with their transitions and masks.
type cache struct {
	gen    uint32
	nclass int32

	nodes  []cnode
	ptrs   []*node
	nodeIx map[uint64]int32

	states   []dstate
	stateIx  map[string]int32
	trans    []int32          // states × classes, encoded (see step)
	concrete map[uint64]int32 // (relative set, stack) -> set

	bytes     int // rough memory of the above
	maskBytes int // of states' masks
	relBytes  int // of relative walks

	// scratch of one step
	out         []int32
	outComplete bool
	outEscaped  bool
	overflow    bool
	seen        []uint64 // open addressing over (pos, parent) keys, stamped
	seenStamp   []uint32
	stamp       uint32
	seenN       int
	key         []byte
	dstack      []int32
}

// cnode is an interned stack: position pos over stack parent (bottom,
// relBottom or a stack), depth frames deep.
type cnode struct {
	pos, parent, depth int32
}

// dstate is an interned set of stacks.
type dstate struct {
	tops     []int32 // sorted stack ids, all at byte-set positions
	complete bool    // the empty stack is in the set
	escaped  bool    // a path returned to the bottom of a relative set
	depth    int32   // the deepest stack
	// loop: bytes known to lead back to this set; known: bytes whose
	// transition is computed.
	loop, known ByteSet
	mask        []uint64
	st          *State
	// the set relative to its common stack (relOf), once known
	relKnown    bool
	relID, relQ int32
	rel         *relResult // the walk of a relative set
}

func (m *Matcher) newCache(gen uint32) *cache {
	c := &cache{
		gen:      gen,
		nclass:   m.nclass,
		nodeIx:   map[uint64]int32{},
		stateIx:  map[string]int32{},
		concrete: map[uint64]int32{},
	}
	c.internSet(nil, false, false, false) // deadID
	return c
}

// enc is set r as a transition (see step).
func (c *cache) enc(r int32) int32 {
	t := (r + 1) << 1
	if c.states[r].escaped {
		t |= 1
	}
	return t
}

// begin clears the scratch of a step.
func (c *cache) begin() {
	c.out = c.out[:0]
	c.outComplete = false
	c.outEscaped = false
	c.overflow = false
	c.stamp++
	c.seenN = 0
	if c.stamp == 0 {
		clear(c.seenStamp)
		c.stamp = 1
	}
}

// visit reports whether (pos, parent) is new in this step.
func (c *cache) visit(pos, parent int32) bool {
	if 2*(c.seenN+1) > len(c.seen) {
		c.growSeen()
	}
	k := uint64(uint32(pos))<<32 | uint64(uint32(parent))
	mask := uint64(len(c.seen) - 1)
	for h := (k * 0x9E3779B97F4A7C15) >> 20 & mask; ; h = (h + 1) & mask {
		if c.seenStamp[h] != c.stamp {
			c.seenStamp[h], c.seen[h] = c.stamp, k
			c.seenN++
			return true
		}
		if c.seen[h] == k {
			return false
		}
	}
}

func (c *cache) growSeen() {
	old, oldStamp := c.seen, c.seenStamp
	n := max(64, 2*len(old))
	c.seen, c.seenStamp = make([]uint64, n), make([]uint32, n)
	mask := uint64(n - 1)
	for i, k := range old {
		if oldStamp[i] != c.stamp {
			continue
		}
		h := (k * 0x9E3779B97F4A7C15) >> 20 & mask
		for c.seenStamp[h] == c.stamp {
			h = (h + 1) & mask
		}
		c.seenStamp[h], c.seen[h] = c.stamp, k
	}
}

// intern is the stack (pos, parent), or -1 (and overflow) past
// MaxStackDepth.
func (c *cache) intern(pos, parent int32) int32 {
	k := uint64(uint32(pos))<<32 | uint64(uint32(parent))
	if id, ok := c.nodeIx[k]; ok {
		return id
	}
	depth := int32(1)
	if parent >= 0 {
		depth = c.nodes[parent].depth + 1
	}
	if depth > MaxStackDepth {
		c.overflow = true
		return -1
	}
	id := int32(len(c.nodes))
	c.nodes = append(c.nodes, cnode{pos: pos, parent: parent, depth: depth})
	c.ptrs = append(c.ptrs, nil)
	c.nodeIx[k] = id
	c.bytes += 64
	return id
}

// ptr is stack id as a persistent node.
func (c *cache) ptr(id int32) *node {
	if id < 0 {
		return nil
	}
	if p := c.ptrs[id]; p != nil {
		return p
	}
	n := c.nodes[id]
	p := &node{pos: n.pos, parent: c.ptr(n.parent)}
	c.ptrs[id] = p
	return p
}

// internSet is the set of sorted, distinct stacks tops (plus the empty
// stack if complete, a return to a relative bottom if escaped); an
// overflowed step is the dead set.
func (c *cache) internSet(tops []int32, complete, escaped, overflow bool) int32 {
	if overflow {
		tops, complete, escaped = nil, false, false
	}
	var flags byte
	if complete {
		flags |= 1
	}
	if escaped {
		flags |= 2
	}
	k := append(c.key[:0], flags)
	for _, t := range tops {
		k = binary.LittleEndian.AppendUint32(k, uint32(t))
	}
	c.key = k
	if id, ok := c.stateIx[string(k)]; ok {
		return id
	}
	id := int32(len(c.states))
	var depth int32
	for _, t := range tops {
		depth = max(depth, c.nodes[t].depth)
	}
	c.states = append(c.states, dstate{tops: slices.Clone(tops), complete: complete, escaped: escaped, depth: depth})
	c.stateIx[string(k)] = id
	c.trans = append(c.trans, make([]int32, c.nclass)...)
	c.bytes += 250 + 2*len(k) + 4*int(c.nclass)
	return id
}
