package chat

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The tool-call formats that the common chat templates teach their models:
//
//   - Hermes, Qwen 2.5/3 and most fine-tunes: <tool_call>{"name": …, "arguments": {…}}</tool_call>,
//     one tag per call, after optional text;
//   - Mistral: [TOOL_CALLS][{"name": …, "arguments": {…}}, …], or [TOOL_CALLS]name[ARGS]{…} per
//     call in newer tokenizers (the tag is a control token, so the text may start at the JSON);
//   - Llama 3.x: the whole answer is {"name": …, "parameters": {…}}, possibly after <|python_tag|>.
//
// A bare JSON answer counts as a call only when it names a function the request offered: a model
// asked for JSON without tools in mind must not have its answer taken for a call.
const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
	mistralTag  = "[TOOL_CALLS]"
	mistralArgs = "[ARGS]"
	pythonTag   = "<|python_tag|>"
	space       = " \t\r\n"
)

// ToolParser finds the tool calls in the answer to a request that offered tools.
type ToolParser struct {
	names map[string]bool // the offered functions
}

// NewToolParser returns a parser for a request that offered functions named names.
func NewToolParser(names []string) *ToolParser {
	p := &ToolParser{names: make(map[string]bool, len(names))}
	for _, n := range names {
		p.names[n] = true
	}
	return p
}

// Parse splits a finished answer into its text before the calls and the calls. ok is false when
// the answer is not made of complete, well-formed tool calls (after optional text for the tagged
// format): it is then plain content. The calls' IDs are left empty; their Arguments are compact
// JSON.
func (p *ToolParser) Parse(text string) (content string, calls []ToolCall, ok bool) {
	if i := strings.Index(text, hermesOpen); i >= 0 {
		calls, ok = p.hermes(text[i:])
		if !ok {
			return text, nil, false
		}
		return strings.TrimRight(text[:i], space), calls, true
	}
	lead := strings.TrimLeft(text, space)
	switch {
	case strings.HasPrefix(lead, mistralTag):
		calls, ok = p.mistral(lead)
	case strings.HasPrefix(lead, pythonTag):
		calls, ok = p.bareJSON(lead[len(pythonTag):], false)
	default:
		calls, ok = p.bareJSON(lead, true)
	}
	if !ok {
		return text, nil, false
	}
	return "", calls, true
}

// SafePrefix returns how many bytes of a partial answer can be streamed as text already: the
// rest may still become a tool call. It never shrinks as the answer grows, except that text held
// back may be released.
func (p *ToolParser) SafePrefix(text string) int {
	lead := strings.TrimLeft(text, space)
	if lead == "" || lead[0] == '{' || lead[0] == '[' ||
		isPrefixEither(lead, mistralTag) || isPrefixEither(lead, pythonTag) {
		// A call in a format that takes the whole answer may be coming; the tagged format
		// below may too.
		return 0
	}
	if i := strings.Index(text, hermesOpen); i >= 0 {
		return i
	}
	// A tag may be arriving: hold back a tail that is the start of one.
	for n := min(len(hermesOpen)-1, len(text)); n > 0; n-- {
		if strings.HasSuffix(text, hermesOpen[:n]) {
			return len(text) - n
		}
	}
	return len(text)
}

// isPrefixEither reports whether one of s and tag starts with the other.
func isPrefixEither(s, tag string) bool {
	if len(s) < len(tag) {
		return strings.HasPrefix(tag, s)
	}
	return strings.HasPrefix(s, tag)
}

// hermes parses one or more <tool_call> blocks; s starts with the first. The closing tag of the
// last block may be missing (a stop string, or a model that ends at its end-of-turn token).
func (p *ToolParser) hermes(s string) ([]ToolCall, bool) {
	var calls []ToolCall
	for s != "" {
		if !strings.HasPrefix(s, hermesOpen) {
			return nil, false
		}
		s = s[len(hermesOpen):]
		body := s
		if j := strings.Index(s, hermesClose); j >= 0 {
			body, s = s[:j], s[j+len(hermesClose):]
		} else {
			s = ""
		}
		c, ok := decodeCall([]byte(body))
		if !ok {
			return nil, false
		}
		calls = append(calls, c)
		s = strings.TrimLeft(s, space)
	}
	return calls, len(calls) > 0
}

// mistral parses [TOOL_CALLS] followed by a JSON array (or object), or by name[ARGS]{…}, once
// or more.
func (p *ToolParser) mistral(s string) ([]ToolCall, bool) {
	rest := strings.TrimLeft(s[len(mistralTag):], space)
	if strings.HasPrefix(rest, "[") || strings.HasPrefix(rest, "{") {
		return p.bareJSON(rest, false)
	}
	var calls []ToolCall
	for _, part := range strings.Split(s, mistralTag)[1:] {
		name, args, found := strings.Cut(part, mistralArgs)
		name = strings.TrimSpace(name)
		if !found || name == "" {
			return nil, false
		}
		a, ok := compactArgs([]byte(args))
		if !ok {
			return nil, false
		}
		calls = append(calls, ToolCall{Type: "function", Function: FunctionCall{Name: name, Arguments: a}})
	}
	return calls, len(calls) > 0
}

// bareJSON parses an answer that is one call object or an array of them. offered: every call
// must name an offered function.
func (p *ToolParser) bareJSON(s string, offered bool) ([]ToolCall, bool) {
	b := bytes.TrimSpace([]byte(s))
	if len(b) == 0 {
		return nil, false
	}
	var bodies []json.RawMessage
	switch b[0] {
	case '{':
		bodies = []json.RawMessage{b}
	case '[':
		if err := json.Unmarshal(b, &bodies); err != nil || len(bodies) == 0 {
			return nil, false
		}
	default:
		return nil, false
	}
	calls := make([]ToolCall, 0, len(bodies))
	for _, body := range bodies {
		c, ok := decodeCall(body)
		if !ok || (offered && !p.names[c.Function.Name]) {
			return nil, false
		}
		calls = append(calls, c)
	}
	return calls, true
}

// decodeCall decodes {"name": …, "arguments"|"parameters": …}: one JSON object and nothing else.
func decodeCall(body []byte) (ToolCall, bool) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return ToolCall{}, false
	}
	var c struct {
		Name       string          `json:"name"`
		Arguments  json.RawMessage `json:"arguments"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(body, &c); err != nil || strings.TrimSpace(c.Name) == "" {
		return ToolCall{}, false
	}
	raw := c.Arguments
	if raw == nil {
		raw = c.Parameters
	}
	args, ok := compactArgs(raw)
	if !ok {
		return ToolCall{}, false
	}
	return ToolCall{Type: "function", Function: FunctionCall{Name: strings.TrimSpace(c.Name), Arguments: args}}, true
}

// compactArgs returns the arguments as compact JSON text: an object as it is, a string holding
// JSON (some models quote their arguments) unquoted, nothing as {}.
func compactArgs(raw []byte) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", true
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", false
		}
		raw = bytes.TrimSpace([]byte(s))
		if len(raw) == 0 {
			return "{}", true
		}
	}
	if raw[0] != '{' {
		return "", false
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return "", false
	}
	return out.String(), true
}
