package server

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func completionParams(prompt string, maxTokens int64) openai.CompletionNewParams {
	return openai.CompletionNewParams{
		Model:       "tiny",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens:   openai.Int(maxTokens),
		Temperature: openai.Float(0),
	}
}

func TestCompletions(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	resp, err := ts.client.Completions.New(ctx, completionParams("Once upon", 7), option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Object != "text_completion" || resp.Model != "tiny" || len(resp.Choices) != 1 {
		t.Fatalf("response %s", resp.RawJSON())
	}
	c := resp.Choices[0]
	if c.FinishReason != "length" || resp.Usage.CompletionTokens != 7 || resp.Usage.PromptTokens != int64(len("Once upon")) {
		t.Errorf("choice %+v usage %+v", c, resp.Usage)
	}

	// Streaming gives the same text; completions chunks carry no usage.
	stream := ts.client.Completions.NewStreaming(ctx, completionParams("Once upon", 7), option.WithJSONSet("ignore_eos", true))
	var text strings.Builder
	var finish string
	for stream.Next() {
		ch := stream.Current()
		if ch.Object != "text_completion" || len(ch.Choices) != 1 {
			t.Errorf("chunk %s", ch.RawJSON())
			continue
		}
		if strings.Contains(ch.RawJSON(), `"usage"`) {
			t.Errorf("usage on a completions chunk: %s", ch.RawJSON())
		}
		text.WriteString(ch.Choices[0].Text)
		if ch.Choices[0].FinishReason != "" {
			finish = string(ch.Choices[0].FinishReason)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != c.Text || finish != "length" {
		t.Errorf("streamed %q (%s), non-streamed %q", text.String(), finish, c.Text)
	}

	// Echo, token prompts and legacy logprobs.
	var out struct {
		Choices []struct {
			Text     string `json:"text"`
			Logprobs struct {
				Tokens        []string             `json:"tokens"`
				TokenLogprobs []float64            `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
				TextOffset    []int                `json:"text_offset"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	prompt := []int{'a', 'b', 'c'}
	r, body := ts.post("/v1/completions", map[string]any{"model": "tiny", "prompt": prompt, "max_tokens": 4, "temperature": 0,
		"ignore_eos": true, "echo": true, "logprobs": 2, "logit_bias": map[string]int{"120": 100, "121": 100}})
	if r.StatusCode != 200 || json.Unmarshal(body, &out) != nil {
		t.Fatalf("%d %s", r.StatusCode, body)
	}
	ch := out.Choices[0]
	if !strings.HasPrefix(ch.Text, "abc") || len(ch.Text) != 7 || out.Usage.PromptTokens != 3 {
		t.Errorf("echoed text %q, prompt tokens %d", ch.Text, out.Usage.PromptTokens)
	}
	lp := ch.Logprobs
	if len(lp.Tokens) != 4 || len(lp.TokenLogprobs) != 4 || len(lp.TopLogprobs) != 4 || len(lp.TextOffset) != 4 {
		t.Fatalf("logprobs %+v", lp)
	}
	for i, tok := range lp.Tokens {
		if lp.TextOffset[i] != 3+i || ch.Text[3+i:4+i] != tok || len(lp.TopLogprobs[i]) != 2 {
			t.Errorf("token %d: %q offset %d top %v", i, tok, lp.TextOffset[i], lp.TopLogprobs[i])
		}
	}
}
