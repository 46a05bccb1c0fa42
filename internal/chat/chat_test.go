package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type goldenCase struct {
	name, template, source, bos, eos string
	messages, tools, vars            string // OpenAI-style JSON
	addGenerationPrompt              bool
	want, wantErr                    string
}

var testNow = time.Date(2024, 7, 26, 9, 5, 3, 0, time.Local)

// openAIMessages decodes an OpenAI chat request's messages array.
func openAIMessages(t *testing.T, data string) []Message {
	t.Helper()
	var raw []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Name      string          `json:"name"`
		ToolCalls []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		ToolCallID       string `json:"tool_call_id"`
		ReasoningContent string `json:"reasoning_content"`
	}
	if err := json.Unmarshal([]byte(data), &raw); err != nil {
		t.Fatalf("messages: %v", err)
	}
	msgs := make([]Message, len(raw))
	for i, r := range raw {
		m := Message{Role: r.Role, Name: r.Name, ToolCallID: r.ToolCallID, ReasoningContent: r.ReasoningContent}
		if len(r.Content) > 0 && r.Content[0] == '[' {
			if err := json.Unmarshal(r.Content, &m.Parts); err != nil {
				t.Fatalf("content parts: %v", err)
			}
		} else if len(r.Content) > 0 && string(r.Content) != "null" {
			if err := json.Unmarshal(r.Content, &m.Content); err != nil {
				t.Fatalf("content: %v", err)
			}
		}
		for _, tc := range r.ToolCalls {
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Type: tc.Type,
				Function: FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
		msgs[i] = m
	}
	return msgs
}

func loadTemplate(t testing.TB, name, bos, eos string) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", "templates", name))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := NewTemplate(string(src), bos, eos)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return tmpl
}

// TestGolden checks real model templates against the output of Python Jinja2 configured as
// transformers' apply_chat_template (testdata/gen_golden.py).
func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			var tmpl *Template
			if c.source != "" {
				var err error
				if tmpl, err = NewTemplate(c.source, c.bos, c.eos); err != nil {
					t.Fatal(err)
				}
			} else {
				tmpl = loadTemplate(t, c.template, c.bos, c.eos)
			}
			opts := Options{AddGenerationPrompt: c.addGenerationPrompt, Now: testNow}
			if c.tools != "" {
				var tools []json.RawMessage
				if err := json.Unmarshal([]byte(c.tools), &tools); err != nil {
					t.Fatal(err)
				}
				for _, tool := range tools {
					opts.Tools = append(opts.Tools, tool)
				}
			}
			if c.vars != "" {
				if err := json.Unmarshal([]byte(c.vars), &opts.Vars); err != nil {
					t.Fatal(err)
				}
			}
			got, err := tmpl.RenderOptions(openAIMessages(t, c.messages), opts)
			if c.wantErr != "" {
				var cerr *Error
				if err == nil || err.Error() != c.wantErr || !errors.As(err, &cerr) || !cerr.Raised {
					t.Fatalf("error = %v, want %q (raised)", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("rendered:\n%q\nwant:\n%q", got, c.want)
			}
		})
	}
}

func TestRenderSimpleAPI(t *testing.T) {
	tmpl := loadTemplate(t, "qwen2.5-instruct.jinja", "", "<|im_end|>")
	got, err := tmpl.Render([]Message{{Role: "user", Content: "Hi"}}, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" +
		"<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

func TestDefaultTemplate(t *testing.T) {
	msgs := []Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "Hello"},
	}
	got, err := Default().Render(msgs, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
	if got != want {
		t.Errorf("got %q want %q", got, want)
	}
	got, err = Default().Render(msgs[1:], false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nHello<|im_end|>\n"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	if Default().Family() != FamilyChatML {
		t.Error("default template is not detected as ChatML")
	}
}

func TestRaiseException(t *testing.T) {
	tmpl, err := NewTemplate(`{{ raise_exception("bad " + messages[0].role) }}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render([]Message{{Role: "robot"}}, false, nil)
	var cerr *Error
	if !errors.As(err, &cerr) || !cerr.Raised || err.Error() != "chat template error: bad robot" {
		t.Fatalf("err = %#v", err)
	}
}

func TestRenderErrorsAreErrors(t *testing.T) {
	// A compile error, a runtime type error and an unknown filter all come back as *Error.
	if _, err := NewTemplate("{% for x in %}", "", ""); err == nil {
		t.Error("compile error not reported")
	}
	if _, err := NewTemplate("{{ x ", "", ""); err == nil {
		t.Error("unclosed tag not reported")
	}
	tmpl, err := NewTemplate("{{ messages | nosuchfilter }}", "", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = tmpl.Render(nil, false, nil)
	var cerr *Error
	if !errors.As(err, &cerr) || cerr.Raised {
		t.Fatalf("err = %v", err)
	}
}

func TestNoPanicOnHostileTemplates(t *testing.T) {
	srcs := []string{
		"{{ messages[0].content.split() }}",
		"{{ range(0, 10, 0) }}",
		"{{ messages[99]['role'] }}{{ (messages|first).role }}",
		"{{ 1 / 0 }}{{ 1 // 0 }}{{ 1 % 0 }}",
		"{% set x = messages[0] %}{{ x.content[5:2] }}{{ x.nothing.deeper.still }}",
		"{{ messages|map(attribute='role')|join(',') }}{{ messages|selectattr('x','equalto',1)|list }}",
		"{{ tools|tojson(indent=2) }}{{ tools|tojson(separators=[1,2]) }}",
		"{{ strftime_now() }}{{ raise_exception() }}",
		"{% for m in messages recursive %}{{ loop(m.content) }}{% endfor %}",
	}
	for _, src := range srcs {
		tmpl, err := NewTemplate(src, "", "")
		if err != nil {
			continue
		}
		for _, msgs := range [][]Message{nil, {{Role: "user", Content: "x"}}} {
			// Must return (possibly an error), never panic.
			_, _ = tmpl.Render(msgs, true, []any{json.RawMessage(`{"a":1}`)})
		}
	}
}

func TestToJSONLikePython(t *testing.T) {
	tool := json.RawMessage(`{"name":"f","b":[1,2.50,1e20,1e-7,-0.0,100000000000000000000000],"a":{"x<y":"é & \"q\"\n\u0001\u2028"},"e":{},"l":[]}`)
	cases := []struct{ expr, want string }{
		{`tools[0]|tojson`, `{"name": "f", "b": [1, 2.5, 1e+20, 1e-07, -0.0, 1e+23], "a": {"x<y": "é & \"q\"\n\u0001` + "\u2028" + `"}, "e": {}, "l": []}`},
		{`tools[0].a|tojson(ensure_ascii=true)`, `{"x<y": "\u00e9 & \"q\"\n\u0001\u2028"}`},
		{`tools[0]|tojson(indent=2)`, "{\n  \"name\": \"f\",\n  \"b\": [\n    1,\n    2.5,\n    1e+20,\n    1e-07,\n    -0.0,\n    1e+23\n  ],\n  \"a\": {\n    \"x<y\": \"é & \\\"q\\\"\\n\\u0001\u2028\"\n  },\n  \"e\": {},\n  \"l\": []\n}"},
		{`tools[0].b|tojson(separators=(',', ':'))`, `[1,2.5,1e+20,1e-07,-0.0,1e+23]`},
		{`tools[0]|tojson(sort_keys=true)`, `{"a": {"x<y": "é & \"q\"\n\u0001` + "\u2028" + `"}, "b": [1, 2.5, 1e+20, 1e-07, -0.0, 1e+23], "e": {}, "l": [], "name": "f"}`},
		{`"a|tojson" ~ (tools[0].name | tojson)`, `a|tojson"f"`},
	}
	for _, c := range cases {
		tmpl, err := NewTemplate("{{ "+c.expr+" }}", "", "")
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		got, err := tmpl.Render(nil, false, []any{tool})
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.expr, got, c.want)
		}
	}
}

func TestPythonFloat(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", 0.1: "0.1", 1e16: "1e+16", 1e15: "1000000000000000.0", 0.0001: "0.0001",
		0.00001: "1e-05", -2.5: "-2.5", 123456789.125: "123456789.125", 1.7976931348623157e308: "1.7976931348623157e+308",
	} {
		if got := pythonFloat(f); got != want {
			t.Errorf("pythonFloat(%v) = %s, want %s", f, got, want)
		}
	}
}

func TestToolsKeyOrderAndTypes(t *testing.T) {
	tmpl, err := NewTemplate(`{% for t in tools %}{{ t|tojson }};{% endfor %}{{ tools is none }}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	type fn struct {
		Name string `json:"name"`
		Desc string `json:"description"`
	}
	got, err := tmpl.Render(nil, false, []any{
		json.RawMessage(`{"z":1,"a":2}`),
		map[string]any{"z": 1, "a": 2},
		fn{Name: "n", Desc: "d"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"z": 1, "a": 2};{"a": 2, "z": 1};{"name": "n", "description": "d"};False`; got != want {
		t.Errorf("got %s want %s", got, want)
	}
	got, err = tmpl.Render(nil, false, nil)
	if err != nil || got != "True" {
		t.Errorf("no tools: got %q, %v; want tools to be none", got, err)
	}
	if _, err := tmpl.Render(nil, false, []any{json.RawMessage(`{"a":`)}); err == nil {
		t.Error("invalid tool JSON accepted")
	}
}

func TestMessageFields(t *testing.T) {
	tmpl, err := NewTemplate(`{% for m in messages %}{{ m|tojson }}
{% endfor %}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]Message{
		{Role: "user", Content: "a", Name: "bob"},
		{Role: "assistant", ToolCalls: []ToolCall{
			{ID: "c1", Function: FunctionCall{Name: "f", Arguments: `{"b": 1, "a": [true]}`}},
			{Function: FunctionCall{Name: "g", Arguments: `not json`}},
		}},
		{Role: "tool", ToolCallID: "c1", Content: "r"},
		{Role: "assistant", Content: "x", ReasoningContent: "why"},
		{Role: "user", Parts: []ContentPart{{Type: "text", Text: "p1"}, {Type: "image_url"}, {Text: "p2"}}},
	}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role": "user", "content": "a", "name": "bob"}
{"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"b": 1, "a": [true]}}}, {"type": "function", "function": {"name": "g", "arguments": "not json"}}]}
{"role": "tool", "content": "r", "tool_call_id": "c1"}
{"role": "assistant", "content": "x", "reasoning_content": "why"}
{"role": "user", "content": "p1\np2"}
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestContentPartsAsList(t *testing.T) {
	// A template that loops over content gets the parts as a list of dicts.
	src := `{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m['content'] %}[{{ p.type }}:{{ p.text }}]{% endfor %}{% endif %}{% endfor %}`
	tmpl, err := NewTemplate(src, "", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.Render([]Message{
		{Role: "user", Content: "s"},
		{Role: "user", Parts: []ContentPart{{Type: "text", Text: "a"}, {Text: "b"}}},
	}, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "s[text:a][text:b]"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

func TestVarsAndStrftime(t *testing.T) {
	tmpl, err := NewTemplate(`{{ strftime_now("%Y-%m-%d %H:%M:%S %a %A %b %B %j %-d %y %I%p %%") }}|{{ enable_thinking }}|{{ custom.k }}|{{ add_generation_prompt }}`, "", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.RenderOptions(nil, Options{
		Now:  time.Date(2025, 3, 4, 15, 6, 7, 0, time.UTC),
		Vars: map[string]any{"enable_thinking": false, "custom": map[string]any{"k": "v"}, "add_generation_prompt": "ignored"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "2025-03-04 15:06:07 Tue Tuesday Mar March 063 4 25 03PM %|False|v|False"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	// Without Now, the current date is used.
	tmpl, _ = NewTemplate(`{{ strftime_now("%Y") }}`, "", "")
	got, err = tmpl.Render(nil, false, nil)
	if err != nil || got != time.Now().Format("2006") {
		t.Errorf("got %q, %v", got, err)
	}
}

func TestDetect(t *testing.T) {
	want := map[string]Family{
		"llama-3.2-instruct.jinja":       FamilyLlama3,
		"qwen2.5-instruct.jinja":         FamilyChatML,
		"qwen3.jinja":                    FamilyChatML,
		"mistral-7b-instruct-v0.3.jinja": FamilyMistral,
		"tinyllama-chat.jinja":           FamilyZephyr,
		"smollm2-instruct.jinja":         FamilyChatML,
	}
	for name, fam := range want {
		if got := loadTemplate(t, name, "", "").Family(); got != fam {
			t.Errorf("%s: %q, want %q", name, got, fam)
		}
	}
	if Detect("{{ messages }}") != FamilyUnknown || Detect("<start_of_turn>user") != FamilyGemma {
		t.Error("Detect misnames a template")
	}
}

func TestConcurrentRender(t *testing.T) {
	tmpl := loadTemplate(t, "qwen3.jinja", "", "<|im_end|>")
	msgs := []Message{{Role: "user", Content: "hi"}}
	want, err := tmpl.Render(msgs, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				got, err := tmpl.Render(msgs, true, nil)
				if err != nil || got != want {
					t.Errorf("goroutine %d: %q, %v", i, got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if !strings.HasSuffix(want, "<|im_start|>assistant\n") {
		t.Errorf("unexpected render %q", want)
	}
}

func BenchmarkRenderQwen3(b *testing.B) {
	tmpl := loadTemplate(b, "qwen3.jinja", "", "<|im_end|>")
	msgs := []Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "Hello!"},
		{Role: "assistant", Content: "Hi there! How can I help?"},
		{Role: "user", Content: "What is 2+2?"},
	}
	for b.Loop() {
		if _, err := tmpl.Render(msgs, true, nil); err != nil {
			b.Fatal(err)
		}
	}
}
