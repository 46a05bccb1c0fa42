// Package engine turns a loaded model into generated text: a scheduler
// batches the sequences of concurrent requests into engine steps (one
// forward pass each), over a KV cache it meets through kvcache.Manager.
// Callers Submit a Request and read its Stream. The engine knows nothing of
// HTTP or Prometheus; it reports what happens as Stats values to a
// StatsSink.
package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"mistralrs/internal/constrain"
	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/loader"
	"mistralrs/internal/model"
	"mistralrs/internal/sampler"
	"mistralrs/internal/tokenizer"
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
	// N is the number of choices (0 or 1: one). The prompt is computed
	// once; the other choices start from a copy of its KV cache (shared
	// blocks) and sample with their own random streams.
	N int
	// Grammar, when set, constrains the output to the grammar's sentences
	// (structured output: JSON schemas, regular expressions, Lark); pass
	// the same *Grammar for the same constraint so that its matcher is
	// reused.
	Grammar *constrain.Grammar
	// NoSpeculation turns speculative decoding off for this request (the
	// API's "speculative": false extension).
	NoSpeculation bool
	// ToolCalls, when set, reports whether the text of an answer that
	// stopped (end of generation, stop token or stop string) is tool calls;
	// its finish reason is then FinishToolCalls, in the Result and in the
	// completion count alike, streamed or not. It runs once per sequence, on
	// the engine's goroutine.
	ToolCalls func(text string) bool
	// Images are the prompt's images (sorted, not overlapping, inside
	// Prompt; else a RequestError): the ids at their positions are
	// replaced by placeholders in the sequence's copy of the prompt (the
	// caller's slice is left as it is), their rows come from the encoder
	// cache (images.go). A request with images does not speculate.
	Images []Image
	// LoRA, when set, applies adapters to this request's sequences.
	LoRA *LoRA
	// Trace, when set, hears each sequence's phases (trace.go): called on
	// the engine's goroutine, it must be cheap and never block.
	Trace func(Event)
}

// LoRA is the adapters of a request. Key names the adapters' generations
// and scales: it salts the prefix cache's hashes, so that the same prompt
// under two adapters never shares KV (Submit refuses adapters without a
// key). Name is what the engine's statistics report for its running and
// waiting sequences (the alias a client used). See lora.go.
type LoRA struct {
	Name   string
	Key    string
	Active []model.Active
}

// Output is one generated token and the text it made safe to emit.
type Output struct {
	Index   int // the choice it belongs to (0 unless Request.N > 1)
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
	Embedding        []float32     // an embedding (Engine.Embed): the pooled, L2-normalised final hidden states
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

// ErrClosed is returned by Submit once the engine is closed, and is the
// result of a sequence still running when it closes.
var ErrClosed = errors.New("engine closed")

// Options configure an engine's scheduler and KV cache. There are no
// defaults here: internal/config's table holds them, and
// config.DefaultEngineOptions (or Config.EngineOptions) fills every field
// from it. New refuses limits that are not positive.
type Options struct {
	Threads int // worker threads (0: one per core)

	MaxSeqs                     int // sequences scheduled at once (--max-seqs)
	MaxNumBatchedTokens         int // tokens in one engine step (--max-num-batched-tokens)
	MaxDecodeStepsBeforePrefill int // steps a waiting prompt that does not fit the KV cache may be passed over (--max-decode-steps-before-prefill)
	// EmbeddingStepTokens caps the embedding tokens of one step
	// (--embedding-step-tokens); they come after generation, within
	// MaxNumBatchedTokens.
	EmbeddingStepTokens int

	PagedAttn string // "auto" or "" (on here), "on", "off": contiguous per-sequence caches
	BlockSize int    // positions per KV block (--pa-block-size)
	// Paged KV pool size: at most one applies, with mistral.rs's TOML
	// precedence (fraction, then context length, then memory); a paged
	// engine needs one (config's table has the default fraction). A fraction f gives f × physical memory less
	// the memory in use, at least one full context and at most MaxSeqs
	// full contexts twice over. Block memory is allocated when first used.
	MemoryMB       int
	ContextLen     int     // in tokens, shared by all sequences
	MemoryFraction float64 // of physical memory, in (0, 1]

	PrefixCacheN int  // non-paged: finished caches kept for reuse; paged: 0 turns block reuse off
	NoKVCache    bool // recompute the whole sequence for every token (also no prefix cache)

	// CacheType is how keys and values are stored (--pa-cache-type):
	// "auto" or "" (float32, what the model computes), "f16" (halves:
	// half the memory and memory traffic, rounded to nearest even), or one
	// of the other kvcache.TypeNames (bf16, q8_0, q4_0, f8e4m3).
	CacheType string
	// CacheTypeK and CacheTypeV store keys and values apart
	// (--cache-type-k/-v, as llama.cpp's -ctk/-ctv; "" follows CacheType):
	// any of kvcache.TypeNames. Types other than auto and f16 need the
	// paged cache.
	CacheTypeK, CacheTypeV string
	// NoCacheRotation stores q8_0/q4_0 keys and values as computed instead
	// of rotated (--no-cache-rotation; kvcache.Pool.SetRotation).
	NoCacheRotation bool

	// Speculative decoding: a proposer guesses up to SpecTokens tokens
	// (--mtp-n-predict, 1..16) and one forward pass of the model verifies
	// them all. The proposer is the Draft model (--mtp-model) when set,
	// else prompt lookup over the sequence's own tokens with n-grams of up
	// to SpecNgram tokens (--spec-ngram; 0: off).
	SpecTokens int
	SpecNgram  int
	// Draft is the draft ("assistant") model, loaded by the caller and
	// sharing the model's vocabulary; nil: none. The engine does not own it.
	Draft *loader.Model

	// EncoderCacheBytes is the encoder cache's byte budget: image
	// embeddings no running sequence holds are kept for later requests
	// within it (4 bytes per float); 0 turns caching off.
	EncoderCacheBytes int64
}

// MaxSpecTokens is the most draft tokens one step may verify.
const MaxSpecTokens = 16

// MaxChoices is the most choices (Request.N) one request may ask for.
const MaxChoices = 16

// check refuses limits the scheduler cannot work with.
func (o *Options) check() error {
	for _, l := range []struct {
		name string
		v    int
	}{
		{"max-seqs", o.MaxSeqs}, {"max-num-batched-tokens", o.MaxNumBatchedTokens},
		{"max-decode-steps-before-prefill", o.MaxDecodeStepsBeforePrefill}, {"pa-block-size", o.BlockSize},
		{"embedding-step-tokens", o.EmbeddingStepTokens},
	} {
		if l.v <= 0 {
			return fmt.Errorf("engine option %s is %d: must be positive", l.name, l.v)
		}
	}
	if o.PrefixCacheN < 0 {
		return fmt.Errorf("prefix cache size %d is negative", o.PrefixCacheN)
	}
	if (o.Draft != nil || o.SpecNgram > 0) && (o.SpecTokens < 1 || o.SpecTokens > MaxSpecTokens) {
		return fmt.Errorf("speculative decoding: %d draft tokens per step, want 1..%d", o.SpecTokens, MaxSpecTokens)
	}
	if o.SpecNgram < 0 {
		return fmt.Errorf("speculative n-gram size %d is negative", o.SpecNgram)
	}
	if o.EncoderCacheBytes < 0 {
		return fmt.Errorf("encoder cache budget %d bytes is negative", o.EncoderCacheBytes)
	}
	return nil
}

// Engine generates text with one model. Requests submitted concurrently
// are batched by a scheduler goroutine: every engine step is one forward
// pass over the decode tokens of the running sequences and chunks of the
// prompts being prefilled.
type Engine struct {
	net  *model.Model
	tok  *tokenizer.Tokenizer
	pool *kernels.Pool

	opts  Options
	paged bool
	kv    kvcache.Manager
	prop  proposer // nil: no speculative decoding
	cons  constraints
	enc   *encoderCache // image embeddings (owned by the engine goroutine)

	mu     sync.Mutex
	sink   StatsSink
	inbox  []*seq // submitted, not yet seen by the scheduler
	closed bool
	broken error        // set by the runner: a model file changed under its map
	files  []*gguf.File // the model's and the draft's, checked as requests arrive

	kvWarning string // set by New: the KV pool may take most of the memory
	kvSummary string // set by New: the paged pool's types, tokens and bytes
	nextID    uint64
	wake      chan struct{}
	done      chan struct{}

	stats stepStats
}

// New makes an engine running m, configured by o. The engine does not own
// m: close it after the engine.
func New(m *loader.Model, o Options) (*Engine, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	e := &Engine{net: m.Net, tok: m.Tok, opts: o, sink: discardStats, wake: make(chan struct{}, 1), done: make(chan struct{})}
	e.files = append(e.files, m.File)
	if o.Draft != nil {
		e.files = append(e.files, o.Draft.File)
	}
	kt, vt, err := cacheTypes(o)
	if err != nil {
		return nil, err
	}
	f16 := kt == kvcache.F16 && vt == kvcache.F16
	switch o.PagedAttn {
	case "", "auto", "on":
		e.paged = !o.NoKVCache
	case "off":
	default:
		return nil, fmt.Errorf("paged attention mode %q: want auto, on or off", o.PagedAttn)
	}
	cfg := &m.Net.Config
	sh := cfg.KVShape()
	prefix := o.PrefixCacheN > 0 && !o.NoKVCache
	switch {
	case e.paged:
		if err := errors.Join(kt.CheckRow(sh.KDim), vt.CheckRow(sh.VDim)); err != nil {
			return nil, err
		}
		n, err := poolBlocks(o, sh, cfg.ContextLen, kt, vt)
		if err != nil {
			return nil, err
		}
		pool := kvcache.NewTypedPool(sh, o.BlockSize, n, kt, vt)
		pool.SetRotation(!o.NoCacheRotation)
		e.kv = kvcache.NewPaged(pool, m.Identity(), prefix)
		e.kvWarning = kvMemoryWarning(int64(n) * kvcache.TypedBlockBytes(sh, o.BlockSize, kt, vt))
		e.kvSummary = fmt.Sprintf("KV cache: %d tokens (%d blocks of %d), keys %s, values %s, up to %s",
			n*o.BlockSize, n, o.BlockSize, kt, vt, megabytes(int64(n)*kvcache.TypedBlockBytes(sh, o.BlockSize, kt, vt)))
	case !f16 && (kt != kvcache.F32 || vt != kvcache.F32):
		return nil, fmt.Errorf("KV cache types %s/%s need the paged KV cache (this one is off: --paged-attn off or --no-kv-cache)", kt, vt)
	case o.NoKVCache:
		e.kv = kvcache.NewRecompute(sh, f16)
	default:
		e.kv = kvcache.NewContiguous(sh, f16, o.PrefixCacheN)
	}
	e.stats.blocksTotal = e.kv.Usage().BlocksTotal
	if o.Draft != nil {
		if err := checkDraft(m, o.Draft); err != nil {
			return nil, err
		}
	}
	e.pool = kernels.NewPool(o.Threads)
	switch {
	case o.NoKVCache:
		// Every token recomputes the sequence: nothing to gain.
	case o.Draft != nil:
		e.prop = newDraftProposer(o.Draft, e.pool, kt != kvcache.F32 || vt != kvcache.F32)
	case o.SpecNgram > 0:
		e.prop = ngramProposer{n: o.SpecNgram}
	}
	sch := newScheduler(o, e.kv)
	sch.enc.embd = cfg.Embd
	e.enc = sch.enc
	r := &runner{e: e, sched: sch, flopsPerToken: flopsPerToken(m.Net, paramCount(m.File))}
	r.sampleFn = r.sampleRange
	go r.run()
	return e, nil
}

// SetStatsSink makes the engine report to sink (call it before any
// generation; nil: report nowhere) and reports its capacity, the sequences
// it schedules at once, and the idle state.
func (e *Engine) SetStatsSink(sink StatsSink) {
	if sink == nil {
		sink = discardStats
	}
	e.mu.Lock()
	e.sink = sink
	e.mu.Unlock()
	st := Stats{Measured: LevelCapacity | LevelQueues | LevelLoRA, Capacity: e.Capacity()}
	if e.paged {
		st.Measured |= LevelKV
		st.KVBlocksTotal = e.kv.Usage().BlocksTotal
	}
	sink(st)
}

func (e *Engine) statsSink() StatsSink {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sink
}

// KVWarning is a warning to log at startup when the paged KV pool can grow
// past kvWarnFraction of the machine's memory (it is allocated as it
// fills), or "".
func (e *Engine) KVWarning() string { return e.kvWarning }

// KVSummary says how many tokens the paged KV cache holds, stored as what,
// in how many megabytes at most ("" when not paged): the number of tokens
// follows the cache types for a budget in megabytes or of memory.
func (e *Engine) KVSummary() string { return e.kvSummary }

// Broken is the error that made the engine unusable (a model file changed
// on disk while in use: a *gguf.ChangedError), nil while it works. A
// broken engine fails every request; the model must be loaded again.
func (e *Engine) Broken() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.broken
}

// Capacity is the number of sequences the engine runs at once (--max-seqs).
func (e *Engine) Capacity() int { return e.opts.MaxSeqs }

// Options returns the engine's settings.
func (e *Engine) Options() Options { return e.opts }

// Paged reports whether the engine uses the paged KV cache.
func (e *Engine) Paged() bool { return e.paged }

// Workers is the engine's worker pool (for callers that run the model
// directly on the same threads, such as benchmarks).
func (e *Engine) Workers() *kernels.Pool { return e.pool }

// KVCacheBlocks returns the paged pool's used and total blocks (0, 0 when
// not paged), as of the scheduler's last report. Cached blocks no sequence
// uses count as free.
func (e *Engine) KVCacheBlocks() (used, total int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats.blocksUsed, e.stats.blocksTotal
}

// Close cancels what is still running, stops the scheduler and the worker
// pool. Submit fails with ErrClosed afterwards.
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
	e.pool.Close()
}

func (e *Engine) signal() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// ContextLength is the longest sequence the model accepts.
func (e *Engine) ContextLength() int { return e.net.Config.ContextLen }

// VocabSize is the number of token ids the model has logits for.
func (e *Engine) VocabSize() int { return e.net.Config.Vocab }

// stepStats measure the scheduler (benchmarks, tests) and mirror the
// pool's occupancy for KVCacheBlocks.
type stepStats struct {
	steps       int64
	stepNanos   int64 // whole steps
	fwdNanos    int64 // inside Forward
	schedNanos  int64 // choosing the batch
	blocksUsed  int
	blocksTotal int
}

// paramCount is the number of weights in f (0 without a file).
func paramCount(f *gguf.File) uint64 {
	if f == nil {
		return 0
	}
	var n uint64
	for i := range f.Tensors {
		n += f.Tensors[i].Elements()
	}
	return n
}

// Tokenizer is the model's tokenizer, which the engine decodes with.
func (e *Engine) Tokenizer() *tokenizer.Tokenizer { return e.tok }

// megabytes writes b bytes in MB: whole ones, with two decimals below 10
// so that a small budget (--pa-memory-mb 1) does not read "0 MB".
func megabytes(b int64) string {
	if b < 10<<20 {
		return fmt.Sprintf("%.2f MB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%d MB", b>>20)
}
