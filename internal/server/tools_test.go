package server

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"mistralrs/internal/demo"
	"mistralrs/internal/gguf"
	"mistralrs/internal/loader"
	"mistralrs/internal/tokenizer"
)

// The tool model is the tiny model with two user-defined tokens: a whole
// Hermes-style tool call, and a JSON answer that is not one. A logit bias
// makes the model say one of them first and then its end-of-text token (a
// repetition penalty keeps it from repeating itself), so tool calling is
// exercised end to end, from the sampled tokens to the client.
const (
	toolCallToken = 259
	jsonToken     = 260
	eosToken      = 256
	toolCallText  = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>"
	jsonText      = `{"answer": 42}`
)

var (
	toolModelOnce sync.Once
	toolModelData []byte
	toolModelErr  error
)

func toolModelSpec(t *testing.T) ModelSpec {
	toolModelOnce.Do(func() {
		f, err := gguf.Parse("tiny", modelBytes(t, tinyConfig))
		if err != nil {
			toolModelErr = err
			return
		}
		tokens, _ := f.Strings("tokenizer.ggml.tokens")
		types, _ := f.Int32s("tokenizer.ggml.token_type")
		tokens, types = append([]string(nil), tokens...), append([]int32(nil), types...)
		tokens[toolCallToken], types[toolCallToken] = toolCallText, tokenizer.TypeUserDefined
		tokens[jsonToken], types[jsonToken] = jsonText, tokenizer.TypeUserDefined
		w, err := demo.RandomModel(tinyConfig)
		if err != nil {
			toolModelErr = err
			return
		}
		w.AddKV("tokenizer.ggml.tokens", tokens)
		w.AddKV("tokenizer.ggml.token_type", types)
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			toolModelErr = err
			return
		}
		toolModelData = buf.Bytes()
	})
	if toolModelErr != nil {
		t.Fatal(toolModelErr)
	}
	return ModelSpec{ID: "tiny", Load: func() (*loader.Model, error) {
		f, err := gguf.Parse("tiny", toolModelData)
		if err != nil {
			return nil, err
		}
		return loader.FromFile(f, loader.Options{ID: "tiny"})
	}}
}

// toolParams asks for the weather with the get_weather tool; the model
// answers with token first, then end of text.
func toolParams(token int, tools bool) openai.ChatCompletionNewParams {
	p := chatParams(8)
	p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")}
	p.LogitBias = map[string]int64{strconv.Itoa(token): 60, strconv.Itoa(eosToken): 40}
	if tools {
		p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name:       "get_weather",
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}},
		})}
	}
	return p
}

var repeatOnce = option.WithJSONSet("repetition_penalty", 4)

func TestToolCalls(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.Models = []ModelSpec{toolModelSpec(t)} })
	ctx := context.Background()

	// Not streamed: the answer comes back as a tool call, content null.
	resp, err := ts.client.Chat.Completions.New(ctx, toolParams(toolCallToken, true), repeatOnce)
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Choices[0]
	if c.FinishReason != "tool_calls" || c.Message.Content != "" || len(c.Message.ToolCalls) != 1 {
		t.Fatalf("finish %q, content %q, tool calls %+v", c.FinishReason, c.Message.Content, c.Message.ToolCalls)
	}
	tc := c.Message.ToolCalls[0]
	if tc.Type != "function" || !strings.HasPrefix(tc.ID, "call_") || len(tc.ID) != len("call_")+32 ||
		tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"city":"Paris","days":2}` {
		t.Errorf("tool call %+v", tc)
	}
	if !strings.Contains(c.Message.RawJSON(), `"content":null`) {
		t.Errorf("message %s: content should be null", c.Message.RawJSON())
	}

	// Streamed: nothing of the call leaks out as text; the client's
	// accumulator rebuilds the same call.
	stream := ts.client.Chat.Completions.NewStreaming(ctx, toolParams(toolCallToken, true), repeatOnce)
	var acc openai.ChatCompletionAccumulator
	var content strings.Builder
	for stream.Next() {
		ch := stream.Current()
		acc.AddChunk(ch)
		for _, ci := range ch.Choices {
			content.WriteString(ci.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if content.Len() != 0 {
		t.Errorf("streamed content %q, want none", content.String())
	}
	sc := acc.Choices[0]
	if sc.FinishReason != "tool_calls" || len(sc.Message.ToolCalls) != 1 ||
		sc.Message.ToolCalls[0].Function.Name != "get_weather" || sc.Message.ToolCalls[0].Function.Arguments != `{"city":"Paris","days":2}` {
		t.Errorf("streamed: finish %q, calls %+v", sc.FinishReason, sc.Message.ToolCalls)
	}

	// Without tools, or with tool_choice "none", the same answer is text.
	for _, tools := range []bool{false, true} {
		p := toolParams(toolCallToken, tools)
		if tools {
			p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("none")}
		}
		r, err := ts.client.Chat.Completions.New(ctx, p, repeatOnce)
		if err != nil {
			t.Fatal(err)
		}
		if r.Choices[0].FinishReason != "stop" || r.Choices[0].Message.Content != toolCallText || len(r.Choices[0].Message.ToolCalls) != 0 {
			t.Errorf("tools %v (choice none): finish %q, content %q", tools, r.Choices[0].FinishReason, r.Choices[0].Message.Content)
		}
	}

	// JSON that is not a call is held back while streaming, then sent as text.
	stream = ts.client.Chat.Completions.NewStreaming(ctx, toolParams(jsonToken, true), repeatOnce)
	content.Reset()
	var finish string
	for stream.Next() {
		for _, ci := range stream.Current().Choices {
			content.WriteString(ci.Delta.Content)
			if ci.FinishReason != "" {
				finish = ci.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if content.String() != jsonText || finish != "stop" {
		t.Errorf("JSON answer streamed as %q (%s), want %q (stop)", content.String(), finish, jsonText)
	}

	// Both tool-call answers count as tool_calls, streamed or not
	// (mistral.rs counts the non-streamed one as stop).
	fams := ts.metrics()
	if v := value(fams, "mistralrs_sequences_completed_total", map[string]string{"reason": "tool_calls"}); v != 2 {
		t.Errorf("completed{reason=tool_calls} = %v, want 2", v)
	}
	if v := value(fams, "mistralrs_sequences_completed_total", map[string]string{"reason": "stop"}); v != 3 {
		t.Errorf("completed{reason=stop} = %v, want 3", v)
	}
}

func TestToolRequestErrors(t *testing.T) {
	ts := startServer(t)
	weather := map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}
	for _, tt := range []struct {
		name  string
		set   map[string]any
		param string
	}{
		{"tool not an object", map[string]any{"tools": []any{"get_weather"}}, "tools[0]"},
		{"tool type", map[string]any{"tools": []any{map[string]any{"type": "code", "function": map[string]any{"name": "x"}}}}, "tools[0].type"},
		{"tool without name", map[string]any{"tools": []any{map[string]any{"type": "function", "function": map[string]any{}}}}, "tools[0].function.name"},
		{"unknown choice", map[string]any{"tools": []any{weather}, "tool_choice": "sometimes"}, "tool_choice"},
		{"required without tools", map[string]any{"tool_choice": "required"}, "tool_choice"},
		{"choice of a missing function", map[string]any{"tools": []any{weather}, "tool_choice": map[string]any{"type": "function", "function": map[string]any{"name": "get_time"}}}, "tool_choice"},
	} {
		body := map[string]any{"model": "tiny", "max_tokens": 1, "messages": []map[string]string{{"role": "user", "content": "x"}}}
		for k, v := range tt.set {
			body[k] = v
		}
		resp, data := ts.post("/v1/chat/completions", body)
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		if resp.StatusCode != 400 || json.Unmarshal(data, &e) != nil || e.Error.Param == nil || *e.Error.Param != tt.param {
			t.Errorf("%s: %d %s, want 400 with param %s", tt.name, resp.StatusCode, data, tt.param)
		}
	}
	// Accepted choices.
	for _, choice := range []any{"auto", "none", "required", map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}} {
		body := map[string]any{"model": "tiny", "max_tokens": 1, "messages": []map[string]string{{"role": "user", "content": "x"}},
			"tools": []any{weather}, "tool_choice": choice}
		if resp, data := ts.post("/v1/chat/completions", body); resp.StatusCode != 200 {
			t.Errorf("tool_choice %v: %d %s", choice, resp.StatusCode, data)
		}
	}
}
