package openai

import (
	"bytes"
	"encoding/json"
	"net/http"
	"unicode/utf8"

	"mistralrs/internal/engine"
	"mistralrs/internal/sampler"
	"mistralrs/internal/server/gen"
	"mistralrs/internal/tokenizer"
)

// Completions is POST /v1/completions.
func (a *API) Completions(w http.ResponseWriter, r *http.Request) {
	a.handle(w, r, func(r *http.Request, body []byte) (*gen.Job, bool, func(*gen.Events) gen.Sink, error) {
		req, p, j, err := a.prepareCompletion(r, body)
		if err != nil {
			return nil, false, nil, err
		}
		c := &completionAnswer{b: a.b, w: w, r: r, j: j, lp: NewLogprobs(j.Model.Tok, req.Logprobs != nil),
			includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage}
		if req.Echo {
			c.echo = p.text
			if !p.isText {
				c.echo = j.Model.Tok.Decode(p.tokens)
			}
		}
		return j, req.Stream, func(ev *gen.Events) gen.Sink {
			if ev == nil {
				return newCompletionBody(c)
			}
			return newCompletionStream(c, ev)
		}, nil
	})
}

// completionPrompt is the prompt field: a string, or token ids, or a list
// holding one of them (one prompt per request).
type completionPrompt struct {
	text   string
	tokens []int32
	isText bool
}

func parsePrompt(raw gen.BodyJSON) (*completionPrompt, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return nil, gen.BadRequest("prompt", "prompt is required")
	}
	var text string
	if json.Unmarshal(b, &text) == nil {
		return &completionPrompt{text: text, isText: true}, nil
	}
	var toks []int32
	if json.Unmarshal(b, &toks) == nil {
		return &completionPrompt{tokens: toks}, nil
	}
	var list []gen.BodyJSON
	if json.Unmarshal(b, &list) == nil {
		if len(list) != 1 {
			return nil, gen.BadRequest("prompt", "prompt lists of %d prompts are not supported: send one prompt per request", len(list))
		}
		return parsePrompt(list[0])
	}
	return nil, gen.BadRequest("prompt", "prompt must be a string, an array of token ids, or a list holding one of them")
}

func (a *API) prepareCompletion(r *http.Request, body []byte) (*completionRequest, *completionPrompt, *gen.Job, error) {
	var req completionRequest
	if err := gen.DecodeJSON(body, &req); err != nil {
		return nil, nil, nil, err
	}
	m, err := a.b.Resolve(req.Model)
	if err != nil {
		return nil, nil, nil, err
	}
	if req.BestOf != nil && *req.BestOf != 1 {
		return nil, nil, nil, gen.BadRequest("best_of", "best_of = %d is not supported (only 1)", *req.BestOf)
	}
	if req.Suffix != nil && *req.Suffix != "" {
		return nil, nil, nil, gen.BadRequest("suffix", "suffix is not supported")
	}
	logprobs, top := false, 0
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > sampler.MaxTopLogprobs {
			return nil, nil, nil, gen.BadRequest("logprobs", "logprobs must be between 0 and %d, got %d", sampler.MaxTopLogprobs, *req.Logprobs)
		}
		logprobs, top = true, *req.Logprobs
	}
	if err := gen.Refuse(body, unsupported); err != nil {
		return nil, nil, nil, err
	}
	g, err := req.Settings(logprobs, top, a.b.Seed)
	if err != nil {
		return nil, nil, nil, err
	}
	if g.Grammar, g.Compile, err = a.b.ConstraintNoted("response_format", nil, req.Grammar); err != nil {
		return nil, nil, nil, err
	}
	p, err := parsePrompt(req.Prompt)
	if err != nil {
		return nil, nil, nil, err
	}
	gr := &gen.Request{Model: m, Settings: g, Tokens: p.tokens, Continuation: true, Adapter: req.Adapter}
	if p.isText {
		gr.Text = &p.text
	}
	j, err := a.b.Prepare(r.Context(), gr)
	return &req, p, j, err
}

// completionLogprobs accumulates the legacy logprobs object.
type completionLogprobs struct {
	lp     completionLogprob
	offset int
}

func newCompletionLogprobs(offset int) *completionLogprobs {
	return &completionLogprobs{offset: offset, lp: completionLogprob{
		Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}}
}

func (c *completionLogprobs) add(tok *tokenizer.Tokenizer, ch *sampler.Choice) {
	b := tok.TokenBytes(ch.Token)
	c.lp.Tokens = append(c.lp.Tokens, legacyToken(b))
	c.lp.TokenLogprobs = append(c.lp.TokenLogprobs, logprob(ch.Logprob))
	top := make(map[string]float64, len(ch.Top))
	for _, t := range ch.Top {
		top[legacyToken(tok.TokenBytes(t.Token))] = logprob(t.Logprob)
	}
	c.lp.TopLogprobs = append(c.lp.TopLogprobs, top)
	c.lp.TextOffset = append(c.lp.TextOffset, c.offset)
	c.offset += len(b)
}

// legacyToken is a token's text in the legacy logprobs object, whose
// top_logprobs are keyed by it: bytes that are not valid UTF-8 (part of a
// character) are written "bytes:\xNN…", as OpenAI does, so that distinct
// tokens never share a key.
func legacyToken(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := []byte("bytes:")
	for _, c := range b {
		out = append(out, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
	}
	return string(out)
}

const hexDigits = "0123456789abcdef"

// completionAnswer is what both forms of a completion answer share.
type completionAnswer struct {
	b            *gen.Base
	w            http.ResponseWriter
	r            *http.Request
	j            *gen.Job
	lp           Logprobs // on: the legacy logprobs object is asked for
	includeUsage bool
	echo         string // the prompt text when echo is set
}

func (c *completionAnswer) chunk(choices []completionChoiceJSON, u *usageJSON) completionJSON {
	return completionJSON{ID: c.j.ID, Object: "text_completion", Created: c.j.Created, Model: c.j.Served.ID(),
		SystemFingerprint: systemFingerprint, Choices: choices, Usage: u, AdapterGeneration: c.j.AdapterGeneration}
}

// completionBody answers in one text_completion body.
type completionBody struct {
	*completionAnswer
	lps []*completionLogprobs // by choice
}

func newCompletionBody(c *completionAnswer) *completionBody {
	lps := make([]*completionLogprobs, max(c.j.Req.N, 1))
	if c.lp.On {
		for i := range lps {
			lps[i] = newCompletionLogprobs(len(c.echo))
		}
	}
	return &completionBody{completionAnswer: c, lps: lps}
}

func (c *completionBody) Output(o engine.Output, _ string) error {
	if c.lp.Wants(o) {
		c.lps[o.Index].add(c.lp.tok, o.Logprob)
	}
	return nil
}

func (c *completionBody) Finish(end *gen.End) (bool, error) {
	choices := make([]completionChoiceJSON, len(end.Choices))
	for i := range end.Choices {
		reason := end.Choices[i].FinishReason
		choices[i] = completionChoiceJSON{Index: i, Text: c.echo + end.Choices[i].Text, FinishReason: &reason}
		if c.lps[i] != nil {
			choices[i].Logprobs = &c.lps[i].lp
		}
	}
	resp := c.chunk(choices, usage(&end.Merged))
	c.b.Respond(c.w, c.r, resp)
	return false, nil
}

func (c *completionBody) Fail(err error) { c.b.WriteError(c.w, c.r, gen.OpenAI, err) }

// completionStream answers with text_completion chunks and [DONE].
type completionStream struct {
	*completionAnswer
	ev     *gen.Events
	echo   []string // per choice, until its first chunk
	offset []int
}

func newCompletionStream(c *completionAnswer, ev *gen.Events) *completionStream {
	n := max(c.j.Req.N, 1)
	s := &completionStream{completionAnswer: c, ev: ev, echo: make([]string, n), offset: make([]int, n)}
	for i := range s.echo {
		s.echo[i], s.offset[i] = c.echo, len(c.echo)
	}
	return s
}

func (c *completionStream) Output(o engine.Output, _ string) error {
	i := o.Index
	var lp *completionLogprob
	if c.lp.Wants(o) {
		l := newCompletionLogprobs(c.offset[i])
		l.add(c.lp.tok, o.Logprob)
		lp = &l.lp
	}
	text := c.echo[i] + o.Text
	if text == "" && lp == nil {
		return nil
	}
	c.echo[i] = ""
	c.offset[i] += len(o.Text)
	return c.ev.Data(c.chunk([]completionChoiceJSON{{Index: i, Text: text, Logprobs: lp}}, nil))
}

// Finish sends each choice's final chunk (with an echo not sent yet);
// completions chunks carry no usage (as in mistral.rs) unless
// stream_options.include_usage asks for OpenAI's usage chunk; then [DONE].
func (c *completionStream) Finish(end *gen.End) (bool, error) {
	for i := range end.Choices {
		reason := end.Choices[i].FinishReason
		if err := c.ev.Data(c.chunk([]completionChoiceJSON{{Index: i, Text: c.echo[i], FinishReason: &reason}}, nil)); err != nil {
			return false, err
		}
	}
	if c.includeUsage {
		if err := c.ev.Data(c.chunk([]completionChoiceJSON{}, usage(&end.Merged))); err != nil {
			return false, err
		}
		return true, c.ev.Done()
	}
	return false, c.ev.Done()
}

func (c *completionStream) Fail(err error) { streamError(c.ev, err) }
