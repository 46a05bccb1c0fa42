package gen

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"mistralrs/internal/constrain"
)

// ToolCallGrammar is the constraint of tool_choice "required" (one call of
// any offered function) or a named function: one call in the model's own
// format (read from its chat template: Hermes/Qwen tags, Mistral's
// [TOOL_CALLS] list, else a bare JSON object as Llama 3 writes), whose
// arguments follow the function's parameter schema. nil for other modes.
// The tools are checked already (ToolsParser, CheckTool): names unique,
// parameters object schemas. note, when not nil, receives how the grammar
// came from the grammar cache (for the generation spans).
func (b *Base) ToolCallGrammar(note *GrammarCompile, tmplSrc string, tools []json.RawMessage, choice json.RawMessage) (*constrain.Grammar, error) {
	if note == nil {
		note = &GrammarCompile{}
	}
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
	call, err := callSchema(tools, named)
	if err != nil {
		return nil, err
	}
	prefix, suffix := "", ""
	switch {
	case strings.Contains(tmplSrc, "<tool_call>"):
		prefix, suffix = "<tool_call>\n", "\n</tool_call>"
	case strings.Contains(tmplSrc, "[TOOL_CALLS]"):
		prefix, suffix = "[TOOL_CALLS][", "]"
	}
	key, _ := json.Marshal(struct {
		Prefix, Suffix string
		Call           *toolCallSchema
	}{prefix, suffix, call})
	g, err := b.grammars.compile(note, "tool_call", key, func() (*constrain.Grammar, error) {
		g, err := constrain.FromJSONSchemaDocs(call.Schema, call.Params)
		if err != nil {
			return nil, err
		}
		return constrain.Wrap(prefix, g, suffix), nil
	})
	if err != nil {
		return nil, toolSchemaError(err, call.names)
	}
	return g, nil
}

// toolCallSchema is the JSON schema of one call: Schema is the wrapper
// {"name": …, "arguments": …} (an anyOf of one per callable tool), whose
// arguments refer to the tools' parameter schemas, kept as documents of
// their own (Params, by the tool's param, "tools[1]") so that their
// references ("#", "#/$defs/…", "#/definitions/…") resolve against their
// own root as they would in response_format.
type toolCallSchema struct {
	Schema json.RawMessage
	Params map[string][]byte
	names  map[string]string // the tools' names by their param
}

// callSchema is the call schema of the tools (only the one named, when
// named is set).
func callSchema(tools []json.RawMessage, named string) (*toolCallSchema, error) {
	c := &toolCallSchema{Params: map[string][]byte{}, names: map[string]string{}}
	var calls []json.RawMessage
	for i, raw := range tools {
		var t struct {
			Function struct {
				Name       string          `json:"name"`
				Parameters json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		at := fmt.Sprintf("tools[%d]", i)
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, BadRequest(at, "%s must be an object (%s)", at, JSONProblem(err))
		}
		if named != "" && t.Function.Name != named {
			continue
		}
		params := t.Function.Parameters
		if IsNull(params) {
			params = json.RawMessage(`{}`)
		}
		c.Params[at], c.names[at] = params, t.Function.Name
		name, _ := json.Marshal(t.Function.Name)
		ref, _ := json.Marshal(at)
		// "type": "object" beside the reference: whatever else the
		// parameters allow, the arguments of a call are an object, so
		// the answer always reads as a call.
		calls = append(calls, json.RawMessage(fmt.Sprintf(
			`{"type":"object","properties":{"name":{"const":%s},"arguments":{"type":"object","$ref":%s}},"required":["name","arguments"],"additionalProperties":false}`,
			name, ref)))
	}
	if len(calls) == 0 {
		return nil, BadRequest("tool_choice", "tool_choice names function %q, which is not among the tools", named)
	}
	c.Schema = calls[0]
	if len(calls) > 1 {
		list, _ := json.Marshal(calls)
		c.Schema = json.RawMessage(`{"anyOf":` + string(list) + `}`)
	}
	return c, nil
}

// toolSchemaError is a 400 for a call schema that does not compile: one
// naming the tool when its parameters are at fault.
func toolSchemaError(err error, names map[string]string) error {
	var se *constrain.SchemaError
	if !errors.As(err, &se) || se.Doc == "" {
		return schemaError("tools", err)
	}
	at := se.Doc
	inner := *se
	inner.Doc = ""
	return BadRequest(at, "%s (%q): parameters: %v", at, names[at], &inner)
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
