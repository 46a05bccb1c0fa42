package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"mistralrs/internal/gguf"
	"net/http"
	"strconv"
	"time"

	"mistralrs/internal/chat"
	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
	"mistralrs/internal/observe"
	"mistralrs/internal/sampler"
	"mistralrs/internal/tokenizer"
)

// statusClientClosed is the status logged for a non-streaming request whose
// client left before the answer (nginx's 499); nobody receives it.
const statusClientClosed = 499

// job is one checked generation request, bound to a loaded model.
type job struct {
	s       *Server
	entry   *modelEntry
	lm      *loadedModel
	release func()
	req     *engine.Request
	id      string
	created int64
}

// resolveModel finds the request's model (404 if we do not serve it).
func (s *Server) resolveModel(name string) (*modelEntry, error) {
	e, ok := s.models.lookup(name)
	if !ok {
		return nil, &requestError{status: http.StatusNotFound, param: "model", msg: s.models.unknownModelError(name)}
	}
	return e, nil
}

// newJob loads (if needed) and holds the model for one request.
func (s *Server) newJob(ctx context.Context, e *modelEntry, g *genSettings) (*job, error) {
	if err := e.refuseGeneration(); err != nil {
		return nil, err
	}
	lm, release, err := e.acquire(ctx)
	if err != nil {
		return nil, err
	}
	vocab := int32(lm.model.Tok.VocabSize())
	bad := int32(-1)
	for id := range g.params.LogitBias {
		if id >= vocab && (bad < 0 || id < bad) {
			bad = id
		}
	}
	if bad >= 0 {
		release()
		return nil, badRequest("logit_bias", "logit_bias: token id %d is outside the vocabulary (0..%d)", bad, vocab-1)
	}
	return &job{
		s: s, entry: e, lm: lm, release: release,
		req: &engine.Request{Sampling: g.params, MaxTokens: g.maxTokens, Stop: g.stop, IgnoreEOS: g.ignoreEOS, NoSpeculation: g.noSpec, N: g.n, Grammar: g.grammar},
		id:  strconv.FormatUint(s.seq.Add(1)-1, 10), created: time.Now().Unix(),
	}, nil
}

// promptLimit is the most tokens a prompt may have: one fewer than the
// context length, leaving room for at least one generated token.
func promptLimit(ctxLen int) int { return max(ctxLen-1, 0) }

// tooLong is the error of a prompt with more tokens than fit the context.
// (no param: the whole prompt, as the token count check of setPrompt).
func tooLong(ctxLen int) error {
	return badRequest("", "the prompt has more than %d tokens, which does not fit the model's context length of %d tokens", promptLimit(ctxLen), ctxLen)
}

// checkTextBytes refuses, before any rendering or tokenizing, a request
// whose prompt text (nbytes in all) is longer than the context could hold
// even at the tokenizer's longest token, so that a huge prompt costs no
// more than its body.
func checkTextBytes(tok *tokenizer.Tokenizer, ctxLen, nbytes int) error {
	if b := tok.MaxTokenBytes(); b > 0 && nbytes/b > promptLimit(ctxLen) {
		return tooLong(ctxLen)
	}
	return nil
}

// encodePrompt tokenizes a prompt text for the model (control token texts
// recognised), stopping as soon as it cannot fit the context: the memory
// and time a prompt too long costs are those of the context, not of the
// text.
func encodePrompt(tok *tokenizer.Tokenizer, ctxLen int, text string, addSpecial bool) ([]int32, error) {
	p, ok := tok.EncodeLimit(text, addSpecial, true, promptLimit(ctxLen))
	if !ok {
		return nil, tooLong(ctxLen)
	}
	return p, nil
}

// templateOptions are the chat template's inputs besides the messages:
// the generation prompt, the request's tools, its chat_template_kwargs and
// enable_thinking.
func templateOptions(tools []json.RawMessage, kwargs map[string]json.RawMessage, enableThinking *bool) chat.Options {
	opts := chat.Options{AddGenerationPrompt: true}
	for _, t := range tools {
		opts.Tools = append(opts.Tools, t)
	}
	if len(kwargs) > 0 || enableThinking != nil {
		opts.Vars = map[string]any{}
		for k, v := range kwargs {
			opts.Vars[k] = v
		}
		if enableThinking != nil {
			opts.Vars["enable_thinking"] = *enableThinking
		}
	}
	return opts
}

// renderPrompt applies m's chat template to msgs and tokenizes the text; a
// conversation that cannot fit ctxLen tokens is refused as soon as that is
// certain, and a template's own raise_exception is a 400 naming param.
func renderPrompt(m *loader.Model, ctxLen int, msgs []chat.Message, opts chat.Options, param string) ([]int32, error) {
	if err := checkTextBytes(m.Tok, ctxLen, messagesBytes(msgs)); err != nil {
		return nil, err
	}
	text, err := m.Template.RenderOptions(msgs, opts)
	if err != nil {
		var ce *chat.Error
		if errors.As(err, &ce) && ce.Raised {
			return nil, badRequest(param, "%s", err.Error())
		}
		return nil, err
	}
	// The template writes BOS itself where the model wants it.
	return encodePrompt(m.Tok, ctxLen, text, false)
}

// encode is encodePrompt for the job's model.
func (j *job) encode(text string, addSpecial bool) ([]int32, error) {
	return encodePrompt(j.lm.model.Tok, j.lm.eng.ContextLength(), text, addSpecial)
}

// setPrompt checks that the prompt fits the model.
func (j *job) setPrompt(tokens []int32) error {
	if len(tokens) == 0 {
		return badRequest("", "the prompt is empty after tokenization")
	}
	if n := j.lm.eng.ContextLength(); len(tokens) >= n {
		return badRequest("", "the prompt has %d tokens, which does not fit the model's context length of %d tokens", len(tokens), n)
	}
	vocab := int32(j.lm.model.Tok.VocabSize())
	for _, t := range tokens {
		if t < 0 || t >= vocab {
			return badRequest("prompt", "token id %d is outside the vocabulary (0..%d)", t, vocab-1)
		}
	}
	j.req.Prompt = tokens
	return nil
}

// usage is the usage object of a finished generation, with mistral.rs's
// timing fields.
func usage(res *engine.Result) *usageJSON {
	prompt, compl := res.PromptTime.Seconds(), res.DecodeTime.Seconds()
	total := prompt + compl
	rate := func(n int, sec float64) float64 {
		if sec <= 0 {
			return 0
		}
		return float64(n) / sec
	}
	return &usageJSON{
		CompletionTokens:       res.CompletionTokens,
		PromptTokens:           res.PromptTokens,
		TotalTokens:            res.PromptTokens + res.CompletionTokens,
		AvgTokPerSec:           rate(res.PromptTokens+res.CompletionTokens, total),
		AvgPromptTokPerSec:     rate(res.PromptTokens, prompt),
		AvgComplTokPerSec:      rate(res.CompletionTokens, compl),
		TotalTimeSec:           total,
		TotalPromptTimeSec:     prompt,
		TotalCompletionTimeSec: compl,
	}
}

// usageAll is the usage of a request's choices: the prompt counted once,
// the completions added up, timed from the arrival to the last choice's
// last token.
func usageAll(res []*engine.Result) *usageJSON {
	m := *res[0]
	for _, r := range res[1:] {
		m.CompletionTokens += r.CompletionTokens
		m.DecodeTime = max(m.DecodeTime, r.DecodeTime+r.PromptTime-m.PromptTime)
	}
	return usage(&m)
}

// accessUsage is what the access log shows of a stream's usage.
func accessUsage(u *usageJSON) observe.Usage {
	return observe.Usage{PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		PrefillTokPerSec: u.AvgPromptTokPerSec, DecodeTokPerSec: u.AvgComplTokPerSec}
}

// tokenText is a token's text as it appears in the output, and its bytes.
func tokenText(tok *tokenizer.Tokenizer, id int32) (string, []int) {
	b := tok.TokenBytes(id)
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return string(b), ints
}

// logprob converts a float32 logprob for JSON (which has no -Inf).
func logprob(v float32) float64 {
	f := float64(v)
	if math.IsInf(f, -1) || math.IsNaN(f) {
		return -9999
	}
	return f
}

func chatLogprob(tok *tokenizer.Tokenizer, c *sampler.Choice) tokenLogprob {
	text, b := tokenText(tok, c.Token)
	e := tokenLogprob{Token: text, Logprob: logprob(c.Logprob), Bytes: b, TopLogprobs: []topLogprob{}}
	for _, t := range c.Top {
		tt, tb := tokenText(tok, t.Token)
		e.TopLogprobs = append(e.TopLogprobs, topLogprob{Token: tt, Logprob: logprob(t.Logprob), Bytes: tb})
	}
	return e
}

// generateError maps an engine error to the request error the client gets:
// a request the engine refuses is the client's (400), a closed engine means
// the model went away (503), anything else is a server error.
func generateError(err error) error {
	var re *requestError
	if errors.As(err, &re) {
		return err
	}
	var ee *engine.RequestError
	if errors.As(err, &ee) {
		return &requestError{status: http.StatusBadRequest, msg: ee.Msg}
	}
	if errors.Is(err, engine.ErrClosed) {
		return &requestError{status: http.StatusServiceUnavailable, msg: "the model was unloaded while the request waited; retry"}
	}
	var changed *gguf.ChangedError
	if errors.As(err, &changed) {
		// Not the client's fault and over once the model is loaded again,
		// which the next request does (modelEntry.release retires it).
		return &requestError{status: http.StatusServiceUnavailable, msg: changed.Error() + " (it is loaded again on the next request; retry)"}
	}
	return fmt.Errorf("generation failed: %w", err)
}

// clientGone reports whether the request's client has left.
func clientGone(r *http.Request) bool { return r.Context().Err() != nil }
