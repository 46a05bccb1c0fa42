package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
	"mistralrs/internal/sampler"
)

// Finish reasons, as the OpenAI API and mistral.rs name them.
const (
	FinishStop     = "stop"
	FinishLength   = "length"
	FinishCanceled = "canceled"
	FinishError    = "error"
)

// prefillChunk bounds how many prompt tokens go through one forward pass, so
// that scratch memory stays bounded for long prompts.
const prefillChunk = 512

// Request is one generation.
type Request struct {
	Prompt     []int32 // token ids, BOS included if wanted
	Sampling   sampler.Params
	MaxTokens  int      // 0: up to the context length
	Stop       []string // stop strings, never emitted
	StopTokens []int32  // extra stop token ids besides the model's end-of-generation tokens
	IgnoreEOS  bool
}

// Output is one generated token and the text it made safe to emit.
type Output struct {
	Token   int32
	Text    string // may be empty (partial UTF-8 or a possible stop-string prefix held back)
	Logprob *sampler.Choice
	Time    time.Time
}

// Result summarises a finished generation.
type Result struct {
	Text             string
	Tokens           []int32
	FinishReason     string
	PromptTokens     int
	CompletionTokens int
	PromptTime       time.Duration // prefill, until the first token was sampled
	DecodeTime       time.Duration // from the first to the last token
}

// Engine generates text with one model. Generations run one at a time; the
// continuous-batching scheduler replaces this lock.
type Engine struct {
	Model *Model
	Pool  *kernels.Pool

	obs     Observer
	mu      sync.Mutex
	waiting atomic.Int64 // generations queued behind the running one
	logits  []float32
}

// New makes an engine on m with its own worker pool of the given size
// (0: one per core).
func New(m *Model, threads int) *Engine {
	return &Engine{Model: m, Pool: kernels.NewPool(threads), obs: NopObserver{}}
}

// SetObserver makes the engine report to obs (before any generation) and
// publishes its capacity, the sequences it schedules at once.
func (e *Engine) SetObserver(obs Observer) {
	if obs == nil {
		obs = NopObserver{}
	}
	e.obs = obs
	obs.Capacity(e.Capacity())
	obs.SchedulerState(0, 0)
}

// Capacity is the number of sequences the engine runs at once.
func (e *Engine) Capacity() int { return 1 }

// Close stops the worker pool.
func (e *Engine) Close() { e.Pool.Close() }

// ContextLength is the longest sequence the model accepts.
func (e *Engine) ContextLength() int { return e.Model.Net.Config.ContextLen }

// Generate runs req to completion, calling emit for every sampled token. An
// error from emit, or ctx ending, cancels the generation (reason canceled).
func (e *Engine) Generate(ctx context.Context, req *Request, emit func(Output) error) (*Result, error) {
	if len(req.Prompt) == 0 {
		return nil, errors.New("empty prompt")
	}
	if err := req.Sampling.Validate(); err != nil {
		return nil, err
	}
	ctxLen := e.ContextLength()
	if len(req.Prompt) >= ctxLen {
		return nil, fmt.Errorf("prompt of %d tokens does not fit the context length %d", len(req.Prompt), ctxLen)
	}
	maxTokens := ctxLen - len(req.Prompt)
	if req.MaxTokens > 0 && req.MaxTokens < maxTokens {
		maxTokens = req.MaxTokens
	}

	obs := e.obs
	obs.PrefixCacheLookup()
	obs.PendingAdmission(int(e.waiting.Add(1)))
	e.mu.Lock()
	defer e.mu.Unlock()
	waiting := int(e.waiting.Add(-1))
	obs.PendingAdmission(waiting)
	obs.SchedulerState(1, waiting)
	res, err := e.generate(ctx, req, maxTokens, emit)
	reason := FinishError
	if err == nil {
		reason = res.FinishReason
	}
	obs.SequenceCompleted(reason)
	obs.SchedulerState(0, int(e.waiting.Load()))
	return res, err
}

// generate runs one sequence; the caller holds e.mu.
func (e *Engine) generate(ctx context.Context, req *Request, maxTokens int, emit func(Output) error) (*Result, error) {
	obs := e.obs
	net := e.Model.Net
	vocab := net.Config.Vocab
	if cap(e.logits) < vocab {
		e.logits = make([]float32, vocab)
	}
	logits := e.logits[:vocab]
	cache := model.NewContiguousCache(net.Config, len(req.Prompt)+maxTokens)
	smp := sampler.New(req.Sampling)
	stops := sampler.NewStopMatcher(req.Stop)
	dec := e.Model.Tok.NewDecoder()

	res := &Result{PromptTokens: len(req.Prompt), FinishReason: FinishLength}
	history := append(make([]int32, 0, len(req.Prompt)+maxTokens), req.Prompt...)
	start := time.Now()

	// Prefill in chunks; only the last chunk asks for logits.
	for pos := 0; pos < len(req.Prompt); pos += prefillChunk {
		end := min(pos+prefillChunk, len(req.Prompt))
		in := &model.SeqInput{Tokens: req.Prompt[pos:end], Pos: pos, Cache: cache}
		if end == len(req.Prompt) {
			in.Logits = logits
		}
		if err := net.Forward(e.Pool, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
			return nil, err
		}
		obs.TokensProcessed(end - pos)
		if err := ctx.Err(); err != nil {
			res.FinishReason = FinishCanceled
			return res, nil
		}
	}

	var text []byte
	var firstTok time.Time
	for n := 0; n < maxTokens; n++ {
		choice := smp.Sample(logits, history)
		now := time.Now()
		if n == 0 {
			firstTok = now
			res.PromptTime = now.Sub(start)
		}
		tok := choice.Token
		history = append(history, tok)
		res.Tokens = append(res.Tokens, tok)
		res.CompletionTokens++

		if e.isStopToken(req, tok) {
			res.FinishReason = FinishStop
			piece := stops.Flush()
			text = append(text, piece...)
			if err := emit(Output{Token: tok, Text: piece, Logprob: logprobOf(req, &choice), Time: now}); err != nil {
				res.FinishReason = FinishCanceled
			}
			break
		}
		piece, stopped := stops.Push(dec.Add(tok))
		if !stopped && n == maxTokens-1 {
			// Last token: nothing more can complete a character or a stop string.
			tail, stoppedTail := stops.Push(dec.Flush())
			piece += tail
			stopped = stoppedTail
			if !stopped {
				piece += stops.Flush()
			}
		}
		text = append(text, piece...)
		if err := emit(Output{Token: tok, Text: piece, Logprob: logprobOf(req, &choice), Time: now}); err != nil {
			res.FinishReason = FinishCanceled
			break
		}
		if stopped {
			res.FinishReason = FinishStop
			break
		}
		if ctx.Err() != nil {
			res.FinishReason = FinishCanceled
			break
		}
		if n == maxTokens-1 {
			break
		}
		in := &model.SeqInput{Tokens: history[len(history)-1:], Pos: len(history) - 1, Cache: cache, Logits: logits}
		if err := net.Forward(e.Pool, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
			return nil, err
		}
		obs.TokensProcessed(1)
	}
	if !firstTok.IsZero() {
		res.DecodeTime = time.Since(firstTok)
	}
	res.Text = string(text)
	return res, nil
}

func (e *Engine) isStopToken(req *Request, tok int32) bool {
	if !req.IgnoreEOS && e.Model.Tok.IsEOG(tok) {
		return true
	}
	for _, s := range req.StopTokens {
		if s == tok {
			return true
		}
	}
	return false
}

func logprobOf(req *Request, c *sampler.Choice) *sampler.Choice {
	if !req.Sampling.Logprobs {
		return nil
	}
	cp := *c
	return &cp
}
