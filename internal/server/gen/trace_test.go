package gen

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"mistralrs/internal/engine"
)

// Without a recording span in the context no span is made, the engine's
// hook stays nil and nothing is allocated.
func TestStartTraceOff(t *testing.T) {
	b, j := &Base{}, &Job{Req: &engine.Request{}}
	ctx := context.Background()
	if b.startTrace(ctx, j) != nil || j.Req.Trace != nil {
		t.Fatal("a trace without a recording span")
	}
	var tr *genTrace
	allocs := testing.AllocsPerRun(100, func() {
		tr = b.startTrace(ctx, j)
		tr.end(nil, nil, "")
	})
	if allocs != 0 {
		t.Errorf("%v allocations per request with tracing off", allocs)
	}
}

// An embeddings request without a recording span makes no span and
// allocates nothing; with one, its span has the inputs, their tokens or
// the error.
func TestEmbeddingsTrace(t *testing.T) {
	ctx := context.Background()
	allocs := testing.AllocsPerRun(100, func() {
		StartEmbeddings(ctx, "m", 3).End(7, nil)
	})
	if allocs != 0 || StartEmbeddings(ctx, "m", 3) != nil {
		t.Errorf("%v allocations per request with tracing off", allocs)
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ctx, parent := tp.Tracer("test").Start(ctx, "server")
	StartEmbeddings(ctx, "m", 3).End(7, nil)
	StartEmbeddings(ctx, "m", 1).End(0, errors.New("boom"))
	parent.End()
	spans := exp.GetSpans()
	if len(spans) != 3 || spans[0].Name != "embeddings m" || spans[0].Parent.SpanID() != parent.SpanContext().SpanID() {
		t.Fatalf("spans %+v", spans)
	}
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range spans[0].Attributes {
		got[kv.Key] = kv.Value
	}
	if got["gen_ai.operation.name"].AsString() != OpEmbeddings || got["mistralrs.embeddings.inputs"].AsInt64() != 3 ||
		got["gen_ai.usage.input_tokens"].AsInt64() != 7 {
		t.Errorf("attributes %v", got)
	}
	if spans[1].Status.Description != "boom" {
		t.Errorf("failed request's status %+v", spans[1].Status)
	}
}

// The engine's events of one choice become span events and the
// attributes they sum up to: queue time, prefill chunks, preemptions,
// image lookups, decode steps, speculation. Events of other choices are
// left to their own spans.
func TestChoiceEvents(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	_, sp := tp.Tracer("test").Start(context.Background(), "chat m")
	t0 := time.Unix(100, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	events := []engine.Event{
		{Kind: engine.TraceQueued, Time: at(0)},
		{Kind: engine.TraceQueued, Index: 1, Time: at(0)},
		{Kind: engine.TraceAdmitted, Time: at(20), Tokens: 16},
		{Kind: engine.TraceImage, Time: at(20), Tokens: 256, Hit: false},
		{Kind: engine.TraceImage, Time: at(20), Tokens: 256, Hit: true},
		{Kind: engine.TracePrefill, Time: at(30), Tokens: 40},
		{Kind: engine.TracePreempted, Time: at(35)},
		{Kind: engine.TraceResumed, Time: at(50), Tokens: 32},
		{Kind: engine.TracePrefill, Time: at(60), Tokens: 24},
		{Kind: engine.TraceFirstToken, Time: at(60)},
		{Kind: engine.TraceFinished, Time: at(90), Reason: "stop", Steps: 7, Proposed: 6, Accepted: 4},
	}
	tr := &genTrace{spans: nil}
	end := tr.choiceEvents(sp, 0, events)
	sp.End()
	if !end.Equal(at(90)) {
		t.Errorf("ends at %v", end)
	}
	s := exp.GetSpans()[0]
	if len(s.Events) != len(events)-1 {
		t.Errorf("%d span events for %d of the choice's", len(s.Events), len(events)-1)
	}
	want := map[attribute.Key]attribute.Value{
		"mistralrs.time_in_queue_s":       attribute.Float64Value(0.02),
		"mistralrs.time_to_first_token_s": attribute.Float64Value(0.06),
		"mistralrs.prefill.chunks":        attribute.Int64Value(2),
		"mistralrs.prefill.tokens":        attribute.Int64Value(64),
		"mistralrs.preemptions":           attribute.Int64Value(1),
		"mistralrs.encoder_cache.hits":    attribute.Int64Value(1),
		"mistralrs.encoder_cache.misses":  attribute.Int64Value(1),
		"mistralrs.decode.steps":          attribute.Int64Value(7),
		"mistralrs.speculative.proposed":  attribute.Int64Value(6),
		"mistralrs.speculative.accepted":  attribute.Int64Value(4),
	}
	got := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		got[kv.Key] = kv.Value
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k].String(), v.String())
		}
	}
}
