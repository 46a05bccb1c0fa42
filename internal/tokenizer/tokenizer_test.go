package tokenizer

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"testing"

	"mistralrs/internal/gguf"
)

func TestSPMEncode(t *testing.T) {
	tok := mustTok(t, spmMeta(spmPieces))
	cases := []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"▁Hello", "▁world"}},
		{" Hello", []string{"▁", "▁Hello"}},
		{"the", []string{"▁the"}},
		{"Hello\nworld", []string{"▁Hello", "\n", "w", "or", "ld"}},
		{"é", []string{"▁", "<0xC3>", "<0xA9>"}}, // byte fallback
		{"", nil},
	}
	for _, c := range cases {
		got := texts(tok, tok.Encode(c.in, false, false))
		if !slices.Equal(got, c.want) && !(len(got) == 0 && len(c.want) == 0) {
			t.Errorf("Encode(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if got := tok.Encode("Hello", true, false); got[0] != tok.BOS() || len(got) != 2 {
		t.Errorf("addSpecial: %v", got)
	}
	if got := tok.Encode("", true, false); !slices.Equal(got, []int32{1}) {
		t.Errorf("empty with addSpecial = %v, want [1]", got)
	}
}

// The pair forming the highest-scoring token merges first; equal scores go
// to the leftmost pair.
func TestSPMMergeOrder(t *testing.T) {
	for _, c := range []struct {
		pieces []string
		want   []string
	}{
		{[]string{"ab", "bc", "a", "b", "c"}, []string{"ab", "c"}},
		{[]string{"bc", "ab", "a", "b", "c"}, []string{"a", "bc"}},
	} {
		md := spmMeta(c.pieces)
		md["tokenizer.ggml.add_space_prefix"] = false
		tok := mustTok(t, md)
		if got := texts(tok, tok.Encode("abc", false, false)); !slices.Equal(got, c.want) {
			t.Errorf("pieces %q: got %q want %q", c.pieces, got, c.want)
		}
	}
	// Equal scores: leftmost first.
	md := spmMeta(nil, vtok{"ab", TypeNormal, -1}, vtok{"bc", TypeNormal, -1}, vtok{"a", TypeNormal, -5},
		vtok{"b", TypeNormal, -5}, vtok{"c", TypeNormal, -5})
	md["tokenizer.ggml.add_space_prefix"] = false
	tok := mustTok(t, md)
	if got := texts(tok, tok.Encode("abc", false, false)); !slices.Equal(got, []string{"ab", "c"}) {
		t.Errorf("tie: got %q", got)
	}
}

func TestSPMSpecialTokens(t *testing.T) {
	tok := mustTok(t, spmMeta(spmPieces,
		vtok{"<|im_start|>", TypeControl, 0},
		vtok{"<|im_end|>", TypeNormal, 0}, // converted as normal: llama.cpp makes it control and EOG
		vtok{"[TOOL]", TypeUserDefined, 0},
	))
	start, end, tool := id(t, tok, "<|im_start|>"), id(t, tok, "<|im_end|>"), id(t, tok, "[TOOL]")

	got := tok.Encode("<|im_start|>Hello<|im_end|>", false, true)
	if want := []int32{start, id(t, tok, "▁Hello"), end}; !slices.Equal(got, want) {
		t.Errorf("parseSpecial: %q", texts(tok, got))
	}
	// Without parseSpecial control texts are plain text...
	got = tok.Encode("<|im_start|>", false, false)
	if slices.Contains(got, start) {
		t.Errorf("control token recognised without parseSpecial: %q", texts(tok, got))
	}
	// ...but user-defined tokens are always matched whole, and the text
	// after a special token gets the space prefix.
	got = tok.Encode("Hello[TOOL]world", false, false)
	if want := []string{"▁Hello", "[TOOL]", "▁world"}; !slices.Equal(texts(tok, got), want) {
		t.Errorf("user-defined: %q", texts(tok, got))
	}
	if !tok.IsEOG(end) || !tok.IsControl(end) || !tok.IsEOG(tok.EOS()) || tok.IsEOG(start) {
		t.Errorf("EOG: end=%v/%v eos=%v start=%v", tok.IsEOG(end), tok.IsControl(end), tok.IsEOG(tok.EOS()), tok.IsEOG(start))
	}
	if tok.EOT() != end {
		t.Errorf("EOT = %d, want %d", tok.EOT(), end)
	}
	// Decode does not render control tokens but does render user-defined ones.
	if got := tok.Decode([]int32{tok.BOS(), start, id(t, tok, "▁Hello"), tool, end}); got != " Hello[TOOL]" {
		t.Errorf("Decode = %q", got)
	}
}

func TestSPMDecode(t *testing.T) {
	tok := mustTok(t, spmMeta(spmPieces))
	for _, s := range []string{"Hello world", " Hello  world ", "é ü 🦙", "\n\nx", ""} {
		ids := tok.Encode(s, false, false)
		if got := tok.Decode(ids); got != s {
			t.Errorf("Decode(Encode(%q)) = %q", s, got)
		}
		// A leading BOS does not keep the prefix space.
		if got := tok.Decode(tok.Encode(s, true, false)); got != s {
			t.Errorf("Decode(Encode(%q, bos)) = %q", s, got)
		}
	}
	// Only the first token loses its space.
	hello, world := id(t, tok, "▁Hello"), id(t, tok, "▁world")
	if got := tok.Decode([]int32{world, hello}); got != "world Hello" {
		t.Errorf("got %q", got)
	}
	if got := string(tok.TokenBytes(hello)); got != " Hello" {
		t.Errorf("TokenBytes = %q", got)
	}
	if got := tok.TokenBytes(id(t, tok, "<0x41>")); !bytes.Equal(got, []byte("A")) {
		t.Errorf("byte token = %q", got)
	}
	if tok.TokenBytes(-1) != nil || tok.TokenBytes(int32(tok.VocabSize())) != nil {
		t.Error("out-of-range TokenBytes")
	}
	// Without the space prefix nothing is stripped.
	md := spmMeta(spmPieces)
	md["tokenizer.ggml.add_space_prefix"] = false
	tok2 := mustTok(t, md)
	if got := tok2.Encode("Hello", false, false); texts(tok2, got)[0] == "▁Hello" {
		t.Errorf("space prefix added: %q", texts(tok2, got))
	}
	if got := tok2.Decode([]int32{id(t, tok2, "▁Hello")}); got != " Hello" {
		t.Errorf("got %q", got)
	}
}

func TestBPEEncode(t *testing.T) {
	tok := mustTok(t, bpeMeta("qwen2", gpt2Merges))
	cases := []struct {
		in   string
		want []string
	}{
		{"Hello world", []string{"Hello", "Ġworld"}},
		{"Hello the world", []string{"Hello", "Ġthe", "Ġworld"}},
		{"  the", []string{"Ġ", "Ġthe"}},
		{"123", []string{"1", "2", "3"}}, // qwen2 splits digits
		{"\n\n", []string{"ĊĊ"}},
		{"é", []string{"Ã", "©"}},
	}
	for _, c := range cases {
		if got := texts(tok, tok.Encode(c.in, false, false)); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if tok.AddBOS() || tok.BOS() != 11 {
		t.Errorf("qwen2 defaults: addBOS %v bos %d", tok.AddBOS(), tok.BOS())
	}
	if got := tok.Encode("Hello", true, false); len(got) != 1 {
		t.Errorf("qwen2 adds no BOS: %v", got)
	}

	// Llama 3 groups digits by three and adds BOS.
	tok = mustTok(t, bpeMeta("llama-bpe", gpt2Merges, vtok{"<|begin_of_text|>", TypeControl, 0}))
	bos := id(t, tok, "<|begin_of_text|>")
	md := bpeMeta("llama-bpe", gpt2Merges, vtok{"<|begin_of_text|>", TypeControl, 0})
	md["tokenizer.ggml.bos_token_id"] = uint32(bos)
	tok = mustTok(t, md)
	got := tok.Encode("1234", true, false)
	if want := []string{"<|begin_of_text|>", "123", "4"}; !slices.Equal(texts(tok, got), want) {
		t.Errorf("llama3: %q", texts(tok, got))
	}
	// add_bos_token from the file wins.
	md["tokenizer.ggml.add_bos_token"] = false
	if tok := mustTok(t, md); tok.AddBOS() {
		t.Error("add_bos_token=false ignored")
	}
}

// With ignore_merges (Llama 3, Tekken) a word that is a vocab entry is one
// token even when the merges would not build it.
func TestBPEIgnoreMerges(t *testing.T) {
	extra := vtok{"Ġxyz", TypeNormal, 0}
	for pre, want := range map[string][]string{
		"llama-bpe": {"Ġxyz"},
		"qwen2":     {"Ġ", "x", "y", "z"},
	} {
		tok := mustTok(t, bpeMeta(pre, gpt2Merges, extra))
		if got := texts(tok, tok.Encode(" xyz", false, false)); !slices.Equal(got, want) {
			t.Errorf("%s: %q, want %q", pre, got, want)
		}
	}
}

func TestBPESpecialAndDecode(t *testing.T) {
	tok := mustTok(t, bpeMeta("qwen2", gpt2Merges,
		vtok{"<|endoftext|>", TypeControl, 0},
		vtok{"<|im_start|>", TypeControl, 0},
		vtok{"<|im_end|>", TypeControl, 0},
		vtok{"<think>", TypeUserDefined, 0},
	))
	start, end, think := id(t, tok, "<|im_start|>"), id(t, tok, "<|im_end|>"), id(t, tok, "<think>")
	got := tok.Encode("<|im_start|>Hello<think> world<|im_end|>\n", false, true)
	want := []string{"<|im_start|>", "Hello", "<think>", "Ġworld", "<|im_end|>", "Ċ"}
	if !slices.Equal(texts(tok, got), want) {
		t.Errorf("got %q", texts(tok, got))
	}
	if !tok.IsEOG(end) || !tok.IsEOG(id(t, tok, "<|endoftext|>")) || tok.IsEOG(start) || tok.IsEOG(think) {
		t.Error("EOG set")
	}
	if got := tok.Decode(got); got != "Hello<think> world\n" {
		t.Errorf("Decode = %q", got)
	}
	for _, s := range []string{"Hello world", "  a\tb\r\n", "é🦙中文", "<|im_end|>", ""} {
		if got := tok.Decode(tok.Encode(s, false, false)); got != s {
			t.Errorf("roundtrip %q: %q", s, got)
		}
	}
	// Without special parsing the control text is ordinary text.
	if got := tok.Encode("<|im_end|>", false, false); slices.Contains(got, end) {
		t.Errorf("parsed control token without parseSpecial")
	}
}

// Longer special tokens win over shorter ones they contain or overlap.
func TestPartitionLongestFirst(t *testing.T) {
	tok := mustTok(t, bpeMeta("gpt-2", nil,
		vtok{"<a>", TypeControl, 0},
		vtok{"<a><b>", TypeControl, 0},
		vtok{"b><c", TypeControl, 0},
	))
	got := texts(tok, tok.Encode("x<a><b><c>y<a>", false, true))
	want := []string{"x", "<a><b>", "<", "c", ">", "y", "<a>"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q want %q", got, want)
	}
	got = texts(tok, tok.Encode("<a<a>>", false, true))
	if want := []string{"<", "a", "<a>", ">"}; !slices.Equal(got, want) {
		t.Errorf("got %q want %q", got, want)
	}
}

// Phi-3 strips the whitespace after its special tokens.
func TestPhi3RStrip(t *testing.T) {
	md := spmMeta(spmPieces, vtok{"<|user|>", TypeControl, 0}, vtok{"<|end|>", TypeControl, 0})
	md["general.name"] = "Phi-3 mini"
	tok := mustTok(t, md)
	got := texts(tok, tok.Encode("<|user|>\n  Hello<|end|>", false, true))
	if want := []string{"<|user|>", "▁Hello", "<|end|>"}; !slices.Equal(got, want) {
		t.Errorf("got %q want %q", got, want)
	}
}

func TestStreamDecoder(t *testing.T) {
	tok := mustTok(t, spmMeta(spmPieces))
	b := func(x byte) int32 { return tok.byteTok[x] }
	d := tok.NewDecoder()
	var out []string
	for _, id := range []int32{tok.BOS(), id(t, tok, "▁Hello"), b(0xC3), b(0xA9), b(0xF0), b(0x9F), b(0xA6), b(0x99), b('!')} {
		out = append(out, d.Add(id))
	}
	out = append(out, d.Flush())
	want := []string{"", "Hello", "", "é", "", "", "", "🦙", "!", ""}
	if !slices.Equal(out, want) {
		t.Errorf("stream = %q, want %q", out, want)
	}
	// Invalid bytes become U+FFFD once it is certain they cannot complete.
	d = tok.NewDecoder()
	out = nil
	for _, id := range []int32{b(0xE2), b(0x82), b('x'), b(0xFF), b(0xE2)} {
		out = append(out, d.Add(id))
	}
	out = append(out, d.Flush())
	want = []string{"", "", "\uFFFD\uFFFDx", "\uFFFD", "", "\uFFFD"}
	if !slices.Equal(out, want) {
		t.Errorf("stream = %q, want %q", out, want)
	}
	if got := tok.Decode([]int32{b(0xE2), b(0x82), b('x'), b(0xFF), b(0xE2)}); got != strings.Join(want, "") {
		t.Errorf("Decode = %q", got)
	}
	// A continuation decoder keeps the first token's space.
	c := tok.NewContinuationDecoder()
	if got := c.Add(id(t, tok, "▁Hello")); got != " Hello" {
		t.Errorf("continuation = %q", got)
	}
}

func TestMetadataErrors(t *testing.T) {
	for name, md := range map[string]MapMetadata{
		"no model":    {"tokenizer.ggml.tokens": []string{"a"}},
		"bad model":   {"tokenizer.ggml.model": "wordpiece", "tokenizer.ggml.tokens": []string{"a"}},
		"no tokens":   {"tokenizer.ggml.model": "llama"},
		"bad pre":     bpeMeta("no-such-pre", nil),
		"no merges":   {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": []string{"a"}},
		"short types": {"tokenizer.ggml.model": "llama", "tokenizer.ggml.tokens": []string{"a", "b"}, "tokenizer.ggml.token_type": []int32{1}},
	} {
		if _, err := FromMetadata(md); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// BOS, EOS and unknown ids outside the vocab are a broken file; other
	// special ids outside it are ignored.
	for _, k := range []string{"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"} {
		md := bpeMeta("gpt-2", nil)
		md[k] = uint32(1 << 30)
		if _, err := FromMetadata(md); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("out-of-range %s: %v", k, err)
		}
	}
	md := bpeMeta("gpt-2", nil)
	md["tokenizer.ggml.padding_token_id"] = uint32(1 << 30)
	if tok, err := FromMetadata(md); err != nil || tok.Pad() != -1 {
		t.Errorf("out-of-range padding id: %v %v", err, tok)
	}
}

// FromGGUF reads the same metadata from a file made by the gguf writer.
func TestFromGGUFWriter(t *testing.T) {
	md := bpeMeta("llama-bpe", gpt2Merges, vtok{"<|eot_id|>", TypeControl, 0})
	w := gguf.NewWriter()
	for _, k := range []string{"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges"} {
		w.AddKV(k, md[k])
	}
	w.AddKV("tokenizer.ggml.bos_token_id", uint32(5))
	w.AddKV("tokenizer.ggml.eos_token_id", uint32(6))
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("mem.gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	eot := id(t, tok, "<|eot_id|>")
	if tok.BOS() != 5 || tok.EOS() != 6 || !tok.AddBOS() || tok.EOT() != eot || !tok.IsEOG(eot) || !tok.IsEOG(6) {
		t.Errorf("bos %d eos %d addBOS %v eot %d", tok.BOS(), tok.EOS(), tok.AddBOS(), tok.EOT())
	}
	if got := texts(tok, tok.Encode("Hello world", false, false)); !slices.Equal(got, []string{"Hello", "Ġworld"}) {
		t.Errorf("got %q", got)
	}
	// Errors name the file.
	w = gguf.NewWriter()
	w.AddKV("tokenizer.ggml.model", "nope")
	buf.Reset()
	w.WriteTo(&buf)
	f, _ = gguf.Parse("bad.gguf", buf.Bytes())
	if _, err := FromGGUF(f); err == nil || !strings.Contains(err.Error(), "bad.gguf") {
		t.Errorf("error %v does not name the file", err)
	}
}

// Encode is safe for concurrent use (scratch buffers are pooled).
func TestEncodeConcurrent(t *testing.T) {
	tok := mustTok(t, bpeMeta("llama-bpe", gpt2Merges, vtok{"<|eot_id|>", TypeControl, 0}))
	inputs := []string{"Hello world", "the thing <|eot_id|> 12345", "é🦙中文 don't", strings.Repeat("ab ", 200)}
	want := make([][]int32, len(inputs))
	for i, s := range inputs {
		want[i] = tok.Encode(s, true, true)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 50 {
				i := (g + k) % len(inputs)
				if got := tok.Encode(inputs[i], true, true); !slices.Equal(got, want[i]) {
					t.Errorf("concurrent Encode(%q) = %v", inputs[i], got)
					return
				}
			}
		}()
	}
	wg.Wait()
}
