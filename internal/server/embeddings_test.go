package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"

	"mistralrs/internal/config"
	"mistralrs/internal/loader"
)

// embedDirect embeds prompts with the served model's engine directly (one
// Engine.Embed call), for comparison with what the route answers.
func (ts *testServer) embedDirect(id string, prompts ...[]int32) [][]float32 {
	ts.t.Helper()
	lm, release, err := ts.srv.models.byID[id].acquire(context.Background())
	if err != nil {
		ts.t.Fatal(err)
	}
	defer release()
	out, err := lm.Engine.Embed(context.Background(), prompts)
	if err != nil {
		ts.t.Fatal(err)
	}
	return out
}

// encode tokenizes text as the route does.
func (ts *testServer) encode(id, text string) []int32 {
	ts.t.Helper()
	lm, release, err := ts.srv.models.byID[id].acquire(context.Background())
	if err != nil {
		ts.t.Fatal(err)
	}
	defer release()
	return lm.Model.Tok.Encode(text, true, true)
}

// embeddingBody is the route's answer, with float embeddings.
type embeddingBody struct {
	Object string `json:"object"`
	Model  string `json:"model"`
	Data   []struct {
		Object    string    `json:"object"`
		Embedding []float32 `json:"embedding"`
		Index     int       `json:"index"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func (ts *testServer) embed(body any) embeddingBody {
	ts.t.Helper()
	resp, data := ts.post("/v1/embeddings", body)
	if resp.StatusCode != 200 {
		ts.t.Fatalf("embeddings: %d %s", resp.StatusCode, data)
	}
	var out embeddingBody
	if err := json.Unmarshal(data, &out); err != nil {
		ts.t.Fatalf("%v: %s", err, data)
	}
	if out.Object != "list" {
		ts.t.Errorf("object %q", out.Object)
	}
	for i, d := range out.Data {
		if d.Object != "embedding" || d.Index != i {
			ts.t.Errorf("data[%d]: object %q index %d", i, d.Object, d.Index)
		}
	}
	return out
}

// sameVec checks a == b within tol (0: bit for bit) and that a has unit length.
func sameVec(t *testing.T, name string, a []float32, b []float32, tol float64) {
	t.Helper()
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("%s: lengths %d and %d", name, len(a), len(b))
	}
	var norm float64
	for i := range a {
		norm += float64(a[i]) * float64(a[i])
		if d := math.Abs(float64(a[i]) - float64(b[i])); d > tol || (tol == 0 && math.Float32bits(a[i]) != math.Float32bits(b[i])) {
			t.Fatalf("%s: [%d] %v vs %v", name, i, a[i], b[i])
		}
	}
	if math.Abs(norm-1) > 1e-5 {
		t.Errorf("%s: squared norm %v, want 1", name, norm)
	}
}

func toFloat32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, f := range v {
		out[i] = float32(f)
	}
	return out
}

// decodeBase64 reads OpenAI's base64 form: little-endian float32 bytes.
func decodeBase64(t *testing.T, s string) []float32 {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b)%4 != 0 {
		t.Fatalf("base64 %q: %v", s, err)
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// The openai-go client reads float and base64 embeddings; they are the
// engine's vector for the text's tokens, bit for bit, and the usage counts
// those tokens.
func TestEmbeddingsClient(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	const text = "The quick brown fox"
	toks := ts.encode("tiny", text)
	want := ts.embedDirect("tiny", toks)[0]
	if len(want) != tinyConfig.Embd {
		t.Fatalf("direct embedding of width %d", len(want))
	}

	res, err := ts.client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "tiny",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data) != 1 || res.Model != "tiny" || res.Data[0].Index != 0 {
		t.Fatalf("response %+v", res)
	}
	if res.Usage.PromptTokens != int64(len(toks)) || res.Usage.TotalTokens != int64(len(toks)) {
		t.Errorf("usage %+v, want %d tokens", res.Usage, len(toks))
	}
	float := toFloat32(res.Data[0].Embedding)
	sameVec(t, "float", float, want, 0)

	res, err = ts.client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model:          "tiny",
		Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{text}},
		EncodingFormat: openai.EmbeddingNewParamsEncodingFormatBase64,
		User:           openai.String("someone"),
	})
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if len(res.Data) != 1 || json.Unmarshal([]byte(res.Data[0].JSON.Embedding.Raw()), &s) != nil {
		t.Fatalf("base64 response %s", res.RawJSON())
	}
	sameVec(t, "base64", decodeBase64(t, s), float, 0)

	// The default model, named or not.
	for _, model := range []string{"default", ""} {
		res, err = ts.client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: model, Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)}})
		if err != nil || res.Model != "tiny" {
			t.Fatalf("model %q: %v %+v", model, err, res)
		}
		sameVec(t, "default model", toFloat32(res.Data[0].Embedding), want, 0)
	}

	// dimensions is refused with 422.
	_, err = ts.client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "tiny", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(text)}, Dimensions: openai.Int(8)})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 422 || !strings.Contains(ae.Message, "Custom embedding dimensions (8) are not supported.") {
		t.Errorf("dimensions: %v", err)
	}
}

// A list of inputs: one embedding each, in input order, each the one the
// input gets alone; token-id inputs are the same as the text they encode.
func TestEmbeddingsBatchAndTokens(t *testing.T) {
	ts := startServer(t)
	texts := []string{"alpha", "a somewhat longer second input", "gamma gamma"}
	var toks [][]int32
	n := 0
	for _, s := range texts {
		toks = append(toks, ts.encode("tiny", s))
		n += len(toks[len(toks)-1])
	}
	alone := make([][]float32, len(texts))
	for i := range toks {
		alone[i] = ts.embedDirect("tiny", toks[i])[0]
	}

	got := ts.embed(map[string]any{"model": "tiny", "input": texts})
	if len(got.Data) != 3 || got.Model != "tiny" || got.Usage.PromptTokens != n || got.Usage.TotalTokens != n {
		t.Fatalf("batch: %d embeddings, model %q, usage %+v (want %d tokens)", len(got.Data), got.Model, got.Usage, n)
	}
	for i := range texts {
		sameVec(t, fmt.Sprintf("batch[%d]", i), got.Data[i].Embedding, alone[i], 1e-5)
	}
	if d := math.Abs(float64(got.Data[0].Embedding[0] - got.Data[2].Embedding[0])); d == 0 {
		t.Errorf("different inputs, same embedding")
	}

	// [[int]]: the same vectors from the token ids.
	tok := ts.embed(map[string]any{"model": "tiny", "input": toks})
	if len(tok.Data) != 3 || tok.Usage.PromptTokens != n {
		t.Fatalf("token batch: %+v", tok)
	}
	for i := range toks {
		sameVec(t, fmt.Sprintf("tokens[%d]", i), tok.Data[i].Embedding, got.Data[i].Embedding, 1e-5)
	}
	// [int]: one input.
	one := ts.embed(map[string]any{"input": toks[1]})
	if len(one.Data) != 1 || one.Usage.PromptTokens != len(toks[1]) {
		t.Fatalf("token input: %+v", one)
	}
	sameVec(t, "tokens", one.Data[0].Embedding, alone[1], 0)

	// base64 over raw HTTP decodes to the float answer.
	resp, data := ts.post("/v1/embeddings", map[string]any{"input": texts, "encoding_format": "base64"})
	var b64 struct {
		Data []struct {
			Embedding string `json:"embedding"`
			Index     int    `json:"index"`
		} `json:"data"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(data, &b64) != nil || len(b64.Data) != 3 {
		t.Fatalf("base64: %d %s", resp.StatusCode, data)
	}
	for i, d := range b64.Data {
		sameVec(t, fmt.Sprintf("base64[%d]", i), decodeBase64(t, d.Embedding), got.Data[i].Embedding, 1e-5)
	}
}

// truncate_sequence cuts an over-long input to the context length (its
// first tokens); without it the input is refused with 422.
func TestEmbeddingsTruncate(t *testing.T) {
	ts := startServer(t)
	long := make([]int32, tinyConfig.ContextLen+40)
	for i := range long {
		long[i] = int32(3 + i%200)
	}
	resp, data := ts.post("/v1/embeddings", map[string]any{"input": long})
	if resp.StatusCode != 422 || !strings.Contains(string(data), "more than the context length 512") {
		t.Errorf("too long: %d %s", resp.StatusCode, data)
	}
	got := ts.embed(map[string]any{"input": long, "truncate_sequence": true})
	if got.Usage.PromptTokens != tinyConfig.ContextLen {
		t.Errorf("usage %+v, want %d", got.Usage, tinyConfig.ContextLen)
	}
	sameVec(t, "truncated", got.Data[0].Embedding, ts.embedDirect("tiny", long[:tinyConfig.ContextLen])[0], 0)
	// A text too.
	text := strings.Repeat("abcdefgh ", 100)
	got = ts.embed(map[string]any{"input": []string{text, "short"}, "truncate_sequence": true})
	if short := len(ts.encode("tiny", "short")); got.Usage.PromptTokens != tinyConfig.ContextLen+short {
		t.Errorf("usage %+v, want %d+%d", got.Usage, tinyConfig.ContextLen, short)
	}
}

// Bad requests: the status and the OpenAI error envelope of each.
func TestEmbeddingsErrors(t *testing.T) {
	pooled := tinyConfig
	pooled.PoolingType = 4 // rank: a reranker cannot embed
	ts := startServer(t, func(o *Options) {
		o.Models = append(o.Models, tinySpec(t, "ranker", pooled, loader.Options{}))
	})
	for _, c := range []struct {
		body   string
		status int
		param  string
		code   string
		msg    string
	}{
		{`{"model":"nope","input":"x"}`, 422, "model", "model_not_found", "Requested model 'nope' is not available. Available models: ranker, tiny. Use 'default' to use the default model."},
		{`{"input":"x","dimensions":256}`, 422, "dimensions", "invalid_dimensions", "Custom embedding dimensions (256) are not supported."},
		{`{"input":[]}`, 422, "input", "invalid_input", "input must contain at least one entry."},
		{`{"input":""}`, 422, "input", "invalid_input", "input[0] is empty."},
		{`{"input":["a",""]}`, 422, "input", "invalid_input", "input[1] is empty."},
		{`{"input":[[1,2],[]]}`, 422, "input", "invalid_input", "input[1] is empty."},
		{`{"input":[1,2,300]}`, 422, "input", "invalid_input", "input 0: token 300 outside the vocabulary (size 300)"},
		{`{"input":[[5],[-1]]}`, 422, "input", "invalid_input", "input 1: token -1 is negative: embeddings take text only, not images"},
		{`{"model":"ranker","input":"x"}`, 422, "input", "invalid_input", `the model's pooling type "rank" cannot make embeddings`},
		{`{"input":"x","encoding_format":"hex"}`, 400, "encoding_format", "", `encoding_format must be "float" or "base64", got "hex"`},
		{`{"model":"tiny"}`, 400, "input", "", "input is required"},
		{`{"input":5}`, 400, "input", "", "input must be a string, an array of strings, an array of token ids (integers), or an array of arrays of token ids"},
		{`{"input":["a",1]}`, 400, "input", "", "input must be a string, an array of strings, an array of token ids (integers), or an array of arrays of token ids"},
		{`{"input":[1.5]}`, 400, "input", "", "input must be a string, an array of strings, an array of token ids (integers), or an array of arrays of token ids"},
		{`{"input":"x","truncate_sequence":"yes"}`, 400, "truncate_sequence", "", ""},
		{`{"input":"x",`, 400, "", "", ""},
	} {
		resp, data := ts.post("/v1/embeddings", c.body)
		var e apiError
		if err := json.Unmarshal(data, &e); err != nil || resp.StatusCode != c.status {
			t.Errorf("%s: %d %s", c.body, resp.StatusCode, data)
			continue
		}
		param, code := "", ""
		if e.Error.Param != nil {
			param = *e.Error.Param
		}
		if e.Error.Code != nil {
			code = *e.Error.Code
		}
		if param != c.param || code != c.code || e.Error.Type != "invalid_request_error" || (c.msg != "" && e.Error.Message != c.msg) {
			t.Errorf("%s: %d %s", c.body, resp.StatusCode, data)
		}
	}
	// Over the input limit.
	many := make([]string, config.Default().Server.MaxEmbeddingInputs+1)
	for i := range many {
		many[i] = "x"
	}
	if resp, data := ts.post("/v1/embeddings", map[string]any{"input": many}); resp.StatusCode != 422 || !strings.Contains(string(data), "at most 2048") {
		t.Errorf("too many inputs: %d %s", resp.StatusCode, data)
	}
	// The server still serves.
	ts.embed(map[string]any{"input": "still here"})
}

// An embedding-only model (kind embedding, from a TOML file here) answers
// embeddings and refuses chat and completions with a 400 naming it and its
// kind; the text model next to it does both.
func TestEmbeddingOnlyModel(t *testing.T) {
	dir := t.TempDir()
	text := writeTiny(t, dir, "text.gguf", tinyConfig)
	emb := writeTiny(t, dir, "emb.gguf", tinyConfig)
	cfg := loadTOML(t, fmt.Sprintf("command = \"serve\"\n[[models]]\nmodel_id = %q\n[[models]]\nmodel_id = %q\nkind = \"embedding\"\n", text, emb))
	opts, _, err := OptionsFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Models[0].Kind != KindText || opts.Models[1].Kind != KindEmbedding {
		t.Fatalf("kinds %q %q", opts.Models[0].Kind, opts.Models[1].Kind)
	}
	ts := startServer(t, func(o *Options) { o.Models, o.DefaultModel = opts.Models, opts.DefaultModel })
	if l := ts.log.lines("Model " + emb + " is served for embeddings only"); len(l) != 1 {
		t.Errorf("no startup line for the embedding model:\n%s", ts.log.String())
	}

	want := fmt.Sprintf("Model '%s' is served for embeddings only (kind embedding): it answers POST /v1/embeddings, not text generation.", emb)
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, emb)},
		{"/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":true}`, emb)},
		{"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"hi"}`, emb)},
	} {
		resp, data := ts.post(c.path, c.body)
		var e apiError
		if resp.StatusCode != 400 || json.Unmarshal(data, &e) != nil || e.Error.Message != want ||
			e.Error.Param == nil || *e.Error.Param != "model" {
			t.Errorf("%s: %d %s", c.path, resp.StatusCode, data)
		}
	}
	// The other generation routes refuse it too, each in its own envelope.
	for _, c := range []struct{ path, body string }{
		{"/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, emb)},
		{"/v1/responses", fmt.Sprintf(`{"model":%q,"input":"hi"}`, emb)},
	} {
		resp, data := ts.post(c.path, c.body)
		if resp.StatusCode != 400 || !strings.Contains(string(data), want) {
			t.Errorf("%s: %d %s", c.path, resp.StatusCode, data)
		}
	}
	// The client sees it too.
	_, err = ts.client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model: emb, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var ae *openai.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.Message, "embeddings only") {
		t.Errorf("client chat: %v", err)
	}

	// Embeddings from both; the same weights give the same vectors.
	e1 := ts.embed(map[string]any{"model": emb, "input": "hello"})
	e2 := ts.embed(map[string]any{"model": text, "input": "hello"})
	if e1.Model != emb || e2.Model != text {
		t.Errorf("models %q %q", e1.Model, e2.Model)
	}
	sameVec(t, "kinds", e1.Data[0].Embedding, e2.Data[0].Embedding, 0)
	// The text model still generates.
	if resp, data := ts.post("/v1/completions", map[string]any{"model": text, "prompt": "hi", "max_tokens": 2}); resp.StatusCode != 200 {
		t.Errorf("text model: %d %s", resp.StatusCode, data)
	}
}

// The route's access-log lines and HTTP metrics carry path
// /v1/embeddings and the model label of §4.3 (unknown models: "unknown").
func TestEmbeddingsObservability(t *testing.T) {
	ts := startServer(t)
	if resp, data := ts.post("/v1/embeddings", map[string]any{"model": "tiny", "input": []string{"a", "b"}}, "X-Request-Id", "emb-1"); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	ts.post("/v1/embeddings", map[string]any{"input": "a"}, "X-Request-Id", "emb-2")
	ts.post("/v1/embeddings", map[string]any{"model": "secret-name", "input": "a"}, "X-Request-Id", "emb-3")
	ts.post("/v1/embeddings", `not json`, "X-Request-Id", "emb-4")

	fams := ts.metrics()
	for _, c := range []struct {
		model, status string
		n             float64
	}{{"tiny", "200", 2}, {"unknown", "422", 1}, {"unknown", "400", 1}} {
		l := map[string]string{"method": "POST", "path": "/v1/embeddings", "model": c.model, "status": c.status}
		if v := value(fams, "http_requests_total", l); v != c.n {
			t.Errorf("http_requests_total%v = %v, want %v", l, v, c.n)
		}
	}
	for _, ls := range labelSets(fams, "http_requests_total") {
		if ls["model"] == "secret-name" {
			t.Errorf("client string as a label: %v", ls)
		}
	}
	if v := value(fams, "mistralrs_time_to_first_token_seconds", map[string]string{"path": "/v1/embeddings"}); v > 0 {
		t.Errorf("TTFT samples for embeddings: %v", v)
	}
	line := ts.log.waitLines(t, 1, "request completed: request_id=emb-1 ")[0]
	if !strings.Contains(line, "route=/v1/embeddings model=tiny status=200 duration_ms=") {
		t.Errorf("access line %q", line)
	}
	line = ts.log.waitLines(t, 1, "request completed: request_id=emb-3 ")[0]
	if !strings.Contains(line, "route=/v1/embeddings model=unknown status=422") || !strings.Contains(line, "Requested model 'secret-name' is not available") {
		t.Errorf("access line %q", line)
	}
}

// server.max_embedding_inputs (--max-embedding-inputs) caps the inputs of
// one request: a TOML file lowers it, and a request over it is a 422
// naming the cap and the setting; one at it is served.
func TestEmbeddingsInputCap(t *testing.T) {
	model := writeTiny(t, t.TempDir(), "tiny.gguf", tinyConfig)
	cfg := loadTOML(t, fmt.Sprintf("command = \"serve\"\n[server]\nmax_embedding_inputs = 3\n[[models]]\nmodel_id = %q\n", model))
	opts, _, err := OptionsFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if opts.MaxEmbeddingInputs != 3 {
		t.Fatalf("options carry %d inputs, want 3", opts.MaxEmbeddingInputs)
	}
	ts := startServer(t, func(o *Options) {
		o.Models, o.DefaultModel, o.MaxEmbeddingInputs = opts.Models, opts.DefaultModel, opts.MaxEmbeddingInputs
	})
	if got := ts.embed(map[string]any{"input": []string{"a", "b", "c"}}); len(got.Data) != 3 {
		t.Fatalf("3 inputs: %d embeddings", len(got.Data))
	}
	resp, data := ts.post("/v1/embeddings", map[string]any{"input": [][]int{{1}, {2}, {3}, {4}}})
	var e apiError
	if err := json.Unmarshal(data, &e); err != nil || resp.StatusCode != 422 || e.Error.Param == nil || *e.Error.Param != "input" ||
		e.Error.Message != "input has 4 entries; at most 3 are allowed per request (the server's max_embedding_inputs)." {
		t.Errorf("4 inputs: %d %s", resp.StatusCode, data)
	}
}
