package main

import (
	"context"
	"encoding/base64"
	"fmt"

	"mistralrs/internal/chat"
	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
	"mistralrs/internal/server/gen"
	"mistralrs/internal/smallfile"
)

// runImages are run's --image files, sent with the first user turn (or
// before the --raw prompt) through the server's own prompt building
// (gen.Base.Prepare): each image becomes its projector's start text, its
// embedding positions and its end text, and the engine encodes it.
type runImages struct {
	base  gen.Base
	model runModel
	parts gen.Images
	marks []chat.ContentPart // the parts standing for the images, in order
}

// runModel is run's one model as gen sees a served model.
type runModel struct{ l *gen.Loaded }

func (r runModel) ID() string              { return r.l.Model.ID }
func (r runModel) RefuseGeneration() error { return nil }
func (r runModel) Acquire(context.Context) (*gen.Loaded, func(), error) {
	return r.l, func() {}, nil
}

// newRunImages reads the image files for m, whose engine is eng; m must
// have a vision projector.
func newRunImages(files []string, m *loader.Model, eng *engine.Engine) (*runImages, error) {
	if m.Vision == nil {
		return nil, fmt.Errorf("--image needs a vision projector: --mmproj FILE, or one *mmproj*.gguf beside the model")
	}
	ri := &runImages{model: runModel{&gen.Loaded{Model: m, Engine: eng}}}
	for _, file := range files {
		data, err := smallfile.Read(file, imageFileCap)
		if err != nil {
			return nil, fmt.Errorf("--image: %w", err)
		}
		// The same data URL a chat request carries: the image is checked,
		// decoded and bounded exactly as the server does it.
		u := "data:;base64," + base64.StdEncoding.EncodeToString(data)
		ri.marks = append(ri.marks, ri.parts.Add("--image "+file, u))
	}
	return ri, nil
}

// attach puts the images before the text of a user message.
func (ri *runImages) attach(msg chat.Message) chat.Message {
	msg.Parts = append(append([]chat.ContentPart(nil), ri.marks...), chat.ContentPart{Type: "text", Text: msg.Content})
	return msg
}

// request makes the engine request of a conversation whose first user
// message went through attach, or with raw of the raw prompt after the
// images; release it once generated.
func (ri *runImages) request(ctx context.Context, msgs []chat.Message, raw *string, s *gen.Settings) (*engine.Request, func(), error) {
	req := &gen.Request{Model: ri.model, Settings: s, Images: ri.parts, Continuation: raw != nil}
	if raw != nil {
		text := ""
		for _, p := range ri.marks {
			text += p.Text
		}
		text += *raw
		req.Text = &text
	} else {
		req.Messages, req.Template, req.Param = msgs, gen.TemplateOptions(nil, nil, nil), "messages"
	}
	job, err := ri.base.Prepare(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	return job.Req, job.Release, nil
}
