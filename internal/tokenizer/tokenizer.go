// Package tokenizer implements the GGUF tokenizers of llama.cpp: the
// SentencePiece-style model ("llama": score-driven merges, byte fallback)
// and byte-level BPE ("gpt2": ranked merges after a regex pre-tokenizer
// chosen by tokenizer.ggml.pre). Encoding follows llama.cpp's
// llama_tokenize token for token, including the special-token partition;
// decoding follows llama_detokenize.
package tokenizer

import (
	"fmt"
	"reflect"
	"strings"

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

// FromMetadata builds a tokenizer from GGUF-style tokenizer.* metadata.
func FromMetadata(md Metadata) (*Tokenizer, error) {
	t := &Tokenizer{eog: map[int32]bool{}}
	model, ok := mdString(md, "tokenizer.ggml.model")
	if !ok {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.model missing")
	}
	t.model = model
	t.preTyp, _ = mdString(md, "tokenizer.ggml.pre")

	var defBOS, defEOS, defUNK int32
	switch model {
	case "llama":
		t.kind = kindSPM
		defBOS, defEOS, defUNK = 1, 2, 0
		t.addSpacePrefix = true
		t.addBOS = true
	case "gpt2":
		t.kind = kindBPE
		// llama.cpp's defaults (Falcon's ids) when the file names none.
		defBOS, defEOS, defUNK = 11, 11, nullID
		p, err := lookupPre(t.preTyp)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		t.pre, t.ignoreMerges, t.addBOS = p.pre, p.ignoreMerges, p.addBOS
		if p.noBOS {
			defBOS = nullID
		}
	default:
		return nil, fmt.Errorf("tokenizer: unsupported tokenizer model %q (supported: llama, gpt2)", model)
	}
	if v, ok := mdBool(md, "tokenizer.ggml.add_space_prefix"); ok {
		t.addSpacePrefix = v
	}

	texts, err := stringArray(md, "tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	if len(texts) == 0 {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.tokens is an empty array, expected one string per token")
	}
	n := len(texts)
	t.texts = make([]string, n)
	t.scores = make([]float32, n)
	t.attrs = make([]uint16, n)
	t.ids = make(map[string]int32, n)
	var scores []float32
	if v, ok := md.Get("tokenizer.ggml.scores"); ok {
		if scores, ok = toFloat32s(v); !ok {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.scores is %s, expected an array of float32", describe(v))
		}
		if len(scores) < n {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.scores has %d entries, expected one per token (%d)", len(scores), n)
		}
	}
	var types []int32
	if v, ok := md.Get("tokenizer.ggml.token_type"); ok {
		if types, ok = toInt32s(v); !ok {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.token_type is %s, expected an array of int32", describe(v))
		}
		if len(types) < n {
			return nil, fmt.Errorf("tokenizer: tokenizer.ggml.token_type has %d entries, expected one per token (%d)", len(types), n)
		}
	}
	for i, s := range texts {
		if s == "" {
			s = fmt.Sprintf("[EMPTY_%d]", i)
		}
		t.texts[i] = s
		// First id wins for duplicates (llama.cpp refuses such files).
		if _, dup := t.ids[s]; !dup {
			t.ids[s] = int32(i)
		}
		if scores != nil {
			t.scores[i] = scores[i]
		}
		t.attrs[i] = attrNormal
		if types != nil {
			t.attrs[i] = typeAttr(types[i])
		}
	}

	if t.kind == kindBPE {
		merges, err := stringArray(md, "tokenizer.ggml.merges")
		if err != nil {
			return nil, err
		}
		t.ranks = make(map[mergeKey]int32, len(merges))
		for i, m := range merges {
			var k mergeKey
			// The separator is the first space after the first byte, so a
			// left part may itself start with a space.
			if len(m) > 1 {
				if p := strings.IndexByte(m[1:], ' '); p >= 0 {
					k = mergeKey{m[:p+1], m[p+2:]}
				}
			}
			if _, dup := t.ranks[k]; !dup {
				t.ranks[k] = int32(i)
			}
		}
		t.byteEnc, t.byteDec = gpt2Bytes()
	}

	// Special token ids: defaults outside the vocab are disabled, ids from the
	// file outside it are ignored.
	ids := func(def int32, keys ...string) int32 {
		if def >= int32(n) {
			def = nullID
		}
		for _, k := range keys {
			if v, ok := mdUint(md, k); ok {
				if v < uint64(n) {
					def = int32(v)
				}
			}
		}
		return def
	}
	// An id the file gives for BOS, EOS or unknown that is outside the
	// vocab is a broken file (a wrong id would corrupt every prompt or
	// never stop a generation): refused, naming the key.
	for _, k := range []string{"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"} {
		if v, ok := mdUint(md, k); ok && v >= uint64(n) {
			return nil, fmt.Errorf("tokenizer: %s = %d is outside the vocabulary of %d tokens", k, v, n)
		}
	}
	t.bos = ids(defBOS, "tokenizer.ggml.bos_token_id")
	t.eos = ids(defEOS, "tokenizer.ggml.eos_token_id")
	t.eot = ids(nullID, "tokenizer.ggml.eot_token_id")
	t.eom = ids(nullID, "tokenizer.ggml.eom_token_id")
	t.unk = ids(defUNK, "tokenizer.ggml.unknown_token_id")
	t.pad = ids(nullID, "tokenizer.ggml.padding_token_id")
	fimPre := ids(nullID, "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id")
	fimSuf := ids(nullID, "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id")
	fimMid := ids(nullID, "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id")
	fimPad := ids(nullID, "tokenizer.ggml.fim_pad_token_id")
	fimRep := ids(nullID, "tokenizer.ggml.fim_rep_token_id")
	fimSep := ids(nullID, "tokenizer.ggml.fim_sep_token_id")

	if v, ok := mdBool(md, "tokenizer.ggml.add_bos_token"); ok {
		t.addBOS = v
	}
	if v, ok := mdBool(md, "tokenizer.ggml.add_eos_token"); ok {
		t.addEOS = v
	}
	if t.addBOS && t.bos == nullID {
		return nil, fmt.Errorf("tokenizer: add_bos_token is set but there is no BOS token")
	}
	if t.addEOS && t.eos == nullID {
		return nil, fmt.Errorf("tokenizer: add_eos_token is set but there is no EOS token")
	}

	// Auto-detect end-of-turn and FIM tokens by text, as llama.cpp does for
	// files whose converter did not record them; such tokens become control
	// tokens. llama.cpp takes whichever its hash map yields first; the first
	// name present, in list order, is deterministic.
	detect := func(id *int32, names ...string) {
		if *id != nullID {
			return
		}
		for _, name := range names {
			if i, ok := t.ids[name]; ok {
				*id = i
				t.attrs[i] |= attrControl
				return
			}
		}
	}
	detect(&t.eot, "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
		"<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>")
	detect(&t.eom, "<|eom_id|>")
	detect(&fimPre, "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
		"<|code_prefix|>", "<|prefix|>")
	detect(&fimSuf, "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
		"<|code_suffix|>", "<|suffix|>")
	detect(&fimMid, "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
		"<|code_middle|>", "<|middle|>")
	detect(&fimPad, "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]")
	detect(&fimRep, "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>")
	detect(&fimSep, "<|file_sep|>")

	// End-of-generation set: FIM padding/repo/file tokens, the well-known end
	// tokens present in the vocab, and the EOS/EOT/EOM ids.
	for _, id := range []int32{fimPad, fimRep, fimSep} {
		if id != nullID {
			t.eog[id] = true
		}
	}
	for s := range eogTexts {
		if i, ok := t.ids[s]; ok {
			t.eog[i] = true
			t.attrs[i] |= attrControl
		}
	}
	// gpt-oss renders these channel markers, so they are user-defined.
	for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		if id, ok := t.ids[s]; ok {
			t.attrs[id] = attrUserDefined
		}
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id != nullID {
			t.eog[id] = true
		}
	}
	// o200k_harmony / solar-open: "<|end|>" ends a message, not generation.
	hasText := func(s string) bool { id, ok := t.ids[s]; return ok && t.eog[id] }
	hasCall := hasText("<|call|>") || hasText("<|calls|>")
	if id, ok := t.ids["<|end|>"]; ok && t.eog[id] && hasCall && (hasText("<|return|>") || hasText("<|flush|>")) {
		delete(t.eog, id)
		t.attrs[id] = attrUserDefined
	}
	// Gemma 4 / PaddleOCR: "</s>" is an ordinary token next to "<|tool_response>".
	if id, ok := t.ids["</s>"]; ok && t.eog[id] && hasText("<|tool_response>") {
		delete(t.eog, id)
		t.attrs[id] = attrNormal
	}

	// Phi-3 strips whitespace after its special tokens.
	if name, _ := mdString(md, "general.name"); strings.Contains(strings.ToLower(name), "phi-3") ||
		strings.Contains(strings.ToLower(name), "phi3") {
		for i, a := range t.attrs {
			if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
				t.attrs[i] |= attrRStrip
			}
		}
		if id, ok := t.ids["</s>"]; ok {
			t.attrs[id] |= attrRStrip
		}
		for _, s := range []string{"<unk>", "<s>", "<|endoftext|>"} {
			if id, ok := t.ids[s]; ok {
				t.attrs[id] &^= attrRStrip
			}
		}
	}

	t.special = newTrie()
	for i, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special.insert(t.texts[i], int32(i))
		}
	}

	for b := range t.byteTok {
		t.byteTok[b] = nullID
		if id, ok := t.ids[fmt.Sprintf("<0x%02X>", b)]; ok {
			t.byteTok[b] = id
		} else if id, ok := t.ids[string([]byte{byte(b)})]; ok {
			t.byteTok[b] = id
		}
	}

	t.maxTokenBytes = t.tokenBytesBound()

	// All pieces live in one string: one allocation instead of one per token.
	var arena []byte
	offs := make([]int, n+1)
	for i := range n {
		arena = t.appendPiece(arena, int32(i))
		offs[i+1] = len(arena)
	}
	all := string(arena)
	t.pieces = make([]string, n)
	for i := range t.pieces {
		t.pieces[i] = all[offs[i]:offs[i+1]]
	}
	return t, nil
}

// eogTexts are the end-of-generation tokens llama.cpp recognises by text.
var eogTexts = map[string]bool{
	"<|eot_id|>": true, "<|im_end|>": true, "<|end|>": true, "<|return|>": true, "<|call|>": true,
	"<|flush|>": true, "<|calls|>": true, "<end_of_turn>": true, "<|endoftext|>": true, "</s>": true,
	"<|eom_id|>": true, "<EOT>": true, "_<EOT>": true, "[EOT]": true, "[EOS]": true,
	"<|end_of_text|>": true, "<end_of_utterance>": true, "<eos>": true, "<turn|>": true,
	"<|tool_response>": true, "<｜end▁of▁sentence｜>": true, "[e~[": true,
}

func typeAttr(t int32) uint16 {
	switch t {
	case TypeNormal:
		return attrNormal
	case TypeUnknown:
		return attrUnknown
	case TypeControl:
		return attrControl
	case TypeUserDefined:
		return attrUserDefined
	case TypeUnused:
		return attrUnused
	case TypeByte:
		return attrByte
	}
	return 0 // undefined: never rendered
}

// gpt2Bytes builds GPT-2's reversible byte <-> printable rune mapping:
// printable Latin-1 bytes map to themselves, the rest to U+0100 onwards.
func gpt2Bytes() (enc [256]string, dec []int16) {
	dec = make([]int16, 512)
	for i := range dec {
		dec[i] = -1
	}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) {
			r = rune(256 + n)
			n++
		}
		enc[b] = string(r)
		dec[r] = int16(b)
	}
	return enc, dec
}

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

// Metadata helpers: GGUF values arrive as the Go types of internal/gguf;
// integers of any width are accepted.

func mdString(md Metadata, key string) (string, bool) {
	v, ok := md.Get(key)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	return s, ok
}

func mdBool(md Metadata, key string) (bool, bool) {
	v, ok := md.Get(key)
	if !ok {
		return false, false
	}
	b, ok := v.(bool)
	return b, ok
}

func mdUint(md Metadata, key string) (uint64, bool) {
	v, ok := md.Get(key)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	case int:
		return uint64(x), x >= 0
	}
	return 0, false
}

// stringArray returns the array of strings stored under key, or an error
// that says whether the key is missing or holds another type.
func stringArray(md Metadata, key string) ([]string, error) {
	v, ok := md.Get(key)
	if !ok {
		return nil, fmt.Errorf("tokenizer: %s missing", key)
	}
	s, ok := v.([]string)
	if !ok {
		return nil, fmt.Errorf("tokenizer: %s is %s, expected an array of strings", key, describe(v))
	}
	return s, nil
}

// describe names the GGUF type of a metadata value for an error message:
// "an array of int32", "a string", "a uint32".
func describe(v any) string {
	t := reflect.TypeOf(v)
	if t == nil {
		return "no value"
	}
	if t.Kind() == reflect.Slice {
		if t.Elem().Kind() == reflect.Slice || t.Elem().Kind() == reflect.Interface {
			return "an array of arrays"
		}
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array of " + t.Elem().Kind().String()
	}
	n := t.Kind().String()
	if strings.HasPrefix(n, "int") {
		return "an " + n
	}
	return "a " + n
}

func toFloat32s(v any) ([]float32, bool) {
	switch x := v.(type) {
	case []float32:
		return x, true
	case []float64:
		out := make([]float32, len(x))
		for i, f := range x {
			out[i] = float32(f)
		}
		return out, true
	case []int32:
		out := make([]float32, len(x))
		for i, f := range x {
			out[i] = float32(f)
		}
		return out, true
	}
	return nil, false
}

func toInt32s(v any) ([]int32, bool) {
	switch x := v.(type) {
	case []int32:
		return x, true
	case []uint32:
		out := make([]int32, len(x))
		for i, f := range x {
			out[i] = int32(f)
		}
		return out, true
	case []int64:
		out := make([]int32, len(x))
		for i, f := range x {
			out[i] = int32(f)
		}
		return out, true
	case []int:
		out := make([]int32, len(x))
		for i, f := range x {
			out[i] = int32(f)
		}
		return out, true
	case []uint8:
		out := make([]int32, len(x))
		for i, f := range x {
			out[i] = int32(f)
		}
		return out, true
	case []int8:
		out := make([]int32, len(x))
		for i, f := range x {
			out[i] = int32(f)
		}
		return out, true
	}
	return nil, false
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
