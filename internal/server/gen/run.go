package gen

import (
	"context"
	"net/http"
	"time"

	"mistralrs/internal/chat"
	"mistralrs/internal/engine"
	"mistralrs/internal/observe"
)

// Sink receives one generation in a dialect's wire format; Run calls it on
// the request's goroutine. A streaming sink writes events as they come; a
// sink for one JSON body collects in Output and writes the body in Finish.
type Sink interface {
	// Output gets each engine output and the part of its text that can be
	// shown now (in a stream, text that may still be a tool call is held
	// back; otherwise text is o.Text). An error cancels the generation.
	Output(o engine.Output, text string) error
	// Finish gets every choice's end once the engine is done. A stream
	// reports whether the usage reached the client (the access log shows
	// it then) and the error of its last write.
	Finish(end *End) (usageSent bool, err error)
	// Fail answers a failed generation: err is a *Error for the client's
	// mistakes (or ErrClientClosed), anything else a server error.
	Fail(err error)
}

// CancelFailer is a Sink whose dialect has no finish reason for a
// generation the server canceled while its client was still there (the
// drain ran out, or the model went away): Canceled answers it as a failure
// with msg; end holds what was generated until then. Without it such a
// generation finishes with reason canceled.
type CancelFailer interface {
	Canceled(msg string, end *End)
}

// ErrClientClosed is what a sink is told when the client left before a
// one-body answer: nobody reads it, but the access log and metrics say
// what happened (the status is logged as 499).
var ErrClientClosed = &Error{Status: StatusClientClosed, Msg: "client closed the request"}

// End is the end of a generation: each choice's result, in order.
type End struct {
	Choices []Choice
	// Merged is the choices' result as one: the usage of the request.
	Merged engine.Result
}

// Choice is one choice's end.
type Choice struct {
	*engine.Result
	// Answer is the answer read as tool calls (finish reason tool_calls),
	// else nil.
	Answer *ToolAnswer
	// Rest is, in a stream, the text held back that is still to be sent;
	// Calls the tool calls to send (in a body: Answer's calls).
	Rest  string
	Calls []chat.ToolCall
}

// Content is the choice's text without its tool calls.
func (c *Choice) Content() string {
	if c.Answer != nil {
		return c.Answer.Content
	}
	return c.Text
}

// Run generates j and hands the outputs to the sink that newSink makes:
// as a server-sent event stream (newSink gets its Events) when stream is
// set, else for one body (newSink gets nil). Run owns the stream's keep-
// alives, the held-back tool-call text, the endings (engine error, client
// gone, cancel by the server, done), the payload log of failures and the
// stream-latency record (TTFT, ITL, usage, error) of the access log.
func (b *Base) Run(w http.ResponseWriter, r *http.Request, j *Job, stream bool, newSink func(ev *Events) Sink) {
	if stream {
		b.runStream(w, r, j, newSink)
		return
	}
	sink := newSink(nil)
	gctx, cancel := genContext(r.Context())
	defer cancel()
	tr := b.startTrace(r.Context(), j)
	results, err := j.Engine.GenerateAll(gctx, j.Req, func(o engine.Output) error { return sink.Output(o, o.Text) })
	tr.end(results, err, b.cancelReason(r, results))
	cf, canFail := sink.(CancelFailer)
	switch {
	case err != nil:
		sink.Fail(GenerateError(err))
	case results[0].FinishReason == engine.FinishCanceled && ClientGone(r):
		sink.Fail(ErrClientClosed)
	case results[0].FinishReason == engine.FinishCanceled && canFail:
		cf.Canceled(b.Canceled(), j.end(results, nil))
	default:
		_, _ = sink.Finish(j.end(results, nil))
	}
}

func (b *Base) runStream(w http.ResponseWriter, r *http.Request, j *Job, newSink func(ev *Events) Sink) {
	st := observe.StreamFromContext(r.Context())
	ev := startEvents(w)
	ev.log, ev.ctx = b.PayloadLog, r.Context()
	sink := newSink(ev)
	held := make([]*toolStream, max(j.Req.N, 1)) // by choice
	if j.Tools != nil {
		for i := range held {
			held[i] = &toolStream{p: j.Tools}
		}
	}
	tr := b.startTrace(r.Context(), j)
	results, err := b.stream(r.Context(), j, ev, func(o engine.Output) error {
		text := o.Text
		if h := held[o.Index]; h != nil {
			text = h.push(text)
		}
		return sink.Output(o, text)
	})
	tr.end(results, err, b.cancelReason(r, results))
	cf, canFail := sink.(CancelFailer)
	switch {
	case err != nil:
		msg := GenerateError(err)
		st.Error(msg.Error())
		_ = b.PayloadLog.ErrorCtx(r.Context(), msg.Error())
		sink.Fail(msg)
		return
	case ev.err != nil || results[0].FinishReason == engine.FinishCanceled && ClientGone(r):
		return
	case results[0].FinishReason == engine.FinishCanceled && canFail:
		msg := b.Canceled()
		st.Error(msg)
		cf.Canceled(msg, j.end(results, held))
		return
	}
	end := j.end(results, held)
	sent, err := sink.Finish(end)
	if sent {
		st.SetUsage(AccessUsage(&end.Merged))
	}
	if err == nil {
		st.Done()
	}
}

// cancelReason says why a generation that ended canceled was: the client
// left, or the server canceled it ("" when it was not canceled).
func (b *Base) cancelReason(r *http.Request, results []*engine.Result) string {
	switch {
	case len(results) == 0 || results[0].FinishReason != engine.FinishCanceled:
		return ""
	case ClientGone(r):
		return ErrClientClosed.Msg
	case b.Canceled != nil:
		return b.Canceled()
	}
	return "canceled by the server"
}

// end reads the choices' endings; held are a stream's held-back texts.
func (j *Job) end(results []*engine.Result, held []*toolStream) *End {
	e := &End{Choices: make([]Choice, len(results)), Merged: Merge(results)}
	for i, res := range results {
		c := Choice{Result: res}
		if res.FinishReason == engine.FinishToolCalls {
			c.Answer = j.Answer(res.Text)
			c.Calls = c.Answer.Calls
		}
		if held != nil && held[i] != nil {
			c.Rest, c.Calls = held[i].finish(c.Answer)
		}
		e.Choices[i] = c
	}
	return e
}

// stream submits j and hands each output to onOut as it arrives, on the
// calling goroutine, which owns the writer; while no frame was written for
// the keep-alive interval it sends keep-alive frames. Each engine step that
// produced outputs is one token step for TTFT and ITL: the tokens of a
// verified speculative run share their step's time and count once. A
// failed write (the client went away), an error from onOut, the end of ctx
// or the end of the server's drain time (genContext) cancels the
// generation; the engine then finishes it with reason canceled. It returns
// every choice's result when the engine is done with the sequence.
func (b *Base) stream(ctx context.Context, j *Job, ev *Events, onOut func(engine.Output) error) ([]*engine.Result, error) {
	steps := observe.StreamFromContext(ctx)
	ctx, cancel := genContext(ctx)
	defer cancel()
	st, err := j.Engine.Submit(ctx, j.Req)
	if err != nil {
		return nil, err
	}
	keepAlive := b.KeepAlive
	var lastStep time.Time
	ka := time.NewTimer(keepAlive)
	defer ka.Stop()
	for !st.Done() {
		select {
		case <-st.Ready():
			for {
				o, ok := st.Next()
				if !ok {
					break
				}
				if !o.Time.Equal(lastStep) {
					steps.TokenStep(o.Time)
					lastStep = o.Time
				}
				if ev.err != nil || onOut(o) != nil {
					st.Cancel()
				}
			}
		case <-ka.C:
			if ev.err == nil && time.Since(ev.last) >= keepAlive && ev.keepAlive() != nil {
				st.Cancel()
			}
			ka.Reset(max(keepAlive-time.Since(ev.last), time.Millisecond))
		}
	}
	return st.Results()
}

// drainKey is the request-context key of the server's drain context.
type drainKey struct{}

// WithDrain gives a request's context the server's drain context, which
// ends when the shutdown's drain time is over: generations still running
// are canceled then (genContext).
func WithDrain(ctx, drain context.Context) context.Context {
	return context.WithValue(ctx, drainKey{}, drain)
}

// genContext returns the context a generation runs under: ctx (the request's,
// which ends when the client leaves), also canceled when the server's drain
// time is over. The request's own context stays alive then, so a sink that
// sees a canceled result while the client is there still ends its answer.
func genContext(ctx context.Context) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancel(ctx)
	drain, _ := ctx.Value(drainKey{}).(context.Context)
	if drain == nil {
		return gctx, cancel
	}
	stop := context.AfterFunc(drain, cancel)
	return gctx, func() { stop(); cancel() }
}
