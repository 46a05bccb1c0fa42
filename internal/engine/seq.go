package engine

import (
	"sync/atomic"
	"time"

	"mistralrs/internal/constrain"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/model/nn"
	"mistralrs/internal/sampler"
	"mistralrs/internal/tokenizer"
)

// seq is one generation. The scheduler's fields and the output fields
// belong to the engine goroutine; cancel and box are shared with the
// sequence's Stream.
type seq struct {
	id        uint64 // arrival order: smaller is older
	req       *Request
	maxTokens int
	arrived   time.Time

	// Scheduling (sched.go).
	tokens    []int32 // prompt, then the sampled tokens
	promptLen int
	computed  int // tokens whose keys and values are committed to the cache
	n         int // tokens scheduled in this step
	running   bool
	kv        *kvcache.State
	starved   int         // steps it waited for KV blocks while others ran
	hit       bool        // counted as a prefix-cache hit (once per sequence)
	cached    int         // prompt tokens taken from the prefix cache at first admission
	imgs      []seqImage  // the prompt's images (images.go)
	runs      []nn.Embeds // scratch: this step's runs of image rows

	// Output (output.go).
	smp    *sampler.Sampler
	stops  *sampler.StopMatcher
	dec    *tokenizer.StreamDecoder
	logits []float32
	text   []byte
	out    Output // what the step's sampling emits
	reason string // non-empty: finished

	firstTok, lastTok time.Time

	// Speculative decoding (speculative.go).
	spec      bool        // guesses are proposed for it
	draft     []int32     // staged guesses for its next step
	draftQ    []float32   // their distributions (len(draft)×vocab), when sampled
	specWant  int         // guesses wanted in the current proposal
	kept      int         // guesses the last verification kept
	ds        *draftState // its state in a draft model
	feed      []int32     // a verifying step's tokens: the last one and the guesses
	allLogits []float32   // their logits

	final *final   // result, delivered after the step is reported
	tr    seqTrace // what a traced request's final event reports (trace.go)

	// Structured output (constrain.go).
	cons   *constrain.Matcher
	cstate *constrain.State
	mask   []bool

	embed []float32 // an embedding sequence's pooled hidden states (embed.go)

	// Choices (Request.N > 1): the first choice holds the others until its
	// prompt is computed; then they start from a fork of its cache.
	index    int
	children []*seq

	cancel atomic.Bool // set by the Stream
	box    *outbox     // shared by the choices of a request
}

// adapters are the LoRA adapters of sq's forward passes (nil: the base
// model).
func (sq *seq) adapters() []nn.Active {
	if sq.req.LoRA == nil {
		return nil
	}
	return sq.req.LoRA.Active
}

// newSeq is a sequence of req generating at most maxTokens, whose KV state
// is kv. Its sampler, stop matcher and decoder are set by Submit.
func newSeq(req *Request, maxTokens int, kv *kvcache.State) *seq {
	s := &seq{
		req: req, maxTokens: maxTokens, arrived: time.Now(), kv: kv,
		tokens:    append(make([]int32, 0, len(req.Prompt)+min(maxTokens, 256)), req.Prompt...),
		promptLen: len(req.Prompt),
	}
	s.box = &outbox{notify: make(chan struct{}, 1)}
	for _, im := range req.Images {
		placeholders(im.Key, s.tokens[im.Pos:im.End()])
		s.imgs = append(s.imgs, seqImage{Image: im})
	}
	return s
}
