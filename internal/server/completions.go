package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"unicode/utf8"

	"mistralrs/internal/engine"
	"mistralrs/internal/observe"
	"mistralrs/internal/sampler"
	"mistralrs/internal/tokenizer"
)

// handleCompletions is POST /v1/completions.
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	cj, err := s.prepareCompletion(r, body)
	if err != nil {
		s.writePrepareError(w, r, err)
		return
	}
	defer cj.job.release()
	if cj.stream {
		s.streamCompletion(w, r, cj)
	} else {
		s.complete(w, r, cj)
	}
}

// completionJob is a checked completions request.
type completionJob struct {
	job          *job
	stream       bool
	includeUsage bool
	logprobs     bool
	echo         string // the prompt text when echo is set
}

// completionPrompt is the prompt field: a string, or token ids, or a list
// holding one of them (one prompt per request).
type completionPrompt struct {
	text   string
	tokens []int32
	isText bool
}

func parsePrompt(raw bodyJSON) (*completionPrompt, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return nil, badRequest("prompt", "prompt is required")
	}
	var text string
	if json.Unmarshal(b, &text) == nil {
		return &completionPrompt{text: text, isText: true}, nil
	}
	var toks []int32
	if json.Unmarshal(b, &toks) == nil {
		return &completionPrompt{tokens: toks}, nil
	}
	var list []bodyJSON
	if json.Unmarshal(b, &list) == nil {
		if len(list) != 1 {
			return nil, badRequest("prompt", "prompt lists of %d prompts are not supported: send one prompt per request", len(list))
		}
		return parsePrompt(list[0])
	}
	return nil, badRequest("prompt", "prompt must be a string, an array of token ids, or a list holding one of them")
}

func (s *Server) prepareCompletion(r *http.Request, body []byte) (*completionJob, error) {
	var req completionRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	entry, err := s.resolveModel(req.Model)
	if err != nil {
		return nil, err
	}
	if req.BestOf != nil && *req.BestOf != 1 {
		return nil, badRequest("best_of", "best_of = %d is not supported (only 1)", *req.BestOf)
	}
	if req.Suffix != nil && *req.Suffix != "" {
		return nil, badRequest("suffix", "suffix is not supported")
	}
	logprobs, top := false, 0
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > sampler.MaxTopLogprobs {
			return nil, badRequest("logprobs", "logprobs must be between 0 and %d, got %d", sampler.MaxTopLogprobs, *req.Logprobs)
		}
		logprobs, top = true, *req.Logprobs
	}
	g, err := req.settings(logprobs, top, s.opts.Seed)
	if err != nil {
		return nil, err
	}
	if g.grammar, err = s.constraint("response_format", nil, req.Grammar); err != nil {
		return nil, err
	}
	p, err := parsePrompt(req.Prompt)
	if err != nil {
		return nil, err
	}
	j, err := s.newJob(r.Context(), entry, g)
	if err != nil {
		return nil, err
	}
	tok := j.lm.model.Tok
	prompt := p.tokens
	if p.isText {
		prompt, err = j.encode(p.text, true)
	}
	j.req.Continuation = true // a completion continues the prompt's text
	if err == nil {
		err = j.setPrompt(prompt)
	}
	if err != nil {
		j.release()
		return nil, err
	}
	cj := &completionJob{job: j, stream: req.Stream, logprobs: logprobs}
	if req.StreamOptions != nil {
		cj.includeUsage = req.StreamOptions.IncludeUsage
	}
	if req.Echo {
		cj.echo = p.text
		if !p.isText {
			cj.echo = tok.Decode(p.tokens)
		}
	}
	return cj, nil
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

func (s *Server) complete(w http.ResponseWriter, r *http.Request, cj *completionJob) {
	j := cj.job
	tok := j.lm.model.Tok
	n := max(j.req.N, 1)
	lps := make([]*completionLogprobs, n)
	if cj.logprobs {
		for i := range lps {
			lps[i] = newCompletionLogprobs(len(cj.echo))
		}
	}
	gctx, cancel := genContext(r.Context())
	defer cancel()
	results, err := j.lm.eng.GenerateAll(gctx, j.req, func(o engine.Output) error {
		if l := lps[o.Index]; l != nil && o.Logprob != nil && !o.StopToken {
			l.add(tok, o.Logprob)
		}
		return nil
	})
	if err != nil {
		s.writeRequestError(w, r, generateError(err))
		return
	}
	if results[0].FinishReason == engine.FinishCanceled && clientGone(r) {
		observe.WriteErrorMessage(w, r, statusClientClosed, "client closed the request")
		return
	}
	choices := make([]completionChoiceJSON, len(results))
	for i, res := range results {
		reason := res.FinishReason
		choices[i] = completionChoiceJSON{Index: i, Text: cj.echo + res.Text, FinishReason: &reason}
		if lps[i] != nil {
			choices[i].Logprobs = &lps[i].lp
		}
	}
	resp := completionJSON{
		ID: j.id, Object: "text_completion", Created: j.created, Model: j.entry.spec.ID,
		SystemFingerprint: systemFingerprint, Choices: choices, Usage: usageAll(results),
	}
	_ = s.opts.PayloadLog.Response(resp)
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) streamCompletion(w http.ResponseWriter, r *http.Request, cj *completionJob) {
	j := cj.job
	tok := j.lm.model.Tok
	st := observe.StreamFromContext(r.Context())
	sw := startSSE(w)
	chunk := func(choices []completionChoiceJSON, u *usageJSON) completionJSON {
		return completionJSON{ID: j.id, Object: "text_completion", Created: j.created, Model: j.entry.spec.ID,
			SystemFingerprint: systemFingerprint, Choices: choices, Usage: u}
	}
	send := func(v completionJSON) error {
		_ = s.opts.PayloadLog.Response(v)
		return sw.data(v)
	}
	n := max(j.req.N, 1)
	echo := make([]string, n) // per choice, until its first chunk
	offset := make([]int, n)
	for i := range echo {
		echo[i], offset[i] = cj.echo, len(cj.echo)
	}
	results, err := generateStreamingAll(r.Context(), j.lm.eng, j.req, sw, s.opts.KeepAlive, func(o engine.Output) error {
		i := o.Index
		var lp *completionLogprob
		if cj.logprobs && o.Logprob != nil && !o.StopToken {
			l := newCompletionLogprobs(offset[i])
			l.add(tok, o.Logprob)
			lp = &l.lp
		}
		text := echo[i] + o.Text
		if text == "" && lp == nil {
			return nil
		}
		echo[i] = ""
		offset[i] += len(o.Text)
		return send(chunk([]completionChoiceJSON{{Index: i, Text: text, Logprobs: lp}}, nil))
	})
	s.finishStreamAll(r, sw, st, results, err, func(results []*engine.Result, u *usageJSON) (bool, error) {
		for i, res := range results {
			reason := res.FinishReason
			text := echo[i] // an echo not sent yet (no token produced text)
			if err := send(chunk([]completionChoiceJSON{{Index: i, Text: text, FinishReason: &reason}}, nil)); err != nil {
				return false, err
			}
		}
		if cj.includeUsage {
			// Completions chunks carry no usage (as in mistral.rs) unless
			// stream_options.include_usage asks for OpenAI's usage chunk.
			return true, send(chunk([]completionChoiceJSON{}, u))
		}
		return false, nil
	})
}
