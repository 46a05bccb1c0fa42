// Package tokenizer implements the GGUF tokenizers of llama.cpp: the
// SentencePiece-style model ("llama": score-driven merges, byte fallback)
// and byte-level BPE ("gpt2": ranked merges after a regex pre-tokenizer
// chosen by tokenizer.ggml.pre). Encoding follows llama.cpp's
// llama_tokenize token for token, including the special-token partition;
// decoding follows llama_detokenize.
package tokenizer

import (
	"fmt"

	"mistralrs/internal/gguf"
)

// Token types stored in tokenizer.ggml.token_type.
const (
	TypeNormal      = 1
	TypeUnknown     = 2
	TypeControl     = 3
	TypeUserDefined = 4
	TypeUnused      = 5
	TypeByte        = 6
)

// Token attributes, llama.cpp's llama_token_attr bits.
const (
	attrUnknown = 1 << iota
	attrUnused
	attrNormal
	attrControl
	attrUserDefined
	attrByte
	attrNormalized
	attrLStrip
	attrRStrip
)

type kind uint8

const (
	kindSPM kind = iota
	kindBPE
)

// Tokenizer converts between text and token ids. It is immutable after
// construction and safe for concurrent use.
type Tokenizer struct {
	kind   kind
	model  string
	preTyp string

	texts  []string
	scores []float32
	attrs  []uint16
	ids    map[string]int32
	pieces []string // what each token renders as (llama.cpp token_to_piece, special=false)

	// BPE
	ranks        map[mergeKey]int32
	pre          *preTokenizer
	ignoreMerges bool
	byteEnc      [256]string // GPT-2 byte -> printable rune
	byteDec      []int16     // printable rune -> GPT-2 byte, -1 when not a mapped rune

	// SPM byte fallback: the token of each byte, -1 when none.
	byteTok [256]int32

	bos, eos, eot, eom, unk, pad int32
	addBOS, addEOS               bool
	addSpacePrefix               bool
	eog                          map[int32]bool

	special *trie // control, user-defined and unknown tokens

	// maxTokenBytes bounds the input bytes one token stands for (the
	// longest token text); 0 when no such bound holds (some input bytes
	// may give no token at all: stripped whitespace, unencodable bytes).
	maxTokenBytes int
}

type mergeKey struct{ a, b string }

// Metadata is the key/value view the tokenizer reads (satisfied by
// *gguf.File).
type Metadata interface {
	Get(key string) (any, bool)
}

// MapMetadata is a Metadata backed by a map, for building tokenizers in
// memory (tests, tools).
type MapMetadata map[string]any

// Get implements Metadata.
func (m MapMetadata) Get(key string) (any, bool) {
	v, ok := m[key]
	return v, ok
}

// FromGGUF builds the tokenizer described by a GGUF file's tokenizer.*
// metadata.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	t, err := FromMetadata(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return t, nil
}

const nullID = -1

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.texts) }

// BOS is the beginning-of-sequence token, -1 when none.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence token, -1 when none.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT is the end-of-turn token, -1 when none.
func (t *Tokenizer) EOT() int32 { return t.eot }

// Unk is the unknown token, -1 when none.
func (t *Tokenizer) Unk() int32 { return t.unk }

// Pad is the padding token, -1 when none.
func (t *Tokenizer) Pad() int32 { return t.pad }

// AddBOS reports whether Encode with addSpecial prepends BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode with addSpecial appends EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// Model is tokenizer.ggml.model ("llama" or "gpt2").
func (t *Tokenizer) Model() string { return t.model }

// Pre is tokenizer.ggml.pre, the BPE pre-tokenizer type ("" when absent).
func (t *Tokenizer) Pre() string { return t.preTyp }

// IsEOG reports whether id ends generation: EOS, EOT, EOM and the
// well-known end tokens of the vocab ("<|im_end|>", "<|eot_id|>", ...).
func (t *Tokenizer) IsEOG(id int32) bool { return t.eog[id] }

// IsControl reports whether id is a control (or unknown) token, which
// Decode does not render.
func (t *Tokenizer) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.attrs) && t.attrs[id]&(attrControl|attrUnknown) != 0
}

// TokenText is the vocab string of id ("" when out of range).
func (t *Tokenizer) TokenText(id int32) string {
	if id < 0 || int(id) >= len(t.texts) {
		return ""
	}
	return t.texts[id]
}

// Lookup finds the token whose vocab string is exactly text.
func (t *Tokenizer) Lookup(text string) (int32, bool) {
	id, ok := t.ids[text]
	return id, ok
}

// tokenBytesBound is the longest token text in bytes when every input byte
// is sure to end up in some token, else 0. A token's text is never shorter
// than the input it covers (SentencePiece's U+2581 is three bytes for a
// space, GPT-2's byte runes one or two bytes for one byte, U+FFFD three
// for an invalid byte), so n input bytes give at least n/bound tokens.
func (t *Tokenizer) tokenBytesBound() int {
	for _, a := range t.attrs {
		if a&(attrLStrip|attrRStrip) != 0 {
			return 0 // whitespace next to the token disappears
		}
	}
	for b := range 256 {
		switch {
		case t.kind == kindBPE:
			if _, ok := t.ids[t.byteEnc[b]]; !ok {
				return 0 // bpeWord drops a byte without a token
			}
		case t.byteTok[b] == nullID && t.unk == nullID:
			return 0 // encodeSPM drops it
		}
	}
	longest := 1
	for _, s := range t.texts {
		longest = max(longest, len(s))
	}
	return longest
}

// MaxTokenBytes is an upper bound on the bytes of input text one token
// stands for, so that a text of n bytes has at least n/MaxTokenBytes
// tokens; 0 when the tokenizer may drop input bytes and no bound holds.
func (t *Tokenizer) MaxTokenBytes() int { return t.maxTokenBytes }
