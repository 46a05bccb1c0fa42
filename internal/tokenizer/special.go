package tokenizer

import "slices"

// trie indexes the special token texts for the partition step.
type trie struct {
	root  [256]int32       // child of the root for each first byte, -1 none
	edges map[uint64]int32 // (node<<8 | byte) -> child
	val   []int32          // token ending at each node, -1 none
}

func newTrie() *trie {
	tr := &trie{edges: map[uint64]int32{}, val: []int32{nullID}}
	for i := range tr.root {
		tr.root[i] = nullID
	}
	return tr
}

func (tr *trie) insert(s string, id int32) {
	if s == "" {
		return
	}
	node := int32(0)
	for i := 0; i < len(s); i++ {
		var next int32
		var ok bool
		if i == 0 {
			next = tr.root[s[0]]
			ok = next != nullID
		} else {
			next, ok = tr.edges[uint64(node)<<8|uint64(s[i])]
		}
		if !ok {
			next = int32(len(tr.val))
			tr.val = append(tr.val, nullID)
			if i == 0 {
				tr.root[s[0]] = next
			} else {
				tr.edges[uint64(node)<<8|uint64(s[i])] = next
			}
		}
		node = next
	}
	if tr.val[node] == nullID {
		tr.val[node] = id
	}
}

// segment is a piece of the input: raw text text[lo:hi] (id -1) or a
// special token matched whole.
type segment struct {
	lo, hi int
	id     int32
}

type occurrence struct {
	pos, n int
	id     int32
}

// isCSpace is C's isspace, which llama.cpp uses to strip around tokens.
func isCSpace(b byte) bool {
	return b == ' ' || (b >= '\t' && b <= '\r')
}

// partition splits text on special token texts as llama.cpp's
// tokenizer_st_partition: longer tokens first, each splitting every
// remaining text fragment at its leftmost non-overlapping occurrences.
// User-defined tokens are always split out; control and unknown tokens only
// with parseSpecial.
func (t *Tokenizer) partition(sc *scratch, text string, parseSpecial bool) []segment {
	segs := sc.segs[:0]
	if text == "" {
		return segs
	}
	occ := sc.occ[:0]
	tr := t.special
	for i := 0; i < len(text); i++ {
		node := tr.root[text[i]]
		for d := 1; node != nullID; d++ {
			if id := tr.val[node]; id != nullID && (parseSpecial || t.attrs[id]&(attrControl|attrUnknown) == 0) {
				occ = append(occ, occurrence{pos: i, n: d, id: id})
			}
			if i+d >= len(text) {
				break
			}
			next, ok := tr.edges[uint64(node)<<8|uint64(text[i+d])]
			if !ok {
				break
			}
			node = next
		}
	}
	sc.occ = occ
	if len(occ) == 0 {
		sc.segs = append(segs, segment{0, len(text), nullID})
		return sc.segs
	}
	// llama.cpp processes tokens longest first; ties between different
	// tokens of one length (an unspecified order there) go by id.
	slices.SortFunc(occ, func(a, b occurrence) int {
		if a.n != b.n {
			return b.n - a.n
		}
		if a.id != b.id {
			return int(a.id - b.id)
		}
		return a.pos - b.pos
	})
	if cap(sc.taken) < len(text) {
		sc.taken = make([]bool, len(text))
	}
	taken := sc.taken[:len(text)]
	clear(taken)
	acc := occ[:0]
	for _, o := range occ {
		if slices.Contains(taken[o.pos:o.pos+o.n], true) {
			continue
		}
		for k := o.pos; k < o.pos+o.n; k++ {
			taken[k] = true
		}
		acc = append(acc, o)
	}
	slices.SortFunc(acc, func(a, b occurrence) int { return a.pos - b.pos })
	cur := 0
	for k, o := range acc {
		lo, hi := cur, o.pos
		if t.attrs[o.id]&attrLStrip != 0 {
			for hi > lo && isCSpace(text[hi-1]) {
				hi--
			}
		}
		if hi > lo {
			segs = append(segs, segment{lo, hi, nullID})
		}
		segs = append(segs, segment{o.pos, o.pos + o.n, o.id})
		cur = o.pos + o.n
		if t.attrs[o.id]&attrRStrip != 0 {
			limit := len(text)
			if k+1 < len(acc) {
				limit = acc[k+1].pos
			}
			for cur < limit && isCSpace(text[cur]) {
				cur++
			}
		}
	}
	if cur < len(text) {
		segs = append(segs, segment{cur, len(text), nullID})
	}
	sc.segs = segs
	return segs
}
