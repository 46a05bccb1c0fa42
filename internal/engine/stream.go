package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

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
	vocab := int32(e.VocabSize())
	for _, t := range req.Prompt {
		if t < 0 || t >= vocab {
			return nil, &RequestError{Msg: fmt.Sprintf("prompt token %d outside the vocabulary (size %d)", t, vocab)}
		}
	}
	maxTokens := ctxLen - len(req.Prompt)
	if req.MaxTokens > 0 && req.MaxTokens < maxTokens {
		maxTokens = req.MaxTokens
	}

	obs := e.observer()
	obs.PrefixCacheLookup()
	// Capacity and NewState read only what never changes after New: safe
	// beside the engine goroutine.
	if c := e.kv.Capacity(); c > 0 && len(req.Prompt) > c {
		obs.SequenceRejected(RejectOverCapacity)
		return nil, &RequestError{Reason: RejectOverCapacity, Msg: fmt.Sprintf(
			"prompt of %d tokens is longer than the whole KV cache (%d blocks of %d tokens)", len(req.Prompt), c/e.opts.BlockSize, e.opts.BlockSize)}
	}

	sq := newSeq(req, maxTokens, e.kv.NewState(min(ctxLen, len(req.Prompt)+maxTokens)))
	sq.smp = sampler.New(req.Sampling)
	sq.spec = e.prop != nil && !req.NoSpeculation
	sq.stops = sampler.NewStopMatcher(req.Stop)
	if req.Continuation {
		sq.dec = e.tok.NewContinuationDecoder()
	} else {
		sq.dec = e.tok.NewDecoder()
	}
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

	st := &Stream{e: e, sq: sq}
	st.stop = context.AfterFunc(ctx, st.Cancel)
	return st, nil
}

// Stream is one submitted generation's outputs, read by one goroutine:
// wait on Ready, take what arrived with Next, until Done; then Result. The
// engine never blocks on a slow reader (outputs queue up).
type Stream struct {
	e    *Engine
	sq   *seq
	stop func() bool // unregisters the context's cancellation

	buf       []Output // taken from the outbox, not yet returned by Next
	i         int
	fin       *final
	delivered int    // outputs returned by Next
	text      []byte // their text
}

// Ready receives a value when outputs or the end may be waiting (a wake-up
// can be spurious: Next then returns nothing).
func (st *Stream) Ready() <-chan struct{} { return st.sq.box.notify }

// Next returns the next output if one is waiting, never blocking. After
// Cancel it returns nothing more.
func (st *Stream) Next() (Output, bool) {
	if st.sq.cancel.Load() {
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
	st.delivered++
	st.text = append(st.text, o.Text...)
	return o, true
}

// poll takes what the engine queued since the last call.
func (st *Stream) poll() {
	if st.fin == nil {
		st.buf, st.fin = st.sq.box.take(st.buf[:0])
		st.i = 0
	}
}

// Done reports whether the generation ended and every output was taken
// (after Cancel: whether the engine let go of the sequence).
func (st *Stream) Done() bool {
	canceled := st.sq.cancel.Load()
	if st.fin == nil && (st.i == len(st.buf) || canceled) {
		st.poll()
	}
	return st.fin != nil && (st.i == len(st.buf) || canceled)
}

// Cancel ends the generation: the engine drops the sequence at its next
// step, and the Result holds only what Next returned (its reason stays the
// engine's, canceled, unless the sequence had finished first). Safe from
// any goroutine.
func (st *Stream) Cancel() {
	if !st.sq.cancel.Swap(true) {
		st.e.signal()
	}
}

// Result is the finished generation, once Done.
func (st *Stream) Result() (*Result, error) {
	if !st.Done() {
		return nil, errors.New("engine: Result called before the stream was done")
	}
	st.stop()
	if st.fin.err != nil {
		return nil, st.fin.err
	}
	res := st.fin.res
	if st.sq.cancel.Load() {
		res.Tokens = res.Tokens[:min(st.delivered, len(res.Tokens))]
		res.CompletionTokens = len(res.Tokens)
		res.Text = string(st.text)
	}
	return res, nil
}

// Generate runs req to completion, calling emit (on the caller's
// goroutine) for every output. An error from emit, or ctx ending, cancels
// the generation; emit is not called again.
func (e *Engine) Generate(ctx context.Context, req *Request, emit func(Output) error) (*Result, error) {
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
	return st.Result()
}

// outbox hands a sequence's outputs from the engine goroutine to its
// Stream without ever blocking the engine.
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
