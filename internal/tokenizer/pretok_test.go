package tokenizer

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// The oracle runs the original regexes with Go's regexp, which picks the
// match a backtracking engine would. Go has no lookahead, so \s+(?!\S) is
// evaluated from its definition; \s is spelled out as Unicode White_Space
// (Go's \s is ASCII only).

const wsClass = `\t\n\v\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

type oracleStep struct {
	re          *regexp.Regexp
	wsLookahead bool // then \s+(?!\S)|\s+
}

func oracle(pattern string, wsLookahead bool) oracleStep {
	p := strings.ReplaceAll(pattern, `\s`, "["+wsClass+"]")
	p = strings.ReplaceAll(p, "WS", wsClass)
	return oracleStep{re: regexp.MustCompile(`^(?:` + p + `)`), wsLookahead: wsLookahead}
}

func (o oracleStep) match(s []rune, i int) int {
	if loc := o.re.FindStringIndex(string(s[i:])); loc != nil && loc[1] > 0 {
		return i + utf8.RuneCountInString(string(s[i:])[:loc[1]])
	}
	if !o.wsLookahead || !unicode.Is(unicode.White_Space, s[i]) {
		return -1
	}
	k := i
	for k < len(s) && unicode.Is(unicode.White_Space, s[k]) {
		k++
	}
	// \s+(?!\S): the longest run whose next rune is not a non-space.
	for e := k; e > i; e-- {
		if e == len(s) || unicode.Is(unicode.White_Space, s[e]) {
			return e
		}
	}
	return k // \s+
}

const contr = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`
const gpt2Re = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^WS\p{L}\p{N}]+`

func oracleFor(name string) []oracleStep {
	cjk := `[\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+`
	switch name {
	case "gpt2":
		return []oracleStep{oracle(gpt2Re, true)}
	case "llama3":
		return []oracleStep{oracle(contr+`|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^WS\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+`, true)}
	case "qwen2":
		return []oracleStep{oracle(contr+`|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^WS\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+`, true)}
	case "qwen35":
		return []oracleStep{oracle(contr+`|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^WS\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+`, true)}
	case "seed-coder":
		return []oracleStep{oracle(contr+`|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^WS\p{L}\p{N}\r\n]+|\s*[\r\n]+`, true)}
	case "tekken":
		return []oracleStep{oracle(`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^WS\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+`, true)}
	case "gpt-4o":
		return []oracleStep{oracle(`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+`+contr+`?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*`+contr+`?|\p{N}{1,3}| ?[^WS\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+`, true)}
	case "default":
		return []oracleStep{oracle(`[\p{P}\$\+<=>\^~\|]+`, false), oracle(gpt2Re, true), oracle(`\p{N}+`, false), oracle(`[0-9][0-9][0-9]`, false)}
	case "falcon":
		return []oracleStep{oracle("[\\p{P}\\$\\+<=>\\^~\\|`]+", false), oracle(gpt2Re, true), oracle(`[0-9][0-9][0-9]`, false)}
	case "starcoder":
		return []oracleStep{oracle(`\p{N}`, false), oracle(gpt2Re, true)}
	case "deepseek-coder":
		return []oracleStep{oracle(`[\r\n]`, false), oracle(`\s?\p{L}+`, false), oracle(`\s?\p{P}+`, false), oracle(cjk, false), oracle(`\p{N}`, false)}
	case "deepseek-llm":
		var letters strings.Builder
		for _, r := range deepseekLetters {
			letters.WriteString(regexp.QuoteMeta(string(r[0])) + "-" + regexp.QuoteMeta(string(r[1])))
		}
		return []oracleStep{oracle(`[\r\n]`, false), oracle(`\s?[`+letters.String()+`]+`, false),
			oracle(`\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+`, false),
			oracle(`\s+$`, false), oracle(cjk, false), oracle(`\p{N}+`, false)}
	case "bloom":
		return []oracleStep{oracle(`[ ]?[^(WS|.,!?…。，、।۔،)]+`, false)}
	case "viking":
		return []oracleStep{oracle(`[ ]?[^(WS|.,!?…。，、।۔،)]+`, false), oracle(`\p{N}`, false)}
	}
	return nil
}

// oracleSplit applies the oracle steps as llama.cpp's unicode_regex_split:
// matches and the gaps between them become pieces.
func oracleSplit(steps []oracleStep, text string) []string {
	pieces := []string{text}
	if text == "" {
		return nil
	}
	for _, st := range steps {
		var next []string
		for _, p := range pieces {
			s := []rune(p)
			gap := 0
			for i := 0; i < len(s); {
				e := st.match(s, i)
				if e <= i {
					i++
					continue
				}
				if gap < i {
					next = append(next, string(s[gap:i]))
				}
				next = append(next, string(s[i:e]))
				i, gap = e, e
			}
			if gap < len(s) {
				next = append(next, string(s[gap:]))
			}
		}
		pieces = next
	}
	return pieces
}

var allPre = map[string]*preTokenizer{
	"gpt2": preGPT2, "llama3": preLlama3, "qwen2": preQwen2, "qwen35": preQwen35, "seed-coder": preSeed,
	"tekken": preTekken, "gpt-4o": preGPT4o, "default": preDefault, "falcon": preFalcon,
	"starcoder": preStarcoder, "deepseek-coder": preDeepseekCoder, "deepseek-llm": preDeepseekLLM,
	"bloom": preBloom, "viking": preViking,
}

// alphabet mixes the classes the regexes distinguish: spaces of several
// kinds, cased and uncased letters, marks, numbers, punctuation, symbols,
// CJK and Hangul, apostrophes and contraction letters.
var alphabet = []rune{
	' ', ' ', ' ', '\t', '\n', '\r', '\v', 0xA0, 0x3000, 0x2009, 0x85,
	'a', 'b', 's', 't', 'r', 'e', 'v', 'l', 'm', 'd', 'A', 'S', 'T', 'R', 'E', 'L', 'D', 'M', 'V', 'ſ',
	'\'', '\'', '"', '.', ',', '!', '?', '(', ')', '-', '/', '_', '$', '+', '<', '=', '>', '^', '`', '|', '~',
	'0', '1', '2', '9', '²', 'Ⅻ', '٣', '½',
	0x301, 0x903, 0x20DD, // marks Mn, Mc, Me
	'ǅ', 'ʰ', 'ª', 'µ', 'ß', 'Ä', 'é', 'Ω', 'ω', 'Ω', 'K', 'ι', 'ж', 'Ж',
	'中', '文', '한', 'ࠀ', 'あ', 'ア', '…', '。', '，', '、', '।', '۔', '،', '‘', '“', '！', 'Ａ', 'ａ',
	'🦙', '😀', 0xFE0F, 0x200D, 0xFFFD, 0x378, 0xE000,
}

func randText(r *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteRune(alphabet[r.IntN(len(alphabet))])
	}
	return b.String()
}

func TestPreTokenizersMatchRegexOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	iters := 600 // FuzzPreTokenizers explores further
	if testing.Short() {
		iters = 100
	}
	fixed := []string{
		"", " ", "  ", "   ", "\t", "\n", "\n\n\n", "\t\n", " \n", "  \n  x", "Hello world", " Hello world",
		"Hello, y'all! How are you 😁 ?我想在apple工作1314151天～", "3333333", "33 333 33333",
		"   Hello\n    Hello", "' era", "\n =", "HelloWorld HELLOworld helloWORLD ABCdef", "don't I'LL we'Re",
		"a\u0301b\u0301 Ç\u0301A", "x  ", "x \u3000y", "\u3000\u3000", "𝒜𝓑𝓬", "ǅungla ǄUNG",
	}
	for name, pre := range allPre {
		steps := oracleFor(name)
		if steps == nil {
			t.Fatalf("no oracle for %s", name)
		}
		check := func(s string) {
			got := pre.splitString(s)
			want := oracleSplit(steps, s)
			if !slices.Equal(got, want) {
				t.Fatalf("%s split %q:\n got  %q\n want %q", name, s, got, want)
			}
		}
		for _, s := range fixed {
			check(s)
		}
		for range iters {
			check(randText(r, r.IntN(24)))
		}
	}
}

func FuzzPreTokenizers(f *testing.F) {
	f.Add("Hello, y'all! How are you 😁 ?我想在apple工作1314151天～")
	f.Add("   Hello\n    Hello\t\t x  ")
	f.Add("HelloWorld HELLOworld a\u0301b")
	oracles := map[string][]oracleStep{}
	for name := range allPre {
		oracles[name] = oracleFor(name)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || len(s) > 200 {
			return
		}
		for name, pre := range allPre {
			got := pre.splitString(s)
			if want := oracleSplit(oracles[name], s); !slices.Equal(got, want) {
				t.Fatalf("%s split %q:\n got  %q\n want %q", name, s, got, want)
			}
		}
	})
}

// Hand-checked splits of the most used pre-tokenizers.
func TestPreTokenizerExamples(t *testing.T) {
	cases := []struct {
		pre  *preTokenizer
		in   string
		want []string
	}{
		{preLlama3, "Hello, world!  It's 12345 \n\n x", []string{"Hello", ",", " world", "!", " ", " It", "'s", " ", "123", "45", " \n\n", " x"}},
		{preLlama3, "   Hello\n    Hello", []string{"  ", " Hello", "\n", "   ", " Hello"}},
		{preQwen2, "ab 12345 c", []string{"ab", " ", "1", "2", "3", "4", "5", " c"}},
		{preQwen2, "x{\n  y: 'a'}\n", []string{"x", "{\n", " ", " y", ":", " '", "a", "'}\n"}},
		{preGPT2, "Hello  world 42x", []string{"Hello", " ", " world", " 42", "x"}},
		{preGPT2, "I'LL don't", []string{"I", "'", "LL", " don", "'t"}},
		{preStarcoder, "x = 123;", []string{"x", " =", " ", "1", "2", "3", ";"}},
		{preTekken, "HelloWorld HTTPServer", []string{"Hello", "World", " HTTPServer"}},
		{preDeepseekCoder, "def f(x):\n  return 12", []string{"def", " f", "(", "x", "):", "\n", " ", " return", " ", "1", "2"}},
		{preFalcon, "1234567 a", []string{"123", "456", "7", " a"}},
	}
	for _, c := range cases {
		if got := c.pre.splitString(c.in); !slices.Equal(got, c.want) {
			t.Errorf("%s split %q:\n got  %q\n want %q", c.pre.name, c.in, got, c.want)
		}
	}
}

// DeepSeek's letter class is \p{LC} (cased letters) of an older Unicode:
// every listed code point must still be a cased letter.
func TestDeepseekLettersAreCased(t *testing.T) {
	for _, rg := range deepseekLetters {
		if rg[0] > rg[1] {
			t.Fatalf("bad range %U-%U", rg[0], rg[1])
		}
		for r := rg[0]; r <= rg[1]; r++ {
			if !unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt) {
				t.Errorf("%U (%q) is not a cased letter", r, r)
			}
		}
	}
	for i := 1; i < len(deepseekLetters); i++ {
		if deepseekLetters[i][0] <= deepseekLetters[i-1][1] {
			t.Errorf("ranges %d and %d overlap or are unsorted", i-1, i)
		}
	}
}
