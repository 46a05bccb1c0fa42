package tokenizer

import (
	"fmt"
	"testing"
)

// vtok is one extra vocab entry of a test vocab.
type vtok struct {
	text  string
	typ   int32
	score float32
}

// spmMeta builds a small SentencePiece-style vocab: <unk>, <s>, </s>, the
// 256 byte tokens, then pieces scored by position (earlier = higher), then
// extra tokens.
func spmMeta(pieces []string, extra ...vtok) MapMetadata {
	texts := []string{"<unk>", "<s>", "</s>"}
	types := []int32{TypeUnknown, TypeControl, TypeControl}
	scores := []float32{0, 0, 0}
	for b := 0; b < 256; b++ {
		texts = append(texts, fmt.Sprintf("<0x%02X>", b))
		types = append(types, TypeByte)
		scores = append(scores, 0)
	}
	for i, p := range pieces {
		texts = append(texts, p)
		types = append(types, TypeNormal)
		scores = append(scores, -float32(i+1))
	}
	for _, e := range extra {
		texts = append(texts, e.text)
		types = append(types, e.typ)
		scores = append(scores, e.score)
	}
	return MapMetadata{
		"tokenizer.ggml.model":            "llama",
		"tokenizer.ggml.tokens":           texts,
		"tokenizer.ggml.scores":           scores,
		"tokenizer.ggml.token_type":       types,
		"tokenizer.ggml.bos_token_id":     uint32(1),
		"tokenizer.ggml.eos_token_id":     uint32(2),
		"tokenizer.ggml.unknown_token_id": uint32(0),
	}
}

// bpeMeta builds a small byte-level BPE vocab: the 256 byte runes in byte
// order, one token per merge (its two sides joined), then extra tokens.
func bpeMeta(pre string, merges []string, extra ...vtok) MapMetadata {
	enc, _ := gpt2Bytes()
	var texts []string
	var types []int32
	seen := map[string]bool{}
	add := func(s string, typ int32) {
		if !seen[s] {
			seen[s] = true
			texts = append(texts, s)
			types = append(types, typ)
		}
	}
	for b := 0; b < 256; b++ {
		add(enc[b], TypeNormal)
	}
	for _, m := range merges {
		for i := 1; i < len(m); i++ {
			if m[i] == ' ' {
				add(m[:i]+m[i+1:], TypeNormal)
				break
			}
		}
	}
	for _, e := range extra {
		add(e.text, e.typ)
	}
	return MapMetadata{
		"tokenizer.ggml.model":      "gpt2",
		"tokenizer.ggml.pre":        pre,
		"tokenizer.ggml.tokens":     texts,
		"tokenizer.ggml.token_type": types,
		"tokenizer.ggml.merges":     merges,
	}
}

func mustTok(t testing.TB, md MapMetadata) *Tokenizer {
	t.Helper()
	tok, err := FromMetadata(md)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// texts renders ids as their vocab strings, for readable comparisons.
func texts(tok *Tokenizer, ids []int32) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = tok.TokenText(id)
	}
	return out
}

func id(t testing.TB, tok *Tokenizer, s string) int32 {
	t.Helper()
	v, ok := tok.Lookup(s)
	if !ok {
		t.Fatalf("%q not in vocab", s)
	}
	return v
}

// Common small vocabs.

var spmPieces = []string{
	"▁t", "he", "▁the", "▁a", "▁H", "ll", "▁He", "llo", "▁Hello", "or", "▁w", "▁wor", "ld", "▁world",
	"▁", "e", "l", "o", "H", "w", "r", "d", "t", "h", "a", "b", "c", "x", ",", "!", "\n",
}

// gpt2Merges spell "Hello", " world", " the", "ing" and a few more in
// GPT-2's printable byte runes (Ġ = space, Ċ = newline).
var gpt2Merges = []string{
	"Ġ t", "h e", "Ġt he", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "H e", "l l", "He ll", "Hell o",
	"i n", "in g", "Ġ a", "Ċ Ċ", "Ġ Ġ", "1 2", "12 3",
}
