package gen

import (
	"errors"

	"mistralrs/internal/chat"
	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
)

// Prompter makes a request's prompt tokens for its loaded model: the chat
// template, the tokenizer, the context's limit, and the request's images,
// which it places where their media markers are, the way llama.cpp's mtmd
// does: the text is split at the markers, each piece tokenized with special
// tokens parsed (BOS, when asked, on the first piece only), and each image
// becomes its projector's start text, its embedding positions and its end
// text.
type Prompter struct {
	Model  *loader.Model
	CtxLen int

	set           *imageSet                 // nil: no images
	images        map[uint64]*preparedImage // by media marker number
	before, after string                    // the projector's texts around an image
	spans         []imageSpan               // where Encode placed images
}

// imageSpan is an image placed in the prompt: positions [pos, pos+img.tokens).
type imageSpan struct {
	pos int
	img *preparedImage
}

// newPrompter is the prompter of a job's model with its prepared images.
func newPrompter(m *loader.Model, ctxLen int, set *imageSet) *Prompter {
	p := &Prompter{Model: m, CtxLen: ctxLen, set: set}
	if set != nil && len(set.images) > 0 {
		p.images = make(map[uint64]*preparedImage, len(set.images))
		for _, im := range set.images {
			p.images[im.part.id] = im
		}
		p.before, p.after = set.before, set.after
	}
	return p
}

// Render applies the model's chat template to msgs and tokenizes the text;
// a conversation that cannot fit the context is refused as soon as that is
// certain, and a template's own raise_exception is a 400 naming param.
func (p *Prompter) Render(msgs []chat.Message, opts chat.Options, param string) ([]int32, error) {
	if err := CheckTextBytes(p.Model.Tok, p.CtxLen, MessagesBytes(msgs)); err != nil {
		return nil, err
	}
	text, err := p.Model.Template.RenderOptions(msgs, opts)
	if err != nil {
		var ce *chat.Error
		if errors.As(err, &ce) && ce.Raised {
			return nil, BadRequest(param, "%s", err.Error())
		}
		return nil, err
	}
	// The template writes BOS itself where the model wants it.
	return p.Encode(text, false)
}

// Encode tokenizes a prompt text (control token texts recognised), with
// the request's images at their markers, stopping as soon as it cannot fit
// the context. addSpecial adds the tokenizer's BOS to the first piece.
func (p *Prompter) Encode(text string, addSpecial bool) ([]int32, error) {
	p.spans = p.spans[:0]
	if len(p.images) == 0 {
		return EncodePrompt(p.Model.Tok, p.CtxLen, text, addSpecial)
	}
	limit := promptLimit(p.CtxLen)
	var out []int32
	piece := ""
	first := true
	// emit tokenizes the text before an image (or the end) onto out.
	emit := func(s string) error {
		if s == "" && !(first && addSpecial) {
			first = false
			return nil
		}
		ids, ok := p.Model.Tok.EncodeLimit(s, first && addSpecial, true, limit-len(out))
		if !ok {
			return tooLong(p.CtxLen)
		}
		out = append(out, ids...)
		first = false
		return nil
	}
	from := 0
	for {
		start, end, id, ok := nextMarker(text, from)
		img := p.images[id]
		if !ok {
			break
		}
		if img == nil {
			// Another request's marker (a stored conversation whose image
			// is gone) stays text; it cannot come from a client.
			piece += text[from:end]
			from = end
			continue
		}
		if err := emit(piece + text[from:start] + p.before); err != nil {
			return nil, err
		}
		if len(out)+img.tokens > limit {
			return nil, tooLong(p.CtxLen)
		}
		p.spans = append(p.spans, imageSpan{pos: len(out), img: img})
		// The engine writes the image's placeholder ids over these.
		out = append(out, make([]int32, img.tokens)...)
		piece, from = p.after, end
	}
	if err := emit(piece + text[from:]); err != nil {
		return nil, err
	}
	return out, nil
}

// setImages hands the images the prompter placed to the engine request:
// their positions, their encoder-cache keys, and how to encode them on a
// cache miss.
func (j *Job) setImages(p *Prompter) {
	if len(p.spans) == 0 {
		return
	}
	proj := p.set.proj
	j.Req.Images = make([]engine.Image, len(p.spans))
	for i, s := range p.spans {
		pr := s.img.prepared
		j.Req.Images[i] = engine.Image{Pos: s.pos, Len: s.img.tokens, Key: pr.Hash, NonCausal: proj.NonCausal(),
			Encode: func() engine.Encoder { return proj.Encode(pr) }}
	}
}
