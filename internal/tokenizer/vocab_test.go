package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/testutil"
)

type vocabCase struct {
	text string
	ids  []int32
}

// readVocabCases parses llama.cpp's test-tokenizer-0 files: .inp holds the
// texts, each followed by "\n__ggml_vocab_test__\n"; .out one line of
// space-separated ids per text.
func readVocabCases(t *testing.T, inp, out string) []vocabCase {
	t.Helper()
	rawIn, err := os.ReadFile(inp)
	if err != nil {
		t.Fatal(err)
	}
	rawOut, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	var texts []string
	s := string(rawIn)
	for pos := 0; pos < len(s); {
		next := strings.Index(s[pos:], sep)
		if next < 0 {
			texts = append(texts, s[pos:])
			break
		}
		texts = append(texts, s[pos:pos+next])
		pos += next + len(sep)
	}
	lines := strings.Split(strings.TrimSuffix(string(rawOut), "\n"), "\n")
	if len(lines) != len(texts) {
		t.Fatalf("%s: %d texts but %d result lines", inp, len(texts), len(lines))
	}
	cases := make([]vocabCase, len(texts))
	for i, line := range lines {
		cases[i].text = texts[i]
		for _, f := range strings.Fields(line) {
			v, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s line %d: %v", out, i+1, err)
			}
			cases[i].ids = append(cases[i].ids, int32(v))
		}
	}
	return cases
}

var (
	vocabMu    sync.Mutex
	vocabCache = map[string]*Tokenizer{}
)

// loadVocab loads a vocab file once per test binary (tokenizers are
// immutable, so tests share them).
func loadVocab(t testing.TB, path string) *Tokenizer {
	t.Helper()
	vocabMu.Lock()
	defer vocabMu.Unlock()
	if tok, ok := vocabCache[path]; ok {
		return tok
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	vocabCache[path] = tok
	return tok
}

// TestVocabFiles checks every shared vocab that has test vectors and a
// tokenizer in scope: each text must encode (no BOS/EOS, no special
// parsing, as test-tokenizer-0) to exactly the recorded ids.
func TestVocabFiles(t *testing.T) {
	dir := filepath.Join(testutil.SharedDir(t), "testdata", "vocab")
	inps, _ := filepath.Glob(filepath.Join(dir, "*.gguf.inp"))
	if len(inps) == 0 {
		t.Skip("no vocab test vectors")
	}
	for _, inp := range inps {
		gg := strings.TrimSuffix(inp, ".inp")
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(gg), "ggml-vocab-"), ".gguf")
		t.Run(name, func(t *testing.T) {
			if _, err := os.Stat(gg); err != nil {
				t.Skipf("no %s (test vectors only)", filepath.Base(gg))
			}
			f, err := gguf.Open(gg)
			if err != nil {
				t.Fatal(err)
			}
			model, _ := f.String("tokenizer.ggml.model")
			f.Close()
			if model != "llama" && model != "gpt2" {
				t.Skipf("tokenizer model %q is out of scope", model)
			}
			tok := loadVocab(t, gg)
			cases := readVocabCases(t, inp, gg+".out")
			failed := 0
			for _, c := range cases {
				got := tok.Encode(c.text, false, false)
				if !slices.Equal(got, c.ids) {
					failed++
					t.Errorf("Encode(%q)\n got  %v\n want %v", c.text, got, c.ids)
				}
				// These tokenizers are lossless on valid text (no space
				// clean-up), so the recorded ids decode to the text.
				if d := tok.Decode(c.ids); d != c.text {
					t.Errorf("Decode(%v) = %q, want %q", c.ids, d, c.text)
				}
			}
			t.Logf("%s: %d/%d cases pass", name, len(cases)-failed, len(cases))
		})
	}
}

func TestVocabSpecials(t *testing.T) {
	dir := filepath.Join(testutil.SharedDir(t), "testdata", "vocab")
	for _, c := range []struct {
		file     string
		bos, eos int32
		addBOS   bool
		eog      []string
	}{
		{"llama-spm", 1, 2, true, []string{"</s>"}},
		{"gpt-2", 50256, 50256, false, []string{"<|endoftext|>"}},
		{"starcoder", 0, 0, false, []string{"<|endoftext|>", "<fim_pad>"}},
		{"deepseek-llm", 100000, 100001, true, []string{"<｜end▁of▁sentence｜>"}},
		{"deepseek-coder", 32013, 32014, true, []string{"<｜end▁of▁sentence｜>"}},
	} {
		path := filepath.Join(dir, "ggml-vocab-"+c.file+".gguf")
		if _, err := os.Stat(path); err != nil {
			continue
		}
		tok := loadVocab(t, path)
		if tok.BOS() != c.bos || tok.EOS() != c.eos || tok.AddBOS() != c.addBOS {
			t.Errorf("%s: bos %d eos %d addBOS %v", c.file, tok.BOS(), tok.EOS(), tok.AddBOS())
		}
		for _, s := range c.eog {
			if !tok.IsEOG(id(t, tok, s)) {
				t.Errorf("%s: %q is not EOG", c.file, s)
			}
		}
		if c.file == "llama-spm" && (tok.Unk() != 0 || tok.Pad() != -1 || tok.Model() != "llama") {
			t.Errorf("llama-spm: unk %d pad %d model %q", tok.Unk(), tok.Pad(), tok.Model())
		}
		if c.file == "deepseek-llm" && (tok.Pad() != 100001 || tok.Unk() != -1 || tok.Pre() != "deepseek-llm") {
			t.Errorf("deepseek-llm: pad %d unk %d pre %q", tok.Pad(), tok.Unk(), tok.Pre())
		}
		if tok.IsEOG(tok.BOS()) && tok.BOS() != tok.EOS() {
			t.Errorf("%s: BOS is EOG", c.file)
		}
	}
}

// The real models' prompts and generations recorded from llama.cpp.
func TestRealModelTokens(t *testing.T) {
	shared := testutil.SharedDir(t)
	t.Run("stories260K", func(t *testing.T) {
		path := filepath.Join(shared, "testdata", "real", "stories260K.gguf")
		if _, err := os.Stat(path); err != nil {
			t.Skip(err)
		}
		tok := loadVocab(t, path)
		if got := tok.Encode("Once upon a time", true, false); !slices.Equal(got, []int32{1, 403, 407, 261, 378}) {
			t.Errorf("prompt tokens %v", got)
		}
		gen := []int32{432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408,
			419, 292, 411, 322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394}
		want := ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw"
		if got := tok.Decode(gen); got != want {
			t.Errorf("Decode = %q", got)
		}
	})
	t.Run("reference", func(t *testing.T) {
		path := filepath.Join(shared, "testdata", "reference", "reference.json")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Skip(err)
		}
		var ref struct {
			Prompt       string  `json:"prompt"`
			PromptTokens []int32 `json:"prompt_tokens"`
			Models       map[string]struct {
				File   string  `json:"file"`
				Greedy []int32 `json:"greedy_32_tokens"`
				Text   *string `json:"greedy_32_text"`
			} `json:"models"`
		}
		if err := json.Unmarshal(raw, &ref); err != nil {
			t.Fatal(err)
		}
		checked := 0
		for name, m := range ref.Models {
			tok := loadVocab(t, filepath.Join(shared, "testdata", "reference", m.File))
			if got := tok.Encode(ref.Prompt, true, false); !slices.Equal(got, ref.PromptTokens) {
				t.Errorf("%s: prompt tokens %v, want %v", name, got, ref.PromptTokens)
			}
			if m.Text == nil {
				continue
			}
			// The server's text is the concatenated token pieces.
			d := tok.NewContinuationDecoder()
			var b strings.Builder
			for _, id := range m.Greedy {
				b.WriteString(d.Add(id))
			}
			b.WriteString(d.Flush())
			if b.String() != *m.Text {
				t.Errorf("%s: generated text %q, want %q", name, b.String(), *m.Text)
			}
			checked++
		}
		if checked == 0 {
			t.Error("no generated text checked")
		}
	})
}

// Every in-scope vocab loads and round-trips text, also those without test
// vectors (baichuan, gpt-neox).
func TestVocabLoadAll(t *testing.T) {
	dir := filepath.Join(testutil.SharedDir(t), "testdata", "vocab")
	files, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	const sample = "Hello, world! 12345 \n\n  Ünïcödé 🦙 中文 <|endoftext|> don't"
	for _, p := range files {
		f, err := gguf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		model, _ := f.String("tokenizer.ggml.model")
		f.Close()
		if model != "llama" && model != "gpt2" {
			continue
		}
		tok := loadVocab(t, p)
		if got := tok.Decode(tok.Encode(sample, false, false)); got != sample {
			t.Errorf("%s: round trip gave %q", filepath.Base(p), got)
		}
	}
}
