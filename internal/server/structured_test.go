package server

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"mistralrs/internal/loader"
)

// Structured output over HTTP on every route that takes it: the random
// model's answers follow the schema, the regex, the Lark grammar, and a
// required tool call is one call of the offered function.
func TestStructuredOutputRoutes(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"city": map[string]any{"type": "string", "maxLength": 10},
		"temp": map[string]any{"type": "integer", "minimum": -40, "maximum": 50},
	}, "required": []string{"city", "temp"}, "additionalProperties": false}
	checked := 0
	checkJSON := func(where, text string) {
		t.Helper()
		checked++
		var v struct {
			City *string `json:"city"`
			Temp *int    `json:"temp"`
		}
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil || v.City == nil || v.Temp == nil || *v.Temp < -40 || *v.Temp > 50 || len([]rune(*v.City)) > 10 {
			t.Errorf("%s: %q does not follow the schema (%v)", where, text, err)
		}
	}
	for seed := range int64(4) {
		p := chatParams(200)
		p.Temperature = openai.Float(1)
		p.Seed = openai.Int(seed)
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "weather", Schema: schema, Strict: openai.Bool(true)}}}
		resp, err := ts.client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if c := resp.Choices[0]; c.FinishReason == "stop" {
			checkJSON("chat json_schema", c.Message.Content)
		}
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &shared.ResponseFormatJSONObjectParam{}}
		resp, err = ts.client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if c := resp.Choices[0]; c.FinishReason == "stop" && json.Unmarshal([]byte(c.Message.Content), &obj) != nil {
			t.Errorf("json_object: %q is not a JSON object", c.Message.Content)
		}
	}
	// mistral.rs's grammar field on completions: a regex and a Lark grammar.
	re := regexp.MustCompile(`^[0-9]{3}-[a-z]{2,4}$`)
	for _, g := range []map[string]any{
		{"type": "regex", "value": `[0-9]{3}-[a-z]{2,4}`},
		{"type": "lark", "value": "start: DIGIT DIGIT DIGIT \"-\" LETTER LETTER LETTER?\nDIGIT: /[0-9]/\nLETTER: /[a-z]/"},
	} {
		resp, body := ts.post("/v1/completions", map[string]any{"model": "tiny", "prompt": "x", "max_tokens": 20, "temperature": 1, "grammar": g})
		var out struct {
			Choices []struct {
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil {
			t.Fatalf("%v: %d %s", g["type"], resp.StatusCode, body)
		}
		if c := out.Choices[0]; c.FinishReason != "stop" || !re.MatchString(c.Text) {
			t.Errorf("grammar %v: %q (%s)", g["type"], c.Text, c.FinishReason)
		}
	}
	// Anthropic and Responses.
	resp, body := ts.post("/v1/messages", map[string]any{"model": "tiny", "max_tokens": 200, "temperature": 1,
		"messages":        []map[string]any{{"role": "user", "content": "weather?"}},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "w", "schema": schema}}})
	var msg struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &msg) != nil {
		t.Fatalf("messages: %d %s", resp.StatusCode, body)
	}
	if msg.StopReason == "end_turn" {
		checkJSON("messages", msg.Content[0].Text)
	}
	resp, body = ts.post("/v1/responses", map[string]any{"model": "tiny", "input": "weather?", "max_output_tokens": 200,
		"text": map[string]any{"format": map[string]any{"type": "json_schema", "name": "w", "schema": schema}}})
	var rr struct {
		Output []struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		IncompleteDetails any `json:"incomplete_details"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &rr) != nil {
		t.Fatalf("responses: %d %s", resp.StatusCode, body)
	}
	if rr.IncompleteDetails == nil {
		checkJSON("responses", rr.Output[0].Content[0].Text)
	}
	if checked < 4 {
		t.Errorf("only %d schema answers finished within max_tokens: the test checks too little", checked)
	}
}

// tool_choice "required" makes the answer one call of an offered function
// whose arguments follow its parameters.
func TestRequiredToolCall(t *testing.T) {
	tmpl := writeTemplate(t, `{%- for m in messages %}{{ '<|im_start|>' + m.role + '\n' + (m.content or '') + '<|im_end|>\n' }}{% endfor -%}`+
		`{%- if tools %}{{ '<tool_call>' }}{% endif -%}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`)
	ts := startServer(t, func(o *Options) {
		o.Models = []ModelSpec{tinySpec(t, "tiny", tinyConfig, loader.Options{ChatTemplatePath: tmpl})}
	})
	params := map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer", "minimum": 1, "maximum": 9}},
		"required": []string{"n"}, "additionalProperties": false}
	calls := 0
	for seed := range 4 {
		resp, body := ts.post("/v1/chat/completions", map[string]any{"model": "tiny", "max_tokens": 200, "temperature": 1, "seed": seed,
			"messages":    []map[string]any{{"role": "user", "content": "call it"}},
			"tools":       []any{map[string]any{"type": "function", "function": map[string]any{"name": "pick", "parameters": params}}},
			"tool_choice": "required"})
		var out struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
				Message      struct {
					ToolCalls []struct {
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &out) != nil {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		c := out.Choices[0]
		if c.FinishReason == "length" {
			continue
		}
		calls++
		var args struct {
			N *int `json:"n"`
		}
		if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != "pick" ||
			json.Unmarshal([]byte(c.Message.ToolCalls[0].Function.Arguments), &args) != nil || args.N == nil || *args.N < 1 || *args.N > 9 {
			t.Errorf("seed %d: %s", seed, body)
		}
	}
	if calls == 0 {
		t.Error("no call finished within max_tokens")
	}
	_ = option.WithJSONSet
}
