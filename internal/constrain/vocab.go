package constrain

import (
	"bytes"
	"slices"
)

// Vocab is a model's vocabulary as bytes, with a trie over the tokens,
// built once per model and shared (read only) by every Matcher of that
// model.
//
// The trie is stored in preorder (the tokens' lexicographic order): node i's
// subtree is nodes i+1 .. skip-1, so a depth-first walk is a loop over an
// array that jumps to skip to prune a subtree. Tokens whose bytes end at
// node i are order[tokOff(i) : tokOff(i+1)], so the tokens of a whole
// subtree are one contiguous run of order as well.
type Vocab struct {
	tokens [][]byte
	nodes  []trieNode // preorder, plus a sentinel at the end
	sub    []ByteSet  // bytes of node i's strict descendants
	order  []int32    // token ids in trie order
	depth  int        // longest token
}

// trieNode is one trie node: the byte that leads to it, its depth (1 for
// the root's children), the end of its subtree and its first token in
// order.
type trieNode struct {
	tokOff int32
	skip   int32
	subEnd int32 // tokOff of node skip: the end of the subtree's tokens
	depth  uint16
	b      byte
}

// maxTokenLen bounds a token's length (a trie depth); longer tokens are
// never allowed.
const maxTokenLen = 1<<16 - 1

// NewVocab builds the vocabulary of tokens (tokens[id] is the bytes of
// token id). A nil or empty entry (special and control tokens, which
// render as nothing) is never allowed by a mask, nor is a token longer than
// 65,535 bytes. The Vocab keeps tokens; the caller must not change them.
func NewVocab(tokens [][]byte) *Vocab {
	v := &Vocab{tokens: tokens}
	ids := make([]int32, 0, len(tokens))
	for id, t := range tokens {
		if len(t) > 0 && len(t) <= maxTokenLen {
			ids = append(ids, int32(id))
		}
	}
	slices.SortFunc(ids, func(a, b int32) int {
		if c := bytes.Compare(tokens[a], tokens[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	v.order = ids
	// path[d] is the node at depth d+1 on the path to the previous token.
	var path []int32
	var prev []byte
	for k, id := range ids {
		t := tokens[id]
		lcp := 0
		for lcp < len(prev) && lcp < len(t) && prev[lcp] == t[lcp] {
			lcp++
		}
		for len(path) > lcp {
			v.nodes[path[len(path)-1]].skip = int32(len(v.nodes))
			path = path[:len(path)-1]
		}
		for d := lcp; d < len(t); d++ {
			path = append(path, int32(len(v.nodes)))
			v.nodes = append(v.nodes, trieNode{tokOff: int32(k), depth: uint16(d + 1), b: t[d]})
		}
		// A token equal to the previous one shares its node: the node's
		// tokens run on, since tokOff only marks where they start.
		prev = t
		v.depth = max(v.depth, len(t))
	}
	n := int32(len(v.nodes))
	for _, p := range path {
		v.nodes[p].skip = n
	}
	v.nodes = append(v.nodes, trieNode{tokOff: int32(len(ids)), skip: n + 1, subEnd: int32(len(ids))})
	for i := range n {
		v.nodes[i].subEnd = v.nodes[v.nodes[i].skip].tokOff
	}
	// Bytes below each node: fold each node into its parent, children
	// after parents in preorder so a reverse pass sees every child first.
	v.sub = make([]ByteSet, n)
	parent := make([]int32, 0, v.depth+1)
	par := make([]int32, n)
	for i := range n {
		d := int(v.nodes[i].depth)
		parent = append(parent[:d-1], i)
		if d >= 2 {
			par[i] = parent[d-2]
		} else {
			par[i] = -1
		}
	}
	for i := n - 1; i >= 0; i-- {
		if p := par[i]; p >= 0 {
			s := &v.sub[p]
			s.Add(v.nodes[i].b)
			for w := range s {
				s[w] |= v.sub[i][w]
			}
		}
	}
	return v
}

// Size is the number of token ids (the length of a mask).
func (v *Vocab) Size() int { return len(v.tokens) }

// Token is the bytes of token id (nil when out of range).
func (v *Vocab) Token(id int32) []byte {
	if id < 0 || int(id) >= len(v.tokens) {
		return nil
	}
	return v.tokens[id]
}

// trieSize is the number of trie nodes (for benchmarks and reports).
func (v *Vocab) trieSize() int { return len(v.nodes) - 1 }
