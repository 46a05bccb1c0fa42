// Package demo holds the embedded demo model, served when no model is
// given: stories260K, a small trained llama (Andrej Karpathy's TinyStories
// model from llama2.c, MIT licence; see NOTICE) that writes short
// children's stories in English. It also builds random-weight models with
// a byte-level vocabulary, for tests, benchmarks and gen-model.
package demo

import (
	"bytes"
	_ "embed"
	"fmt"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
)

// ID is the model id the demo model is served under.
const ID = "demo"

// Warning is printed at startup when the demo model is used.
const Warning = "warning: no model given, using the embedded demo model: stories260K, a tiny TinyStories llama " +
	"that only writes short children's stories. Load a real model with -f model.gguf (for example a Qwen3 or Llama 3.2 GGUF)."

//go:embed stories260K.gguf
var stories []byte

// chatTemplate turns a conversation into a story to continue: the
// messages' texts, one per line. TinyStories was trained on plain stories,
// not on chats, so that a prompt such as "Once upon a time" is continued.
const chatTemplate = `{% for message in messages %}{{ message['content'] }}{% if not loop.last %}{{ '\n' }}{% endif %}{% endfor %}`

// GGUF is the demo model's file (not to be modified).
func GGUF() []byte { return stories }

// Load returns the demo model and everything needed to run it.
func Load() (*loader.Model, error) {
	f, err := gguf.Parse("demo", stories)
	if err != nil {
		return nil, fmt.Errorf("demo model: %w", err)
	}
	if _, ok := f.Get("tokenizer.chat_template"); !ok {
		f.KV = append(f.KV, gguf.KV{Key: "tokenizer.chat_template", Value: chatTemplate})
	}
	return loader.FromFile(f, loader.Options{ID: ID})
}

// Config is the shape of the random-weight model BuildRandom makes.
var Config = model.RandomConfig{
	Arch: "llama", Layers: 4, Embd: 256, FF: 768, Heads: 8, KVHeads: 4,
	ContextLen: 4096, Type: kernels.Q8_0, Seed: 20261129,
}

// Special tokens after the 256 byte tokens; the default (ChatML) chat template
// uses them.
var specials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

// BuildRandom returns a random-weight model of shape Config with a
// byte-level vocabulary and ChatML specials, as GGUF bytes (the demo model
// before it was a trained one; tests that want any text to be one token per
// byte use it).
func BuildRandom() ([]byte, error) {
	cfg := Config
	cfg.Vocab = 256 + len(specials)
	w, err := RandomModel(cfg)
	if err != nil {
		return nil, err
	}
	w.AddKV("general.name", "mistralrs random (random weights)")
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// LoadRandom loads BuildRandom's model under the demo's id.
func LoadRandom() (*loader.Model, error) {
	data, err := BuildRandom()
	if err != nil {
		return nil, fmt.Errorf("random model: %w", err)
	}
	f, err := gguf.Parse("random", data)
	if err != nil {
		return nil, err
	}
	return loader.FromFile(f, loader.Options{ID: ID})
}

// RandomModel returns a writer holding a random-weight model of the given
// shape with a byte-level vocabulary (cfg.Vocab >= 259), ready to be written
// to a file (benchmark models) or to memory (the demo model).
func RandomModel(cfg model.RandomConfig) (*gguf.Writer, error) {
	if cfg.Vocab < 256+len(specials) {
		return nil, fmt.Errorf("random model: vocabulary of %d tokens is smaller than the %d byte and special tokens", cfg.Vocab, 256+len(specials))
	}
	w := gguf.NewWriter()
	if err := model.BuildRandom(cfg, w); err != nil {
		return nil, err
	}
	addByteVocab(w, cfg.Vocab)
	return w, nil
}

// addByteVocab writes a byte-level BPE vocabulary without merges: every byte
// is one token, spelled with GPT-2's byte-to-unicode mapping. Entries beyond
// the bytes and the special tokens are unused fillers.
func addByteVocab(w *gguf.Writer, size int) {
	tokens := make([]string, 0, size)
	types := make([]int32, 0, size)
	for b := 0; b < 256; b++ {
		tokens = append(tokens, string(byteRune(byte(b))))
		types = append(types, 1) // normal
	}
	for _, s := range specials {
		tokens = append(tokens, s)
		types = append(types, 3) // control
	}
	for i := len(tokens); i < size; i++ {
		tokens = append(tokens, fmt.Sprintf("<unused%d>", i))
		types = append(types, 5) // unused
	}
	w.AddKV("tokenizer.ggml.model", "gpt2")
	w.AddKV("tokenizer.ggml.pre", "default")
	w.AddKV("tokenizer.ggml.tokens", tokens)
	w.AddKV("tokenizer.ggml.token_type", types)
	w.AddKV("tokenizer.ggml.merges", []string{})
	w.AddKV("tokenizer.ggml.eos_token_id", uint32(256))
	w.AddKV("tokenizer.ggml.bos_token_id", uint32(256))
	w.AddKV("tokenizer.ggml.add_bos_token", false)
	w.AddKV("tokenizer.ggml.eot_token_id", uint32(258))
}

// byteRune is GPT-2's mapping of bytes to printable runes: printable Latin-1
// bytes stand for themselves, the others are shifted past U+0100.
func byteRune(b byte) rune {
	if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE {
		return rune(b)
	}
	n := 0
	for c := 0; c < int(b); c++ {
		cb := byte(c)
		if !((cb >= '!' && cb <= '~') || (cb >= 0xA1 && cb <= 0xAC) || cb >= 0xAE) {
			n++
		}
	}
	return rune(256 + n)
}
