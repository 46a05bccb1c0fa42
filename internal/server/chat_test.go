package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"mistralrs/internal/loader"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func chatParams(maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:       "tiny",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hello")},
		MaxTokens:   openai.Int(maxTokens),
		Temperature: openai.Float(0),
	}
}

func TestChatCompletionNonStreaming(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	resp, err := ts.client.Chat.Completions.New(ctx, chatParams(12), option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1019 the SDK deprecates system_fingerprint; mistral.rs (and this server) still send it
	if resp.Object != "chat.completion" || resp.Model != "tiny" || resp.SystemFingerprint != "local" || resp.ID == "" {
		t.Errorf("envelope: %+v", resp)
	}
	if len(resp.Choices) != 1 {
		t.Fatalf("choices: %d", len(resp.Choices))
	}
	c := resp.Choices[0]
	if c.FinishReason != "length" || c.Message.Role != "assistant" || c.Index != 0 {
		t.Errorf("choice: %+v", c)
	}
	u := resp.Usage
	if u.CompletionTokens != 12 || u.PromptTokens == 0 || u.TotalTokens != u.PromptTokens+12 {
		t.Errorf("usage: %+v", u)
	}
	// mistral.rs's timing fields.
	var raw struct {
		Usage map[string]float64 `json:"usage"`
	}
	if err := json.Unmarshal([]byte(resp.RawJSON()), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"avg_tok_per_sec", "avg_prompt_tok_per_sec", "avg_compl_tok_per_sec", "total_time_sec", "total_prompt_time_sec", "total_completion_time_sec"} {
		if v, ok := raw.Usage[k]; !ok || v <= 0 {
			t.Errorf("usage.%s = %v (present %v)", k, v, ok)
		}
	}

	// Greedy is deterministic, and the content is what the engine generates
	// for the templated prompt.
	again, err := ts.client.Chat.Completions.New(ctx, chatParams(12), option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	if again.Choices[0].Message.Content != c.Message.Content {
		t.Errorf("greedy differs: %q vs %q", c.Message.Content, again.Choices[0].Message.Content)
	}
	if again.ID == resp.ID {
		t.Errorf("two responses share the id %q", resp.ID)
	}

	// The default model answers requests that name none or "default".
	for _, name := range []string{"", "default"} {
		var out map[string]any
		r, body := ts.post("/v1/chat/completions", map[string]any{"model": name, "messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 2})
		if r.StatusCode != 200 || json.Unmarshal(body, &out) != nil || out["model"] != "tiny" {
			t.Errorf("model %q: %d %s", name, r.StatusCode, body)
		}
	}
}

func TestChatCompletionStreaming(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	p := chatParams(10)
	p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := ts.client.Chat.Completions.NewStreaming(ctx, p, option.WithJSONSet("ignore_eos", true))
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		chunks++
		if ch.Object != "chat.completion.chunk" || ch.Model != "tiny" {
			t.Errorf("chunk envelope: %s", ch.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 3 {
		t.Errorf("only %d chunks", chunks)
	}
	if acc.Usage.CompletionTokens != 10 || acc.Usage.PromptTokens == 0 {
		t.Errorf("usage %+v", acc.Usage)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "length" {
		t.Fatalf("accumulated: %+v", acc.Choices)
	}
	// The stream carries the same text as the non-streaming answer.
	full, err := ts.client.Chat.Completions.New(ctx, chatParams(10), option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != full.Choices[0].Message.Content {
		t.Errorf("stream %q, non-stream %q", acc.Choices[0].Message.Content, full.Choices[0].Message.Content)
	}

	// Raw framing: data events, usage on the final chunk (mistral.rs) when
	// stream_options is absent, then data: [DONE].
	resp, body := ts.post("/v1/chat/completions", map[string]any{"model": "tiny", "stream": true, "max_tokens": 5, "ignore_eos": true,
		"messages": []map[string]string{{"role": "user", "content": "hi"}}})
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("headers: %v", resp.Header)
	}
	data, _ := sseEvents(t, body)
	if len(data) < 2 || data[len(data)-1] != "[DONE]" {
		t.Fatalf("events: %q", data)
	}
	var last struct {
		Choices []struct {
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(data[len(data)-2]), &last); err != nil {
		t.Fatal(err)
	}
	if last.Usage == nil || last.Usage.CompletionTokens != 5 || len(last.Choices) != 1 || last.Choices[0].FinishReason == nil || *last.Choices[0].FinishReason != "length" {
		t.Errorf("final chunk: %s", data[len(data)-2])
	}
	for _, d := range data[:len(data)-2] {
		if strings.Contains(d, `"usage"`) {
			t.Errorf("usage before the final chunk: %s", d)
		}
	}
}

func TestChatLogprobsStopAndSeed(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	p := chatParams(6)
	p.Logprobs = openai.Bool(true)
	p.TopLogprobs = openai.Int(3)
	resp, err := ts.client.Chat.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	lp := resp.Choices[0].Logprobs.Content
	if len(lp) != 6 {
		t.Fatalf("%d logprob entries, want 6", len(lp))
	}
	var joined []byte
	for _, e := range lp {
		if len(e.TopLogprobs) != 3 || e.Logprob > 0 || e.TopLogprobs[0].Logprob < e.TopLogprobs[2].Logprob {
			t.Errorf("entry %+v", e)
		}
		// Greedy: the chosen token is the most likely one.
		if e.Token != e.TopLogprobs[0].Token {
			t.Errorf("greedy token %q is not the top one %q", e.Token, e.TopLogprobs[0].Token)
		}
		for _, b := range e.Bytes {
			joined = append(joined, byte(b))
		}
	}
	// The token bytes make up the content (as JSON would carry them).
	var asJSON string
	enc, _ := json.Marshal(string(joined))
	if err := json.Unmarshal(enc, &asJSON); err != nil || asJSON != resp.Choices[0].Message.Content {
		t.Errorf("logprob bytes %q, content %q", joined, resp.Choices[0].Message.Content)
	}

	// A stop string taken from the greedy text ends it there, never emitted.
	// The logit bias keeps the text to the ASCII letters x, y and z (byte
	// tokens 120-122), so that any slice of it is a valid stop string.
	ascii := func(p openai.ChatCompletionNewParams) openai.ChatCompletionNewParams {
		p.LogitBias = map[string]int64{"120": 100, "121": 100, "122": 100}
		return p
	}
	r1, err := ts.client.Chat.Completions.New(ctx, ascii(chatParams(8)), option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	full := r1.Choices[0].Message.Content
	if len(full) != 8 || strings.Trim(full, "xyz") != "" {
		t.Fatalf("biased text %q", full)
	}
	stop := full[3:5]
	p2 := ascii(chatParams(8))
	p2.Stop = openai.ChatCompletionNewParamsStopUnion{OfString: openai.String(stop)}
	r2, err := ts.client.Chat.Completions.New(ctx, p2, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	if want := full[:strings.Index(full, stop)]; r2.Choices[0].Message.Content != want || r2.Choices[0].FinishReason != "stop" {
		t.Errorf("with stop %q: %q (%s), want %q", stop, r2.Choices[0].Message.Content, r2.Choices[0].FinishReason, want)
	}

	// The same seed gives the same sample at temperature 1.
	sampled := func(seed int64) string {
		p := chatParams(16)
		p.Temperature = openai.Float(1)
		p.Seed = openai.Int(seed)
		r, err := ts.client.Chat.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		return r.Choices[0].Message.Content
	}
	if a, b := sampled(42), sampled(42); a != b {
		t.Errorf("seed 42 twice: %q vs %q", a, b)
	}
}

func TestChatToolsReachTheTemplate(t *testing.T) {
	tmpl := writeTemplate(t, `{%- if tools %}{{ 'tools:' }}{% for t in tools %}{{ t.function.name }};{% endfor %}{% endif -%}`+
		`{%- for m in messages %}{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{% endfor -%}`+
		`{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`)
	ts := startServer(t, func(o *Options) {
		o.Models = []ModelSpec{tinySpec(t, "tiny", tinyConfig, loader.Options{ChatTemplatePath: tmpl})}
	})
	base := map[string]any{"model": "tiny", "max_tokens": 1, "messages": []map[string]string{{"role": "user", "content": "x"}}}
	promptTokens := func(body map[string]any) int {
		resp, data := ts.post("/v1/chat/completions", body)
		var out struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(data, &out) != nil {
			t.Fatalf("%d %s", resp.StatusCode, data)
		}
		return out.Usage.PromptTokens
	}
	without := promptTokens(base)
	withTools := map[string]any{}
	for k, v := range base {
		withTools[k] = v
	}
	withTools["tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{"type": "object"}}}}
	withTools["tool_choice"] = "auto"
	// Byte-level vocabulary: one token per byte of "tools:get_weather;".
	if got := promptTokens(withTools); got != without+len("tools:get_weather;") {
		t.Errorf("prompt tokens with tools %d, without %d", got, without)
	}
}

// The global --seed makes requests without a seed reproducible.
func TestGlobalSeed(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.Seed = ptr(uint64(5)) })
	sample := func() string {
		p := chatParams(16)
		p.Temperature = openai.Float(1)
		r, err := ts.client.Chat.Completions.New(context.Background(), p, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		return r.Choices[0].Message.Content
	}
	if a, b := sample(), sample(); a != b {
		t.Errorf("global seed: %q vs %q", a, b)
	}
}
