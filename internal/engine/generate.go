package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/model"
	"mistralrs/internal/sampler"
)

// Finish reasons, as the OpenAI API and mistral.rs name them.
const (
	FinishStop     = "stop"
	FinishLength   = "length"
	FinishCanceled = "canceled"
	FinishError    = "error"
	// FinishToolCalls: the answer is tool calls (Request.ToolCalls said so).
	FinishToolCalls = "tool_calls"
)

// Rejection reasons (mistral.rs's mistralrs_sequences_rejected_total labels).
const (
	RejectOverCapacity   = "over_total_capacity"
	RejectCacheExhausted = "cache_exhausted"
)

// Request is one generation.
type Request struct {
	Prompt     []int32 // token ids, BOS included if wanted
	Sampling   sampler.Params
	MaxTokens  int      // 0: up to the context length
	Stop       []string // stop strings, never emitted
	StopTokens []int32  // extra stop token ids besides the model's end-of-generation tokens
	IgnoreEOS  bool
	// Continuation: the output continues the prompt's text (raw completions),
	// so a SentencePiece leading space of the first token is kept. Chat
	// answers start a new message and drop it, as Hugging Face decoding does.
	Continuation bool
	// ToolCalls, when set, reports whether the text of an answer that
	// stopped (end of generation, stop token or stop string) is tool calls;
	// its finish reason is then FinishToolCalls, in the Result and in the
	// completion count alike, streamed or not. It runs once per sequence, on
	// the engine's goroutine.
	ToolCalls func(text string) bool
}

// Output is one generated token and the text it made safe to emit.
type Output struct {
	Token   int32
	Text    string // may be empty (partial UTF-8 or a possible stop-string prefix held back)
	Logprob *sampler.Choice
	Time    time.Time // when the engine step that produced the token ended
	// StopToken: the token ended the generation as an end-of-generation or
	// stop token id; it is not part of the text.
	StopToken bool
}

// Result summarises a finished generation.
type Result struct {
	Text             string
	Tokens           []int32
	FinishReason     string
	PromptTokens     int
	CompletionTokens int
	CachedTokens     int           // prompt tokens whose KV came from the prefix cache
	PromptTime       time.Duration // from the request's arrival until its first token was sampled
	DecodeTime       time.Duration // from the first to the last token
}

// RequestError is a request the engine refuses before running it: the
// server answers it with a 400-class status. Reason is a rejection reason
// (RejectOverCapacity) or empty for plain validation errors.
type RequestError struct {
	Reason string
	Msg    string
}

func (e *RequestError) Error() string { return e.Msg }

// ErrClosed is returned by Generate once the engine is closed.
var ErrClosed = errors.New("engine closed")

// Options configure an engine's scheduler and KV cache. NewWithOptions
// takes zero values of the limits as their defaults (see DefaultOptions);
// PrefixCacheN 0 turns the prefix cache off.
type Options struct {
	Threads int // worker threads (0: one per core)

	MaxSeqs                     int // sequences scheduled at once (--max-seqs)
	MaxNumBatchedTokens         int // tokens in one engine step (--max-num-batched-tokens)
	MaxDecodeStepsBeforePrefill int // steps a waiting prompt that does not fit the KV cache may be passed over (--max-decode-steps-before-prefill)

	PagedAttn string // "auto" or "" (on here), "on", "off": contiguous per-sequence caches
	BlockSize int    // positions per KV block (--pa-block-size)
	// Paged KV pool size: at most one applies, with mistral.rs's TOML
	// precedence (fraction, then context length, then memory); none is
	// DefaultMemoryFraction. A fraction f gives f × physical memory less
	// the memory in use, at least one full context and at most MaxSeqs
	// full contexts twice over. Block memory is allocated when first used.
	MemoryMB       int
	ContextLen     int     // in tokens, shared by all sequences
	MemoryFraction float64 // of physical memory, in (0, 1]

	PrefixCacheN int  // non-paged: finished caches kept for reuse; paged: 0 turns block reuse off
	NoKVCache    bool // recompute the whole sequence for every token (also no prefix cache)

	// CacheType is how keys and values are stored (--pa-cache-type):
	// "auto" or "" (float32, what the model computes), or "f16" (halves:
	// half the memory and memory traffic, rounded to nearest even).
	CacheType string
}

// DefaultMemoryFraction is the paged KV budget when no size is given, as
// mistral.rs's Utilization(0.9).
const DefaultMemoryFraction = 0.9

// DefaultOptions are mistral.rs's defaults.
func DefaultOptions() Options {
	return Options{
		MaxSeqs: 32, MaxNumBatchedTokens: 4096, MaxDecodeStepsBeforePrefill: 8,
		PagedAttn: "auto", BlockSize: 32, PrefixCacheN: 16,
	}
}

// Engine generates text with one model. Requests submitted by concurrent
// Generate calls are batched by a scheduler goroutine: every engine step is
// one forward pass over the decode tokens of the running sequences and
// chunks of the prompts being prefilled.
type Engine struct {
	Model *Model
	Pool  *kernels.Pool

	opts  Options
	paged bool
	f16KV bool          // keys and values stored as halves
	kv    *kvcache.Pool // nil unless paged

	mu     sync.Mutex
	obs    Observer
	inbox  []*seq // submitted, not yet seen by the scheduler
	closed bool
	nextID uint64
	wake   chan struct{}
	done   chan struct{}

	stats stepStats
}

// New makes an engine on m with the default options and a worker pool of
// the given size (0: one per core).
func New(m *Model, threads int) *Engine {
	o := DefaultOptions()
	o.Threads = threads
	e, err := NewWithOptions(m, o)
	if err != nil {
		// The defaults size the pool from the model alone; failing here
		// means the model's shapes are broken, which Load rejects.
		panic(err)
	}
	return e
}

// NewWithOptions makes an engine on m configured by o.
func NewWithOptions(m *Model, o Options) (*Engine, error) {
	d := DefaultOptions()
	if o.MaxSeqs <= 0 {
		o.MaxSeqs = d.MaxSeqs
	}
	if o.MaxNumBatchedTokens <= 0 {
		o.MaxNumBatchedTokens = d.MaxNumBatchedTokens
	}
	if o.MaxDecodeStepsBeforePrefill <= 0 {
		o.MaxDecodeStepsBeforePrefill = d.MaxDecodeStepsBeforePrefill
	}
	if o.BlockSize <= 0 {
		o.BlockSize = d.BlockSize
	}
	if o.PrefixCacheN < 0 {
		return nil, fmt.Errorf("prefix cache size %d is negative", o.PrefixCacheN)
	}
	e := &Engine{Model: m, opts: o, obs: NopObserver{}, wake: make(chan struct{}, 1), done: make(chan struct{})}
	switch o.CacheType {
	case "", "auto", "f32":
	case "f16":
		e.f16KV = true
	default:
		return nil, fmt.Errorf("KV cache type %q: want auto or f16", o.CacheType)
	}
	switch o.PagedAttn {
	case "", "auto", "on":
		e.paged = !o.NoKVCache
	case "off":
	default:
		return nil, fmt.Errorf("paged attention mode %q: want auto, on or off", o.PagedAttn)
	}
	if e.paged {
		cfg := m.Net.Config
		n, err := poolBlocks(o, cfg.Layers, cfg.KDim(), cfg.VDim(), cfg.ContextLen, e.f16KV)
		if err != nil {
			return nil, err
		}
		e.kv = kvcache.NewPool(cfg.Layers, cfg.KDim(), cfg.VDim(), o.BlockSize, n, e.f16KV)
	}
	e.Pool = kernels.NewPool(o.Threads)
	s := newScheduler(e)
	go s.run()
	return e, nil
}

// SetObserver makes the engine report to obs (call it before any
// generation) and publishes its capacity, the sequences it schedules at
// once, and the idle state.
func (e *Engine) SetObserver(obs Observer) {
	if obs == nil {
		obs = NopObserver{}
	}
	e.mu.Lock()
	e.obs = obs
	e.mu.Unlock()
	obs.Capacity(e.Capacity())
	obs.SchedulerState(0, 0)
	if e.kv != nil {
		obs.KVCacheBlocks(0, e.kv.Total())
	}
}

func (e *Engine) observer() Observer {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.obs
}

// Capacity is the number of sequences the engine runs at once (--max-seqs).
func (e *Engine) Capacity() int { return e.opts.MaxSeqs }

// Options returns the engine's settings with defaults filled in.
func (e *Engine) Options() Options { return e.opts }

// Paged reports whether the engine uses the paged KV cache.
func (e *Engine) Paged() bool { return e.paged }

// KVCacheBlocks returns the paged pool's used and total blocks (0, 0 when
// not paged). Cached blocks no sequence uses count as free.
func (e *Engine) KVCacheBlocks() (used, total int) {
	if e.kv == nil {
		return 0, 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats.blocksUsed, e.kv.Total()
}

// Close cancels what is still running, stops the scheduler and the worker
// pool. Generate fails with ErrClosed afterwards.
func (e *Engine) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	e.mu.Unlock()
	e.signal()
	<-e.done
	e.Pool.Close()
}

func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// newCache is a contiguous cache (non-paged mode) of the engine's storage type.
func (e *Engine) newCache(maxTokens int) *model.ContiguousCache {
	if e.f16KV {
		return model.NewContiguousCacheF16(e.Model.Net.Config, maxTokens)
	}
	return model.NewContiguousCache(e.Model.Net.Config, maxTokens)
}

// ContextLength is the longest sequence the model accepts.
func (e *Engine) ContextLength() int { return e.Model.Net.Config.ContextLen }

// Generate runs req to completion, calling emit (on the caller's goroutine)
// for every sampled token. An error from emit, or ctx ending, cancels the
// generation (reason canceled): the sequence leaves the batch at the next
// step and its KV blocks are freed; emit is not called again and the
// Result holds only the tokens emitted.
func (e *Engine) Generate(ctx context.Context, req *Request, emit func(Output) error) (*Result, error) {
	if len(req.Prompt) == 0 {
		return nil, &RequestError{Msg: "empty prompt"}
	}
	if err := req.Sampling.Validate(); err != nil {
		return nil, &RequestError{Msg: err.Error()}
	}
	ctxLen := e.ContextLength()
	if len(req.Prompt) >= ctxLen {
		return nil, &RequestError{Msg: fmt.Sprintf("prompt of %d tokens does not fit the context length %d", len(req.Prompt), ctxLen)}
	}
	vocab := int32(e.Model.Net.Config.Vocab)
	for _, t := range req.Prompt {
		if t < 0 || t >= vocab {
			return nil, &RequestError{Msg: fmt.Sprintf("prompt token %d outside the vocabulary (size %d)", t, vocab)}
		}
	}
	maxTokens := ctxLen - len(req.Prompt)
	if req.MaxTokens > 0 && req.MaxTokens < maxTokens {
		maxTokens = req.MaxTokens
	}
	if emit == nil {
		emit = func(Output) error { return nil }
	}

	obs := e.observer()
	obs.PrefixCacheLookup()
	if e.kv != nil && len(req.Prompt) > e.kv.Tokens() {
		obs.SequenceRejected(RejectOverCapacity)
		return nil, &RequestError{Reason: RejectOverCapacity, Msg: fmt.Sprintf(
			"prompt of %d tokens is longer than the whole KV cache (%d blocks of %d tokens)", len(req.Prompt), e.kv.Total(), e.kv.BlockSize())}
	}

	sq := newSeq(e, req, maxTokens)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	e.nextID++
	sq.id = e.nextID
	e.inbox = append(e.inbox, sq)
	obs.PendingAdmission(len(e.inbox))
	e.mu.Unlock()
	e.signal()

	// Deliver outputs until the scheduler finishes the sequence.
	var (
		delivered int
		text      []byte
		canceled  bool
		batch     []Output
	)
	cancel := func() {
		if !canceled {
			canceled = true
			sq.cancel.Store(true)
			e.signal()
		}
	}
	ctxDone := ctx.Done()
	for {
		select {
		case <-sq.box.notify:
		case <-ctxDone:
			ctxDone = nil
			cancel()
			continue
		}
		var fin *final
		batch, fin = sq.box.take(batch[:0])
		for _, o := range batch {
			if canceled {
				break
			}
			delivered++
			text = append(text, o.Text...)
			if err := emit(o); err != nil || ctx.Err() != nil {
				cancel()
			}
		}
		if fin == nil {
			continue
		}
		if fin.err != nil {
			return nil, fin.err
		}
		res := fin.res
		if canceled {
			// The caller saw only what was delivered. The reason stays the
			// engine's (and the metrics'): canceled, unless the sequence
			// had finished before the cancellation reached the scheduler.
			res.Tokens = res.Tokens[:min(delivered, len(res.Tokens))]
			res.CompletionTokens = len(res.Tokens)
			res.Text = string(text)
		}
		return res, nil
	}
}

// outbox hands a sequence's outputs from the scheduler to its Generate call
// without ever blocking the scheduler.
type outbox struct {
	mu     sync.Mutex
	outs   []Output
	fin    *final
	notify chan struct{}
}

type final struct {
	res *Result
	err error
}

func (b *outbox) push(o Output) {
	b.mu.Lock()
	b.outs = append(b.outs, o)
	b.mu.Unlock()
	b.poke()
}

func (b *outbox) finish(f *final) {
	b.mu.Lock()
	b.fin = f
	b.mu.Unlock()
	b.poke()
}

func (b *outbox) poke() {
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

func (b *outbox) take(dst []Output) ([]Output, *final) {
	b.mu.Lock()
	defer b.mu.Unlock()
	dst = append(dst, b.outs...)
	clear(b.outs)
	b.outs = b.outs[:0]
	return dst, b.fin
}

// stepStats measure the scheduler (benchmarks, tests).
type stepStats struct {
	steps      int64
	stepNanos  int64 // whole steps
	fwdNanos   int64 // inside Forward
	schedNanos int64 // choosing the batch
	blocksUsed int
}
