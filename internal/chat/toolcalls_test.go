package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func call(name, args string) ToolCall {
	return ToolCall{Type: "function", Function: FunctionCall{Name: name, Arguments: args}}
}

func TestToolParserParse(t *testing.T) {
	p := NewToolParser([]string{"get_weather", "get_time"})
	tests := []struct {
		name    string
		text    string
		content string
		calls   []ToolCall
	}{
		{"hermes", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
			[]ToolCall{call("get_weather", `{"city":"Paris"}`)}},
		{"hermes after text", "Let me check.\n\n<tool_call>{\"name\":\"get_time\",\"arguments\":{}}</tool_call>\n", "Let me check.",
			[]ToolCall{call("get_time", `{}`)}},
		{"hermes two calls", "<tool_call>{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Oslo\"}}</tool_call>\n<tool_call>{\"name\":\"get_time\",\"arguments\":{\"tz\":\"CET\"}}</tool_call>", "",
			[]ToolCall{call("get_weather", `{"city":"Oslo"}`), call("get_time", `{"tz":"CET"}`)}},
		{"hermes unclosed last", "<tool_call>{\"name\":\"get_time\",\"arguments\":{}}", "", []ToolCall{call("get_time", `{}`)}},
		{"hermes any name", "<tool_call>{\"name\":\"search\",\"arguments\":{\"q\":\"x\"}}</tool_call>", "", []ToolCall{call("search", `{"q":"x"}`)}},
		{"hermes quoted arguments", `<tool_call>{"name":"get_time","arguments":"{\"tz\": \"UTC\"}"}</tool_call>`, "", []ToolCall{call("get_time", `{"tz":"UTC"}`)}},
		{"mistral array", `[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Rome"}}]`, "",
			[]ToolCall{call("get_weather", `{"city":"Rome"}`)}},
		{"mistral args format", `[TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}[TOOL_CALLS]get_time[ARGS]{}`, "",
			[]ToolCall{call("get_weather", `{"city":"Rome"}`), call("get_time", `{}`)}},
		{"mistral tag stripped", ` [{"name": "get_weather", "arguments": {"city": "Rome"}}]`, "",
			[]ToolCall{call("get_weather", `{"city":"Rome"}`)}},
		{"llama json", `{"name": "get_weather", "parameters": {"city": "Lima"}}`, "", []ToolCall{call("get_weather", `{"city":"Lima"}`)}},
		{"llama python tag", `<|python_tag|>{"name": "lookup", "parameters": {}}`, "", []ToolCall{call("lookup", `{}`)}},
		{"no arguments", `{"name": "get_time"}`, "", []ToolCall{call("get_time", `{}`)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, calls, ok := p.Parse(tt.text)
			if !ok {
				t.Fatalf("Parse(%q): not tool calls", tt.text)
			}
			if content != tt.content || !reflect.DeepEqual(calls, tt.calls) {
				t.Errorf("Parse(%q) = %q, %+v; want %q, %+v", tt.text, content, calls, tt.content, tt.calls)
			}
		})
	}
}

func TestToolParserPlainText(t *testing.T) {
	p := NewToolParser([]string{"get_weather"})
	for _, text := range []string{
		"",
		"The weather in Paris is sunny.",
		`{"name": "not_offered", "parameters": {}}`, // bare JSON must name an offered function
		`{"answer": 42}`,                  // JSON, but not a call
		`[1, 2, 3]`,                       // JSON array of non-calls
		"<tool_call>not json</tool_call>", // broken call
		"<tool_call>{\"name\":\"get_weather\"}</tool_call> and then text", // text after the calls
		"<tool_call>{\"arguments\":{}}</tool_call>",                       // no name
		`<tool_call>{"name":"get_weather","arguments":[1]}</tool_call>`,   // arguments not an object
		`[TOOL_CALLS]get_weather{"city":"x"}`,                             // no [ARGS]
		`{"name": "get_weather", "parameters": {}} trailing`,
	} {
		content, calls, ok := p.Parse(text)
		if ok || calls != nil || content != text {
			t.Errorf("Parse(%q) = %q, %+v, %v; want the text back as content", text, content, calls, ok)
		}
	}
}

// TestToolParserSafePrefix streams answers a byte at a time: text released early is never
// retracted, and a tool call is never released as text.
func TestToolParserSafePrefix(t *testing.T) {
	p := NewToolParser([]string{"get_weather"})
	tests := []struct {
		text string
		want int // bytes released once the whole text is in
	}{
		{"Hello there", 11},
		{"Hello <tool_call>{\"name\":\"get_weather\"}</tool_call>", 6},
		{"Hello <tool", 6},
		{"Hello <tools are>", 17},
		{`{"name":"get_weather","arguments":{}}`, 0},
		{"  [TOOL_CALLS]", 0},
		{"[TOOL", 0},
		{"<|python", 0},
		{"<b>bold</b>", 11},
		{"   ", 0},
	}
	for _, tt := range tests {
		prev := 0
		for i := 1; i <= len(tt.text); i++ {
			n := p.SafePrefix(tt.text[:i])
			if n < 0 || n > i {
				t.Fatalf("SafePrefix(%q) = %d, out of range", tt.text[:i], n)
			}
			if n < prev {
				t.Errorf("SafePrefix(%q) = %d, less than the %d released before", tt.text[:i], n, prev)
			}
			prev = n
		}
		if prev != tt.want {
			t.Errorf("SafePrefix(%q) = %d, want %d", tt.text, prev, tt.want)
		}
	}
}

func FuzzToolParser(f *testing.F) {
	for _, s := range []string{
		"<tool_call>{\"name\":\"f\",\"arguments\":{\"a\":1}}</tool_call>",
		`[TOOL_CALLS]f[ARGS]{"a":1}`,
		`[TOOL_CALLS][{"name":"f","arguments":{}}]`,
		`{"name":"f","parameters":{"x":[1,2]}}`,
		`<|python_tag|>{"name":"g"}`,
		"text <tool_call>{",
		"plain text",
	} {
		f.Add(s)
	}
	p := NewToolParser([]string{"f"})
	f.Fuzz(func(t *testing.T, text string) {
		content, calls, ok := p.Parse(text)
		if !ok {
			if content != text || calls != nil {
				t.Fatalf("Parse(%q): not calls, but content %q and calls %+v", text, content, calls)
			}
		} else {
			if len(calls) == 0 || !strings.HasPrefix(text, content) {
				t.Fatalf("Parse(%q) = %q, %+v", text, content, calls)
			}
			for _, c := range calls {
				var obj map[string]any
				if c.Function.Name == "" || json.Unmarshal([]byte(c.Function.Arguments), &obj) != nil {
					t.Fatalf("Parse(%q): bad call %+v", text, c)
				}
			}
		}
		if n := p.SafePrefix(text); n < 0 || n > len(text) {
			t.Fatalf("SafePrefix(%q) = %d", text, n)
		}
	})
}

// TestToolParserReadsTemplates: the way each real chat template writes an
// assistant's tool call in the conversation (which is what the model learnt
// to produce) is read back as that call.
func TestToolParserReadsTemplates(t *testing.T) {
	msgs := []Message{
		{Role: "user", Content: "Weather in Paris?"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "abc123def", Type: "function",
			Function: FunctionCall{Name: "get_weather", Arguments: `{"city": "Paris", "days": 2}`}}}},
	}
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}}}
	p := NewToolParser([]string{"get_weather"})
	for _, tt := range []struct {
		file, bos, eos string
		start, end     string // the assistant turn: after the last start, up to end
	}{
		{"qwen2.5-instruct.jinja", "", "<|im_end|>", "<|im_start|>assistant\n", "<|im_end|>"},
		{"qwen3.jinja", "", "<|im_end|>", "<|im_start|>assistant\n", "<|im_end|>"},
		{"llama-3.2-instruct.jinja", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|>"},
		{"mistral-7b-instruct-v0.3.jinja", "<s>", "</s>", "[/INST]", "</s>"},
	} {
		src, err := os.ReadFile(filepath.Join("testdata", "templates", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := NewTemplate(string(src), tt.bos, tt.eos)
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		out, err := tmpl.Render(msgs, false, tools)
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		i := strings.LastIndex(out, tt.start)
		if i < 0 {
			t.Fatalf("%s: no assistant turn in %q", tt.file, out)
		}
		turn := out[i+len(tt.start):]
		if j := strings.Index(turn, tt.end); j >= 0 {
			turn = turn[:j]
		}
		content, calls, ok := p.Parse(turn)
		t.Logf("%s: %q", tt.file, turn)
		if !ok || len(calls) != 1 || calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city":"Paris","days":2}` {
			t.Errorf("%s: the assistant turn %q parses as %q, %+v, %v", tt.file, turn, content, calls, ok)
		}
	}
}
