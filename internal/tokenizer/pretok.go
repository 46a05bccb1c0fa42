package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// Pre-tokenization splits text into words before BPE merging. The original
// tokenizers describe it as a sequence of regexes; each regex splits every
// piece left by the previous one into its matches and the gaps between them
// (HF's Split with behaviour "Isolated", llama.cpp's unicode_regex_split).
// Go's regexp has no lookahead, so each regex is a hand-written matcher with
// the semantics of a backtracking engine (leftmost match, ordered
// alternation, greedy quantifiers).

// matcher reports the end of the regex match that starts at s[i], or -1
// when the regex does not match there. s is the whole piece being split, so
// lookaheads and $ see the piece end as the text end.
type matcher func(s []rune, i int) int

type preTokenizer struct {
	name  string
	steps []matcher
}

// split refines the piece boundaries ends (exclusive end offsets into cps,
// the last equal to len(cps)) through every step and returns the new
// boundaries and the other buffer, both reused across calls.
func (p *preTokenizer) split(cps []rune, ends, tmp []int) ([]int, []int) {
	for _, m := range p.steps {
		tmp = tmp[:0]
		start := 0
		for _, end := range ends {
			s := cps[start:end]
			gap := 0
			for i := 0; i < len(s); {
				e := m(s, i)
				if e <= i {
					i++
					continue
				}
				if gap < i {
					tmp = append(tmp, start+i)
				}
				tmp = append(tmp, start+e)
				i, gap = e, e
			}
			if gap < len(s) {
				tmp = append(tmp, end)
			}
			start = end
		}
		ends, tmp = tmp, ends
	}
	return ends, tmp
}

// splitString is a convenience for tests: the words of text.
func (p *preTokenizer) splitString(text string) []string {
	cps := []rune(text)
	if len(cps) == 0 {
		return nil
	}
	ends, _ := p.split(cps, []int{len(cps)}, nil)
	out := make([]string, 0, len(ends))
	start := 0
	for _, e := range ends {
		out = append(out, string(cps[start:e]))
		start = e
	}
	return out
}

// run returns the first index >= i whose rune does not satisfy f.
func run(s []rune, i int, f func(rune) bool) int {
	for i < len(s) && f(s[i]) {
		i++
	}
	return i
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at s[i] (s[i] == '\”); fold
// makes it ASCII case-insensitive as (?i:...) in the Llama 3 family.
func contraction(s []rune, i int, fold bool) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return -1
	}
	low := func(r rune) rune {
		if fold && r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	switch low(s[i+1]) {
	case 's', 't', 'm', 'd':
		return i + 2
	}
	if i+2 < len(s) {
		a, b := low(s[i+1]), low(s[i+2])
		if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
			return i + 3
		}
	}
	return -1
}

// wsTail matches \s+(?!\S)|\s+ at a whitespace s[i]: a run followed by a
// non-space gives that non-space its last whitespace (" word").
func wsTail(s []rune, i int) int {
	k := run(s, i, isWS)
	if k < len(s) && k-i > 1 {
		return k - 1
	}
	return k
}

// matchGPT2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func matchGPT2(s []rune, i int) int {
	c := s[i]
	if c == '\'' {
		if e := contraction(s, i, false); e > 0 {
			return e
		}
	}
	j := i
	if c == ' ' && i+1 < len(s) {
		j = i + 1
	}
	switch d := s[j]; {
	case isL(d):
		return run(s, j+1, isL)
	case isN(d):
		return run(s, j+1, isN)
	case isOther(d):
		return run(s, j+1, isOther)
	}
	if isWS(c) {
		return wsTail(s, i)
	}
	// Unreachable: every rune is a letter, number, space or other.
	return i + 1
}

// llamaStyle matches the Llama 3 / Qwen 2 family:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// marks makes words [\p{L}\p{M}]+ and others [^\s\p{L}\p{M}\p{N}] (Qwen 3.5);
// noTrail drops the [\r\n]* after others (Seed-Coder).
type llamaStyle struct {
	digits  int
	marks   bool
	noTrail bool
}

func (p llamaStyle) match(s []rune, i int) int {
	n := len(s)
	c := s[i]
	if c == '\'' {
		if e := contraction(s, i, true); e > 0 {
			return e
		}
	}
	word, other := isL, isOther
	if p.marks {
		word, other = isLM, isOtherM
	}
	if isWordPrefix(c) && i+1 < n && word(s[i+1]) {
		return run(s, i+2, word)
	}
	if word(c) {
		return run(s, i+1, word)
	}
	if isN(c) {
		k := i + 1
		for k < n && k-i < p.digits && isN(s[k]) {
			k++
		}
		return k
	}
	j := i
	if c == ' ' && i+1 < n {
		j = i + 1
	}
	if other(s[j]) {
		k := run(s, j+1, other)
		if !p.noTrail {
			k = run(s, k, isNL)
		}
		return k
	}
	if isWS(c) {
		return wsNewlines(s, i)
	}
	return i + 1
}

// wsNewlines matches \s*[\r\n]+|\s+(?!\S)|\s+ at a whitespace s[i].
func wsNewlines(s []rune, i int) int {
	k, lastNL := i, -1
	for k < len(s) && isWS(s[k]) {
		if isNL(s[k]) {
			lastNL = k
		}
		k++
	}
	if lastNL >= 0 {
		return lastNL + 1
	}
	if k < len(s) && k-i > 1 {
		return k - 1
	}
	return k
}

// caseSplit matches the Tekken (Mistral) and GPT-4o patterns, which split
// words at case changes:
//
//	[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+C?
//	|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*C?
//	|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//
// with C = (?i:'s|'t|'re|'ve|'m|'ll|'d) when contractions is set (GPT-4o).
type caseSplit struct {
	digits       int
	contractions bool
}

// upperLower matches U*L+ at p with backtracking: U* is greedy, and gives
// back characters until L+ can match (runes in both classes allow it).
func upperLower(s []rune, p int) int {
	k := run(s, p, isUpperish)
	for q := k; q >= p; q-- {
		if q < len(s) && isLowerish(s[q]) {
			return run(s, q+1, isLowerish)
		}
	}
	return -1
}

// upperThenLower matches U+L*.
func upperThenLower(s []rune, p int) int {
	k := run(s, p, isUpperish)
	if k == p {
		return -1
	}
	return run(s, k, isLowerish)
}

func (p caseSplit) match(s []rune, i int) int {
	n := len(s)
	c := s[i]
	suffix := func(e int) int {
		if p.contractions && e < n && s[e] == '\'' {
			if e2 := contraction(s, e, true); e2 > 0 {
				return e2
			}
		}
		return e
	}
	pre := isWordPrefix(c) && i+1 < n
	for _, alt := range [...]func([]rune, int) int{upperLower, upperThenLower} {
		if pre {
			if e := alt(s, i+1); e > 0 {
				return suffix(e)
			}
		}
		if e := alt(s, i); e > 0 {
			return suffix(e)
		}
	}
	if isN(c) {
		k := i + 1
		for k < n && k-i < p.digits && isN(s[k]) {
			k++
		}
		return k
	}
	j := i
	if c == ' ' && i+1 < n {
		j = i + 1
	}
	if isOther(s[j]) {
		k := run(s, j+1, isOther)
		return run(s, k, func(r rune) bool { return r == '\r' || r == '\n' || r == '/' })
	}
	if isWS(c) {
		return wsNewlines(s, i)
	}
	return i + 1
}

// classRun matches f+.
func classRun(f func(rune) bool) matcher {
	return func(s []rune, i int) int {
		if !f(s[i]) {
			return -1
		}
		return run(s, i+1, f)
	}
}

// classOne matches a single f.
func classOne(f func(rune) bool) matcher {
	return func(s []rune, i int) int {
		if !f(s[i]) {
			return -1
		}
		return i + 1
	}
}

// spaceClassRun matches \s?f+.
func spaceClassRun(f func(rune) bool) matcher {
	return func(s []rune, i int) int {
		if isWS(s[i]) && i+1 < len(s) && f(s[i+1]) {
			return run(s, i+1, f)
		}
		if f(s[i]) {
			return run(s, i+1, f)
		}
		return -1
	}
}

// trailingSpace matches \s+$ (end of the piece).
func trailingSpace(s []rune, i int) int {
	// Inside a run whose start failed, the run does not reach the end either;
	// checking only run starts keeps long runs linear.
	if !isWS(s[i]) || (i > 0 && isWS(s[i-1])) {
		return -1
	}
	if k := run(s, i, isWS); k == len(s) {
		return k
	}
	return -1
}

// threeDigits matches [0-9][0-9][0-9].
func threeDigits(s []rune, i int) int {
	if i+3 > len(s) {
		return -1
	}
	for k := i; k < i+3; k++ {
		if s[k] < '0' || s[k] > '9' {
			return -1
		}
	}
	return i + 3
}

// bloomWord matches  ?[^(\s|.,!?…。，、।۔،)]+ (BLOOM, Poro, Viking).
func bloomWord(s []rune, i int) int {
	excl := func(r rune) bool {
		switch r {
		case '(', ')', '|', '.', ',', '!', '?', '…', '。', '，', '、', '।', '۔', '،':
			return true
		}
		return isWS(r)
	}
	word := func(r rune) bool { return !excl(r) }
	if s[i] == ' ' && i+1 < len(s) && word(s[i+1]) {
		return run(s, i+1, word)
	}
	if word(s[i]) {
		return run(s, i+1, word)
	}
	return -1
}

// isASCIIPunctSym is [\p{P}\$\+<=>\^~\|] (plus ` for Falcon): Unicode
// punctuation and the ASCII symbols HF's Punctuation pre-tokenizer includes.
func punctSym(backtick bool) func(rune) bool {
	return func(r rune) bool {
		switch r {
		case '$', '+', '<', '=', '>', '^', '~', '|':
			return true
		case '`':
			return backtick
		}
		return isP(r)
	}
}

// deepseekLetters is the letter class of DeepSeek LLM's second regex
// (cased letters, \p{LC} of an older Unicode version), written as code
// points to be immune to Unicode normalization of the source text.
var deepseekLetters = runeRanges{
	{'A', 'Z'}, {'a', 'z'}, {0xB5, 0xB5}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x1BA},
	{0x1BC, 0x1BF}, {0x1C4, 0x293}, {0x295, 0x2AF}, {0x370, 0x373}, {0x376, 0x377},
	{0x37B, 0x37D}, {0x37F, 0x37F}, {0x386, 0x386}, {0x388, 0x38A}, {0x38C, 0x38C},
	{0x38E, 0x3A1}, {0x3A3, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x52F}, {0x531, 0x556},
	{0x10A0, 0x10C5}, {0x13A0, 0x13F5}, {0x13F8, 0x13FD}, {0x1C90, 0x1CBA}, {0x1CBD, 0x1CBF},
	{0x1D00, 0x1D2B}, {0x1D6B, 0x1D77}, {0x1D79, 0x1D9A}, {0x1E00, 0x1F15}, {0x1F18, 0x1F1D},
	{0x1F20, 0x1F45}, {0x1F48, 0x1F4D}, {0x1F50, 0x1F57}, {0x1F59, 0x1F59}, {0x1F5B, 0x1F5B},
	{0x1F5D, 0x1F5D}, {0x1F5F, 0x1F7D}, {0x1F80, 0x1FB4}, {0x1FB6, 0x1FBC}, {0x1FBE, 0x1FBE},
	{0x1FC2, 0x1FC4}, {0x1FC6, 0x1FCC}, {0x1FD0, 0x1FD3}, {0x1FD6, 0x1FDB}, {0x1FE0, 0x1FEC},
	{0x1FF2, 0x1FF4}, {0x1FF6, 0x1FFC}, {0x2102, 0x2102}, {0x2107, 0x2107}, {0x210A, 0x2113},
	{0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
	{0x212A, 0x212D}, {0x212F, 0x2134}, {0x2139, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149},
	{0x214E, 0x214E}, {0x2183, 0x2184}, {0x2C00, 0x2C7B}, {0x2C7E, 0x2CE4}, {0x2CEB, 0x2CEE},
	{0x2CF2, 0x2CF3}, {0xA640, 0xA66D}, {0xA680, 0xA69B}, {0xA722, 0xA76F}, {0xA771, 0xA787},
	{0xA78B, 0xA78E}, {0xAB70, 0xABBF}, {0xFB00, 0xFB06}, {0xFB13, 0xFB17}, {0xFF21, 0xFF3A},
	{0xFF41, 0xFF5A}, {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB}, {0x10C80, 0x10CB2},
	{0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
}

// deepseekPunct is [!-/:-~！-／：-～‘-‟　-。].
var deepseekPunct = runeRanges{
	{'!', '/'}, {':', '~'}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
}

// deepseekCJK is [一-龥ࠀ-一가-퟿].
var deepseekCJK = runeRanges{{0x0800, 0x4E00}, {0x4E00, 0x9FA5}, {0xAC00, 0xD7FF}}

var (
	preGPT2    = &preTokenizer{name: "gpt2", steps: []matcher{matchGPT2}}
	preLlama3  = &preTokenizer{name: "llama3", steps: []matcher{llamaStyle{digits: 3}.match}}
	preQwen2   = &preTokenizer{name: "qwen2", steps: []matcher{llamaStyle{digits: 1}.match}}
	preQwen35  = &preTokenizer{name: "qwen35", steps: []matcher{llamaStyle{digits: 1, marks: true}.match}}
	preSeed    = &preTokenizer{name: "seed-coder", steps: []matcher{llamaStyle{digits: 1, noTrail: true}.match}}
	preTekken  = &preTokenizer{name: "tekken", steps: []matcher{caseSplit{digits: 1}.match}}
	preGPT4o   = &preTokenizer{name: "gpt-4o", steps: []matcher{caseSplit{digits: 3, contractions: true}.match}}
	preDefault = &preTokenizer{name: "default", steps: []matcher{
		classRun(punctSym(false)), matchGPT2, classRun(isN), threeDigits,
	}}
	preFalcon = &preTokenizer{name: "falcon", steps: []matcher{
		classRun(punctSym(true)), matchGPT2, threeDigits,
	}}
	preStarcoder   = &preTokenizer{name: "starcoder", steps: []matcher{classOne(isN), matchGPT2}}
	preDeepseekLLM = &preTokenizer{name: "deepseek-llm", steps: []matcher{
		classOne(isNL),
		spaceClassRun(deepseekLetters.has),
		spaceClassRun(deepseekPunct.has),
		trailingSpace,
		classRun(deepseekCJK.has),
		classRun(isN),
	}}
	preDeepseekCoder = &preTokenizer{name: "deepseek-coder", steps: []matcher{
		classOne(isNL),
		spaceClassRun(isL),
		spaceClassRun(isP),
		classRun(deepseekCJK.has),
		classOne(isN),
	}}
	preBloom  = &preTokenizer{name: "bloom", steps: []matcher{bloomWord}}
	preViking = &preTokenizer{name: "viking", steps: []matcher{bloomWord, classOne(isN)}}
)

// bpePre describes a BPE pre-tokenizer type as llama.cpp's llama-vocab.cpp
// configures it from tokenizer.ggml.pre.
type bpePre struct {
	pre          *preTokenizer
	ignoreMerges bool // a word that is a whole vocab entry is not merged
	addBOS       bool // default for tokenizer.ggml.add_bos_token
	noBOS        bool // the default BOS id is dropped (ChatGLM)
}

func lookupPre(name string) (bpePre, error) {
	switch name {
	case "", "default":
		return bpePre{pre: preDefault}, nil
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano":
		return bpePre{pre: preLlama3, ignoreMerges: true, addBOS: true}, nil
	case "dbrx", "smaug-bpe":
		return bpePre{pre: preLlama3}, nil
	case "glm4", "chatglm-bpe":
		return bpePre{pre: preLlama3, noBOS: true}, nil
	case "deepseek-llm":
		return bpePre{pre: preDeepseekLLM}, nil
	case "deepseek-coder":
		return bpePre{pre: preDeepseekCoder}, nil
	case "falcon":
		return bpePre{pre: preFalcon}, nil
	case "gpt-2", "mpt", "olmo", "jais", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de",
		"a.x-4.0", "mellum", "modern-bert", "jina-v1-en", "jina-v2-code", "roberta-bpe", "exaone4",
		"trillion", "granite-docling":
		return bpePre{pre: preGPT2}, nil
	case "starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b", "mellum2":
		return bpePre{pre: preStarcoder}, nil
	case "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2", "megrez", "stablelm2", "hunyuan", "solar-open", "grok-2":
		return bpePre{pre: preQwen2}, nil
	case "qwen35":
		return bpePre{pre: preQwen35}, nil
	case "seed-coder":
		return bpePre{pre: preSeed}, nil
	case "tekken":
		return bpePre{pre: preTekken, ignoreMerges: true, addBOS: true}, nil
	case "gpt-4o", "llama4", "kanana2", "talkie":
		return bpePre{pre: preGPT4o}, nil
	case "poro-chat", "bloom", "gpt3-finnish":
		return bpePre{pre: preBloom}, nil
	case "viking":
		return bpePre{pre: preViking}, nil
	}
	return bpePre{}, fmt.Errorf("unsupported BPE pre-tokenizer %q (tokenizer.ggml.pre)", name)
}

// decodeRunes converts text to code points, each invalid byte becoming
// U+FFFD as in llama.cpp's unicode_cpts_from_utf8, and records the byte
// offset of every code point in the normalized text (offs has one extra
// entry for the end). It reports whether text was valid UTF-8.
func decodeRunes(text string, cps []rune, offs []int32) ([]rune, []int32, bool) {
	valid := true
	var off int32
	for i := 0; i < len(text); {
		r, size := utf8.DecodeRuneInString(text[i:])
		if r == utf8.RuneError && size == 1 {
			valid = false
		}
		cps = append(cps, r)
		offs = append(offs, off)
		off += int32(utf8.RuneLen(r))
		i += size
	}
	offs = append(offs, off)
	return cps, offs, valid
}
