package openai

import (
	"net/http"

	"mistralrs/internal/engine"
	"mistralrs/internal/server/gen"
)

// API serves POST /v1/chat/completions and /v1/completions over the seam,
// and /v1/embeddings.
type API struct {
	b                  *gen.Base
	maxEmbeddingInputs int // the most inputs of one embeddings request
}

// New is the OpenAI dialect over b, taking at most maxEmbeddingInputs
// inputs in one embeddings request (--max-embedding-inputs).
func New(b *gen.Base, maxEmbeddingInputs int) *API {
	return &API{b: b, maxEmbeddingInputs: maxEmbeddingInputs}
}

// handle is the skeleton of both routes: read the body, let prepare turn
// it into a job, run it with the sink newSink makes.
func (a *API) handle(w http.ResponseWriter, r *http.Request,
	prepare func(r *http.Request, body []byte) (*gen.Job, bool, func(ev *gen.Events) gen.Sink, error)) {
	body, ok := a.b.ReadBody(w, r, gen.OpenAI)
	if !ok {
		return
	}
	j, stream, newSink, err := prepare(r, body)
	if err != nil {
		a.b.WriteError(w, r, gen.OpenAI, err)
		return
	}
	defer j.Release()
	a.b.Run(w, r, j, stream, newSink)
}

// Chat is POST /v1/chat/completions.
func (a *API) Chat(w http.ResponseWriter, r *http.Request) {
	a.handle(w, r, func(r *http.Request, body []byte) (*gen.Job, bool, func(*gen.Events) gen.Sink, error) {
		req, j, err := a.prepareChat(r, body)
		if err != nil {
			return nil, false, nil, err
		}
		c := &chatAnswer{b: a.b, w: w, r: r, j: j, lps: NewLogprobs(j.Model.Tok, req.Logprobs),
			includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
		return j, req.Stream, func(ev *gen.Events) gen.Sink {
			if ev == nil {
				c.collected = make([][]TokenLogprob, max(j.Req.N, 1))
				return &chatBody{c}
			}
			return &chatStream{chatAnswer: c, ev: ev}
		}, nil
	})
}

// prepareChat decodes and checks a chat request and holds its model.
func (a *API) prepareChat(r *http.Request, body []byte) (*chatRequest, *gen.Job, error) {
	var req chatRequest
	if err := gen.DecodeJSON(body, &req); err != nil {
		return nil, nil, err
	}
	m, err := a.b.Resolve(req.Model)
	if err != nil {
		return nil, nil, err
	}
	if err := gen.Refuse(body, unsupported); err != nil {
		return nil, nil, err
	}
	top := 0
	if req.TopLogprobs != nil {
		top = *req.TopLogprobs
	}
	g, err := req.Settings(req.Logprobs, top, a.b.Seed)
	if err != nil {
		return nil, nil, err
	}
	var images gen.Images
	msgs, raw, isRaw, err := req.messages(&images)
	if err != nil {
		return nil, nil, err
	}
	if g.Grammar, g.Compile, err = a.b.ConstraintNoted("response_format", req.ResponseFormat, req.Grammar); err != nil {
		return nil, nil, err
	}
	tools, err := gen.ToolsParser(req.Tools, req.ToolChoice)
	if err != nil {
		return nil, nil, err
	}
	gr := &gen.Request{Model: m, Settings: g, Messages: msgs, Param: "messages",
		Template: gen.TemplateOptions(req.Tools, req.ChatTemplateKwargs, req.EnableThinking),
		Tools:    tools, ToolDefs: req.Tools, ToolChoice: req.ToolChoice, Images: images, Adapter: req.Adapter}
	if isRaw {
		gr.Messages, gr.Text = nil, &raw
	}
	j, err := a.b.Prepare(r.Context(), gr)
	return &req, j, err
}

// chatAnswer is what both forms of a chat answer share.
type chatAnswer struct {
	b            *gen.Base
	w            http.ResponseWriter
	r            *http.Request
	j            *gen.Job
	lps          Logprobs
	includeUsage bool
	collected    [][]TokenLogprob // a body's logprobs, by choice
}

func (c *chatAnswer) chunk(choices []chatChoiceJSON, u *usageJSON) chatCompletionJSON {
	return chatCompletionJSON{ID: c.j.ID, Object: "chat.completion.chunk", Created: c.j.Created, Model: c.j.Served.ID(),
		SystemFingerprint: systemFingerprint, Choices: choices, Usage: u, AdapterGeneration: c.j.AdapterGeneration}
}

// chatBody answers in one chat.completion body.
type chatBody struct{ *chatAnswer }

func (c *chatBody) Output(o engine.Output, _ string) error {
	if lp := c.lps.Of(o); lp != nil {
		c.collected[o.Index] = append(c.collected[o.Index], *lp)
	}
	return nil
}

func (c *chatBody) Finish(end *gen.End) (bool, error) {
	choices := make([]chatChoiceJSON, len(end.Choices))
	for i := range end.Choices {
		ch := &end.Choices[i]
		reason := ch.FinishReason
		text := ch.Text
		msg := &chatMessageJSON{Role: "assistant", Content: &text}
		if ch.Answer != nil {
			msg.Content = nil // OpenAI: null when the answer is only calls
			if content := ch.Answer.Content; content != "" {
				msg.Content = &content
			}
			msg.ToolCalls = toolCallsJSON(ch.Answer.Calls, false)
		}
		choices[i] = chatChoiceJSON{Index: i, Message: msg, FinishReason: &reason}
		if c.lps.On {
			if c.collected[i] == nil {
				c.collected[i] = []TokenLogprob{}
			}
			choices[i].Logprobs = &chatLogprobs{Content: c.collected[i]}
		}
	}
	c.b.Respond(c.w, c.r, chatCompletionJSON{
		ID: c.j.ID, Object: "chat.completion", Created: c.j.Created, Model: c.j.Served.ID(),
		SystemFingerprint: systemFingerprint, Choices: choices, Usage: usage(&end.Merged), AdapterGeneration: c.j.AdapterGeneration,
	})
	return false, nil
}

func (c *chatBody) Fail(err error) { c.b.WriteError(c.w, c.r, gen.OpenAI, err) }

// chatStream answers with chat.completion.chunk events and [DONE].
type chatStream struct {
	*chatAnswer
	ev *gen.Events
}

func (c *chatStream) delta(i int, m *chatMessageJSON) error {
	return c.ev.Data(c.chunk([]chatChoiceJSON{{Index: i, Delta: m}}, nil))
}

func (c *chatStream) Output(o engine.Output, text string) error {
	var lp *chatLogprobs
	if e := c.lps.Of(o); e != nil {
		lp = &chatLogprobs{Content: []TokenLogprob{*e}}
	}
	if text == "" && lp == nil {
		return nil
	}
	return c.ev.Data(c.chunk([]chatChoiceJSON{{Index: o.Index, Delta: &chatMessageJSON{Role: "assistant", Content: &text}, Logprobs: lp}}, nil))
}

// Finish sends each choice's held-back text or tool calls and its final
// chunk; the usage goes on the last one (mistral.rs), or in a chunk of its
// own with stream_options.include_usage (OpenAI); then [DONE].
func (c *chatStream) Finish(end *gen.End) (bool, error) {
	u := usage(&end.Merged)
	for i := range end.Choices {
		ch := &end.Choices[i]
		if ch.Rest != "" {
			if err := c.delta(i, &chatMessageJSON{Role: "assistant", Content: &ch.Rest}); err != nil {
				return false, err
			}
		}
		if ch.Calls != nil {
			if err := c.delta(i, &chatMessageJSON{Role: "assistant", ToolCalls: toolCallsJSON(ch.Calls, true)}); err != nil {
				return false, err
			}
		}
		empty, reason := "", ch.FinishReason
		last := c.chunk([]chatChoiceJSON{{Index: i, Delta: &chatMessageJSON{Role: "assistant", Content: &empty}, FinishReason: &reason}}, nil)
		if !c.includeUsage && i == len(end.Choices)-1 {
			last.Usage = u
		}
		if err := c.ev.Data(last); err != nil {
			return false, err
		}
	}
	if c.includeUsage {
		if err := c.ev.Data(c.chunk([]chatChoiceJSON{}, u)); err != nil {
			return false, err
		}
	}
	return true, c.ev.Done()
}

func (c *chatStream) Fail(err error) { streamError(c.ev, err) }

// streamError ends a failed OpenAI stream: an error event, then [DONE].
func streamError(ev *gen.Events, err error) {
	type apiErr struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	if ev.Unlogged("", struct {
		Error apiErr `json:"error"`
	}{apiErr{Message: err.Error(), Type: "server_error"}}) == nil {
		_ = ev.Done()
	}
}

var (
	_ gen.Sink = (*chatBody)(nil)
	_ gen.Sink = (*chatStream)(nil)
	_ gen.Sink = (*completionBody)(nil)
	_ gen.Sink = (*completionStream)(nil)
)
