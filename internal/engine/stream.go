package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"mistralrs/internal/constrain"
	"mistralrs/internal/sampler"
)

// Submit queues req and returns the Stream its outputs arrive on. The end
// of ctx cancels the generation (reason canceled): the sequence leaves the
// batch at the next step and its KV cache is given back. A request the
// engine refuses before running it fails here with a *RequestError.
func (e *Engine) Submit(ctx context.Context, req *Request) (*Stream, error) {
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
	if err := checkImages(req); err != nil {
		return nil, &RequestError{Msg: err.Error()}
	}
	if err := checkPromptIDs(req, int32(e.VocabSize())); err != nil {
		return nil, &RequestError{Msg: err.Error()}
	}
	if err := checkLoRA(req.LoRA); err != nil {
		return nil, &RequestError{Msg: err.Error()}
	}
	maxTokens := ctxLen - len(req.Prompt)
	if req.MaxTokens > 0 && req.MaxTokens < maxTokens {
		maxTokens = req.MaxTokens
	}

	sink := e.statsSink()
	sink(Stats{PrefixLookups: max(req.N, 1)}) // one per sequence: per choice, as mistral.rs
	// Capacity and NewState read only what never changes after New: safe
	// beside the engine goroutine.
	if c := e.kv.Capacity(); c > 0 && len(req.Prompt) > c {
		sink(refused(RejectOverCapacity))
		return nil, &RequestError{Reason: RejectOverCapacity, Msg: fmt.Sprintf(
			"prompt of %d tokens is longer than the whole KV cache (%d blocks of %d tokens)", len(req.Prompt), c/e.opts.BlockSize, e.opts.BlockSize)}
	}

	n := max(req.N, 1)
	if n > MaxChoices {
		return nil, &RequestError{Msg: fmt.Sprintf("%d choices asked for, at most %d", n, MaxChoices)}
	}
	var cons *constrain.Matcher
	if req.Grammar != nil {
		m, err := e.matcher(req.Grammar)
		if err != nil {
			return nil, &RequestError{Msg: err.Error()}
		}
		cons = m
	}
	seqs := make([]*seq, n)
	for i := range seqs {
		sq := newSeq(req, maxTokens, e.kv.NewState(min(ctxLen, len(req.Prompt)+maxTokens)))
		if req.LoRA != nil {
			sq.kv.Salt(req.LoRA.Key)
		}
		params := req.Sampling
		if params.Seed != nil && i > 0 {
			// Each choice its own random stream, reproducible with the seed.
			seed := *params.Seed + uint64(i)*0x9e3779b97f4a7c15
			params.Seed = &seed
		}
		sq.smp = sampler.New(params)
		sq.spec = e.prop != nil && !req.NoSpeculation && len(req.Images) == 0
		if cons != nil {
			sq.cons, sq.cstate = cons, cons.Start()
		}
		sq.stops = sampler.NewStopMatcher(req.Stop)
		if req.Continuation {
			sq.dec = e.tok.NewContinuationDecoder()
		} else {
			sq.dec = e.tok.NewDecoder()
		}
		sq.index = i
		if i > 0 {
			sq.box = seqs[0].box
		}
		seqs[i] = sq
	}
	seqs[0].children = seqs[1:]
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	for _, sq := range seqs {
		e.nextID++
		sq.id = e.nextID
	}
	e.inbox = append(e.inbox, seqs[0])
	sink(Stats{Measured: LevelPending, PendingAdmission: len(e.inbox)})
	e.mu.Unlock()
	e.signal()

	st := &Stream{e: e, seqs: seqs, box: seqs[0].box, fins: make([]*final, n), delivered: make([]int, n), text: make([][]byte, n)}
	st.stop = context.AfterFunc(ctx, st.Cancel)
	return st, nil
}

// Stream is one submitted generation's outputs, read by one goroutine:
// wait on Ready, take what arrived with Next, until Done; then Result (or
// Results, for several choices). The engine never blocks on a slow reader
// (outputs queue up).
type Stream struct {
	e    *Engine
	seqs []*seq // the choices
	box  *outbox
	stop func() bool // unregisters the context's cancellation

	buf       []Output // taken from the outbox, not yet returned by Next
	i         int
	fins      []*final // by choice
	nfin      int
	delivered []int    // outputs returned by Next, by choice
	text      [][]byte // their text
}

func (st *Stream) canceled() bool { return st.seqs[0].cancel.Load() }

// Ready receives a value when outputs or the end may be waiting (a wake-up
// can be spurious: Next then returns nothing).
func (st *Stream) Ready() <-chan struct{} { return st.box.notify }

// Next returns the next output if one is waiting, never blocking. After
// Cancel it returns nothing more.
func (st *Stream) Next() (Output, bool) {
	if st.canceled() {
		return Output{}, false
	}
	if st.i == len(st.buf) {
		st.poll()
		if st.i == len(st.buf) {
			return Output{}, false
		}
	}
	o := st.buf[st.i]
	st.i++
	st.delivered[o.Index]++
	st.text[o.Index] = append(st.text[o.Index], o.Text...)
	return o, true
}

// poll takes what the engine queued since the last call.
func (st *Stream) poll() {
	if st.nfin == len(st.fins) {
		return
	}
	var fins []*final
	st.buf, fins = st.box.take(st.buf[:0])
	st.i = 0
	for _, f := range fins {
		st.fins[f.index] = f
		st.nfin++
	}
}

// Done reports whether every choice ended and every output was taken
// (after Cancel: whether the engine let go of the sequences).
func (st *Stream) Done() bool {
	canceled := st.canceled()
	if st.nfin < len(st.fins) && (st.i == len(st.buf) || canceled) {
		st.poll()
	}
	return st.nfin == len(st.fins) && (st.i == len(st.buf) || canceled)
}

// Cancel ends the generation: the engine drops the sequences at its next
// step, and the results hold only what Next returned (their reason stays
// the engine's, canceled, unless a choice had finished first). Safe from
// any goroutine.
func (st *Stream) Cancel() {
	fresh := false
	for _, sq := range st.seqs {
		if !sq.cancel.Swap(true) {
			fresh = true
		}
	}
	if fresh {
		st.e.signal()
	}
}

// Result is the finished generation of the first choice, once Done.
func (st *Stream) Result() (*Result, error) {
	res, err := st.Results()
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// Results are the finished generations of every choice, by index, once
// Done. A failure of any choice fails them all.
func (st *Stream) Results() ([]*Result, error) {
	if !st.Done() {
		return nil, errors.New("engine: Result called before the stream was done")
	}
	st.stop()
	out := make([]*Result, len(st.fins))
	for i, f := range st.fins {
		if f.err != nil {
			return nil, f.err
		}
		res := f.res
		if st.canceled() {
			res.Tokens = res.Tokens[:min(st.delivered[i], len(res.Tokens))]
			res.CompletionTokens = len(res.Tokens)
			res.Text = string(st.text[i])
		}
		out[i] = res
	}
	return out, nil
}

// Generate runs req to completion, calling emit (on the caller's
// goroutine) for every output, and returns the first choice's result. An
// error from emit, or ctx ending, cancels the generation; emit is not
// called again.
func (e *Engine) Generate(ctx context.Context, req *Request, emit func(Output) error) (*Result, error) {
	res, err := e.GenerateAll(ctx, req, emit)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// GenerateAll is Generate returning every choice's result (Request.N).
func (e *Engine) GenerateAll(ctx context.Context, req *Request, emit func(Output) error) ([]*Result, error) {
	st, err := e.Submit(ctx, req)
	if err != nil {
		return nil, err
	}
	for !st.Done() {
		<-st.Ready()
		for {
			o, ok := st.Next()
			if !ok {
				break
			}
			if emit != nil {
				if err := emit(o); err != nil || ctx.Err() != nil {
					st.Cancel()
				}
			}
		}
	}
	return st.Results()
}

// outbox hands a sequence's outputs from the engine goroutine to its
// Stream without ever blocking the engine.
type outbox struct {
	mu     sync.Mutex
	outs   []Output
	fins   []*final
	notify chan struct{}
}

type final struct {
	index int // the choice
	res   *Result
	err   error
}

func (b *outbox) push(o Output) {
	b.mu.Lock()
	b.outs = append(b.outs, o)
	b.mu.Unlock()
	b.poke()
}

func (b *outbox) finish(f *final) {
	b.mu.Lock()
	b.fins = append(b.fins, f)
	b.mu.Unlock()
	b.poke()
}

func (b *outbox) poke() {
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

func (b *outbox) take(dst []Output) ([]Output, []*final) {
	b.mu.Lock()
	defer b.mu.Unlock()
	dst = append(dst, b.outs...)
	clear(b.outs)
	b.outs = b.outs[:0]
	fins := b.fins
	b.fins = nil
	return dst, fins
}
