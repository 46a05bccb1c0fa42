package gen

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"mistralrs/internal/engine"
	"mistralrs/internal/tracing"
)

// Generation spans. A traced request (its context holds a recording span:
// the HTTP server span) gets one span per sequence, each choice of n, named
// and described per the OpenTelemetry GenAI semantic conventions, with the
// engine's phases as span events. The engine reports the phases through
// engine.Request.Trace into a buffer; the spans are filled and ended on
// the request's goroutine once the engine is done. Without a recording
// parent nothing here runs and the engine's hook stays nil.

// ProviderName is gen_ai.provider.name of every generation span (the
// conventions' replacement for gen_ai.system).
const ProviderName = "mistralrs"

// Operation names (gen_ai.operation.name).
const (
	OpChat           = "chat"
	OpTextCompletion = "text_completion"
	OpEmbeddings     = "embeddings"
)

// genTrace is a job's generation spans and the engine events they are
// made of.
type genTrace struct {
	spans   []trace.Span
	content bool // prompts and completions are recorded (tracing.CaptureContent)

	mu     sync.Mutex
	events []engine.Event
}

// hook is the engine request's Trace hook: it only buffers.
func (t *genTrace) hook(ev engine.Event) {
	t.mu.Lock()
	t.events = append(t.events, ev)
	t.mu.Unlock()
}

// startTrace opens j's generation spans under ctx's span, or returns nil
// (and leaves the engine's hook nil) when that span does not record.
func (b *Base) startTrace(ctx context.Context, j *Job) *genTrace {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return nil
	}
	tracer := parent.TracerProvider().Tracer(tracing.ScopeName)
	op := j.operation()
	attrs := j.requestAttributes(op)
	n := max(j.Req.N, 1)
	capture, _ := tracing.CaptureContent()
	t := &genTrace{spans: make([]trace.Span, n), content: capture}
	for i := range t.spans {
		_, t.spans[i] = tracer.Start(ctx, op+" "+j.Served.ID(), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(attrs...), trace.WithAttributes(attribute.Int("mistralrs.choice.index", i)))
	}
	if t.content {
		t.spans[0].SetAttributes(content("mistralrs.prompt", j.Model.Tok.Decode(j.Req.Prompt))...)
	}
	if c := j.Compile; c.Kind != "" {
		// The compile ran before the spans began: the event keeps its time.
		for _, sp := range t.spans {
			sp.AddEvent("grammar_compile", trace.WithTimestamp(c.At), trace.WithAttributes(
				attribute.String("mistralrs.constraint", c.Kind), attribute.Bool("mistralrs.grammar_cache.hit", c.Hit),
				attribute.Float64("mistralrs.duration_s", c.Took.Seconds())))
		}
	}
	j.Req.Trace = t.hook
	return t
}

// operation is the job's gen_ai.operation.name.
func (j *Job) operation() string {
	if j.Req.Continuation {
		return OpTextCompletion
	}
	return OpChat
}

// requestAttributes describe what the request asked for, the same for
// every choice.
func (j *Job) requestAttributes(op string) []attribute.KeyValue {
	p := &j.Req.Sampling
	a := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", op),
		attribute.String("gen_ai.provider.name", ProviderName),
		attribute.String("gen_ai.request.model", j.Served.ID()),
		attribute.String("gen_ai.response.model", j.Served.ID()),
		attribute.String("gen_ai.response.id", j.responseID()),
		attribute.Float64("gen_ai.request.temperature", float64(p.Temperature)),
		attribute.Float64("gen_ai.request.top_p", float64(p.TopP)),
		attribute.Int("mistralrs.images", len(j.Req.Images)),
	}
	if j.Req.MaxTokens > 0 {
		a = append(a, attribute.Int("gen_ai.request.max_tokens", j.Req.MaxTokens))
	}
	if p.Seed != nil {
		a = append(a, attribute.Int64("gen_ai.request.seed", int64(*p.Seed)))
	}
	if j.Req.N > 1 {
		a = append(a, attribute.Int("gen_ai.request.choice.count", j.Req.N))
	}
	if c := j.Compile; c.Kind != "" {
		a = append(a, attribute.String("mistralrs.constraint", c.Kind))
	}
	if j.Req.LoRA != nil {
		a = append(a, attribute.String("mistralrs.lora.adapter", j.Req.LoRA.Name),
			attribute.String("mistralrs.lora.generation", j.AdapterGeneration))
	}
	return a
}

// responseID is the id the answer carries.
func (j *Job) responseID() string {
	if j.ResponseID != "" {
		return j.ResponseID
	}
	return j.ID
}

// end fills and ends the spans: each choice's events and result, or the
// generation's error. canceled says why a canceled generation was (""
// when none was).
func (t *genTrace) end(results []*engine.Result, err error, canceled string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	events := t.events
	t.mu.Unlock()
	for i, sp := range t.spans {
		endAt := t.choiceEvents(sp, i, events)
		switch {
		case err != nil:
			sp.RecordError(err)
			sp.SetStatus(codes.Error, err.Error())
		case i < len(results):
			t.choiceResult(sp, results[i], canceled)
		}
		if endAt.IsZero() {
			sp.End()
		} else {
			sp.End(trace.WithTimestamp(endAt))
		}
	}
}

// choiceResult records a finished choice.
func (t *genTrace) choiceResult(sp trace.Span, res *engine.Result, canceled string) {
	sp.SetAttributes(
		attribute.StringSlice("gen_ai.response.finish_reasons", []string{res.FinishReason}),
		attribute.Int("gen_ai.usage.input_tokens", res.PromptTokens),
		attribute.Int("gen_ai.usage.output_tokens", res.CompletionTokens),
		attribute.Int("mistralrs.prefix_cache.reused_tokens", res.CachedTokens),
	)
	if t.content {
		sp.SetAttributes(content("mistralrs.completion", res.Text)...)
	}
	if res.FinishReason == engine.FinishCanceled {
		if canceled == "" {
			canceled = "canceled"
		}
		sp.SetStatus(codes.Error, canceled)
	}
}

// choiceEvents adds choice i's engine events to its span, with the
// attributes they sum up to, and returns when the choice ended (zero if
// the engine never said).
func (t *genTrace) choiceEvents(sp trace.Span, i int, events []engine.Event) (endAt time.Time) {
	var queued, admitted, first time.Time
	chunks, prefill, preempted, hits, misses := 0, 0, 0, 0, 0
	for _, ev := range events {
		if ev.Index != i {
			continue
		}
		ts := trace.WithTimestamp(ev.Time)
		switch ev.Kind {
		case engine.TraceQueued:
			queued = ev.Time
			sp.AddEvent("queued", ts)
		case engine.TraceAdmitted, engine.TraceResumed:
			if admitted.IsZero() {
				admitted = ev.Time
			}
			sp.AddEvent(ev.Kind.String(), ts, trace.WithAttributes(attribute.Int("mistralrs.prefix_cache.reused_tokens", ev.Tokens)))
		case engine.TracePrefill:
			chunks++
			prefill += ev.Tokens
			sp.AddEvent("prefill", ts, trace.WithAttributes(attribute.Int("mistralrs.tokens", ev.Tokens)))
		case engine.TraceFirstToken:
			first = ev.Time
			sp.AddEvent("first_token", ts)
		case engine.TracePreempted:
			preempted++
			sp.AddEvent("preempted", ts)
		case engine.TraceImage:
			if ev.Hit {
				hits++
			} else {
				misses++
			}
			sp.AddEvent("image_encode", ts, trace.WithAttributes(attribute.Bool("mistralrs.encoder_cache.hit", ev.Hit),
				attribute.Int("mistralrs.tokens", ev.Tokens)))
		case engine.TraceFinished:
			endAt = ev.Time
			sp.AddEvent("decode", ts, trace.WithAttributes(attribute.Int("mistralrs.decode.steps", ev.Steps)))
			sp.SetAttributes(attribute.Int("mistralrs.decode.steps", ev.Steps),
				attribute.Int("mistralrs.speculative.proposed", ev.Proposed),
				attribute.Int("mistralrs.speculative.accepted", ev.Accepted))
		}
	}
	sp.SetAttributes(attribute.Int("mistralrs.prefill.chunks", chunks), attribute.Int("mistralrs.prefill.tokens", prefill),
		attribute.Int("mistralrs.preemptions", preempted),
		attribute.Int("mistralrs.encoder_cache.hits", hits), attribute.Int("mistralrs.encoder_cache.misses", misses))
	if !queued.IsZero() && !admitted.IsZero() {
		sp.SetAttributes(attribute.Float64("mistralrs.time_in_queue_s", admitted.Sub(queued).Seconds()))
	}
	if !queued.IsZero() && !first.IsZero() {
		sp.SetAttributes(attribute.Float64("mistralrs.time_to_first_token_s", first.Sub(queued).Seconds()))
	}
	return endAt
}

// content is the attribute key holding text s, cut to the capture bound
// (and then key.bytes, its whole length).
func content(key, s string) []attribute.KeyValue {
	v, cut := tracing.Clip(s)
	a := []attribute.KeyValue{attribute.String(key, v)}
	if cut {
		a = append(a, attribute.Int(key+".bytes", len(s)))
	}
	return a
}

// EmbedTrace is an embeddings request's generation span: one for all its
// inputs, which enter the engine together.
type EmbedTrace struct{ sp trace.Span }

// StartEmbeddings opens the span of an embeddings request for model with
// inputs inputs under ctx's span, or returns nil (allocating nothing) when
// that span does not record.
func StartEmbeddings(ctx context.Context, model string, inputs int) *EmbedTrace {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return nil
	}
	_, sp := parent.TracerProvider().Tracer(tracing.ScopeName).Start(ctx, OpEmbeddings+" "+model,
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
			attribute.String("gen_ai.operation.name", OpEmbeddings),
			attribute.String("gen_ai.provider.name", ProviderName),
			attribute.String("gen_ai.request.model", model),
			attribute.Int("mistralrs.embeddings.inputs", inputs)))
	return &EmbedTrace{sp: sp}
}

// End records the input tokens embedded, or the request's error, and ends
// the span.
func (t *EmbedTrace) End(inputTokens int, err error) {
	if t == nil {
		return
	}
	if err != nil {
		t.sp.RecordError(err)
		t.sp.SetStatus(codes.Error, err.Error())
	} else {
		t.sp.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", inputTokens))
	}
	t.sp.End()
}
