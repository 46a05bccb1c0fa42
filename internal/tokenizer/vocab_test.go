package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

func loadVocab(t testing.TB, path string) *Tokenizer {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
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
			}
			t.Logf("%s: %d/%d cases pass", name, len(cases)-failed, len(cases))
		})
	}
}
