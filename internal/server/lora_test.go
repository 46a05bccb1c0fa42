package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"mistralrs/internal/config"
	"mistralrs/internal/loader"
	"mistralrs/internal/model/nn"
	"mistralrs/internal/server/gen"
	"mistralrs/internal/testutil"
)

// fakeAdapters is a test double of the adapter file reader: a "file" is
// any regular file, of rank 8 and as many bytes as it has; a file whose
// name contains "bad" is refused. gate, when set, holds each load until it
// is closed (started is told first).
type fakeAdapters struct {
	mu      sync.Mutex
	loads   []string
	gate    chan struct{}
	started chan string
}

func (f *fakeAdapters) load(path string, _ *loader.Model, maxRank int, maxBytes int64) (*loraWeights, error) {
	f.mu.Lock()
	f.loads = append(f.loads, path)
	gate, started := f.gate, f.started
	f.mu.Unlock()
	if started != nil {
		started <- path
	}
	if gate != nil {
		<-gate
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if strings.Contains(filepath.Base(path), "bad") {
		return nil, fmt.Errorf("%s: not a LoRA adapter", path)
	}
	if maxRank > 0 && maxRank < 8 {
		return nil, fmt.Errorf("%s: rank 8 is over the limit of %d", path, maxRank)
	}
	if maxBytes > 0 && fi.Size() > maxBytes {
		return nil, fmt.Errorf("%s: %d bytes, over the limit of %d", path, fi.Size(), maxBytes)
	}
	return &loraWeights{Net: &nn.Adapter{}, Format: "gguf", Rank: 8, Bytes: fi.Size()}, nil
}

// adapterFile writes a fake adapter of n bytes in dir.
func adapterFile(t *testing.T, dir, name string, n int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// testSet is an adapter set of the given limits holding one generation per
// alias, each of bytes bytes.
func testSet(t *testing.T, lim config.LoRARuntime, bytes int64, aliases ...string) *adapterSet {
	t.Helper()
	s := &adapterSet{limits: lim, resident: map[string]*loraGeneration{}, live: map[string]*loraGeneration{}}
	for _, a := range aliases {
		if err := s.add(testGeneration(a, bytes)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func testGeneration(alias string, bytes int64) *loraGeneration {
	rt := &loraRuntime{load: func(string, *loader.Model, int, int64) (*loraWeights, error) {
		return &loraWeights{Net: &nn.Adapter{}, Rank: 4, Bytes: bytes}, nil
	}}
	g, err := rt.loadGeneration(config.LoRAModule{Alias: alias, Path: alias + ".gguf"}, nil)
	if err != nil {
		panic(err)
	}
	return g
}

// TestLoRAGenerations: generations are unique, selectable by alias and by
// id; replacing an alias retires its generation, which a holder keeps
// until it lets go, and which nobody can select any more.
func TestLoRAGenerations(t *testing.T) {
	s := testSet(t, config.LoRARuntime{}, 100, "a", "b")
	la, ga, relA, err := s.Hold(gen.Adapter{Alias: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if la.Name != "a" || la.Key != ga || len(la.Active) != 1 || la.Active[0].Scale != 1 {
		t.Fatalf("engine LoRA %+v for generation %s", la, ga)
	}
	_, gb, relB, err := s.Hold(gen.Adapter{Alias: "b"})
	if err != nil || gb == ga {
		t.Fatalf("b: generation %q (a's %q), %v", gb, ga, err)
	}
	relB()
	relB() // a second release changes nothing

	// Replace a while a request holds it.
	next := testGeneration("a", 100)
	if err := s.add(next); err != nil {
		t.Fatal(err)
	}
	if _, gens, bytes := s.snapshot(); len(gens) != 3 || bytes != 200 || gens[2].Generation != ga || gens[2].Status != "retired" || gens[2].InUse != 1 {
		t.Fatalf("after replacing a held generation: %+v, resident bytes %d", gens, bytes)
	}
	if _, _, _, err := s.Hold(gen.Adapter{Generation: ga}); gen.Status(err) != http.StatusUnprocessableEntity {
		t.Fatalf("selecting the retired generation: %v", err)
	}
	_, g2, rel2, err := s.Hold(gen.Adapter{Generation: next.id})
	if err != nil || g2 != next.id {
		t.Fatalf("selecting the new generation by id: %q, %v", g2, err)
	}
	rel2()
	if s.bytes != 300 {
		t.Fatalf("held bytes %d with the retired generation still held, want 300", s.bytes)
	}
	relA()
	if _, gens, _ := s.snapshot(); len(gens) != 2 || s.live[ga] != nil || s.bytes != 200 {
		t.Fatalf("the retired generation is not freed after its last holder: %+v (%d bytes)", gens, s.bytes)
	}

	// Unloading an alias nobody holds frees it at once.
	if g := s.unload("b"); g == nil || s.live[g.id] != nil || s.current("b") != nil {
		t.Fatal("unloaded b is still live")
	}
	if _, _, _, err := s.Hold(gen.Adapter{Alias: "b"}); err == nil || !strings.Contains(err.Error(), `unknown LoRA adapter "b"`) {
		t.Fatalf("selecting an unloaded alias: %v", err)
	}
}

// TestLoRALimits: the adapter count and the byte budget refuse a load
// clearly; replacing an alias does not count as one more.
func TestLoRALimits(t *testing.T) {
	s := testSet(t, config.LoRARuntime{MaxAdapters: 2, MaxBytes: 250}, 100, "a", "b")
	err := s.admitCount("c", false)
	if le, ok := err.(*loraError); !ok || le.status != http.StatusConflict || !strings.Contains(le.msg, "--lora-max-adapters") {
		t.Fatalf("a third adapter: %v", err)
	}
	if err := s.admitCount("a", true); err != nil {
		t.Fatalf("replacing within the count: %v", err)
	}
	// Replacing a (100 bytes) by 60 bytes fits; the old generation is freed
	// at once (nobody holds it).
	if err := s.add(testGeneration("a", 60)); err != nil {
		t.Fatal(err)
	}
	// Now 160 held: replacing b by 100 bytes needs 260 while b's old
	// generation is held.
	_, _, rel, _ := s.Hold(gen.Adapter{Alias: "b"})
	err = s.add(testGeneration("b", 100))
	if le, ok := err.(*loraError); !ok || !strings.Contains(le.msg, "--lora-max-bytes") {
		t.Fatalf("over the byte budget: %v", err)
	}
	rel()
	if s.current("b") == nil {
		t.Fatal("a refused replacement removed the resident generation")
	}
}

// TestLoRACardIDs: card ids escape %, : and # in both parts and take a #N
// suffix when an id is taken; short aliases resolve when one card has them.
func TestLoRACardIDs(t *testing.T) {
	r := &models{byID: map[string]*modelEntry{}}
	add := func(id string, aliases ...string) {
		e := &modelEntry{spec: ModelSpec{ID: id}, reg: r, lora: &loraRuntime{}}
		for _, a := range aliases {
			e.lora.catalog = append(e.lora.catalog, config.LoRAModule{Alias: a})
		}
		r.entries = append(r.entries, e)
		r.byID[id] = e
	}
	add("m::x", "only")
	add("m", "x", "a:b#1%", "shared")
	add("n", "shared")
	var ids []string
	for _, c := range r.cards() {
		ids = append(ids, c.id)
	}
	want := []string{"m%3A%3Ax::only", "m::x#2", "m::a%3Ab%231%25", "m::shared", "n::shared"}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Fatalf("card ids %q, want %q", ids, want)
	}
	for name, wantOK := range map[string]bool{"m::x#2": true, "only": true, "shared": false, "m::shared": true, "m::nope": false, "x": true} {
		if _, ok := r.card(name); ok != wantOK {
			t.Errorf("card(%q) = %v, want %v", name, ok, wantOK)
		}
		if r.KnownModel(name) != wantOK {
			t.Errorf("KnownModel(%q) = %v, want %v", name, !wantOK, wantOK)
		}
	}
	if m, err := r.Lookup("m::x"); err != nil || m.ID() != "m::x" {
		t.Fatalf("a model id that looks like a card resolves to the model: %v, %v", m, err)
	}
	m, err := r.Lookup("m::a%3Ab%231%25")
	if c, ok := m.(gen.AdapterCard); err != nil || !ok || c.CardAdapter() != "a:b#1%" || c.ID() != "m::a%3Ab%231%25" {
		t.Fatalf("escaped card id: %v, %v", m, err)
	}
}

// TestLoRAAPIFromEnv: the mutation routes need the variable set to one of
// the true words.
func TestLoRAAPIFromEnv(t *testing.T) {
	for v, want := range map[string]bool{"1": true, "true": true, "YES": true, "on": true, "": false, "0": false, "enabled": false} {
		api := LoRAAPIFromEnv(func(k string) string {
			switch k {
			case "MISTRALRS_ALLOW_RUNTIME_LORA_UPDATING":
				return v
			case "MISTRALRS_LORA_ADAPTER_ROOT":
				return "/srv/adapters"
			}
			return ""
		})
		if api.AllowUpdates != want || api.Root != "/srv/adapters" {
			t.Errorf("%q: %+v", v, api)
		}
	}
}

// loraServer starts the tiny model "tiny" with a LoRA runtime (preloaded
// adapters from dir) over the fake reader, and mutation routes confined to
// root when allow.
func loraServer(t *testing.T, fake *fakeAdapters, spec *config.LoRARuntime, api LoRAAPI, extra ...testOpt) *testServer {
	t.Helper()
	return startServer(t, append([]testOpt{func(o *Options) {
		o.Models[0].LoRA = spec
		o.LoRAAPI = &api
		o.loraLoad = fake.load
	}}, extra...)...)
}

// loraErrorBody decodes the LoRA envelope.
func loraErrorBody(t *testing.T, body []byte) (typ, code, msg string) {
	t.Helper()
	var env loraEnvelope
	if err := json.Unmarshal(body, &env); err != nil || env.Error.Code == "" {
		t.Fatalf("not the LoRA envelope: %s", body)
	}
	return env.Error.Type, env.Error.Code, env.Error.Message
}

// TestLoRARoutesGated: without the variable the mutation routes are not
// served; GET /v1/lora_adapters always is, 409 for a model without runtime.
func TestLoRARoutesGated(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.LoRAAPI = &LoRAAPI{} })
	resp, _ := ts.post("/v1/load_lora_adapter", map[string]any{"lora_name": "a", "lora_path": "/x"})
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("load route without MISTRALRS_ALLOW_RUNTIME_LORA_UPDATING: %d", resp.StatusCode)
	}
	resp, body := ts.get("/v1/lora_adapters?model=tiny")
	if typ, code, _ := loraErrorBody(t, body); resp.StatusCode != http.StatusConflict || code != codeLoRAUnavailable || typ != "invalid_request_error" {
		t.Fatalf("GET without a LoRA runtime: %d %s", resp.StatusCode, body)
	}
	resp, body = ts.get("/v1/lora_adapters?model=nope")
	if _, code, _ := loraErrorBody(t, body); resp.StatusCode != http.StatusNotFound || code != codeModelNotFound {
		t.Fatalf("GET for an unknown model: %d %s", resp.StatusCode, body)
	}
	// The adapter field on a model without runtime.
	resp, body = ts.post("/v1/completions", map[string]any{"model": "tiny", "prompt": "hi", "max_tokens": 1, "adapter": "a"})
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "no LoRA runtime") {
		t.Fatalf("adapter on a model without LoRA runtime: %d %s", resp.StatusCode, body)
	}
}

// TestLoRARoutes: loading, listing, compare-and-set, replacing and
// unloading through the routes, with the bodies' checks.
func TestLoRARoutes(t *testing.T) {
	root := t.TempDir()
	a := adapterFile(t, root, "a.gguf", 100)
	adapterFile(t, root, "b.gguf", 50)
	adapterFile(t, root, "bad.gguf", 10)
	outside := t.TempDir()
	adapterFile(t, outside, "evil.gguf", 10)
	if err := os.Symlink(filepath.Join(outside, "evil.gguf"), filepath.Join(root, "link.gguf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "dir")); err != nil {
		t.Fatal(err)
	}
	// A PEFT-like folder inside the root whose tensors link outside it.
	peft := filepath.Join(root, "peft")
	if err := os.Mkdir(peft, 0o755); err != nil {
		t.Fatal(err)
	}
	adapterFile(t, peft, "adapter_config.json", 10)
	if err := os.Symlink(filepath.Join(outside, "evil.gguf"), filepath.Join(peft, "adapter_model.safetensors")); err != nil {
		t.Fatal(err)
	}
	fake := &fakeAdapters{}
	ts := loraServer(t, fake, &config.LoRARuntime{Preload: []config.LoRAModule{{Alias: "a", Path: a, Source: "org/a", Revision: "main"}}, MaxAdapters: 2},
		LoRAAPI{AllowUpdates: true, Root: root})

	list := func() loraListJSON {
		t.Helper()
		resp, body := ts.get("/v1/lora_adapters?model=%20tiny%20")
		var l loraListJSON
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &l) != nil {
			t.Fatalf("GET /v1/lora_adapters: %d %s", resp.StatusCode, body)
		}
		return l
	}
	l := list()
	if len(l.Data) != 1 || l.Data[0].ID != "a" || l.Data[0].Source != "org/a" || l.Data[0].Revision != "main" || l.Data[0].Bytes != 100 ||
		l.ResidentGenerations != 1 || l.MaxAdapters != 2 {
		t.Fatalf("preloaded adapter: %+v", l)
	}
	genA := l.Data[0].Generation

	post := func(path string, body any, wantStatus int, wantCode string) []byte {
		t.Helper()
		resp, b := ts.post(path, body)
		if resp.StatusCode != wantStatus {
			t.Fatalf("%s %v: %d %s, want %d", path, body, resp.StatusCode, b, wantStatus)
		}
		if wantCode != "" {
			if _, code, _ := loraErrorBody(t, b); code != wantCode {
				t.Fatalf("%s %v: code %s, want %s", path, body, code, wantCode)
			}
		}
		return b
	}
	const load, unload = "/v1/load_lora_adapter", "/v1/unload_lora_adapter"
	post(load, `{"lora_name":"b","lora_path":"b.gguf","extra":1}`, 400, codeInvalidRequest)
	post(unload, `{"lora_name":"a","nope":true}`, 400, codeInvalidRequest)
	post(load, map[string]any{"lora_name": "b", "lora_path": "../b.gguf"}, 400, codeLoRAPath)
	post(load, map[string]any{"lora_name": "b", "lora_path": root + "/x/../b.gguf"}, 400, codeLoRAPath)
	post(load, map[string]any{"lora_name": "b", "lora_path": "link.gguf"}, 403, codeLoRAPath)
	post(load, map[string]any{"lora_name": "b", "lora_path": "dir/evil.gguf"}, 403, codeLoRAPath)
	post(load, map[string]any{"lora_name": "b", "lora_path": filepath.Join(outside, "evil.gguf")}, 403, codeLoRAPath)
	post(load, map[string]any{"lora_name": "b", "lora_path": "peft"}, 403, codeLoRAPath)
	post(load, map[string]any{"lora_name": "b", "lora_path": "peft/adapter_config.json"}, 403, codeLoRAPath)
	post(load, map[string]any{"lora_name": "b", "lora_path": "missing.gguf"}, 400, codeLoRALoad)
	post(load, map[string]any{"lora_name": "b", "lora_path": "bad.gguf"}, 400, codeLoRALoad)
	post(load, map[string]any{"lora_name": "a", "lora_path": "b.gguf"}, 409, codeLoRAExists)
	post(load, map[string]any{"lora_name": "b", "lora_path": "b.gguf", "model": "nope"}, 404, codeModelNotFound)
	post(load, map[string]any{"lora_name": "b", "lora_path": "b.gguf", "expected_generation": genA}, 409, codeLoRAGeneration)
	for _, p := range fake.loads {
		if strings.Contains(p, "evil") {
			t.Fatalf("a path outside the root was read: %s", p)
		}
	}

	var out loraLoadJSON
	b := post(load, map[string]any{"lora_name": "b", "lora_path": "b.gguf", "expected_generation": "", "model": " default "}, 200, "")
	if json.Unmarshal(b, &out) != nil || out.ID != "b" || out.Generation == "" || out.Generation == genA || out.Bytes != 50 {
		t.Fatalf("load b: %s", b)
	}
	post(load, map[string]any{"lora_name": "c", "lora_path": "b.gguf"}, 409, "lora_max_adapters")

	// Compare-and-set replacement.
	post(load, map[string]any{"lora_name": "a", "lora_path": "b.gguf", "replace": true, "expected_generation": "lora-0"}, 409, codeLoRAGeneration)
	b = post(load, map[string]any{"lora_name": "a", "lora_path": "b.gguf", "load_inplace": true, "expected_generation": genA}, 200, "")
	if json.Unmarshal(b, &out) != nil || out.ReplacedGeneration != genA {
		t.Fatalf("replace a: %s", b)
	}
	l = list()
	if len(l.Data) != 2 || l.Data[0].ID != "a" || l.Data[0].Generation != out.Generation || l.RetiredGenerations != 0 || l.ResidentBytes != 100 {
		t.Fatalf("after replacing a (nobody held it): %+v", l)
	}

	post(unload, map[string]any{"lora_name": "b", "expected_generation": genA}, 409, codeLoRAGeneration)
	post(unload, map[string]any{"lora_name": "zzz"}, 404, codeLoRANotFound)
	post(unload, map[string]any{"lora_name": "b", "lora_int_id": 1}, 200, "")
	if l = list(); len(l.Data) != 1 || l.Data[0].ID != "a" {
		t.Fatalf("after unloading b: %+v", l)
	}
	// The model label of the LoRA routes: the trimmed body model (the
	// default model for " default "), the query's for GET.
	ts.log.waitLines(t, 1, "route=/v1/load_lora_adapter model=tiny status=200")
	ts.log.waitLines(t, 1, "route=/v1/lora_adapters model=tiny status=200")
}

// TestLoRALoadsSerialised: a load while another one runs gets 429 with
// Retry-After: 1.
func TestLoRALoadsSerialised(t *testing.T) {
	root := t.TempDir()
	adapterFile(t, root, "a.gguf", 10)
	adapterFile(t, root, "b.gguf", 10)
	fake := &fakeAdapters{gate: make(chan struct{}), started: make(chan string, 1)}
	ts := loraServer(t, fake, &config.LoRARuntime{}, LoRAAPI{AllowUpdates: true, Root: root})
	done := make(chan int, 1)
	go func() {
		resp, _ := ts.post("/v1/load_lora_adapter", map[string]any{"lora_name": "a", "lora_path": "a.gguf"})
		done <- resp.StatusCode
	}()
	<-fake.started
	for path, body := range map[string]any{
		"/v1/load_lora_adapter":   map[string]any{"lora_name": "b", "lora_path": "b.gguf"},
		"/v1/unload_lora_adapter": map[string]any{"lora_name": "a"},
	} {
		resp, b := ts.post(path, body)
		if _, code, _ := loraErrorBody(t, b); resp.StatusCode != http.StatusTooManyRequests || code != codeLoRABusy || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("%s while a load runs: %d %s (Retry-After %q)", path, resp.StatusCode, b, resp.Header.Get("Retry-After"))
		}
	}
	close(fake.gate)
	if st := <-done; st != http.StatusOK {
		t.Fatalf("the first load: %d", st)
	}
}

// TestLoRARequests: the adapter field as an alias and as a generation, card
// ids and short aliases, both forms at once, unknown aliases; answers
// report adapter_generation and echo the model as requested; /v1/models
// lists the cards.
func TestLoRARequests(t *testing.T) {
	dir := t.TempDir()
	fake := &fakeAdapters{}
	ts := loraServer(t, fake, &config.LoRARuntime{Preload: []config.LoRAModule{
		{Alias: "a", Path: adapterFile(t, dir, "a.gguf", 10)},
		{Alias: "x:y", Path: adapterFile(t, dir, "b.gguf", 10)}}}, LoRAAPI{})
	ctx := context.Background()

	models, err := ts.client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	cards := map[string]map[string]any{}
	for _, m := range models.Data {
		ids = append(ids, m.ID)
		var raw map[string]any
		_ = json.Unmarshal([]byte(m.RawJSON()), &raw)
		cards[m.ID] = raw
	}
	if strings.Join(ids, " ") != "default tiny tiny::a tiny::x%3Ay" {
		t.Fatalf("/v1/models ids %q", ids)
	}
	card := cards["tiny::a"]
	if card["parent"] != "tiny" || card["root"] != "a" || card["status"] != "loaded" || card["adapter_generation"] == "" {
		t.Fatalf("card: %v", card)
	}
	genA := card["adapter_generation"].(string)

	complete := func(model string, opts ...option.RequestOption) (*openai.Completion, error) {
		return ts.client.Completions.New(ctx, openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(model),
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}, MaxTokens: openai.Int(2), Temperature: openai.Float(0)}, opts...)
	}
	generation := func(raw string) string {
		var v struct {
			AdapterGeneration string `json:"adapter_generation"`
		}
		_ = json.Unmarshal([]byte(raw), &v)
		return v.AdapterGeneration
	}
	for _, tc := range []struct {
		model string
		opts  []option.RequestOption
	}{
		{"tiny", []option.RequestOption{option.WithJSONSet("adapter", "a")}},
		{"tiny", []option.RequestOption{option.WithJSONSet("adapter", map[string]string{"generation": genA})}},
		{"tiny::a", nil},
		{"a", nil},
	} {
		c, err := complete(tc.model, tc.opts...)
		if err != nil {
			t.Fatalf("%s: %v", tc.model, err)
		}
		if c.Model != tc.model || generation(c.RawJSON()) != genA {
			t.Fatalf("%s: model %q, adapter_generation %q (want %s)", tc.model, c.Model, generation(c.RawJSON()), genA)
		}
	}
	chat, err := ts.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "tiny::x%3Ay",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(2)})
	if err != nil || chat.Model != "tiny::x%3Ay" || generation(chat.RawJSON()) == "" || generation(chat.RawJSON()) == genA {
		t.Fatalf("chat with an escaped card id: %v %+v", err, chat)
	}
	resp, err := ts.client.Responses.New(ctx, respParams("hi", 2), option.WithJSONSet("adapter", "a"))
	if err != nil || generation(resp.RawJSON()) != genA {
		t.Fatalf("Responses with adapter: %v", err)
	}
	if _, err := complete("tiny", option.WithJSONSet("adapter", map[string]any{"generation": genA, "x": 1})); !hasStatus(err, 400) {
		t.Fatalf("adapter with an unknown member: %v", err)
	}
	for _, bad := range []struct {
		model, adapter string
		status         int
		msg            string
	}{
		{"tiny::a", "a", 422, "already selects LoRA adapter"},
		{"tiny", "nope", 422, `unknown LoRA adapter "nope"`},
		{"tiny::nope", "", 404, "is not available"},
	} {
		var opts []option.RequestOption
		if bad.adapter != "" {
			opts = append(opts, option.WithJSONSet("adapter", bad.adapter))
		}
		_, err := complete(bad.model, opts...)
		if st, msg := apiStatus(err); st != bad.status || !strings.Contains(msg, bad.msg) {
			t.Errorf("%s + %q: %v, want %d %q", bad.model, bad.adapter, err, bad.status, bad.msg)
		}
	}
	// Anthropic's Messages take the card forms (and refuse the field).
	r, body := ts.post("/v1/messages", map[string]any{"model": "tiny::a", "max_tokens": 2,
		"messages": []map[string]any{{"role": "user", "content": "hi"}}})
	var msg struct{ Model string }
	if err := json.Unmarshal(body, &msg); r.StatusCode != http.StatusOK || err != nil || msg.Model != "tiny::a" {
		t.Fatalf("Messages with a card id: %d %s", r.StatusCode, body)
	}
	r, body = ts.post("/v1/messages", map[string]any{"model": "tiny", "max_tokens": 2, "adapter": "a",
		"messages": []map[string]any{{"role": "user", "content": "hi"}}})
	if r.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "select a LoRA adapter by model") {
		t.Fatalf("Messages with the adapter field: %d %s", r.StatusCode, body)
	}
	// Card ids and short aliases are known model labels, as supplied.
	ts.log.waitLines(t, 1, "route=/v1/completions model=tiny::a status=200")
	ts.log.waitLines(t, 1, "route=/v1/completions model=a status=200")
}

func hasStatus(err error, status int) bool {
	st, _ := apiStatus(err)
	return st == status
}

// TestLoRAUnloadWhileStreaming: unloading the adapter a stream runs with
// lets the stream finish whole; its generation is freed after, and cannot
// be selected any more.
func TestLoRAUnloadWhileStreaming(t *testing.T) {
	dir := t.TempDir()
	fake := &fakeAdapters{}
	ts := loraServer(t, fake, &config.LoRARuntime{Preload: []config.LoRAModule{{Alias: "a", Path: adapterFile(t, dir, "a.gguf", 10)}}},
		LoRAAPI{AllowUpdates: true})
	ctx := context.Background()
	const n = 64
	stream := ts.client.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "tiny::a",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon")}, MaxTokens: openai.Int(n), Temperature: openai.Float(0)},
		option.WithJSONSet("ignore_eos", true))
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	genA := ""
	var first struct {
		AdapterGeneration string `json:"adapter_generation"`
	}
	_ = json.Unmarshal([]byte(stream.Current().RawJSON()), &first)
	genA = first.AdapterGeneration
	if genA == "" {
		t.Fatalf("the first chunk has no adapter_generation: %s", stream.Current().RawJSON())
	}
	resp, body := ts.post("/v1/unload_lora_adapter", map[string]any{"lora_name": "a", "expected_generation": genA})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("unload while streaming: %d %s", resp.StatusCode, body)
	}
	text, finish := stream.Current().Choices[0].Text, ""
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) > 0 {
			text += c.Choices[0].Text
			if c.Choices[0].FinishReason != "" {
				finish = string(c.Choices[0].FinishReason)
			}
		}
	}
	if err := stream.Err(); err != nil || finish != "length" {
		t.Fatalf("the stream did not finish whole after the unload: finish %q, %v", finish, err)
	}
	// The handler releases the generation as it returns, just after the
	// last frame: wait for its completed line (the "stream accepted" line
	// names the same route, model and status, but comes first).
	ts.log.waitLines(t, 1, "request completed:", "route=/v1/completions model=tiny::a status=200")
	_, body = ts.get("/v1/lora_adapters?model=tiny")
	var l loraListJSON
	if err := json.Unmarshal(body, &l); err != nil || len(l.Data) != 0 || len(l.Generations) != 0 || l.RetiredGenerations != 0 {
		t.Fatalf("after the stream: the retired generation is not freed: %s", body)
	}
	_, err := ts.client.Completions.New(ctx, openai.CompletionNewParams{Model: "tiny",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}, MaxTokens: openai.Int(1)},
		option.WithJSONSet("adapter", map[string]string{"generation": genA}))
	if st, _ := apiStatus(err); st != http.StatusUnprocessableEntity {
		t.Fatalf("selecting the unloaded generation: %v", err)
	}
	if _, err := ts.client.Completions.New(ctx, openai.CompletionNewParams{Model: "tiny::a",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}, MaxTokens: openai.Int(1)}); err == nil {
		t.Fatal("the card of the unloaded adapter still answers")
	}
}

// TestLoRAModelReload: unloading the model frees its adapters with it; the
// next load reads the catalog's files again, with new generations.
func TestLoRAModelReload(t *testing.T) {
	dir := t.TempDir()
	fake := &fakeAdapters{}
	ts := loraServer(t, fake, &config.LoRARuntime{Preload: []config.LoRAModule{{Alias: "a", Path: adapterFile(t, dir, "a.gguf", 10)}}}, LoRAAPI{})
	before := ts.srv.models.byID["tiny"].adapters().current("a").id
	ts.post("/v1/models/unload", map[string]any{"model_id": "tiny"})
	_, body := ts.get("/v1/lora_adapters?model=tiny")
	var l loraListJSON
	if err := json.Unmarshal(body, &l); err != nil || len(l.Data) != 1 || l.Data[0].Generation != "" || len(l.Generations) != 0 {
		t.Fatalf("an unloaded model's adapters: %s", body)
	}
	ts.post("/v1/models/reload", map[string]any{"model_id": "tiny"})
	after := ts.srv.models.byID["tiny"].adapters().current("a")
	if after == nil || after.id == before || len(fake.loads) != 2 {
		t.Fatalf("after the reload: generation %v (was %s), %d file loads", after, before, len(fake.loads))
	}
}

// TestLoRAReference serves the reference tiny model with adapter A of
// ../shared/testdata/lora and checks the greedy completion of the
// fixture's prompt against llama.cpp's (case A), and that the base model
// without the adapter answers case base.
func TestLoRAReference(t *testing.T) {
	base := testutil.SharedFile(t, "testdata", "reference", "tiny-f32.gguf")
	adapterA := testutil.SharedFile(t, "testdata", "lora", "lora-attn-r8.gguf")
	refData, err := os.ReadFile(testutil.SharedFile(t, "testdata", "lora", "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		PromptTokens []int64 `json:"prompt_tokens"`
		Cases        map[string]struct {
			Text string `json:"greedy_32_text"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(refData, &ref); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(o *Options) {
		lo := loader.Options{ID: "ref"}
		o.Models = []ModelSpec{{ID: "ref", Load: func() (*loader.Model, error) { return loader.Load(base, lo) },
			LoRA: &config.LoRARuntime{Preload: []config.LoRAModule{{Alias: "A", Path: adapterA}}}}}
	})
	complete := func(model string, opts ...option.RequestOption) string {
		t.Helper()
		c, err := ts.client.Completions.New(context.Background(), openai.CompletionNewParams{Model: openai.CompletionNewParamsModel(model),
			Prompt:    openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: ref.PromptTokens},
			MaxTokens: openai.Int(32), Temperature: openai.Float(0)}, append(opts, option.WithJSONSet("ignore_eos", true))...)
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		return c.Choices[0].Text
	}
	if got, want := complete("ref::A"), ref.Cases["A"].Text; got != want {
		t.Errorf("with adapter A:\n got %q\nwant %q", got, want)
	}
	if got, want := complete("ref", option.WithJSONSet("adapter", "A")), ref.Cases["A"].Text; got != want {
		t.Errorf("with adapter field A:\n got %q\nwant %q", got, want)
	}
	if got, want := complete("ref"), ref.Cases["base"].Text; got != want {
		t.Errorf("without adapter:\n got %q\nwant %q", got, want)
	}
}

// TestLoRABodyTooLarge: the LoRA routes answer a body over the limit in
// their envelope, with mistral.rs's message and code.
func TestLoRABodyTooLarge(t *testing.T) {
	ts := loraServer(t, &fakeAdapters{}, &config.LoRARuntime{}, LoRAAPI{AllowUpdates: true})
	big := strings.NewReader(`{"lora_name":"` + strings.Repeat("a", 50<<20) + `"}`)
	req, _ := http.NewRequest("POST", ts.url+"/v1/load_lora_adapter", big)
	req.Header.Set("Content-Type", "application/json")
	resp, body := ts.do(req)
	if resp.StatusCode != http.StatusRequestEntityTooLarge ||
		string(body) != `{"error":{"message":"request body exceeds the configured limit","type":"invalid_request_error","code":"request_body_too_large"}}` {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// TestLoRAConcurrentHolds: requests holding and releasing generations
// while an alias is replaced over and over leave nothing behind: once all
// have let go, only the resident generation is live, and the bytes add up.
func TestLoRAConcurrentHolds(t *testing.T) {
	s := testSet(t, config.LoRARuntime{}, 10, "a")
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				_, _, rel, err := s.Hold(gen.Adapter{Alias: "a"})
				if err != nil {
					t.Error(err)
					return
				}
				rel()
			}
		}()
	}
	for range 100 {
		if err := s.add(testGeneration("a", 10)); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if len(s.live) != 1 || s.bytes != 10 || s.current("a") == nil {
		t.Fatalf("after the holders let go: %d live generations, %d bytes", len(s.live), s.bytes)
	}
}

// TestLoRAInfoGauge: a model with a LoRA runtime exports
// mistralrs_lora_requests_info, one series at a time, max_lora its adapter
// limit, the value the time of the last update.
func TestLoRAInfoGauge(t *testing.T) {
	dir := t.TempDir()
	ts := loraServer(t, &fakeAdapters{}, &config.LoRARuntime{Preload: []config.LoRAModule{{Alias: "a", Path: adapterFile(t, dir, "a.gguf", 10)}},
		MaxAdapters: 3}, LoRAAPI{})
	if r, body := ts.post("/v1/completions", map[string]any{"model": "tiny::a", "prompt": "hi", "max_tokens": 2}); r.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", r.StatusCode, body)
	}
	fams := ts.metrics()
	sets := labelSets(fams, "mistralrs_lora_requests_info")
	if len(sets) != 1 || sets[0]["max_lora"] != "3" {
		t.Fatalf("series %v, want one with max_lora 3", sets)
	}
	if v := value(fams, "mistralrs_lora_requests_info", sets[0]); v < 1e9 {
		t.Fatalf("value %v: not the time of the last update", v)
	}
}
