package tokenizer

import (
	"sync"
	"unicode/utf8"
)

// scratch holds the buffers of one Encode call; pooled so that encoding
// allocates little and stays safe for concurrent use.
type scratch struct {
	segs  []segment
	occ   []occurrence
	taken []bool
	cps   []rune
	offs  []int32
	ends  []int
	tmp   []int
	syms  []symbol
	heap  bigramHeap
	buf   []byte
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// symbol is a piece of the word being merged: text[start:start+n], linked
// to its live neighbours; n == 0 once merged into its left neighbour.
type symbol struct {
	start, n   int32
	prev, next int32
}

// bigram is a candidate merge of two adjacent symbols. key orders the
// queue (BPE rank, or minus the SPM score), ties going to the leftmost pair;
// size detects stale entries (a symbol that changed since).
type bigram struct {
	key         float32 // exact for ranks below 2^24
	left, right int32
	size        int32
}

type bigramHeap []bigram

func (h bigramHeap) less(i, j int) bool {
	return h[i].key < h[j].key || (h[i].key == h[j].key && h[i].left < h[j].left)
}

func (h *bigramHeap) push(b bigram) {
	*h = append(*h, b)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s.less(i, p) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *bigramHeap) pop() bigram {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	s.down(0)
	*h = s
	return top
}

func (h bigramHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// init orders a heap filled by plain appends, in linear time.
func (h bigramHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// Encode converts text to token ids. addSpecial adds BOS/EOS as the model's
// add_bos_token/add_eos_token say; parseSpecial recognises control token
// texts such as "<|im_start|>" in text (user-defined tokens are always
// recognised, as in llama.cpp).
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	out, _ := t.encode(text, addSpecial, parseSpecial, -1)
	return out
}

// EncodeLimit is Encode for a text that must not exceed limit tokens: it
// returns Encode's tokens and true when there are at most limit of them,
// else false (and a partial result or nil) as soon as more than limit are
// certain, without tokenizing the rest. A text longer than limit times
// MaxTokenBytes is refused before any work, so the memory and time spent
// on a text too long are those of limit tokens, not of the text.
func (t *Tokenizer) EncodeLimit(text string, addSpecial, parseSpecial bool, limit int) ([]int32, bool) {
	if limit < 0 {
		return nil, false
	}
	if t.maxTokenBytes > 0 && len(text)/t.maxTokenBytes > limit {
		return nil, false
	}
	out, ok := t.encode(text, addSpecial, parseSpecial, limit)
	return out, ok
}

// EncodePrefix returns the first n tokens of Encode(text, addSpecial,
// parseSpecial) (all of them when there are at most n, with true), without
// tokenizing far past them. Unlike EncodeLimit it reads the text's special
// tokens in full, so its memory follows the text.
func (t *Tokenizer) EncodePrefix(text string, addSpecial, parseSpecial bool, n int) ([]int32, bool) {
	n = max(n, 0)
	out, ok := t.encode(text, addSpecial, parseSpecial, n)
	if !ok {
		return out[:n:n], false
	}
	return out, true
}

// encode is Encode, stopping once out has more than limit tokens (no limit
// when negative); it reports whether it ran to the end within the limit.
func (t *Tokenizer) encode(text string, addSpecial, parseSpecial bool, limit int) ([]int32, bool) {
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	size := len(text)/3 + 2
	if limit >= 0 {
		size = min(size, limit+2)
	}
	out := make([]int32, 0, size)
	over := func() bool { return limit >= 0 && len(out) > limit }
	if addSpecial && t.addBOS {
		out = append(out, t.bos)
	}
	segs := t.partition(sc, text, parseSpecial)
	prevSpecial := true // SPM: a space prefix goes before the first text and after special tokens
	for _, sg := range segs {
		if over() {
			return out, false
		}
		if sg.id != nullID {
			out = append(out, sg.id)
			prevSpecial = true
			continue
		}
		frag := text[sg.lo:sg.hi]
		if t.kind == kindSPM {
			out = t.encodeSPM(sc, frag, t.addSpacePrefix && prevSpecial, out)
		} else {
			out = t.encodeBPE(sc, frag, out, limit)
		}
		prevSpecial = false
	}
	if addSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	if over() {
		return out, false
	}
	return out, true
}

// utf8Len is the sequence length announced by a lead byte, 1 for
// continuation bytes (llama.cpp's unicode_len_utf8).
func utf8Len(b byte) int32 {
	return [16]int32{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[b>>4]
}

// escapeSpaces writes frag with spaces as U+2581, optionally prefixed by one.
func escapeSpaces(buf []byte, frag string, prefix bool) []byte {
	const esc = "\u2581"
	if prefix {
		buf = append(buf, esc...)
	}
	for i := 0; i < len(frag); i++ {
		if frag[i] == ' ' {
			buf = append(buf, esc...)
		} else {
			buf = append(buf, frag[i])
		}
	}
	return buf
}

// encodeSPM tokenizes one text fragment SentencePiece-style: characters
// are merged pairwise, the pair forming the highest-scoring vocab entry
// first; what never forms an entry falls back to byte tokens.
func (t *Tokenizer) encodeSPM(sc *scratch, frag string, prefix bool, out []int32) []int32 {
	sc.buf = escapeSpaces(sc.buf[:0], frag, prefix)
	s := string(sc.buf)
	syms := sc.syms[:0]
	for off := int32(0); off < int32(len(s)); {
		n := min(utf8Len(s[off]), int32(len(s))-off)
		i := int32(len(syms))
		syms = append(syms, symbol{start: off, n: n, prev: i - 1, next: i + 1})
		off += n
	}
	if len(syms) == 0 {
		return out
	}
	syms[len(syms)-1].next = -1
	h := sc.heap[:0]
	bg := func(l, r int32) (bigram, bool) {
		a, b := syms[l], syms[r]
		id, ok := t.ids[s[a.start:b.start+b.n]]
		return bigram{key: -t.scores[id], left: l, right: r, size: a.n + b.n}, ok
	}
	try := func(l, r int32) {
		if l >= 0 && r >= 0 {
			if b, ok := bg(l, r); ok {
				h.push(b)
			}
		}
	}
	for i := int32(1); i < int32(len(syms)); i++ {
		if b, ok := bg(i-1, i); ok {
			h = append(h, b)
		}
	}
	h.init()
	for len(h) > 0 {
		bg := h.pop()
		l, r := &syms[bg.left], &syms[bg.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != bg.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bg.left
		}
		try(l.prev, bg.left)
		try(bg.left, l.next)
	}
	sc.syms, sc.heap = syms, h
	for i := int32(0); i != -1; i = syms[i].next {
		sym := s[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[sym]; ok {
			out = append(out, id)
			continue
		}
		for k := 0; k < len(sym); k++ {
			if id := t.byteTok[sym[k]]; id != nullID {
				out = append(out, id)
			} else if t.unk != nullID {
				out = append(out, t.unk)
			}
		}
	}
	return out
}

// encodeBPE pre-tokenizes one text fragment into words and merges each.
// With limit >= 0 it stops once out holds more than limit tokens.
func (t *Tokenizer) encodeBPE(sc *scratch, frag string, out []int32, limit int) []int32 {
	cps, offs, valid := decodeRunes(frag, sc.cps[:0], sc.offs[:0])
	sc.cps, sc.offs = cps, offs
	if len(cps) == 0 {
		return out
	}
	norm := frag
	if !valid {
		norm = string(cps) // invalid bytes became U+FFFD
	}
	ends, tmp := t.pre.split(cps, append(sc.ends[:0], len(cps)), sc.tmp)
	sc.ends, sc.tmp = ends, tmp
	start := 0
	for _, e := range ends {
		out = t.bpeWord(sc, norm[offs[start]:offs[e]], out)
		start = e
		if limit >= 0 && len(out) > limit {
			break
		}
	}
	return out
}

// bpeWord merges one pre-tokenized word: its bytes are mapped to GPT-2's
// printable runes, then adjacent pairs are merged lowest merge rank first.
func (t *Tokenizer) bpeWord(sc *scratch, word string, out []int32) []int32 {
	buf := sc.buf[:0]
	for i := 0; i < len(word); i++ {
		buf = append(buf, t.byteEnc[word[i]]...)
	}
	sc.buf = buf
	if t.ignoreMerges {
		if id, ok := t.ids[string(buf)]; ok {
			return append(out, id)
		}
	}
	s := string(buf)
	syms := sc.syms[:0]
	for off := 0; off < len(s); {
		_, n := utf8.DecodeRuneInString(s[off:])
		i := int32(len(syms))
		syms = append(syms, symbol{start: int32(off), n: int32(n), prev: i - 1, next: i + 1})
		off += n
	}
	syms[len(syms)-1].next = -1
	if len(syms) > 1 {
		h := sc.heap[:0]
		bg := func(l, r int32) (bigram, bool) {
			a, b := syms[l], syms[r]
			rank, ok := t.ranks[mergeKey{s[a.start : a.start+a.n], s[b.start : b.start+b.n]}]
			return bigram{key: float32(rank), left: l, right: r, size: a.n + b.n}, ok
		}
		try := func(l, r int32) {
			if l >= 0 && r >= 0 {
				if b, ok := bg(l, r); ok {
					h.push(b)
				}
			}
		}
		for i := int32(1); i < int32(len(syms)); i++ {
			if b, ok := bg(i-1, i); ok {
				h = append(h, b)
			}
		}
		h.init()
		for len(h) > 0 {
			bg := h.pop()
			l, r := &syms[bg.left], &syms[bg.right]
			if l.n == 0 || r.n == 0 || l.n+r.n != bg.size {
				continue
			}
			l.n += r.n
			r.n = 0
			l.next = r.next
			if r.next >= 0 {
				syms[r.next].prev = bg.left
			}
			try(l.prev, bg.left)
			try(bg.left, l.next)
		}
		sc.heap = h
	}
	sc.syms = syms
	for i := int32(0); i != -1; i = syms[i].next {
		sym := s[syms[i].start : syms[i].start+syms[i].n]
		if id, ok := t.ids[sym]; ok {
			out = append(out, id)
			continue
		}
		// As llama.cpp: try each byte of the symbol as a token; vocabs that
		// cover all 256 byte runes never get here.
		for k := 0; k < len(sym); k++ {
			if id, ok := t.ids[sym[k:k+1]]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}
