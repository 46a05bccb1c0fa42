package anthropic

import (
	"encoding/json"
	"testing"

	"mistralrs/internal/chat"
	"mistralrs/internal/server/gen"
)

// testTemplate shows everything the tool round trip carries.
const testTemplate = `{%- if tools %}tools:{% for t in tools %}{{ t.function.name }}({{ t.function.description }});{% endfor %}{{ '\n' }}{% endif -%}
{%- for m in messages %}<{{ m.role }}>{{ m.content }}
{%- if m.reasoning_content %}[thought {{ m.reasoning_content }}]{% endif %}
{%- if m.tool_calls %}{% for c in m.tool_calls %}[call {{ c.id }} {{ c.function.name }} {{ c.function.arguments | tojson }}]{% endfor %}{% endif %}
{%- if m.tool_call_id %}[result of {{ m.tool_call_id }} ({{ m.name }})]{% endif %}{{ '\n' }}
{%- endfor -%}
{%- if add_generation_prompt %}<assistant>{% endif %}`

// TestAnthropicRender checks the conversion of blocks to template messages
// directly: system blocks, thinking, several calls, tool results between
// texts.
func TestAnthropicRender(t *testing.T) {
	body := `{"system":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"messages":[
		{"role":"user","content":"q"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"let me see"},
			{"type":"tool_use","id":"t1","name":"f","input":{"x":1}},{"type":"tool_use","id":"t2","name":"g"}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]},
			{"type":"tool_result","tool_use_id":"t2","content":"three"},{"type":"text","text":"ok"},{"type":"text","text":"go"}]}]}`
	var req request
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	msgs, err := chatMessages(req.System, req.Messages, new(gen.Images))
	if err != nil {
		t.Fatal(err)
	}
	joinBlockTexts(msgs) // as render does once the size is checked
	tmpl, err := chat.NewTemplate(testTemplate, "", "")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tmpl.RenderOptions(msgs, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	want := "<system>a\nb\n" +
		"<user>q\n" +
		`<assistant>let me see[thought hmm][call t1 f {"x": 1}][call t2 g {}]` + "\n" +
		"<tool>one\ntwo[result of t1 (f)]\n" +
		"<tool>three[result of t2 (g)]\n" +
		"<user>ok\ngo\n" +
		"<assistant>"
	if got != want {
		t.Errorf("rendered:\n%s\nwant:\n%s", got, want)
	}
}

// TestUnsupported checks the extension fields refused and the values that
// ask for nothing.
func TestUnsupported(t *testing.T) {
	for _, c := range []struct{ body, param string }{
		{`null`, ""},
		{`{"dry_multiplier":null,"reasoning_effort":"off","truncate_sequence":false,"enable_code_execution":false}`, ""},
		{`{"reasoning_effort":"none","metadata":{"x":1}}`, ""},
		{`{"dry_base":false}`, "dry_base"},
		{`{"truncate_sequence":true}`, "truncate_sequence"},
		{`{"session_id":"s","adapter":"a"}`, "adapter"},
		{`{"web_search_options":{},"reasoning_effort":"low"}`, "reasoning_effort"},
	} {
		err := gen.Refuse([]byte(c.body), unsupported)
		if c.param == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.body, err)
			}
			continue
		}
		re, ok := err.(*gen.Error)
		if !ok || re.Param != c.param || re.Status != 400 {
			t.Errorf("%s: got %v, want a 400 naming %s", c.body, err, c.param)
		}
	}
}

// TestErrorType checks Anthropic's error types by status.
func TestErrorType(t *testing.T) {
	for status, want := range map[int]string{400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
		405: "invalid_request_error", 413: "request_too_large", 429: "rate_limit_error", 499: "invalid_request_error",
		500: "api_error", 503: "overloaded_error", 529: "overloaded_error"} {
		if got := errorType(status); got != want {
			t.Errorf("errorType(%d) = %q, want %q", status, got, want)
		}
	}
}
