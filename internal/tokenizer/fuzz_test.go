package tokenizer

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

type fuzzTok struct {
	name     string
	tok      *Tokenizer
	lossless bool // Decode(Encode(s)) == s for valid UTF-8 s
}

var (
	fuzzToksOnce sync.Once
	fuzzToks     []fuzzTok
)

// sharedVocab finds a shared vocab file without skipping (fuzz targets use
// whatever is present).
func sharedVocab(name string) string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, "shared", "testdata", "vocab", "ggml-vocab-"+name+".gguf")
		if _, err := os.Stat(p); err == nil {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func fuzzTokenizers(t testing.TB) []fuzzTok {
	fuzzToksOnce.Do(func() {
		special := []vtok{{"<|im_start|>", TypeControl, 0}, {"<|im_end|>", TypeControl, 0}}
		fuzzToks = []fuzzTok{
			{"spm", mustTok(t, spmMeta(spmPieces, special...)), true},
			{"bpe-qwen2", mustTok(t, bpeMeta("qwen2", gpt2Merges, special...)), true},
			{"bpe-llama3", mustTok(t, bpeMeta("llama-bpe", gpt2Merges, special...)), true},
			{"bpe-tekken", mustTok(t, bpeMeta("tekken", gpt2Merges, special...)), true},
			{"bpe-deepseek-llm", mustTok(t, bpeMeta("deepseek-llm", gpt2Merges, special...)), true},
		}
		for _, name := range []string{"llama-spm", "gpt-2", "deepseek-coder", "gpt-neox"} {
			if p := sharedVocab(name); p != "" {
				fuzzToks = append(fuzzToks, fuzzTok{name, loadVocab(t, p), true})
			}
		}
	})
	return fuzzToks
}

// checkEncode is the property every tokenizer must hold on any input.
func checkEncode(t *testing.T, ft fuzzTok, s string) {
	tok := ft.tok
	ids := tok.Encode(s, false, false)
	for _, id := range ids {
		if id < 0 || int(id) >= tok.VocabSize() {
			t.Fatalf("%s: Encode(%q) gave id %d", ft.name, s, id)
		}
	}
	tok.Encode(s, true, true)
	dec := tok.Decode(ids)
	if ft.lossless && utf8.ValidString(s) && dec != s {
		t.Fatalf("%s: Decode(Encode(%q)) = %q (ids %v)", ft.name, s, dec, ids)
	}
	if !utf8.ValidString(dec) {
		t.Fatalf("%s: Decode gave invalid UTF-8 %q", ft.name, dec)
	}
	d := tok.NewDecoder()
	var b strings.Builder
	for _, id := range ids {
		out := d.Add(id)
		if !utf8.ValidString(out) {
			t.Fatalf("%s: stream chunk %q is not valid UTF-8", ft.name, out)
		}
		b.WriteString(out)
	}
	b.WriteString(d.Flush())
	if b.String() != dec {
		t.Fatalf("%s: stream %q != Decode %q", ft.name, b.String(), dec)
	}
}

func FuzzEncode(f *testing.F) {
	for _, s := range []string{
		"", " ", "Hello world", " Hello  world\n\n", "<|im_start|>user\nhi<|im_end|>", "é🦙中文 ½ ²",
		"don't I'LL 12345", "\xff\xfe invalid \xe2\x82", "\t\r\n\v\f", "a\u0301\u200d\ufe0f",
	} {
		f.Add(s)
	}
	toks := fuzzTokenizers(f)
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 4096 {
			return
		}
		for _, ft := range toks {
			checkEncode(t, ft, s)
		}
	})
}

func newRand() *rand.Rand { return rand.New(rand.NewPCG(3, 4)) }

// TestEncodeRandom runs the fuzz property on random texts in ordinary test
// runs.
func TestEncodeRandom(t *testing.T) {
	toks := fuzzTokenizers(t)
	r := newRand()
	n := 300
	if testing.Short() {
		n = 50
	}
	for range n {
		s := randText(r, r.IntN(40))
		for _, ft := range toks {
			checkEncode(t, ft, s)
		}
	}
}

// prompt2K is a 2 KB chat-like prompt mixing prose, code and numbers.
var prompt2K = func() string {
	base := "You are a helpful assistant. The user asks: how do I parse a 2 KB JSON document in Go, " +
		"e.g. {\"id\": 12345, \"name\": \"Ünïcödé\", \"tags\": [\"a\", \"b\"]}? Please explain step by step.\n\n" +
		"func main() {\n\tvar v map[string]any\n\tif err := json.Unmarshal(data, &v); err != nil {\n\t\tlog.Fatal(err)\n\t}\n}\n"
	var b strings.Builder
	for b.Len() < 2048 {
		b.WriteString(base)
	}
	return b.String()[:2048]
}()

func benchEncode(b *testing.B, tok *Tokenizer) {
	b.SetBytes(int64(len(prompt2K)))
	b.ReportAllocs()
	for b.Loop() {
		tok.Encode(prompt2K, true, true)
	}
}

func BenchmarkEncode2K(b *testing.B) {
	b.Run("tiny-spm", func(b *testing.B) { benchEncode(b, mustTok(b, spmMeta(spmPieces))) })
	b.Run("tiny-bpe-llama3", func(b *testing.B) { benchEncode(b, mustTok(b, bpeMeta("llama-bpe", gpt2Merges))) })
	for _, name := range []string{"llama-spm", "gpt-2", "deepseek-llm", "starcoder"} {
		b.Run(name, func(b *testing.B) {
			p := sharedVocab(name)
			if p == "" {
				b.Skip("shared vocab absent")
			}
			benchEncode(b, loadVocab(b, p))
		})
	}
}

func BenchmarkDecodeStream(b *testing.B) {
	p := sharedVocab("llama-spm")
	if p == "" {
		b.Skip("shared vocab absent")
	}
	tok := loadVocab(b, p)
	ids := tok.Encode(prompt2K, true, false)
	b.ReportAllocs()
	for b.Loop() {
		d := tok.NewDecoder()
		for _, id := range ids {
			d.Add(id)
		}
		d.Flush()
	}
}

// TestEncodeLimit checks EncodeLimit against Encode: the same tokens and
// true at or above the token count, false below it, for every tokenizer
// and a few texts (special tokens, invalid UTF-8, long runs).
func TestEncodeLimit(t *testing.T) {
	r := newRand()
	texts := []string{"", "Hello world", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", "\xff\xfe invalid \xe2\x82",
		strings.Repeat("ab ", 200), strings.Repeat(" ", 300)}
	for range 40 {
		texts = append(texts, randText(r, r.IntN(200)))
	}
	for _, ft := range fuzzTokenizers(t) {
		for _, s := range texts {
			for _, add := range []bool{false, true} {
				want := ft.tok.Encode(s, add, true)
				n := len(want)
				for _, limit := range []int{0, n / 2, n - 1, n, n + 1, 10 * n} {
					if limit < 0 {
						continue
					}
					got, ok := ft.tok.EncodeLimit(s, add, true, limit)
					if ok != (n <= limit) {
						t.Fatalf("%s: EncodeLimit(%q, %d) ok = %v with %d tokens", ft.name, s, limit, ok, n)
					}
					if ok && !slices.Equal(got, want) {
						t.Fatalf("%s: EncodeLimit(%q, %d) = %v, Encode %v", ft.name, s, limit, got, want)
					}
					pre, all := ft.tok.EncodePrefix(s, add, true, limit)
					if all != (n <= limit) || !slices.Equal(pre, want[:min(n, limit)]) {
						t.Fatalf("%s: EncodePrefix(%q, %d) = %v, %v; Encode %v", ft.name, s, limit, pre, all, want)
					}
				}
			}
		}
		if b := ft.tok.MaxTokenBytes(); b > 0 {
			// Refused from the length alone: no work for a huge text.
			if _, ok := ft.tok.EncodeLimit(strings.Repeat("x", 1<<20), false, false, (1<<20)/b-1); ok {
				t.Fatalf("%s: a 1 MiB text fit %d tokens", ft.name, (1<<20)/b-1)
			}
		}
	}
}
