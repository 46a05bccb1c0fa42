package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"mistralrs/internal/config"
	"mistralrs/internal/loader"
	"mistralrs/internal/observe"
	"mistralrs/internal/testutil"
)

// tracedServer is a server behind a stand-in for the HTTP server span: a
// layer that starts a span of tp for each request and puts it in the
// request's context, as the observe layers do when tracing is on.
type tracedServer struct {
	url string
	exp *tracetest.InMemoryExporter
}

func startTracedServer(t *testing.T, sampler sdktrace.Sampler, opts ...testOpt) *tracedServer {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sampler))
	oo := observe.DefaultOptions()
	oo.Logger = slog.New(slog.DiscardHandler)
	eo := config.DefaultEngineOptions()
	eo.Threads = 1
	o := Options{Models: []ModelSpec{tinySpec(t, "tiny", tinyConfig, loader.Options{})}, Observe: &oo, Engine: eo,
		Logger: slog.New(slog.DiscardHandler), EngineLogger: slog.New(slog.DiscardHandler)}
	for _, f := range opts {
		f(&o)
	}
	srv, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, sp := tp.Tracer("test").Start(r.Context(), r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer))
		defer sp.End()
		h.ServeHTTP(w, r.WithContext(ctx))
	}))
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &tracedServer{url: hs.URL, exp: exp}
}

func (ts *tracedServer) post(t *testing.T, ctx context.Context, path string, body any) (*http.Response, []byte, error) {
	t.Helper()
	data, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+path, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// tree is a finished request's spans: the server span and its children.
func (ts *tracedServer) tree(t *testing.T) (server tracetest.SpanStub, gens []tracetest.SpanStub) {
	t.Helper()
	// The server span ends when the handler returns, which may be just
	// after the client has read the answer.
	deadline := time.Now().Add(10 * time.Second)
	for {
		spans := ts.exp.GetSpans()
		for _, s := range spans {
			if s.SpanKind == trace.SpanKindServer {
				server = s
			}
		}
		if server.Name != "" || time.Now().After(deadline) {
			for _, s := range spans {
				if s.SpanKind != trace.SpanKindServer {
					gens = append(gens, s)
				}
			}
			ts.exp.Reset()
			return server, gens
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

func eventNames(s tracetest.SpanStub) []string {
	var n []string
	for _, e := range s.Events {
		n = append(n, e.Name)
	}
	return n
}

// checkGeneration checks a generation span of a request for n choices
// under server.
func checkGeneration(t *testing.T, server, g tracetest.SpanStub, op, idPrefix, reason string) {
	t.Helper()
	if g.Name != op+" tiny" || g.Parent.SpanID() != server.SpanContext.SpanID() || g.SpanContext.TraceID() != server.SpanContext.TraceID() {
		t.Errorf("span %q parent %s (server span %s)", g.Name, g.Parent.SpanID(), server.SpanContext.SpanID())
	}
	a := attrs(g)
	for k, want := range map[attribute.Key]string{"gen_ai.operation.name": op, "gen_ai.provider.name": "mistralrs", "gen_ai.request.model": "tiny"} {
		if a[k].AsString() != want {
			t.Errorf("%s = %q, want %q", k, a[k].AsString(), want)
		}
	}
	if id := a["gen_ai.response.id"].AsString(); !strings.HasPrefix(id, idPrefix) {
		t.Errorf("gen_ai.response.id %q, want prefix %q", id, idPrefix)
	}
	if fr := a["gen_ai.response.finish_reasons"].AsStringSlice(); !slices.Equal(fr, []string{reason}) {
		t.Errorf("finish reasons %v, want %s", fr, reason)
	}
	if a["gen_ai.usage.input_tokens"].AsInt64() <= 0 || a["gen_ai.request.max_tokens"].AsInt64() != 4 {
		t.Errorf("input tokens %d, max tokens %d", a["gen_ai.usage.input_tokens"].AsInt64(), a["gen_ai.request.max_tokens"].AsInt64())
	}
	if reason == "length" && a["gen_ai.usage.output_tokens"].AsInt64() != 4 {
		t.Errorf("output tokens %d", a["gen_ai.usage.output_tokens"].AsInt64())
	}
	ev := eventNames(g)
	phases := []string{"queued", "admitted", "prefill", "first_token", "decode"}
	if a["mistralrs.choice.index"].AsInt64() > 0 {
		phases = slices.Delete(phases, 2, 3) // a later choice starts from the first's prompt
	}
	for _, want := range phases {
		if !slices.Contains(ev, want) {
			t.Errorf("events %v lack %s", ev, want)
		}
	}
	if _, ok := a["mistralrs.time_to_first_token_s"]; !ok {
		t.Errorf("no time to first token in %v", a)
	}
}

// Every dialect, streamed or not, gives one generation span under the
// request's span, with the GenAI attributes and the engine's phases.
func TestTraceGenerationSpans(t *testing.T) {
	ts := startTracedServer(t, sdktrace.AlwaysSample())
	msgs := []map[string]any{{"role": "user", "content": "hello"}}
	cases := []struct {
		name, path, op, id string
		body               map[string]any
	}{
		{"chat", "/v1/chat/completions", "chat", "", map[string]any{"model": "tiny", "messages": msgs, "max_tokens": 4}},
		{"completions", "/v1/completions", "text_completion", "", map[string]any{"model": "tiny", "prompt": "hello", "max_tokens": 4}},
		{"responses", "/v1/responses", "chat", "resp_", map[string]any{"model": "tiny", "input": "hello", "max_output_tokens": 4}},
		{"anthropic", "/v1/messages", "chat", "msg_", map[string]any{"model": "tiny", "messages": msgs, "max_tokens": 4}},
	}
	for _, c := range cases {
		for _, stream := range []bool{false, true} {
			name := c.name
			if stream {
				name += "-stream"
			}
			t.Run(name, func(t *testing.T) {
				body := map[string]any{"ignore_eos": true, "stream": stream, "temperature": 0.5, "seed": 3}
				for k, v := range c.body {
					body[k] = v
				}
				resp, data, err := ts.post(t, context.Background(), c.path, body)
				if err != nil || resp.StatusCode != 200 {
					t.Fatalf("%v %v: %s", err, resp, data)
				}
				server, gens := ts.tree(t)
				if len(gens) != 1 {
					t.Fatalf("%d generation spans", len(gens))
				}
				checkGeneration(t, server, gens[0], c.op, c.id, "length")
				a := attrs(gens[0])
				if a["gen_ai.request.temperature"].AsFloat64() != 0.5 || a["gen_ai.request.seed"].AsInt64() != 3 {
					t.Errorf("temperature %v seed %v", a["gen_ai.request.temperature"], a["gen_ai.request.seed"])
				}
			})
		}
	}
}

// n choices: n generation spans, all children of the request's span.
func TestTraceChoices(t *testing.T) {
	ts := startTracedServer(t, sdktrace.AlwaysSample())
	resp, data, err := ts.post(t, context.Background(), "/v1/chat/completions", map[string]any{"model": "tiny", "n": 3, "max_tokens": 4,
		"ignore_eos": true, "temperature": 1, "messages": []map[string]any{{"role": "user", "content": "hi"}}})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v: %s", err, resp, data)
	}
	server, gens := ts.tree(t)
	if len(gens) != 3 {
		t.Fatalf("%d generation spans for 3 choices", len(gens))
	}
	var idx []int64
	for _, g := range gens {
		checkGeneration(t, server, g, "chat", "", "length")
		a := attrs(g)
		idx = append(idx, a["mistralrs.choice.index"].AsInt64())
		if a["gen_ai.request.choice.count"].AsInt64() != 3 {
			t.Errorf("choice count %v", a["gen_ai.request.choice.count"])
		}
	}
	slices.Sort(idx)
	if !slices.Equal(idx, []int64{0, 1, 2}) {
		t.Errorf("choice indexes %v", idx)
	}
}

// A stream the client leaves ends its span with an error status that says
// so, and finish reason canceled.
// The model is slowConfig's: the tiny one wrote 400 tokens before the
// cancel reached it on a fast core, and the stream ended with "length".
func TestTraceCanceledStream(t *testing.T) {
	ts := startTracedServer(t, sdktrace.AlwaysSample(), func(o *Options) {
		o.Models = []ModelSpec{tinySpec(t, "tiny", slowConfig, loader.Options{})}
	})
	ctx, cancel := context.WithCancel(context.Background())
	data, _ := json.Marshal(map[string]any{"model": "tiny", "max_tokens": 1500, "ignore_eos": true, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": "hi"}}})
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.url+"/v1/chat/completions", bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatal(err, resp)
	}
	buf := make([]byte, 1)
	if _, err := resp.Body.Read(buf); err != nil { // the stream has begun
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	server, gens := ts.tree(t)
	if len(gens) != 1 {
		t.Fatalf("%d generation spans (server span %+v)", len(gens), server)
	}
	g := gens[0]
	if g.Status.Code != codes.Error || g.Status.Description != "client closed the request" {
		t.Errorf("status %+v", g.Status)
	}
	if fr := attrs(g)["gen_ai.response.finish_reasons"].AsStringSlice(); !slices.Equal(fr, []string{"canceled"}) {
		t.Errorf("finish reasons %v", fr)
	}
}

// A request whose span does not record (tracing off, or not sampled) makes
// no generation span.
func TestTraceNotSampled(t *testing.T) {
	ts := startTracedServer(t, sdktrace.NeverSample())
	resp, data, err := ts.post(t, context.Background(), "/v1/chat/completions", map[string]any{"model": "tiny", "max_tokens": 2,
		"messages": []map[string]any{{"role": "user", "content": "hi"}}})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v: %s", err, resp, data)
	}
	if n := len(ts.exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported", n)
	}
}

// Unload and reload are spans under the request's.
func TestTraceModelManagement(t *testing.T) {
	ts := startTracedServer(t, sdktrace.AlwaysSample())
	for _, op := range []string{"unload", "reload"} {
		resp, data, err := ts.post(t, context.Background(), "/v1/models/"+op, map[string]any{"model_id": "tiny"})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v: %s", err, resp, data)
		}
		server, spans := ts.tree(t)
		if len(spans) != 1 || spans[0].Name != "model "+op+" tiny" || spans[0].Parent.SpanID() != server.SpanContext.SpanID() {
			t.Fatalf("%s: spans %+v", op, spans)
		}
		if st := attrs(spans[0])["mistralrs.model.status"].AsString(); st == "" {
			t.Errorf("%s: no status", op)
		}
	}
}

// A constrained request's spans say the constraint's kind and whether the
// grammar cache held it: a miss the first time, a hit the second; for a
// grammar (response_format and grammar go the same way) and for a forced
// tool call's.
func TestTraceGrammarCompile(t *testing.T) {
	ts := startTracedServer(t, sdktrace.AlwaysSample())
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	tool := map[string]any{"type": "function", "function": map[string]any{"name": "get_time",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string"}}}}}
	for _, c := range []struct {
		kind string
		body map[string]any
	}{
		{"regex", map[string]any{"model": "tiny", "max_tokens": 4, "messages": msgs,
			"grammar": map[string]any{"type": "regex", "value": "[ab]{1,8}"}}},
		{"tool_call", map[string]any{"model": "tiny", "max_tokens": 4, "messages": msgs,
			"tools": []any{tool}, "tool_choice": "required"}},
	} {
		for _, wantHit := range []bool{false, true} {
			resp, data, err := ts.post(t, context.Background(), "/v1/chat/completions", c.body)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%s: %v %v: %s", c.kind, err, resp, data)
			}
			_, gens := ts.tree(t)
			if len(gens) != 1 {
				t.Fatalf("%s: %d generation spans", c.kind, len(gens))
			}
			if k := attrs(gens[0])["mistralrs.constraint"].AsString(); k != c.kind {
				t.Errorf("constraint %q, want %q", k, c.kind)
			}
			var found bool
			for _, e := range gens[0].Events {
				if e.Name != "grammar_compile" {
					continue
				}
				found = true
				for _, kv := range e.Attributes {
					if kv.Key == "mistralrs.grammar_cache.hit" && kv.Value.AsBool() != wantHit {
						t.Errorf("%s: cache hit %v, want %v", c.kind, kv.Value.AsBool(), wantHit)
					}
				}
			}
			if !found {
				t.Errorf("%s: no grammar_compile event in %v", c.kind, eventNames(gens[0]))
			}
		}
	}
}

// An image's encoding is an event of the generation span: a miss for a
// new image, a hit when it comes again.
func TestTraceImageEncode(t *testing.T) {
	spec := visionSpec(t) // skips without ../shared
	ts := startTracedServer(t, sdktrace.AlwaysSample(), func(o *Options) {
		o.Models = []ModelSpec{spec}
		o.Engine.EncoderCacheBytes = 64 << 20
	})
	square := visionImage(t, "img-square-224.png")
	for i, text := range []string{"Describe this picture", "What is in it?"} {
		resp, data, err := ts.post(t, context.Background(), "/v1/chat/completions", map[string]any{"model": "gemma-vision", "max_tokens": 2,
			"messages": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": text},
				{"type": "image_url", "image_url": map[string]any{"url": square}}}}}})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v: %s", err, resp, data)
		}
		_, gens := ts.tree(t)
		if len(gens) != 1 {
			t.Fatalf("%d generation spans", len(gens))
		}
		a := attrs(gens[0])
		hit := i == 1
		if a["mistralrs.images"].AsInt64() != 1 || a["mistralrs.encoder_cache.hits"].AsInt64() != int64(btoi(hit)) ||
			a["mistralrs.encoder_cache.misses"].AsInt64() != int64(btoi(!hit)) {
			t.Errorf("request %d: images %v, hits %v, misses %v", i, a["mistralrs.images"], a["mistralrs.encoder_cache.hits"], a["mistralrs.encoder_cache.misses"])
		}
		if !slices.Contains(eventNames(gens[0]), "image_encode") {
			t.Errorf("request %d: events %v", i, eventNames(gens[0]))
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// An embeddings request is one span under the request's, with the inputs
// it embedded and their tokens.
func TestTraceEmbeddings(t *testing.T) {
	ts := startTracedServer(t, sdktrace.AlwaysSample())
	resp, data, err := ts.post(t, context.Background(), "/v1/embeddings", map[string]any{"model": "tiny", "input": []string{"hello", "world"}})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v: %s", err, resp, data)
	}
	var out embeddingListJSONForTrace
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	server, spans := ts.tree(t)
	if len(spans) != 1 || spans[0].Name != "embeddings tiny" || spans[0].Parent.SpanID() != server.SpanContext.SpanID() {
		t.Fatalf("spans %+v", spans)
	}
	a := attrs(spans[0])
	if a["gen_ai.operation.name"].AsString() != "embeddings" || a["gen_ai.request.model"].AsString() != "tiny" ||
		a["mistralrs.embeddings.inputs"].AsInt64() != 2 || a["gen_ai.usage.input_tokens"].AsInt64() != int64(out.Usage.PromptTokens) ||
		out.Usage.PromptTokens == 0 {
		t.Errorf("attributes %v, usage %+v", a, out.Usage)
	}
}

type embeddingListJSONForTrace struct {
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}

// A request for an unloaded model loads it in a span of its own, beside
// its generation span.
func TestTraceLoadOnDemand(t *testing.T) {
	ts := startTracedServer(t, sdktrace.AlwaysSample())
	if resp, data, err := ts.post(t, context.Background(), "/v1/models/unload", map[string]any{"model_id": "tiny"}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v: %s", err, resp, data)
	}
	ts.tree(t)
	for _, path := range []string{"/v1/chat/completions", "/v1/embeddings"} {
		body := map[string]any{"model": "tiny", "max_tokens": 2, "messages": []map[string]any{{"role": "user", "content": "hi"}}}
		if path == "/v1/embeddings" {
			body = map[string]any{"model": "tiny", "input": "hi"}
			if resp, data, err := ts.post(t, context.Background(), "/v1/models/unload", map[string]any{"model_id": "tiny"}); err != nil || resp.StatusCode != 200 {
				t.Fatalf("%v %v: %s", err, resp, data)
			}
			ts.tree(t)
		}
		resp, data, err := ts.post(t, context.Background(), path, body)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v: %s", err, resp, data)
		}
		server, spans := ts.tree(t)
		var names []string
		for _, s := range spans {
			names = append(names, s.Name)
			if s.Name == "model load tiny" && (s.Parent.SpanID() != server.SpanContext.SpanID() || attrs(s)["mistralrs.model.status"].AsString() != StatusLoaded) {
				t.Errorf("%s: load span's parent %s (server span %s), status %v", path, s.Parent.SpanID(), server.SpanContext.SpanID(), attrs(s)["mistralrs.model.status"])
			}
		}
		if !slices.Contains(names, "model load tiny") {
			t.Errorf("%s: spans %v", path, names)
		}
		// Loaded now: the next request loads nothing.
		if _, _, err := ts.post(t, context.Background(), path, body); err != nil {
			t.Fatal(err)
		}
		_, spans = ts.tree(t)
		for _, s := range spans {
			if strings.HasPrefix(s.Name, "model ") {
				t.Errorf("%s: a loaded model's request has span %s", path, s.Name)
			}
		}
	}
}

// A sequence preempted under a tiny KV pool shows it in its generation
// span: preempted events each followed by resumed, and their count.
func TestTracePreemption(t *testing.T) {
	ts := startTracedServer(t, sdktrace.AlwaysSample(), func(o *Options) {
		o.Engine.ContextLen, o.Engine.MemoryFraction, o.Engine.BlockSize = 64, 0, 16
	})
	resp, data, err := ts.post(t, context.Background(), "/v1/chat/completions", map[string]any{"model": "tiny", "n": 4, "max_tokens": 30,
		"ignore_eos": true, "temperature": 1, "messages": []map[string]any{{"role": "user", "content": "hi"}}})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("%v %v: %s", err, resp, data)
	}
	server, gens := ts.tree(t)
	if len(gens) != 4 {
		t.Fatalf("%d generation spans for 4 choices", len(gens))
	}
	total := int64(0)
	for _, g := range gens {
		if g.Parent.SpanID() != server.SpanContext.SpanID() {
			t.Errorf("span %s not under the server span", g.Name)
		}
		ev := eventNames(g)
		p := int64(countName(ev, "preempted"))
		if r := int64(countName(ev, "resumed")); r != p || attrs(g)["mistralrs.preemptions"].AsInt64() != p {
			t.Errorf("events %v, preemptions attribute %v", ev, attrs(g)["mistralrs.preemptions"])
		}
		if i := slices.Index(ev, "preempted"); i >= 0 && !slices.Contains(ev[i:], "resumed") {
			t.Errorf("preempted, never resumed: %v", ev)
		}
		if !slices.Contains(ev, "decode") {
			t.Errorf("no decode event in %v", ev)
		}
		total += p
	}
	if total == 0 {
		t.Errorf("no preemption under a KV pool of 64 tokens for 4 sequences of up to ~40")
	}
}

func countName(names []string, name string) int {
	n := 0
	for _, s := range names {
		if s == name {
			n++
		}
	}
	return n
}

// A request through a LoRA adapter says which adapter, and which of its
// generations, served it.
func TestTraceLoRA(t *testing.T) {
	base := testutil.SharedFile(t, "testdata", "reference", "tiny-f32.gguf") // skips without ../shared
	adapterA := testutil.SharedFile(t, "testdata", "lora", "lora-attn-r8.gguf")
	ts := startTracedServer(t, sdktrace.AlwaysSample(), func(o *Options) {
		lo := loader.Options{ID: "ref"}
		o.Models = []ModelSpec{{ID: "ref", Load: func() (*loader.Model, error) { return loader.Load(base, lo) },
			LoRA: &config.LoRARuntime{Preload: []config.LoRAModule{{Alias: "A", Path: adapterA}}}}}
	})
	for _, c := range []struct{ model, adapter string }{{"ref::A", "A"}, {"ref", ""}} {
		resp, data, err := ts.post(t, context.Background(), "/v1/completions", map[string]any{"model": c.model, "prompt": "hello", "max_tokens": 2})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%v %v: %s", err, resp, data)
		}
		_, gens := ts.tree(t)
		if len(gens) != 1 {
			t.Fatalf("%s: %d generation spans", c.model, len(gens))
		}
		a := attrs(gens[0])
		if a["mistralrs.lora.adapter"].AsString() != c.adapter || (c.adapter != "") != (a["mistralrs.lora.generation"].AsString() != "") {
			t.Errorf("%s: adapter %q generation %q", c.model, a["mistralrs.lora.adapter"].AsString(), a["mistralrs.lora.generation"].AsString())
		}
	}
}
