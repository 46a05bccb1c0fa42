package server

import (
	"encoding/json"
	"strings"
	"testing"

	"mistralrs/internal/loader"
)

// Forced tool calls (issue 26): a required / any / named tool_choice makes
// the answer one call on every dialect, for every tool-call format the
// templates teach, with parameters written as pydantic writes them.

// forcedTemplates are chat templates of the three tool-call formats: the
// forced grammar follows the template, the answer's parser reads it back.
var forcedTemplates = map[string]string{
	"hermes":  `{%- for m in messages %}{{ '<|im_start|>' + m.role + '\n' + (m.content or '') + '<|im_end|>\n' }}{% endfor -%}{%- if tools %}{{ '<tool_call>' }}{% endif -%}{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`,
	"mistral": `{%- for m in messages %}{{ '[INST]' + (m.content or '') + '[/INST]' }}{% endfor -%}{%- if tools %}{{ '[TOOL_CALLS]' }}{% endif -%}`,
	"bare":    `{%- for m in messages %}{{ m.role + ': ' + (m.content or '') + '\n' }}{% endfor -%}{%- if add_generation_prompt %}{{ 'assistant: ' }}{% endif %}`,
}

// weatherParams reach their definitions through $defs and definitions,
// relative to their own root; the values are pinned so that the random
// model's call is short and known.
var weatherParams = map[string]any{
	"$defs":       map[string]any{"Loc": map[string]any{"enum": []string{"Paris"}, "title": "Loc", "type": "string"}},
	"definitions": map[string]any{"Days": map[string]any{"const": 2}},
	"properties":  map[string]any{"loc": map[string]any{"$ref": "#/$defs/Loc"}, "days": map[string]any{"$ref": "#/definitions/Days"}},
	"required":    []string{"loc", "days"}, "title": "Weather", "type": "object", "additionalProperties": false,
}

var timeParams = map[string]any{"type": "object", "properties": map[string]any{"tz": map[string]any{"const": "UTC"}},
	"required": []string{"tz"}, "additionalProperties": false}

const weatherArgs = `{"days":2,"loc":"Paris"}` // properties in declaration order: the maps marshal sorted

func forcedServer(t *testing.T) *testServer {
	var specs []ModelSpec
	for _, name := range []string{"hermes", "mistral", "bare"} {
		specs = append(specs, tinySpec(t, name, tinyConfig, loader.Options{ChatTemplatePath: writeTemplate(t, forcedTemplates[name])}))
	}
	return startServer(t, func(o *Options) { o.Models = specs })
}

// forcedCase is one forced choice in one dialect: the request's tools and
// tool_choice, and how to read the call from the answer.
type forcedCase struct {
	dialect, path string
	tools         func(named bool) []any
	choice        func(named bool) any
	body          func(model string, tools []any, choice any, stream bool) map[string]any
	// call reads a non-streamed answer: the call's name and arguments, and
	// whether the answer says it ended in a call.
	call func(t *testing.T, data []byte) (name, args string, asCall bool)
	// streamed checks that a streamed answer carries the call.
	streamed func(data []byte) bool
}

var forcedCases = []forcedCase{
	{
		dialect: "chat", path: "/v1/chat/completions",
		tools: func(named bool) []any {
			tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": weatherParams}}}
			if named {
				tools = append(tools, map[string]any{"type": "function", "function": map[string]any{"name": "get_time", "parameters": timeParams}})
			}
			return tools
		},
		choice: func(named bool) any {
			if named {
				return map[string]any{"type": "function", "function": map[string]any{"name": "get_weather"}}
			}
			return "required"
		},
		body: func(model string, tools []any, choice any, stream bool) map[string]any {
			return map[string]any{"model": model, "max_tokens": 120, "seed": 1, "stream": stream, "tools": tools, "tool_choice": choice,
				"messages": []map[string]any{{"role": "user", "content": "Weather?"}}}
		},
		call: func(t *testing.T, data []byte) (string, string, bool) {
			var out struct {
				Choices []struct {
					FinishReason string `json:"finish_reason"`
					Message      struct {
						ToolCalls []struct {
							Function struct{ Name, Arguments string } `json:"function"`
						} `json:"tool_calls"`
					} `json:"message"`
				} `json:"choices"`
			}
			if json.Unmarshal(data, &out) != nil || len(out.Choices) != 1 || len(out.Choices[0].Message.ToolCalls) != 1 {
				return "", "", false
			}
			f := out.Choices[0].Message.ToolCalls[0].Function
			return f.Name, f.Arguments, out.Choices[0].FinishReason == "tool_calls"
		},
		streamed: func(data []byte) bool {
			return strings.Contains(string(data), `"finish_reason":"tool_calls"`) && strings.Contains(string(data), `"name":"get_weather"`)
		},
	},
	{
		dialect: "responses", path: "/v1/responses",
		tools: func(named bool) []any {
			tools := []any{map[string]any{"type": "function", "name": "get_weather", "parameters": weatherParams}}
			if named {
				tools = append(tools, map[string]any{"type": "function", "name": "get_time", "parameters": timeParams})
			}
			return tools
		},
		choice: func(named bool) any {
			if named {
				return map[string]any{"type": "function", "name": "get_weather"}
			}
			return "required"
		},
		body: func(model string, tools []any, choice any, stream bool) map[string]any {
			return map[string]any{"model": model, "max_output_tokens": 120, "seed": 1, "stream": stream, "tools": tools, "tool_choice": choice,
				"input": "Weather?", "store": false}
		},
		call: func(t *testing.T, data []byte) (string, string, bool) {
			var out struct {
				Status string `json:"status"`
				Output []struct {
					Type, Name, Arguments string
				} `json:"output"`
			}
			if json.Unmarshal(data, &out) != nil || len(out.Output) != 1 {
				return "", "", false
			}
			o := out.Output[0]
			return o.Name, o.Arguments, o.Type == "function_call" && out.Status == "completed"
		},
		streamed: func(data []byte) bool {
			return strings.Contains(string(data), "event: response.function_call_arguments.done") &&
				strings.Contains(string(data), `"arguments":"{\"days\":2,\"loc\":\"Paris\"}"`)
		},
	},
	{
		dialect: "anthropic", path: "/v1/messages",
		tools: func(named bool) []any {
			tools := []any{map[string]any{"name": "get_weather", "input_schema": weatherParams}}
			if named {
				tools = append(tools, map[string]any{"name": "get_time", "input_schema": timeParams})
			}
			return tools
		},
		choice: func(named bool) any {
			if named {
				return map[string]any{"type": "tool", "name": "get_weather"}
			}
			return map[string]any{"type": "any"}
		},
		body: func(model string, tools []any, choice any, stream bool) map[string]any {
			return map[string]any{"model": model, "max_tokens": 120, "seed": 1, "stream": stream, "tools": tools, "tool_choice": choice,
				"messages": []map[string]any{{"role": "user", "content": "Weather?"}}}
		},
		call: func(t *testing.T, data []byte) (string, string, bool) {
			var out struct {
				StopReason string `json:"stop_reason"`
				Content    []struct {
					Type, Name string
					Input      json.RawMessage
				} `json:"content"`
			}
			if json.Unmarshal(data, &out) != nil || len(out.Content) != 1 {
				return "", "", false
			}
			c := out.Content[0]
			return c.Name, string(c.Input), c.Type == "tool_use" && out.StopReason == "tool_use"
		},
		streamed: func(data []byte) bool {
			return strings.Contains(string(data), `"type":"tool_use"`) && strings.Contains(string(data), `"stop_reason":"tool_use"`)
		},
	},
}

// A required / any or named choice comes back as one call of the tool,
// with arguments that follow its parameters' $defs and definitions: on
// chat, Responses and Anthropic, in each template's format, streamed too.
func TestForcedToolCallEveryDialect(t *testing.T) {
	ts := forcedServer(t)
	for _, c := range forcedCases {
		for _, model := range []string{"hermes", "mistral", "bare"} {
			for _, named := range []bool{false, true} {
				resp, data := ts.post(c.path, c.body(model, c.tools(named), c.choice(named), false))
				name, args, asCall := c.call(t, data)
				if resp.StatusCode != 200 || !asCall || name != "get_weather" || args != weatherArgs {
					t.Errorf("%s, %s template, named %v: %d %s", c.dialect, model, named, resp.StatusCode, data)
				}
			}
		}
		resp, data := ts.post(c.path, c.body("hermes", c.tools(true), c.choice(true), true))
		if resp.StatusCode != 200 || !c.streamed(data) {
			t.Errorf("%s streamed: %d %s", c.dialect, resp.StatusCode, data)
		}
	}
}

// A tool's parameters that are no object schema, and two tools of one
// name, are 400s naming the tool, whatever the choice and the dialect;
// a parameter schema that does not compile for a forced call names it too.
func TestForcedToolCallRefusals(t *testing.T) {
	ts := forcedServer(t)
	for _, c := range forcedCases {
		var weather, other, stringParams, listParams, badRef map[string]any
		tools := c.tools(true)
		weather = tools[0].(map[string]any)
		other = clone(weather)
		field := "parameters"
		if c.dialect == "anthropic" {
			field = "input_schema"
		}
		set := func(tool map[string]any, key string, v any) map[string]any {
			tool = clone(tool)
			if fn, ok := tool["function"].(map[string]any); ok {
				fn = clone(fn)
				fn[key] = v
				tool["function"] = fn
				return tool
			}
			if key == "parameters" {
				key = field
			}
			tool[key] = v
			return tool
		}
		stringParams = set(weather, "parameters", map[string]any{"type": "string"})
		listParams = set(weather, "parameters", []any{})
		badRef = set(weather, "parameters", map[string]any{"type": "object", "properties": map[string]any{"loc": map[string]any{"$ref": "#/$defs/Missing"}}})
		for _, tt := range []struct {
			name   string
			tools  []any
			choice any
			param  string
			msg    string
		}{
			{"non-object parameters, forced", []any{stringParams}, c.choice(false), "tools[0]", `type "object"`},
			{"non-object parameters, named", []any{stringParams}, c.choice(true), "tools[0]", `type "object"`},
			{"non-object parameters, auto", []any{stringParams}, nil, "tools[0]", `type "object"`},
			{"parameters not an object", []any{listParams}, nil, "tools[0]", "JSON Schema object"},
			{"duplicate names, forced", []any{weather, other}, c.choice(false), "tools[1]", "unique"},
			{"duplicate names, auto", []any{weather, other}, nil, "tools[1]", "unique"},
			{"missing definition, forced", []any{badRef}, c.choice(false), "tools[0]", "no such definition"},
		} {
			body := c.body("hermes", tt.tools, tt.choice, false)
			if tt.choice == nil {
				delete(body, "tool_choice")
			}
			resp, data := ts.post(c.path, body)
			var e struct {
				Error struct {
					Message string  `json:"message"`
					Param   *string `json:"param"`
				} `json:"error"`
			}
			ok := resp.StatusCode == 400 && json.Unmarshal(data, &e) == nil &&
				strings.Contains(e.Error.Message, tt.param) && strings.Contains(e.Error.Message, tt.msg)
			if c.dialect == "anthropic" {
				// Anthropic's envelope has no param; its own check of
				// input_schema comes first and names the field.
				ok = ok && (strings.Contains(e.Error.Message, `"get_weather"`) || strings.Contains(e.Error.Message, "tools[0].input_schema"))
			} else {
				ok = ok && strings.Contains(e.Error.Message, `"get_weather"`) && e.Error.Param != nil && *e.Error.Param == tt.param
			}
			if !ok {
				t.Errorf("%s: %s: %d %s, want 400 naming %s (%q)", c.dialect, tt.name, resp.StatusCode, data, tt.param, tt.msg)
			}
		}
	}
}

func clone(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
