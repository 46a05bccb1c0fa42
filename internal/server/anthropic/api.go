// Package anthropic is the Anthropic Messages API (POST /v1/messages and
// /v1/messages/count_tokens) over the generation seam, as mistral.rs
// serves it: the request is turned into OpenAI-style chat messages (system
// prompt first, tool_use blocks as assistant tool_calls, tool_result blocks
// as tool messages) for the model's chat template, and the answer comes
// back as content blocks (text, tool_use). Every error on these routes
// uses Anthropic's envelope (Envelope).
package anthropic

import (
	"net/http"

	"mistralrs/internal/server/gen"
)

// API serves the Anthropic routes over the seam.
type API struct{ b *gen.Base }

// New is the Anthropic dialect over b.
func New(b *gen.Base) *API { return &API{b: b} }

// Messages is POST /v1/messages.
func (a *API) Messages(w http.ResponseWriter, r *http.Request) {
	body, ok := a.b.ReadBody(w, r, Envelope)
	if !ok {
		return
	}
	j, stream, err := a.prepare(r, body)
	if err != nil {
		a.b.WriteError(w, r, Envelope, err)
		return
	}
	defer j.Release()
	ans := &answer{b: a.b, w: w, r: r, j: j, msgID: newID("msg_")}
	j.ResponseID = ans.msgID
	a.b.Run(w, r, j, stream, func(ev *gen.Events) gen.Sink {
		if ev == nil {
			return &bodySink{ans}
		}
		return newStreamSink(ans, ev)
	})
}

// prepare decodes and checks a /v1/messages request and holds its model;
// it reports whether the answer is streamed.
func (a *API) prepare(r *http.Request, body []byte) (*gen.Job, bool, error) {
	p, err := a.parse(body, true)
	if err != nil {
		return nil, false, err
	}
	g, err := p.settings(a.b.Seed)
	if err != nil {
		return nil, false, err
	}
	j, err := a.b.Prepare(r.Context(), &gen.Request{Model: p.model, Settings: g, Render: p.render, Images: p.images, Tools: p.tools,
		ToolDefs: p.toolDefs, ToolChoice: p.toolChoice})
	if err != nil {
		return nil, false, err
	}
	return j, p.req.Stream, nil
}

// CountTokens is POST /v1/messages/count_tokens: the tokens of the prompt
// the request would run (chat template applied, generation prompt added);
// max_tokens is optional here.
func (a *API) CountTokens(w http.ResponseWriter, r *http.Request) {
	body, ok := a.b.ReadBody(w, r, Envelope)
	if !ok {
		return
	}
	if err := a.countTokens(w, r, body); err != nil {
		a.b.WriteError(w, r, Envelope, err)
	}
}

// countTokens answers with the prompt's token count, or returns the error
// to answer.
func (a *API) countTokens(w http.ResponseWriter, r *http.Request, body []byte) error {
	p, err := a.parse(body, false)
	if err != nil {
		return err
	}
	n, err := a.b.CountTokens(r.Context(), &gen.Request{Model: p.model, Render: p.render, Images: p.images})
	if err != nil {
		return err
	}
	a.b.Respond(w, r, struct {
		InputTokens int `json:"input_tokens"`
	}{n})
	return nil
}
