package tokenizer

import (
	"fmt"
	"reflect"
	"strings"
)

// FromMetadata builds a tokenizer from GGUF-style tokenizer.* metadata. The
// stages run in this order because each reads what the ones before it set,
// and a file with several problems reports the first in this order.
func FromMetadata(md Metadata) (*Tokenizer, error) {
	t := &Tokenizer{eog: map[int32]bool{}}
	defs, err := t.pickModel(md)
	if err != nil {
		return nil, err
	}
	if err := t.readVocab(md); err != nil {
		return nil, err
	}
	if t.kind == kindBPE {
		if err := t.readMerges(md); err != nil {
			return nil, err
		}
	}
	fim, err := t.readSpecialIDs(md, defs)
	if err != nil {
		return nil, err
	}
	if err := t.readAddSpecial(md); err != nil {
		return nil, err
	}
	t.detectSpecialByText(&fim)
	t.markEndOfGeneration(fim)
	t.markChannelMarkers()
	t.keepMessageEndsGenerating()
	if isPhi3(md) {
		t.stripAfterSpecial()
	}
	t.indexSpecialTokens()
	t.findByteTokens()
	t.maxTokenBytes = t.tokenBytesBound()
	t.renderPieces()
	return t, nil
}

// specialDefaults are the BOS, EOS and unknown ids a model type assumes
// when the file names none.
type specialDefaults struct{ bos, eos, unk int32 }

// fimIDs are the fill-in-the-middle tokens; pad, rep and sep also end
// generation.
type fimIDs struct{ pre, suf, mid, pad, rep, sep int32 }

// pickModel reads tokenizer.ggml.model and .pre: the tokenizer kind, its
// pre-tokenizer and BOS/space-prefix habits, and its default special ids.
func (t *Tokenizer) pickModel(md Metadata) (specialDefaults, error) {
	model, ok := mdString(md, "tokenizer.ggml.model")
	if !ok {
		return specialDefaults{}, fmt.Errorf("tokenizer: tokenizer.ggml.model missing")
	}
	t.model = model
	t.preTyp, _ = mdString(md, "tokenizer.ggml.pre")

	var defs specialDefaults
	switch model {
	case "llama":
		t.kind = kindSPM
		defs = specialDefaults{bos: 1, eos: 2, unk: 0}
		t.addSpacePrefix = true
		t.addBOS = true
	case "gpt2":
		t.kind = kindBPE
		// llama.cpp's defaults (Falcon's ids) when the file names none.
		defs = specialDefaults{bos: 11, eos: 11, unk: nullID}
		p, err := lookupPre(t.preTyp)
		if err != nil {
			return specialDefaults{}, fmt.Errorf("tokenizer: %w", err)
		}
		t.pre, t.ignoreMerges, t.addBOS = p.pre, p.ignoreMerges, p.addBOS
		if p.noBOS {
			defs.bos = nullID
		}
	default:
		return specialDefaults{}, fmt.Errorf("tokenizer: unsupported tokenizer model %q (supported: llama, gpt2)", model)
	}
	if v, ok := mdBool(md, "tokenizer.ggml.add_space_prefix"); ok {
		t.addSpacePrefix = v
	}
	return defs, nil
}

// readVocab reads the token texts with their scores and types.
func (t *Tokenizer) readVocab(md Metadata) error {
	texts, err := stringArray(md, "tokenizer.ggml.tokens")
	if err != nil {
		return err
	}
	if len(texts) == 0 {
		return fmt.Errorf("tokenizer: tokenizer.ggml.tokens is an empty array, expected one string per token")
	}
	n := len(texts)
	scores, err := readScores(md, n)
	if err != nil {
		return err
	}
	types, err := readTokenTypes(md, n)
	if err != nil {
		return err
	}
	t.texts = make([]string, n)
	t.scores = make([]float32, n)
	t.attrs = make([]uint16, n)
	t.ids = make(map[string]int32, n)
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
	return nil
}

// readScores reads tokenizer.ggml.scores, nil when the file has none.
func readScores(md Metadata, n int) ([]float32, error) {
	v, ok := md.Get("tokenizer.ggml.scores")
	if !ok {
		return nil, nil
	}
	scores, ok := toFloat32s(v)
	if !ok {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.scores is %s, expected an array of float32", describe(v))
	}
	if len(scores) < n {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.scores has %d entries, expected one per token (%d)", len(scores), n)
	}
	return scores, nil
}

// readTokenTypes reads tokenizer.ggml.token_type, nil when the file has none.
func readTokenTypes(md Metadata, n int) ([]int32, error) {
	v, ok := md.Get("tokenizer.ggml.token_type")
	if !ok {
		return nil, nil
	}
	types, ok := toInt32s(v)
	if !ok {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.token_type is %s, expected an array of int32", describe(v))
	}
	if len(types) < n {
		return nil, fmt.Errorf("tokenizer: tokenizer.ggml.token_type has %d entries, expected one per token (%d)", len(types), n)
	}
	return types, nil
}

// readMerges reads a BPE tokenizer's ranked merges and sets up GPT-2's
// byte mapping.
func (t *Tokenizer) readMerges(md Metadata) error {
	merges, err := stringArray(md, "tokenizer.ggml.merges")
	if err != nil {
		return err
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
	return nil
}

// readSpecialIDs reads the special token ids: defaults outside the vocab are
// disabled, and ids from the file outside it are ignored, except for BOS,
// EOS and unknown.
func (t *Tokenizer) readSpecialIDs(md Metadata, defs specialDefaults) (fimIDs, error) {
	n := len(t.texts)
	// An id the file gives for BOS, EOS or unknown that is outside the
	// vocab is a broken file (a wrong id would corrupt every prompt or
	// never stop a generation): refused, naming the key.
	for _, k := range []string{"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id"} {
		if v, ok := mdUint(md, k); ok && v >= uint64(n) {
			return fimIDs{}, fmt.Errorf("tokenizer: %s = %d is outside the vocabulary of %d tokens", k, v, n)
		}
	}
	id := func(def int32, keys ...string) int32 { return specialID(md, n, def, keys...) }
	t.bos = id(defs.bos, "tokenizer.ggml.bos_token_id")
	t.eos = id(defs.eos, "tokenizer.ggml.eos_token_id")
	t.eot = id(nullID, "tokenizer.ggml.eot_token_id")
	t.eom = id(nullID, "tokenizer.ggml.eom_token_id")
	t.unk = id(defs.unk, "tokenizer.ggml.unknown_token_id")
	t.pad = id(nullID, "tokenizer.ggml.padding_token_id")
	return fimIDs{
		pre: id(nullID, "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"),
		suf: id(nullID, "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"),
		mid: id(nullID, "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"),
		pad: id(nullID, "tokenizer.ggml.fim_pad_token_id"),
		rep: id(nullID, "tokenizer.ggml.fim_rep_token_id"),
		sep: id(nullID, "tokenizer.ggml.fim_sep_token_id"),
	}, nil
}

// specialID is the id under the last of keys the file sets within the
// vocab of n tokens, else def (nullID when def is outside the vocab).
func specialID(md Metadata, n int, def int32, keys ...string) int32 {
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

// readAddSpecial reads whether BOS and EOS are added, refusing either
// without its token.
func (t *Tokenizer) readAddSpecial(md Metadata) error {
	if v, ok := mdBool(md, "tokenizer.ggml.add_bos_token"); ok {
		t.addBOS = v
	}
	if v, ok := mdBool(md, "tokenizer.ggml.add_eos_token"); ok {
		t.addEOS = v
	}
	if t.addBOS && t.bos == nullID {
		return fmt.Errorf("tokenizer: add_bos_token is set but there is no BOS token")
	}
	if t.addEOS && t.eos == nullID {
		return fmt.Errorf("tokenizer: add_eos_token is set but there is no EOS token")
	}
	return nil
}

// detectSpecialByText finds end-of-turn and FIM tokens by text, as llama.cpp
// does for files whose converter did not record them; such tokens become
// control tokens.
func (t *Tokenizer) detectSpecialByText(fim *fimIDs) {
	t.detectByText(&t.eot, "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
		"<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>")
	t.detectByText(&t.eom, "<|eom_id|>")
	t.detectByText(&fim.pre, "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>",
		"<|code_prefix|>", "<|prefix|>")
	t.detectByText(&fim.suf, "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>",
		"<|code_suffix|>", "<|suffix|>")
	t.detectByText(&fim.mid, "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>",
		"<|code_middle|>", "<|middle|>")
	t.detectByText(&fim.pad, "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]")
	t.detectByText(&fim.rep, "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>")
	t.detectByText(&fim.sep, "<|file_sep|>")
}

// detectByText sets an unset *id to the first of names in the vocab.
// llama.cpp takes whichever its hash map yields first; the first name
// present, in list order, is deterministic.
func (t *Tokenizer) detectByText(id *int32, names ...string) {
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

// markEndOfGeneration fills the end-of-generation set: FIM padding/repo/file
// tokens, the well-known end tokens present in the vocab, and the
// EOS/EOT/EOM ids.
func (t *Tokenizer) markEndOfGeneration(fim fimIDs) {
	for _, id := range []int32{fim.pad, fim.rep, fim.sep} {
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
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id != nullID {
			t.eog[id] = true
		}
	}
}

// markChannelMarkers makes gpt-oss's channel markers user-defined: the
// model renders them.
func (t *Tokenizer) markChannelMarkers() {
	for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		if id, ok := t.ids[s]; ok {
			t.attrs[id] = attrUserDefined
		}
	}
}

// keepMessageEndsGenerating takes out of the end-of-generation set the
// tokens that end a message, not the generation, in vocabularies that have
// a token for the latter.
func (t *Tokenizer) keepMessageEndsGenerating() {
	hasText := func(s string) bool { id, ok := t.ids[s]; return ok && t.eog[id] }
	// o200k_harmony / solar-open: "<|end|>" ends a message, not generation.
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
}

// isPhi3 tells Phi-3 models by general.name.
func isPhi3(md Metadata) bool {
	name, _ := mdString(md, "general.name")
	return strings.Contains(strings.ToLower(name), "phi-3") || strings.Contains(strings.ToLower(name), "phi3")
}

// stripAfterSpecial makes the special tokens strip the whitespace after
// them, as Phi-3 does, but for <unk>, <s> and <|endoftext|>.
func (t *Tokenizer) stripAfterSpecial() {
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

// indexSpecialTokens puts the control, user-defined and unknown tokens in
// the trie that the special-token partition of Encode matches against.
func (t *Tokenizer) indexSpecialTokens() {
	t.special = newTrie()
	for i, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			t.special.insert(t.texts[i], int32(i))
		}
	}
}

// findByteTokens finds each byte's token for SentencePiece's byte
// fallback: <0xXX>, else the byte itself.
func (t *Tokenizer) findByteTokens() {
	for b := range t.byteTok {
		t.byteTok[b] = nullID
		if id, ok := t.ids[fmt.Sprintf("<0x%02X>", b)]; ok {
			t.byteTok[b] = id
		} else if id, ok := t.ids[string([]byte{byte(b)})]; ok {
			t.byteTok[b] = id
		}
	}
}

// renderPieces renders every token's piece once. All pieces live in one
// string: one allocation instead of one per token.
func (t *Tokenizer) renderPieces() {
	n := len(t.texts)
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
		return convert[float32](x), true
	case []int32:
		return convert[float32](x), true
	}
	return nil, false
}

func toInt32s(v any) ([]int32, bool) {
	switch x := v.(type) {
	case []int32:
		return x, true
	case []uint32:
		return convert[int32](x), true
	case []int64:
		return convert[int32](x), true
	case []int:
		return convert[int32](x), true
	case []uint8:
		return convert[int32](x), true
	case []int8:
		return convert[int32](x), true
	}
	return nil, false
}

// number are the element types of the metadata arrays these read.
type number interface {
	~int | ~int8 | ~int32 | ~int64 | ~uint8 | ~uint32 | ~float32 | ~float64
}

// convert is x with each element converted to U.
func convert[U, T number](x []T) []U {
	out := make([]U, len(x))
	for i, v := range x {
		out[i] = U(v)
	}
	return out
}
