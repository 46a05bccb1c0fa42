package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"mistralrs/internal/chat"
)

// Tool calling: the request's tools go to the chat template, and an answer
// made of tool calls (in the formats chat.ToolParser knows) comes back as
// OpenAI tool_calls with finish_reason "tool_calls". The engine is told
// which answers are tool calls, so that mistralrs_sequences_completed_total
// counts them as tool_calls whether streamed or not (mistral.rs counts the
// non-streamed ones as stop).

// ToolsParser checks tools and tool_choice and returns the parser for the
// answer, or nil when the answer is not to be read for calls (no tools, or
// tool_choice "none").
func ToolsParser(tools []json.RawMessage, choice json.RawMessage) (*chat.ToolParser, error) {
	names := make([]string, 0, len(tools))
	seen := make(map[string]string, len(tools))
	for i, raw := range tools {
		var t struct {
			Type     string `json:"type"`
			Function *struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, BadRequest(fmt.Sprintf("tools[%d]", i), "tools[%d] must be an object (%s)", i, JSONProblem(err))
		}
		if t.Type != "function" {
			return nil, BadRequest(fmt.Sprintf("tools[%d].type", i), "tools[%d].type must be \"function\", got %q", i, t.Type)
		}
		if t.Function == nil || strings.TrimSpace(t.Function.Name) == "" {
			return nil, BadRequest(fmt.Sprintf("tools[%d].function.name", i), "tools[%d].function.name is required", i)
		}
		if err := CheckTool(fmt.Sprintf("tools[%d]", i), t.Function.Name, "parameters", t.Function.Parameters, seen); err != nil {
			return nil, err
		}
		names = append(names, t.Function.Name)
	}
	mode, err := toolChoice(choice, names)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 || mode == "none" {
		return nil, nil
	}
	return chat.NewToolParser(names), nil
}

// CheckTool refuses a tool that a call could not name or carry: a name an
// earlier tool has (seen: the names so far and their tools, which it
// extends), and a parameter schema (schemaField: its field, as the dialect
// names it) that is not a schema of an object, since a call's arguments are
// an object. at names the tool ("tools[1]") and is the error's param.
func CheckTool(at, name, schemaField string, schema json.RawMessage, seen map[string]string) error {
	if prev, ok := seen[name]; ok {
		return BadRequest(at, "%s is named %q, as %s is: tool names must be unique", at, name, prev)
	}
	seen[name] = at
	if IsNull(schema) {
		return nil
	}
	var obj struct {
		Type json.RawMessage `json:"type"`
	}
	if b := bytes.TrimSpace(schema); b[0] != '{' || json.Unmarshal(b, &obj) != nil {
		return BadRequest(at, "%s (%q): %s must be a JSON Schema object, got %s", at, name, schemaField, abbreviate(b))
	}
	if IsNull(obj.Type) || typeAdmitsObject(obj.Type) {
		return nil
	}
	return BadRequest(at, "%s (%q): %s must be a schema of type \"object\" (a call's arguments are an object), got type %s",
		at, name, schemaField, abbreviate(obj.Type))
}

// typeAdmitsObject reports whether a schema's "type" ("object", or a list
// holding it) lets the value be an object.
func typeAdmitsObject(raw json.RawMessage) bool {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one == "object"
	}
	var list []string
	return json.Unmarshal(raw, &list) == nil && slices.Contains(list, "object")
}

// abbreviate is a JSON value for a message, cut short when long.
func abbreviate(b []byte) string {
	const most = 40
	if len(b) <= most {
		return string(b)
	}
	n := most
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return string(b[:n]) + "…"
}

// toolChoice checks tool_choice: "none", "auto", "required", or
// {"type": "function", "function": {"name": an offered tool}}. "required"
// and a named function constrain the answer to one call (toolCallGrammar).
func toolChoice(raw json.RawMessage, names []string) (string, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return "auto", nil
	}
	var mode string
	if err := json.Unmarshal(b, &mode); err == nil {
		switch mode {
		case "none", "auto":
			return mode, nil
		case "required":
			if len(names) == 0 {
				return "", BadRequest("tool_choice", "tool_choice \"required\" needs tools")
			}
			return mode, nil
		}
		return "", BadRequest("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or a function, got %q", mode)
	}
	var fn struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(b, &fn); err != nil || fn.Type != "function" {
		return "", BadRequest("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": …}}")
	}
	for _, n := range names {
		if n == fn.Function.Name {
			return "function", nil
		}
	}
	return "", BadRequest("tool_choice", "tool_choice names function %q, which is not among the tools", fn.Function.Name)
}

// ToolAnswer is an answer read as tool calls: the text before them and the
// calls.
type ToolAnswer struct {
	Content string
	Calls   []chat.ToolCall
}

// toolStream holds back streamed text that may still turn out to be a tool
// call; what it releases is never taken back.
type toolStream struct {
	p    *chat.ToolParser
	text strings.Builder
	sent int // bytes of text already released
}

// push adds a piece of the answer and returns the text that can be sent now.
func (ts *toolStream) push(piece string) string {
	ts.text.WriteString(piece)
	all := ts.text.String()
	n := max(ts.p.SafePrefix(all), ts.sent)
	out := all[ts.sent:n]
	ts.sent = n
	return out
}

// finish returns what is left to send once the answer is complete: the text
// held back, or, when the answer is tool calls (answer non-nil), the rest of
// the text before them and the calls.
func (ts *toolStream) finish(answer *ToolAnswer) (string, []chat.ToolCall) {
	if answer == nil {
		return ts.text.String()[ts.sent:], nil
	}
	if len(answer.Content) > ts.sent {
		return answer.Content[ts.sent:], answer.Calls
	}
	return "", answer.Calls
}
