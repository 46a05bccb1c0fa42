package server

import (
	"context"
	"io"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// n choices through the OpenAI client: greedy choices are the single
// answer n times, the usage counts the prompt once, the streamed choices
// interleave by index and add up to the same texts.
func TestChoicesOpenAI(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	single, err := ts.client.Chat.Completions.New(ctx, chatParams(10), option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	p := chatParams(10)
	p.N = openai.Int(3)
	resp, err := ts.client.Chat.Completions.New(ctx, p, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 3 {
		t.Fatalf("%d choices", len(resp.Choices))
	}
	for i, c := range resp.Choices {
		if c.Index != int64(i) || c.Message.Content != single.Choices[0].Message.Content || c.FinishReason != "length" {
			t.Errorf("choice %d: %+v, want the single answer %q", i, c, single.Choices[0].Message.Content)
		}
	}
	if u := resp.Usage; u.PromptTokens != single.Usage.PromptTokens || u.CompletionTokens != 30 || u.TotalTokens != u.PromptTokens+30 {
		t.Errorf("usage %+v: want the prompt once and 3 × 10 completion tokens", u)
	}

	// Streamed completions with sampling: two choices, chunks by index.
	seed := int64(4)
	cp := openai.CompletionNewParams{Model: openai.CompletionNewParamsModel("tiny"), Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("abc")},
		MaxTokens: openai.Int(12), N: openai.Int(2), Temperature: openai.Float(1), Seed: openai.Int(seed)}
	full, err := ts.client.Completions.New(ctx, cp, option.WithJSONSet("ignore_eos", true))
	if err != nil {
		t.Fatal(err)
	}
	stream := ts.client.Completions.NewStreaming(ctx, cp, option.WithJSONSet("ignore_eos", true))
	texts := make([]string, 2)
	finished := 0
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			texts[c.Index] += c.Text
			if c.FinishReason != "" {
				finished++
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(full.Choices) != 2 || finished != 2 {
		t.Fatalf("%d choices, %d finish reasons streamed", len(full.Choices), finished)
	}
	for i := range texts {
		if texts[i] != full.Choices[i].Text {
			t.Errorf("choice %d streamed %q, non-streamed %q (same seed)", i, texts[i], full.Choices[i].Text)
		}
	}
	if full.Choices[0].Text == full.Choices[1].Text {
		t.Errorf("two sampled choices are equal: %q", full.Choices[0].Text)
	}
}

// Streamed choices advance together: one TTFT sample, and one ITL sample
// per engine step after the first (not per choice's chunk).
func TestChoicesTokenSteps(t *testing.T) {
	ts := startServer(t)
	resp := ts.openStream(t, "n2", map[string]any{"model": "tiny", "prompt": "abc", "max_tokens": 9, "ignore_eos": true, "n": 2})
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"path": "/v1/completions", "model": "tiny", "status": "200"}
	fams := ts.metrics()
	if ttft, itl := value(fams, "mistralrs_time_to_first_token_seconds", labels), value(fams, "mistralrs_inter_token_latency_seconds", labels); ttft != 1 || itl != 8 {
		t.Errorf("TTFT samples %v, ITL samples %v; want 1 and 8 (9 steps of two choices)", ttft, itl)
	}
}
