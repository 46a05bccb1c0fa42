package constrain

import (
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
)

// What a Grammar keeps of its use: the program (Prepare) and one Matcher
// per vocabulary (Matcher), so that they live exactly as long as the
// Grammar. A cache of compiled grammars that drops a Grammar drops its
// matchers with it (once the requests running it end); nothing else holds
// them. Bytes counts all of it, so such a cache can be bounded in bytes.

// maxVocabMatchers bounds the matchers one Grammar keeps, one per
// vocabulary (the models served at once, and those just replaced by a
// reload); past it the oldest is dropped.
const maxVocabMatchers = 4

// grammarRuntime is what a Grammar derives from its rules once in use.
type grammarRuntime struct {
	once      sync.Once
	prog      *program
	err       error
	own       int64        // the rules' memory
	progBytes atomic.Int64 // the program's, once built

	mu       sync.Mutex
	matchers []*Matcher // oldest first, one per vocabulary
}

// runtime is g's runtime state, made on first use.
func (g *Grammar) runtime() *grammarRuntime {
	if rt := g.rt.Load(); rt != nil {
		return rt
	}
	g.rt.CompareAndSwap(nil, &grammarRuntime{own: g.ownBytes()})
	return g.rt.Load()
}

// Prepare validates g and flattens it for matching, once: it fails when g
// is invalid (Validate), when its start rule matches nothing, or when the
// start rule opens more alternatives at once (MaxStacks), or nests deeper
// (MaxStackDepth), than the matcher follows; the error names the limit.
// A compiler of requests' grammars calls it so that these are the
// request's errors; matching calls it anyway.
func (g *Grammar) Prepare() error {
	_, err := g.program()
	return err
}

func (g *Grammar) program() (*program, error) {
	rt := g.runtime()
	rt.once.Do(func() {
		rt.prog, rt.err = newProgram(g)
		if rt.prog != nil {
			rt.progBytes.Store(rt.prog.bytes())
		}
	})
	return rt.prog, rt.err
}

// Matcher is the Matcher of g over v, made on first use and kept with g,
// so that every request with the same Grammar shares its caches.
func (g *Grammar) Matcher(v *Vocab) (*Matcher, error) {
	rt := g.runtime()
	if m := rt.matcher(v); m != nil {
		return m, nil
	}
	// Built outside the lock, so that Bytes never waits for it; of two
	// built at once, the first kept wins.
	m, err := NewMatcher(g, v)
	if err != nil {
		return nil, err
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if k := rt.matcherLocked(v); k != nil {
		return k, nil
	}
	if len(rt.matchers) == maxVocabMatchers {
		rt.matchers = slices.Delete(rt.matchers, 0, 1)
	}
	rt.matchers = append(rt.matchers, m)
	return m, nil
}

// matcher is the kept Matcher over v, or nil.
func (rt *grammarRuntime) matcher(v *Vocab) *Matcher {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.matcherLocked(v)
}

func (rt *grammarRuntime) matcherLocked(v *Vocab) *Matcher {
	for _, m := range rt.matchers {
		if m.v == v {
			return m
		}
	}
	return nil
}

// Bytes estimates the memory g holds: its rules, its program once
// prepared, and its matchers with what their caches hold as of their last
// use (masks, automaton states, stacks). Measured against the Go heap it
// is within a factor of 1.5 either way (TestBytesHonest); the vocabulary,
// shared by every grammar of a model, is not counted.
func (g *Grammar) Bytes() int64 {
	rt := g.runtime()
	n := rt.own + rt.progBytes.Load()
	rt.mu.Lock()
	for _, m := range rt.matchers {
		n += m.held.Load()
	}
	rt.mu.Unlock()
	return n
}

// DropCaches empties the caches of g's matchers (they are rebuilt as
// states are met again, States staying valid), leaving the program: a
// bounded cache of grammars calls it when one grammar's caches alone
// outgrow its budget.
func (g *Grammar) DropCaches() {
	rt := g.runtime()
	rt.mu.Lock()
	ms := slices.Clone(rt.matchers)
	rt.mu.Unlock()
	for _, m := range ms {
		m.mu.Lock()
		m.c = m.newCache(m.c.gen + 1)
		m.noteBytes()
		m.mu.Unlock()
	}
}

// ownBytes is the memory of g's rules: the slices as allocated.
func (g *Grammar) ownBytes() int64 {
	n := int64(unsafe.Sizeof(*g)) + int64(cap(g.Rules))*int64(unsafe.Sizeof(Rule{}))
	for _, r := range g.Rules {
		n += int64(len(r.Name)) + int64(cap(r.Alts))*int64(unsafe.Sizeof(Seq{}))
		for _, a := range r.Alts {
			n += int64(cap(a)) * int64(unsafe.Sizeof(Elem{}))
		}
	}
	return n
}

// bytes is the memory of the program.
func (p *program) bytes() int64 {
	n := int64(unsafe.Sizeof(*p)) + int64(cap(p.elems))*int64(unsafe.Sizeof(pelem{})) +
		int64(cap(p.alts))*int64(unsafe.Sizeof([]int32{})) + int64(cap(p.classBytes))*33
	for _, a := range p.alts {
		n += 4 * int64(cap(a))
	}
	return n
}

// noteBytes records the Matcher's memory for Bytes (under m.mu): the
// cache's own count of its stacks, sets and transitions, the cached masks,
// and the scratch of a step.
func (m *Matcher) noteBytes() {
	c := m.c
	n := int64(unsafe.Sizeof(*m)) + int64(unsafe.Sizeof(*c))
	n += int64(c.bytes + c.maskBytes + c.relBytes)
	n += int64(8*cap(c.seen) + 4*cap(c.seenStamp) + 4*cap(c.out) + cap(c.key) + 4*cap(c.dstack))
	// Capacity the slices grew into but do not use yet.
	n += int64(cap(c.nodes)-len(c.nodes))*int64(unsafe.Sizeof(cnode{})+8) +
		int64(cap(c.states)-len(c.states))*int64(unsafe.Sizeof(dstate{})) +
		int64(cap(c.trans)-len(c.trans))*4
	m.held.Store(n)
}
