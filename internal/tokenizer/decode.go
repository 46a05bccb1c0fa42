package tokenizer

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// appendPiece appends what token id contributes to decoded text, as
// llama.cpp's token_to_piece with special=false: control and unknown tokens
// render as nothing, user-defined tokens as their text, byte tokens as
// their byte.
func (t *Tokenizer) appendPiece(dst []byte, id int32) []byte {
	a, text := t.attrs[id], t.texts[id]
	switch {
	case a&(attrUnknown|attrControl) != 0:
		return dst
	case a&attrUserDefined != 0:
		return append(dst, text...)
	case a&attrNormal != 0:
		if t.kind == kindSPM {
			return append(dst, strings.ReplaceAll(text, "\u2581", " ")...)
		}
		return t.appendDecodedBytes(dst, text)
	case a&attrByte != 0:
		if len(text) == 6 && strings.HasPrefix(text, "<0x") && text[5] == '>' {
			if b, err := strconv.ParseUint(text[3:5], 16, 8); err == nil {
				return append(dst, byte(b))
			}
		}
	}
	return dst
}

// appendDecodedBytes maps GPT-2 printable runes back to bytes. A token with
// a rune outside the mapping is taken verbatim, as HF's ByteLevel decoder
// does.
func (t *Tokenizer) appendDecodedBytes(dst []byte, text string) []byte {
	n := len(dst)
	for _, r := range text {
		if r < 0 || int(r) >= len(t.byteDec) || t.byteDec[r] < 0 {
			return append(dst[:n], text...)
		}
		dst = append(dst, byte(t.byteDec[r]))
	}
	return dst
}

// TokenBytes is what token id contributes to decoded text, without the
// leading-space removal Decode applies to the first token. The bytes of
// one token may be an incomplete UTF-8 sequence.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(t.pieces) {
		return nil
	}
	return []byte(t.pieces[id])
}

// Decode converts ids to text as llama.cpp's llama_detokenize (special
// tokens not rendered, no space clean-up): SPM's escaped spaces become
// spaces and the space the encoder added before the first word is removed,
// also when it follows a leading BOS. Invalid UTF-8 is replaced by U+FFFD,
// one per byte, so that Decode equals the concatenated output of a
// StreamDecoder.
func (t *Tokenizer) Decode(ids []int32) string {
	d := t.NewDecoder()
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(d.Add(id))
	}
	b.WriteString(d.Flush())
	return b.String()
}

// StreamDecoder decodes tokens one at a time for streaming output. It
// never returns part of a UTF-8 sequence: incomplete bytes wait for the
// next token.
type StreamDecoder struct {
	t     *Tokenizer
	buf   []byte
	n     int
	strip bool
}

// NewDecoder starts decoding a sequence; its first token is treated as
// Decode treats the first token of ids.
func (t *Tokenizer) NewDecoder() *StreamDecoder {
	return &StreamDecoder{t: t, strip: t.addSpacePrefix}
}

// NewContinuationDecoder decodes tokens that continue earlier text, such
// as generated tokens after a prompt: no leading space is removed, so the
// output is the concatenated TokenBytes (llama.cpp's server streams this
// way).
func (t *Tokenizer) NewContinuationDecoder() *StreamDecoder {
	return &StreamDecoder{t: t}
}

// Add decodes one more token and returns the text that became complete.
func (d *StreamDecoder) Add(id int32) string {
	var piece string
	if id >= 0 && int(id) < len(d.t.pieces) {
		piece = d.t.pieces[id]
	}
	if d.strip && !(d.n == 0 && id == d.t.bos && id != nullID) {
		d.strip = false
		piece = strings.TrimPrefix(piece, " ")
	}
	d.n++
	if len(d.buf) == 0 && utf8.ValidString(piece) {
		return piece
	}
	d.buf = append(d.buf, piece...)
	return d.drain(false)
}

// Flush returns what is still buffered, invalid or incomplete sequences
// replaced by U+FFFD; call it when the sequence ends.
func (d *StreamDecoder) Flush() string { return d.drain(true) }

func (d *StreamDecoder) drain(final bool) string {
	var out []byte
	i := 0
	for i < len(d.buf) {
		rest := d.buf[i:]
		if !final && !utf8.FullRune(rest) {
			break
		}
		r, size := utf8.DecodeRune(rest)
		if r == utf8.RuneError && size == 1 {
			out = append(out, "\uFFFD"...)
		} else {
			out = append(out, rest[:size]...)
		}
		i += size
	}
	d.buf = append(d.buf[:0], d.buf[i:]...)
	return string(out)
}
