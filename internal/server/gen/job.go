package gen

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"mistralrs/internal/chat"
	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
	"mistralrs/internal/observe"
	"mistralrs/internal/tokenizer"
)

// Model is a served model as the dialects see it; the server's registry
// implements it (loading, unloading and reloading stay there).
type Model interface {
	ID() string
	// RefuseGeneration is non-nil for a model that cannot generate (an
	// embedding model).
	RefuseGeneration() error
	// Acquire holds the loaded model for one request, loading it again if
	// it was unloaded; release gives it back.
	Acquire(ctx context.Context) (l *Loaded, release func(), err error)
}

// Loaded is a model in memory with its engine.
type Loaded struct {
	Model  *loader.Model
	Engine *engine.Engine
	// Images bound the images of one request to a model with a vision
	// projector.
	Images ImageLimits
	// Adapters are the model's LoRA adapters; nil: it has no LoRA runtime.
	Adapters Adapters
}

// Models finds a request's model: a *Error (404) when it is not served.
type Models interface {
	Lookup(name string) (Model, error)
}

// Base is what every dialect shares: the served models, the server's
// settings that shape an answer, the grammar cache and the id counter.
type Base struct {
	Models     Models
	PayloadLog *observe.PayloadLog
	KeepAlive  time.Duration // idle time before a keep-alive frame
	Seed       *uint64       // the server's seed, for requests without one
	Log        *slog.Logger
	// Canceled says why a generation whose client is still connected was
	// canceled (the server's drain, or its model went away).
	Canceled func() string
	// RemoteImages says whether and how image parts given by http(s) URL
	// are fetched (data: URLs always are read).
	RemoteImages RemoteImages

	fetchState
	grammars grammarCache
	seq      atomic.Uint64
}

// Request is one generation request in neutral terms: what a dialect
// decoded from its wire format.
type Request struct {
	Model    Model
	Settings *Settings
	// The prompt, one of: Render (the dialect's own rendering through the
	// Prompter), Messages (through the chat template with Template; a
	// template's raise_exception is a 400 naming Param), Text (a raw
	// prompt, special token texts recognised) or Tokens.
	Render   func(p *Prompter) ([]int32, error)
	Messages []chat.Message
	Template chat.Options
	Param    string
	Text     *string
	Tokens   []int32
	// Images are the images the messages' media markers stand for
	// (Images.Add made both).
	Images Images
	// Continuation: the answer continues the prompt's text (completions).
	Continuation bool
	// Tools reads the answer for tool calls (nil: it is plain text).
	Tools *chat.ToolParser
	// ToolDefs and ToolChoice (OpenAI's form): a "required" or named
	// choice constrains the answer to one call in the model's format.
	ToolDefs   []json.RawMessage
	ToolChoice json.RawMessage
	// Adapter selects a LoRA adapter (the `adapter` field); a Model that
	// is an AdapterCard selects one too, and both at once are refused.
	Adapter *Adapter
}

// Job is a checked request bound to its loaded model: the engine request
// is ready to submit. Release it when the request is done.
type Job struct {
	ID      string
	Created int64
	Served  Model // the served model (its id, its registry entry)
	*Loaded
	Req   *engine.Request
	Tools *chat.ToolParser
	// AdapterGeneration is the LoRA adapter generation the job holds
	// ("" : none), which answers report as adapter_generation.
	AdapterGeneration string
	// ResponseID is the id the dialect's answer carries, when it is not
	// ID (gen_ai.response.id of the generation spans).
	ResponseID string
	// Compile is how the answer's constraint came from the grammar cache
	// (its kind: json_object, json_schema, regex, lark, tool_call; "":
	// none), for the generation spans.
	Compile GrammarCompile

	release func()
	mu      sync.Mutex
	answers map[string]ToolAnswer // tool-call readings by answer text
}

// Release gives the model back.
func (j *Job) Release() { j.release() }

// Answer is the tool-call reading of a choice's text (set by the engine's
// ToolCalls hook before the stream ends).
func (j *Job) Answer(text string) *ToolAnswer {
	j.mu.Lock()
	defer j.mu.Unlock()
	a := j.answers[text]
	return &a
}

// Resolve finds the request's model (404 if it is not served).
func (b *Base) Resolve(name string) (Model, error) { return b.Models.Lookup(name) }

// Prepare holds the model for req, and the LoRA adapter generation it
// selects, and makes its engine request: the forced tool-call grammar, the
// prompt and its checks, the tool-call hook.
func (b *Base) Prepare(ctx context.Context, req *Request) (*Job, error) {
	sel, err := selectAdapter(req)
	if err != nil {
		return nil, err
	}
	j, err := b.newJob(ctx, req.Model, req.Settings)
	if err != nil {
		return nil, err
	}
	j.Tools = req.Tools
	if err := j.holdAdapter(sel); err != nil {
		j.release()
		return nil, err
	}
	if err := b.prepare(ctx, j, req); err != nil {
		j.release()
		return nil, err
	}
	return j, nil
}

func (b *Base) prepare(ctx context.Context, j *Job, req *Request) error {
	if req.Tools != nil && req.ToolDefs != nil {
		if err := b.forceToolCall(j, req); err != nil {
			return err
		}
	}
	pr, prompt, err := b.buildPrompt(ctx, j.Loaded, req)
	if err != nil {
		return err
	}
	if err := j.setPrompt(prompt); err != nil {
		return err
	}
	j.setImages(pr)
	j.Req.Continuation = req.Continuation
	if req.Tools != nil {
		j.Req.ToolCalls = j.readToolCalls
	}
	return nil
}

// forceToolCall constrains the answer to one call for a "required" or
// named tool_choice.
func (b *Base) forceToolCall(j *Job, req *Request) error {
	var note GrammarCompile
	tg, err := b.ToolCallGrammar(&note, j.Model.Template.Source(), req.ToolDefs, req.ToolChoice)
	if err == nil && tg != nil && j.Req.Grammar != nil {
		err = BadRequest("tool_choice", "tool_choice %s cannot be combined with response_format or grammar", string(req.ToolChoice))
	}
	if err != nil {
		return err
	}
	if tg != nil {
		j.Req.Grammar = tg
		j.Compile = note
	}
	return nil
}

// readToolCalls is the engine's ToolCalls hook: it reads a finished
// choice's text for calls and keeps the reading for the sink.
func (j *Job) readToolCalls(text string) bool {
	content, calls, ok := j.Tools.Parse(text)
	if ok {
		j.mu.Lock()
		if j.answers == nil {
			j.answers = map[string]ToolAnswer{}
		}
		j.answers[text] = ToolAnswer{Content: content, Calls: calls}
		j.mu.Unlock()
	}
	return ok
}

// newJob loads (if needed) and holds the model for one request.
func (b *Base) newJob(ctx context.Context, m Model, g *Settings) (*Job, error) {
	if err := m.RefuseGeneration(); err != nil {
		return nil, err
	}
	l, release, err := m.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkBiasVocab(g, l.Model.Tok); err != nil {
		release()
		return nil, err
	}
	return &Job{
		Served: m, Loaded: l, release: release,
		Req: &engine.Request{Sampling: g.Params, MaxTokens: g.MaxTokens, Stop: g.Stop, IgnoreEOS: g.IgnoreEOS,
			NoSpeculation: g.NoSpec, N: g.N, Grammar: g.Grammar},
		ID: strconv.FormatUint(b.seq.Add(1)-1, 10), Created: time.Now().Unix(), Compile: g.Compile,
	}, nil
}

// checkBiasVocab refuses a logit_bias for a token outside the vocabulary
// (the smallest such id named).
func checkBiasVocab(g *Settings, tok *tokenizer.Tokenizer) error {
	vocab := int32(tok.VocabSize())
	bad := int32(-1)
	for id := range g.Params.LogitBias {
		if id >= vocab && (bad < 0 || id < bad) {
			bad = id
		}
	}
	if bad >= 0 {
		return BadRequest("logit_bias", "logit_bias: token id %d is outside the vocabulary (0..%d)", bad, vocab-1)
	}
	return nil
}

// buildPrompt prepares the request's images for l's projector and makes
// its prompt tokens, the images placed at their markers.
func (b *Base) buildPrompt(ctx context.Context, l *Loaded, req *Request) (*Prompter, []int32, error) {
	set, err := b.prepareImages(ctx, l, req.Images)
	if err != nil {
		return nil, nil, err
	}
	p := newPrompter(l.Model, l.Engine.ContextLength(), set)
	var tokens []int32
	switch {
	case req.Render != nil:
		tokens, err = req.Render(p)
	case req.Text != nil:
		tokens, err = p.Encode(*req.Text, true)
	case req.Messages != nil:
		tokens, err = p.Render(req.Messages, req.Template, req.Param)
	default:
		tokens = req.Tokens
	}
	return p, tokens, err
}

// CountTokens is the number of prompt positions req would take on its
// model, image positions included (Anthropic's count_tokens).
func (b *Base) CountTokens(ctx context.Context, req *Request) (int, error) {
	l, release, err := req.Model.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer release()
	_, tokens, err := b.buildPrompt(ctx, l, req)
	return len(tokens), err
}

// setPrompt checks that the prompt fits the model.
func (j *Job) setPrompt(tokens []int32) error {
	if len(tokens) == 0 {
		return BadRequest("", "the prompt is empty after tokenization")
	}
	if n := j.Engine.ContextLength(); len(tokens) >= n {
		return BadRequest("", "the prompt has %d tokens, which does not fit the model's context length of %d tokens", len(tokens), n)
	}
	vocab := int32(j.Model.Tok.VocabSize())
	for _, t := range tokens {
		if t < 0 || t >= vocab {
			return BadRequest("prompt", "token id %d is outside the vocabulary (0..%d)", t, vocab-1)
		}
	}
	j.Req.Prompt = tokens
	return nil
}

// promptLimit is the most tokens a prompt may have: one fewer than the
// context length, leaving room for at least one generated token.
func promptLimit(ctxLen int) int { return max(ctxLen-1, 0) }

// tooLong is the error of a prompt with more tokens than fit the context.
// (no param: the whole prompt, as the token count check of setPrompt).
func tooLong(ctxLen int) error {
	return BadRequest("", "the prompt has more than %d tokens, which does not fit the model's context length of %d tokens", promptLimit(ctxLen), ctxLen)
}

// CheckTextBytes refuses, before any rendering or tokenizing, a request
// whose prompt text (nbytes in all) is longer than the context could hold
// even at the tokenizer's longest token, so that a huge prompt costs no
// more than its body.
func CheckTextBytes(tok *tokenizer.Tokenizer, ctxLen, nbytes int) error {
	if b := tok.MaxTokenBytes(); b > 0 && nbytes/b > promptLimit(ctxLen) {
		return tooLong(ctxLen)
	}
	return nil
}

// EncodePrompt tokenizes a prompt text for the model (control token texts
// recognised), stopping as soon as it cannot fit the context: the memory
// and time a prompt too long costs are those of the context, not of the
// text.
func EncodePrompt(tok *tokenizer.Tokenizer, ctxLen int, text string, addSpecial bool) ([]int32, error) {
	p, ok := tok.EncodeLimit(text, addSpecial, true, promptLimit(ctxLen))
	if !ok {
		return nil, tooLong(ctxLen)
	}
	return p, nil
}

// TemplateOptions are the chat template's inputs besides the messages:
// the generation prompt, the request's tools, its chat_template_kwargs and
// enable_thinking.
func TemplateOptions(tools []json.RawMessage, kwargs map[string]json.RawMessage, enableThinking *bool) chat.Options {
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

// MessagesBytes is the text the messages carry, all of which a chat
// template normally writes into the prompt (reasoning of earlier turns is
// left out: templates often drop it).
func MessagesBytes(msgs []chat.Message) int {
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

// Merge is the result of a request's choices as one: the prompt counted
// once, the completions added up, timed from the arrival to the last
// choice's last token.
func Merge(res []*engine.Result) engine.Result {
	m := *res[0]
	for _, r := range res[1:] {
		m.CompletionTokens += r.CompletionTokens
		m.DecodeTime = max(m.DecodeTime, r.DecodeTime+r.PromptTime-m.PromptTime)
	}
	return m
}

// AccessUsage is what the access log shows of a finished generation.
func AccessUsage(res *engine.Result) observe.Usage {
	return observe.Usage{PromptTokens: res.PromptTokens, CompletionTokens: res.CompletionTokens,
		PrefillTokPerSec: PerSecond(res.PromptTokens, res.PromptTime.Seconds()),
		DecodeTokPerSec:  PerSecond(res.CompletionTokens, res.DecodeTime.Seconds())}
}

// PerSecond is n tokens over sec seconds, 0 when no time was measured.
func PerSecond(n int, sec float64) float64 {
	if sec <= 0 {
		return 0
	}
	return float64(n) / sec
}

// WriteJSON sends v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Respond logs v as the response payload (with r's trace id) and sends
// it with 200.
func (b *Base) Respond(w http.ResponseWriter, r *http.Request, v any) {
	_ = b.PayloadLog.ResponseCtx(r.Context(), v)
	WriteJSON(w, http.StatusOK, v)
}
