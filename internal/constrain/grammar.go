// Package constrain makes generated text follow a grammar: JSON schemas,
// regular expressions and a subset of Lark compile to one form, a
// context-free grammar over bytes (Grammar), which a Matcher runs as a
// pushdown automaton. At each decoding step the Matcher masks the tokens
// whose bytes the automaton cannot consume, walking a trie of the
// vocabulary, so that only tokens that keep the output inside the grammar
// can be sampled.
//
// The package knows nothing of the engine or HTTP: the engine asks a
// Matcher for masks, the server compiles requests' constraints.
package constrain

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// Grammar is a context-free grammar over bytes. Rules[Start] is the start
// rule; a rule is a set of alternatives, each a sequence of elements; an
// element matches one byte of a set or expands a rule. Repetition is
// written with helper rules (x* is R ::= x R | ε, ε being the empty
// sequence). Left recursion is not allowed (the matcher expands rules
// depth-first): compilers of this package never produce it, and Validate
// refuses it.
//
// A Grammar must not change once it is used: Prepare, Matcher and Bytes
// keep what they derive from it (see runtime.go).
type Grammar struct {
	Rules []Rule
	Start int

	rt atomic.Pointer[grammarRuntime]
}

// Rule is one nonterminal: its name (for messages) and its alternatives.
type Rule struct {
	Name string
	Alts []Seq
}

// Seq is a sequence of elements; the empty Seq matches the empty string.
type Seq []Elem

// Elem is a byte set (Rule < 0) or a reference to a rule (Set unused).
type Elem struct {
	Set  ByteSet
	Rule int // index into Grammar.Rules, or -1 for a byte set
}

// Bytes is an element matching one byte of s.
func Bytes(s ByteSet) Elem { return Elem{Set: s, Rule: -1} }

// Ref is an element expanding rule r.
func Ref(r int) Elem { return Elem{Rule: r} }

// ByteSet is a set of bytes, one bit each.
type ByteSet [4]uint64

// Has reports whether b is in s.
func (s *ByteSet) Has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }

// Add puts b in s.
func (s *ByteSet) Add(b byte) { s[b>>6] |= 1 << (b & 63) }

// AddRange puts lo..hi (inclusive) in s.
func (s *ByteSet) AddRange(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s.Add(byte(c))
	}
}

// Byte is the set {b}.
func Byte(b byte) ByteSet {
	var s ByteSet
	s.Add(b)
	return s
}

// Range is the set lo..hi.
func Range(lo, hi byte) ByteSet {
	var s ByteSet
	s.AddRange(lo, hi)
	return s
}

// Builder helps compilers build grammars: rules are added by name and
// referred to by index.
type Builder struct {
	g     Grammar
	named map[string]int
}

// NewBuilder starts a grammar.
func NewBuilder() *Builder { return &Builder{named: map[string]int{}} }

// Rule returns the index of the rule named name, creating it (empty) if
// needed.
func (b *Builder) Rule(name string) int {
	if i, ok := b.named[name]; ok {
		return i
	}
	b.g.Rules = append(b.g.Rules, Rule{Name: name})
	b.named[name] = len(b.g.Rules) - 1
	return len(b.g.Rules) - 1
}

// Fresh returns a new rule whose name starts with prefix.
func (b *Builder) Fresh(prefix string) int {
	return b.Rule(fmt.Sprintf("%s#%d", prefix, len(b.g.Rules)))
}

// Alt adds an alternative to rule r.
func (b *Builder) Alt(r int, elems ...Elem) {
	b.g.Rules[r].Alts = append(b.g.Rules[r].Alts, Seq(elems))
}

// Literal is the elements matching s byte by byte.
func Literal(s string) []Elem {
	out := make([]Elem, len(s))
	for i := range len(s) {
		out[i] = Bytes(Byte(s[i]))
	}
	return out
}

// Star adds and returns a rule matching zero or more of elems.
func (b *Builder) Star(elems ...Elem) int {
	r := b.Fresh("star")
	b.Alt(r, append(append([]Elem{}, elems...), Ref(r))...)
	b.Alt(r)
	return r
}

// Grammar finishes the grammar with start rule start and checks it.
func (b *Builder) Grammar(start int) (*Grammar, error) {
	g := &Grammar{Rules: b.g.Rules, Start: start}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return g, nil
}

// Size is the number of elements of the grammar (its memory, roughly).
func (g *Grammar) Size() int {
	n := 0
	for _, r := range g.Rules {
		for _, a := range r.Alts {
			n += len(a) + 1
		}
	}
	return n
}

// Validate checks references, that every rule can derive a finite string
// (a grammar that can never terminate is refused) and that no rule is left
// recursive.
func (g *Grammar) Validate() error {
	if g.Start < 0 || g.Start >= len(g.Rules) {
		return fmt.Errorf("grammar: start rule %d of %d", g.Start, len(g.Rules))
	}
	for _, r := range g.Rules {
		for _, a := range r.Alts {
			for _, e := range a {
				if e.Rule >= len(g.Rules) {
					return fmt.Errorf("grammar: rule %s refers to rule %d of %d", r.Name, e.Rule, len(g.Rules))
				}
			}
		}
	}
	// Productive rules: those that derive some finite string.
	prod := finiteRules(g.Rules)
	if !prod[g.Start] {
		return fmt.Errorf("grammar: rule %s can never finish (every alternative recurses forever or it has none)", g.Rules[g.Start].Name)
	}
	// Left recursion: a rule reachable from itself through the first
	// elements of alternatives, looking past nullable rules.
	if path := g.leftCycle(g.nullable()); path != nil {
		return fmt.Errorf("grammar: rule %s is left recursive (%s)", path[0], strings.Join(path, " -> "))
	}
	return nil
}

func (g *Grammar) nullable() []bool { return nullable(g.Rules) }

// nullable reports which rules can match the empty string.
func nullable(rules []Rule) []bool {
	return fixpoint(rules, func(ByteSet) bool { return false })
}

// productiveRules reports which rules derive some finite string (an empty
// byte set deriving nothing).
func productiveRules(rules []Rule) []bool {
	return fixpoint(rules, func(s ByteSet) bool { return s != ByteSet{} })
}

// finiteRules reports which rules derive some finite string, every byte
// set counting as a byte.
func finiteRules(rules []Rule) []bool {
	return fixpoint(rules, func(ByteSet) bool { return true })
}

// fixpoint marks the rules with an alternative whose byte sets all pass
// set and whose references are all to marked rules: the least fixpoint
// behind nullability and productivity. It runs in time linear in the
// grammar's size (each alternative counts its references to rules not yet
// marked; marking a rule decrements the counts of the alternatives that
// refer to it), so a long chain of rules costs no more than its length.
func fixpoint(rules []Rule, set func(ByteSet) bool) []bool {
	ok := make([]bool, len(rules))
	// Alternatives are numbered in order; owner[a] is a's rule, left[a]
	// its references to unmarked rules (-1: it has a byte set that fails).
	var owner, left []int32
	// users[first[r]:first[r+1]] are the alternatives referring to r, one
	// entry per reference.
	first := make([]int32, len(rules)+1)
	for _, r := range rules {
		for _, a := range r.Alts {
			for _, e := range a {
				if e.Rule >= 0 {
					first[e.Rule+1]++
				}
			}
		}
	}
	for r := range rules {
		first[r+1] += first[r]
	}
	users := make([]int32, first[len(rules)])
	fill := append([]int32(nil), first[:len(rules)]...)
	var queue []int32
	for ri, r := range rules {
		for _, a := range r.Alts {
			id := int32(len(owner))
			n := int32(0)
			for _, e := range a {
				switch {
				case e.Rule >= 0:
					users[fill[e.Rule]] = id
					fill[e.Rule]++
					n++
				case !set(e.Set):
					n = -1 << 30
				}
			}
			owner, left = append(owner, int32(ri)), append(left, n)
			if n == 0 && !ok[ri] {
				ok[ri] = true
				queue = append(queue, int32(ri))
			}
		}
	}
	for len(queue) > 0 {
		r := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for _, a := range users[first[r]:first[r+1]] {
			left[a]--
			if o := owner[a]; left[a] == 0 && !ok[o] {
				ok[o] = true
				queue = append(queue, o)
			}
		}
	}
	return ok
}

// leftCycle returns a cycle of rules through leading elements (each rule
// can begin with the next, looking past nullable rules), or nil: one
// depth-first search over the whole grammar, linear in its size.
func (g *Grammar) leftCycle(nullable []bool) []string {
	// edges[r]: the rules that can come first in r.
	edges := make([][]int, len(g.Rules))
	for r, rule := range g.Rules {
		for _, a := range rule.Alts {
			for _, e := range a {
				if e.Rule < 0 {
					break
				}
				edges[r] = append(edges[r], e.Rule)
				if !nullable[e.Rule] {
					break
				}
			}
		}
	}
	const (
		white = iota
		grey  // on the current path
		black // done, no cycle through it
	)
	color := make([]byte, len(g.Rules))
	var stack []int
	type frame struct{ r, next int }
	for root := range g.Rules {
		if color[root] != white {
			continue
		}
		frames := []frame{{root, 0}}
		color[root] = grey
		stack = append(stack[:0], root)
		for len(frames) > 0 {
			f := &frames[len(frames)-1]
			if f.next == len(edges[f.r]) {
				color[f.r] = black
				frames = frames[:len(frames)-1]
				stack = stack[:len(stack)-1]
				continue
			}
			to := edges[f.r][f.next]
			f.next++
			switch color[to] {
			case grey:
				// A cycle: from to's place on the path back to to.
				i := len(stack) - 1
				for stack[i] != to {
					i--
				}
				var path []string
				for _, r := range stack[i:] {
					path = append(path, g.Rules[r].Name)
				}
				return append(path, g.Rules[to].Name)
			case white:
				color[to] = grey
				frames = append(frames, frame{to, 0})
				stack = append(stack, to)
			}
		}
	}
	return nil
}

// Wrap returns a grammar of prefix, then a sentence of g, then suffix (a
// tool call in a model's format: a tag around a JSON object).
func Wrap(prefix string, g *Grammar, suffix string) *Grammar {
	out := &Grammar{Rules: make([]Rule, len(g.Rules), len(g.Rules)+1)}
	copy(out.Rules, g.Rules)
	seq := append(Literal(prefix), Ref(g.Start))
	seq = append(seq, Literal(suffix)...)
	out.Rules = append(out.Rules, Rule{Name: "wrap", Alts: []Seq{seq}})
	out.Start = len(out.Rules) - 1
	return out
}
