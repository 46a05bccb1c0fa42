package gen

import (
	"encoding/json"
	"fmt"
	"strings"

	"mistralrs/internal/constrain"
)

// ToolCallGrammar is the constraint of tool_choice "required" (one call of
// any offered function) or a named function: one call in the model's own
// format (read from its chat template: Hermes/Qwen tags, Mistral's
// [TOOL_CALLS] list, else a bare JSON object as Llama 3 writes), whose
// arguments follow the function's parameter schema. nil for other modes.
func (b *Base) ToolCallGrammar(tmplSrc string, tools []json.RawMessage, choice json.RawMessage) (*constrain.Grammar, error) {
	mode, err := toolChoiceMode(choice)
	if err != nil || (mode != "required" && mode != "function") {
		return nil, err
	}
	var named string
	if mode == "function" {
		var fn struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		_ = json.Unmarshal(choice, &fn)
		named = fn.Function.Name
	}
	var calls []json.RawMessage
	for i, raw := range tools {
		var t struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, BadRequest(fmt.Sprintf("tools[%d]", i), "tools[%d] must be an object (%s)", i, JSONProblem(err))
		}
		if named != "" && t.Function.Name != named {
			continue
		}
		params := t.Function.Parameters
		if IsNull(params) {
			params = json.RawMessage(`{"type":"object"}`)
		}
		name, _ := json.Marshal(t.Function.Name)
		calls = append(calls, json.RawMessage(fmt.Sprintf(
			`{"type":"object","properties":{"name":{"const":%s},"arguments":%s},"required":["name","arguments"],"additionalProperties":false}`,
			name, params)))
	}
	schema := calls[0]
	if len(calls) > 1 {
		list, _ := json.Marshal(calls)
		schema = json.RawMessage(`{"anyOf":` + string(list) + `}`)
	}
	prefix, suffix := "", ""
	switch {
	case strings.Contains(tmplSrc, "<tool_call>"):
		prefix, suffix = "<tool_call>\n", "\n</tool_call>"
	case strings.Contains(tmplSrc, "[TOOL_CALLS]"):
		prefix, suffix = "[TOOL_CALLS][", "]"
	}
	key := append([]byte(prefix+"\x00"+suffix+"\x00"), schema...)
	g, err := b.grammars.compile("tool_call", key, func() (*constrain.Grammar, error) {
		g, err := constrain.FromJSONSchema(schema)
		if err != nil {
			return nil, err
		}
		return constrain.Wrap(prefix, g, suffix), nil
	})
	if err != nil {
		return nil, schemaError("tools", err)
	}
	return g, nil
}

// toolChoiceMode is tool_choice's mode: "auto" (absent), "none",
// "required" or "function" (already checked by toolChoice).
func toolChoiceMode(raw json.RawMessage) (string, error) {
	if IsNull(raw) {
		return "auto", nil
	}
	var mode string
	if json.Unmarshal(raw, &mode) == nil {
		return mode, nil
	}
	return "function", nil
}
