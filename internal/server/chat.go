package server

import (
	"net/http"
	"sync"

	"mistralrs/internal/chat"
	"mistralrs/internal/engine"
	"mistralrs/internal/observe"
)

// handleChat is POST /v1/chat/completions.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	j, err := s.prepareChat(r, body)
	if err != nil {
		s.writePrepareError(w, r, err)
		return
	}
	defer j.job.release()
	if j.stream {
		s.streamChat(w, r, j)
	} else {
		s.completeChat(w, r, j)
	}
}

// writePrepareError answers a request that failed before generation.
func (s *Server) writePrepareError(w http.ResponseWriter, r *http.Request, err error) {
	if clientGone(r) {
		// Left while the model was loading: nobody reads this, but the
		// access log and metrics say what happened.
		observe.WriteErrorMessage(w, r, statusClientClosed, "client closed the request")
		return
	}
	s.writeRequestError(w, r, err)
}

// chatJob is a checked chat request.
type chatJob struct {
	job          *job
	stream       bool
	includeUsage bool
	logprobs     bool
	tools        *chat.ToolParser // nil: the answer is not read for tool calls
	// answers are the answers read as tool calls, by their text, set by
	// the engine's Request.ToolCalls when it finds calls (so before the
	// stream ends; one per choice).
	mu      sync.Mutex
	answers map[string]toolAnswer
}

// answer is the tool-call reading of a choice's text.
func (cj *chatJob) answer(text string) *toolAnswer {
	cj.mu.Lock()
	defer cj.mu.Unlock()
	a := cj.answers[text]
	return &a
}

// messagesBytes is the text the messages carry, all of which a chat
// template normally writes into the prompt (reasoning of earlier turns is
// left out: templates often drop it).
func messagesBytes(msgs []chat.Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content)
		for _, p := range m.Parts {
			n += len(p.Text)
		}
		for _, c := range m.ToolCalls {
			n += len(c.Function.Arguments)
		}
	}
	return n
}

func (s *Server) prepareChat(r *http.Request, body []byte) (*chatJob, error) {
	var req chatRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	entry, err := s.resolveModel(req.Model)
	if err != nil {
		return nil, err
	}
	top := 0
	if req.TopLogprobs != nil {
		top = *req.TopLogprobs
	}
	g, err := req.settings(req.Logprobs, top, s.opts.Seed)
	if err != nil {
		return nil, err
	}
	msgs, raw, isRaw, err := req.messages()
	if err != nil {
		return nil, err
	}
	if g.grammar, err = s.constraint("response_format", req.ResponseFormat, req.Grammar); err != nil {
		return nil, err
	}
	tools, err := toolsParser(req.Tools, req.ToolChoice)
	if err != nil {
		return nil, err
	}
	opts := templateOptions(req.Tools, req.ChatTemplateKwargs, req.EnableThinking)

	j, err := s.newJob(r.Context(), entry, g)
	if err != nil {
		return nil, err
	}
	m := j.lm.model
	if tools != nil {
		// "required" or a named function: one call, in the model's format.
		tg, err := s.toolCallGrammar(m.Template.Source(), req.Tools, req.ToolChoice)
		if err == nil && tg != nil && g.grammar != nil {
			err = badRequest("tool_choice", "tool_choice %s cannot be combined with response_format or grammar", string(req.ToolChoice))
		}
		if err != nil {
			j.release()
			return nil, err
		}
		if tg != nil {
			j.req.Grammar = tg
		}
	}
	var prompt []int32
	if isRaw {
		prompt, err = j.encode(raw, true)
	} else {
		prompt, err = renderPrompt(m, j.lm.eng.ContextLength(), msgs, opts, "messages")
	}
	if err == nil {
		err = j.setPrompt(prompt)
	}
	if err != nil {
		j.release()
		return nil, err
	}
	cj := &chatJob{job: j, stream: req.Stream, logprobs: req.Logprobs, tools: tools}
	if tools != nil {
		j.req.ToolCalls = func(text string) bool {
			content, calls, ok := tools.Parse(text)
			if ok {
				cj.mu.Lock()
				if cj.answers == nil {
					cj.answers = map[string]toolAnswer{}
				}
				cj.answers[text] = toolAnswer{content: content, calls: calls}
				cj.mu.Unlock()
			}
			return ok
		}
	}
	if req.StreamOptions != nil {
		cj.includeUsage = req.StreamOptions.IncludeUsage
	}
	return cj, nil
}

func (s *Server) completeChat(w http.ResponseWriter, r *http.Request, cj *chatJob) {
	j := cj.job
	tok := j.lm.model.Tok
	lps := make([][]tokenLogprob, max(j.req.N, 1))
	gctx, cancel := genContext(r.Context())
	defer cancel()
	results, err := j.lm.eng.GenerateAll(gctx, j.req, func(o engine.Output) error {
		if cj.logprobs && o.Logprob != nil && !o.StopToken {
			lps[o.Index] = append(lps[o.Index], chatLogprob(tok, o.Logprob))
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
	choices := make([]chatChoiceJSON, len(results))
	for i, res := range results {
		text := res.Text
		reason := res.FinishReason
		msg := &chatMessageJSON{Role: "assistant", Content: &text}
		if reason == engine.FinishToolCalls {
			a := cj.answer(res.Text)
			msg.Content = nil // OpenAI: null when the answer is only calls
			if content := a.content; content != "" {
				msg.Content = &content
			}
			msg.ToolCalls = toolCallsJSON(a.calls, false)
		}
		choices[i] = chatChoiceJSON{Index: i, Message: msg, FinishReason: &reason}
		if cj.logprobs {
			if lps[i] == nil {
				lps[i] = []tokenLogprob{}
			}
			choices[i].Logprobs = &chatLogprobs{Content: lps[i]}
		}
	}
	resp := chatCompletionJSON{
		ID: j.id, Object: "chat.completion", Created: j.created, Model: j.entry.spec.ID,
		SystemFingerprint: systemFingerprint, Choices: choices, Usage: usageAll(results),
	}
	_ = s.opts.PayloadLog.Response(resp)
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, cj *chatJob) {
	j := cj.job
	tok := j.lm.model.Tok
	st := observe.StreamFromContext(r.Context())
	sw := startSSE(w)
	chunk := func(choices []chatChoiceJSON, u *usageJSON) chatCompletionJSON {
		return chatCompletionJSON{ID: j.id, Object: "chat.completion.chunk", Created: j.created, Model: j.entry.spec.ID,
			SystemFingerprint: systemFingerprint, Choices: choices, Usage: u}
	}
	send := func(v chatCompletionJSON) error {
		_ = s.opts.PayloadLog.Response(v)
		return sw.data(v)
	}
	delta := func(i int, m *chatMessageJSON) chatCompletionJSON {
		return chunk([]chatChoiceJSON{{Index: i, Delta: m}}, nil)
	}
	held := make([]*toolStream, max(j.req.N, 1)) // by choice
	if cj.tools != nil {
		for i := range held {
			held[i] = &toolStream{p: cj.tools}
		}
	}
	results, err := generateStreamingAll(r.Context(), j.lm.eng, j.req, sw, s.opts.KeepAlive, func(o engine.Output) error {
		var lp *chatLogprobs
		if cj.logprobs && o.Logprob != nil && !o.StopToken {
			lp = &chatLogprobs{Content: []tokenLogprob{chatLogprob(tok, o.Logprob)}}
		}
		text := o.Text
		if h := held[o.Index]; h != nil {
			text = h.push(text)
		}
		if text == "" && lp == nil {
			return nil
		}
		return send(chunk([]chatChoiceJSON{{Index: o.Index, Delta: &chatMessageJSON{Role: "assistant", Content: &text}, Logprobs: lp}}, nil))
	})
	s.finishStreamAll(r, sw, st, results, err, func(results []*engine.Result, u *usageJSON) (bool, error) {
		for i, res := range results {
			reason := res.FinishReason
			if h := held[i]; h != nil {
				// What was held back: text, or the tool calls in one delta.
				var answer *toolAnswer
				if reason == engine.FinishToolCalls {
					answer = cj.answer(res.Text)
				}
				rest, calls := h.finish(answer)
				if rest != "" {
					if err := send(delta(i, &chatMessageJSON{Role: "assistant", Content: &rest})); err != nil {
						return false, err
					}
				}
				if calls != nil {
					if err := send(delta(i, &chatMessageJSON{Role: "assistant", ToolCalls: toolCallsJSON(calls, true)})); err != nil {
						return false, err
					}
				}
			}
			empty := ""
			last := chunk([]chatChoiceJSON{{Index: i, Delta: &chatMessageJSON{Role: "assistant", Content: &empty}, FinishReason: &reason}}, nil)
			if !cj.includeUsage && i == len(results)-1 {
				// mistral.rs puts the usage on the final chunk.
				last.Usage = u
			}
			if err := send(last); err != nil {
				return false, err
			}
		}
		if cj.includeUsage {
			// OpenAI's stream_options.include_usage: one more chunk, no choices.
			return true, send(chunk([]chatChoiceJSON{}, u))
		}
		return true, nil
	})
}

// finishStreamAll ends a stream after the engine is done: the final chunks
// of every choice (written by last, which reports whether they carried the
// usage), or the error event; then [DONE]. A client that left gets nothing
// more.
func (s *Server) finishStreamAll(r *http.Request, sw *sseWriter, st *observe.Stream, results []*engine.Result, err error,
	last func(results []*engine.Result, u *usageJSON) (bool, error)) {
	if err != nil {
		msg := generateError(err).Error()
		st.Error(msg)
		_ = s.opts.PayloadLog.Error(msg)
		_ = sw.streamError(msg)
		return
	}
	if sw.err != nil || (results[0].FinishReason == engine.FinishCanceled && clientGone(r)) {
		return
	}
	u := usageAll(results)
	sent, err := last(results, u)
	if err != nil {
		return
	}
	if sent {
		st.SetUsage(accessUsage(u))
	}
	if sw.done() == nil {
		st.Done()
	}
}
