package server

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"mistralrs/internal/chat"
	"mistralrs/internal/constrain"
	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
	"mistralrs/internal/observe"
	"mistralrs/internal/sampler"
)

// Anthropic Messages API (POST /v1/messages and /v1/messages/count_tokens),
// as mistral.rs serves it: the request is turned into OpenAI-style chat
// messages (system prompt first, tool_use blocks as assistant tool_calls,
// tool_result blocks as tool messages) for the model's chat template, and
// the answer comes back as content blocks (text, tool_use). Every error on
// these routes uses Anthropic's envelope
// {"type":"error","error":{"type":…,"message":…}}.

// anthropicErrorType is Anthropic's error type for a status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusMethodNotAllowed, http.StatusUnprocessableEntity:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

type anthropicErrorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

type anthropicErrorJSON struct {
	Type  string             `json:"type"` // "error"
	Error anthropicErrorBody `json:"error"`
}

func anthropicError(status int, msg string) anthropicErrorJSON {
	return anthropicErrorJSON{Type: "error", Error: anthropicErrorBody{Type: anthropicErrorType(status), Message: msg}}
}

// writeAnthropicError sends an error in Anthropic's envelope and attaches
// the message to the access-log line (an observe.ErrorWriter).
func writeAnthropicError(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if r != nil {
		observe.SetError(r.Context(), msg)
	}
	body, err := json.Marshal(anthropicError(status, msg))
	if err != nil { // cannot happen for these field types
		body = []byte(`{"type":"error","error":{"type":"api_error","message":"internal error"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeAnthropicRequestError answers err (a *requestError carries its
// status; anything else is a 500 api_error).
func (s *Server) writeAnthropicRequestError(w http.ResponseWriter, r *http.Request, err error) {
	if clientGone(r) {
		// Left while the model was loading or generating: nobody reads this,
		// but the access log and metrics say what happened.
		writeAnthropicError(w, r, statusClientClosed, "client closed the request")
		return
	}
	_ = s.opts.PayloadLog.Error(err.Error())
	writeAnthropicError(w, r, errorStatus(err), err.Error())
}

// errorStatus is the HTTP status of a request error (500 for other errors).
func errorStatus(err error) int {
	var re *requestError
	if errors.As(err, &re) {
		return re.status
	}
	return http.StatusInternalServerError
}

// readAnthropicBody is readBody with errors in Anthropic's envelope.
func (s *Server) readAnthropicBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := observe.ReadBody(r)
	if err != nil {
		if observe.IsBodyTooLarge(err) {
			writeAnthropicError(w, r, http.StatusRequestEntityTooLarge, "request body too large")
		} else {
			writeAnthropicError(w, r, http.StatusBadRequest, "failed to read request body: "+err.Error())
		}
		return nil, false
	}
	_ = s.opts.PayloadLog.Request(body)
	if !utf8.Valid(body) {
		s.writeAnthropicRequestError(w, r, badRequest("", "request body is not valid UTF-8"))
		return nil, false
	}
	return body, true
}

// anthropicRequest is the body of POST /v1/messages (and count_tokens).
// Unknown fields are ignored; metadata is accepted and ignored.
type anthropicRequest struct {
	Model         string            `json:"model"`
	MaxTokens     *int              `json:"max_tokens"`
	Messages      bodyJSON          `json:"messages"`
	System        bodyJSON          `json:"system"`
	StopSequences []string          `json:"stop_sequences"`
	Stream        bool              `json:"stream"`
	Tools         []json.RawMessage `json:"tools"`
	ToolChoice    json.RawMessage   `json:"tool_choice"`
	Thinking      json.RawMessage   `json:"thinking"`
	Metadata      json.RawMessage   `json:"metadata"`
	Temperature   *float64          `json:"temperature"`
	TopP          *float64          `json:"top_p"`
	TopK          *int              `json:"top_k"`
	// mistral.rs extensions.
	MinP              *float64           `json:"min_p"`
	PresencePenalty   *float64           `json:"presence_penalty"`
	FrequencyPenalty  *float64           `json:"frequency_penalty"`
	RepetitionPenalty *float64           `json:"repetition_penalty"`
	LogitBias         map[string]float64 `json:"logit_bias"`
	Seed              *int64             `json:"seed"`
	IgnoreEOS         bool               `json:"ignore_eos"`
	EnableThinking    *bool              `json:"enable_thinking"`
	ResponseFormat    json.RawMessage    `json:"response_format"`
	Grammar           json.RawMessage    `json:"grammar"`
}

// anthropicUnsupported are the mistral.rs extension fields this server does
// not implement: a request that sets one is refused rather than answered as
// if it had not (keys starting with dry_ too; enable_code_execution and
// truncate_sequence only when true, reasoning_effort unless "off" or "none").
var anthropicUnsupported = map[string]string{
	"reasoning_effort":          "reasoning budgets are not implemented",
	"adapter":                   "LoRA adapters are not supported",
	"web_search_options":        "web search is not supported",
	"agent_permission":          "agentic tool execution is not supported",
	"code_execution_permission": "agentic tool execution is not supported",
	"enable_code_execution":     "agentic tool execution is not supported",
	"container":                 "skills and containers are not supported",
	"session_id":                "sessions are not supported",
	"files":                     "files are not supported",
	"max_tool_rounds":           "agentic tool execution is not supported",
	"truncate_sequence":         "prompts are never truncated",
}

// checkAnthropicExtensions refuses the extension fields of
// anthropicUnsupported that the body sets (null counts as absent).
func checkAnthropicExtensions(body []byte) error {
	var fields map[string]bodyJSON
	if err := json.Unmarshal(body, &fields); err != nil {
		return badRequest("", "request body must be a JSON object")
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		// Compared as bytes: a string conversion would copy the messages.
		v := bytes.TrimSpace(fields[k])
		if isJSON(v, "null") {
			continue
		}
		why, known := anthropicUnsupported[k]
		switch {
		case strings.HasPrefix(k, "dry_"):
			why = "DRY sampling is not implemented"
		case !known:
			continue
		case (k == "enable_code_execution" || k == "truncate_sequence") && isJSON(v, "false"),
			k == "reasoning_effort" && (isJSON(v, `"off"`) || isJSON(v, `"none"`)):
			continue
		}
		return badRequest(k, "%s is not supported by this server: %s", k, why)
	}
	return nil
}

// anthropicParsed is a checked Anthropic request, ready for the template.
type anthropicParsed struct {
	req   anthropicRequest
	entry *modelEntry
	msgs  []chat.Message
	opts  chat.Options
	tools *chat.ToolParser // nil: the answer is not read for tool calls
	// grammar is the structured-output constraint (response_format,
	// grammar), nil for free text.
	grammar *constrain.Grammar
}

// parseAnthropic decodes and checks a request; generate is false for
// count_tokens, where max_tokens and the sampling fields are not needed.
func (s *Server) parseAnthropic(body []byte, generate bool) (*anthropicParsed, error) {
	p := &anthropicParsed{}
	if err := decodeJSON(body, &p.req); err != nil {
		return nil, err
	}
	if err := checkAnthropicExtensions(body); err != nil {
		return nil, err
	}
	req := &p.req
	entry, err := s.resolveModel(req.Model)
	if err != nil {
		return nil, err
	}
	p.entry = entry
	if generate && req.MaxTokens == nil {
		return nil, badRequest("max_tokens", "max_tokens is required")
	}
	if p.grammar, err = s.constraint("response_format", req.ResponseFormat, req.Grammar); err != nil {
		return nil, err
	}
	if p.msgs, err = anthropicMessages(req.System, req.Messages); err != nil {
		return nil, err
	}
	tools, names, err := anthropicTools(req.Tools)
	if err != nil {
		return nil, err
	}
	mode, err := anthropicToolChoice(req.ToolChoice, names)
	if err != nil {
		return nil, err
	}
	p.opts = chat.Options{AddGenerationPrompt: true}
	if mode != "none" && len(tools) > 0 {
		// tool_choice "none" leaves the tools out of the prompt, as mistral.rs does.
		p.opts.Tools = tools
		p.tools = chat.NewToolParser(names)
	}
	thinking, err := anthropicThinking(req.Thinking, req.EnableThinking)
	if err != nil {
		return nil, err
	}
	if thinking != nil {
		p.opts.Vars = map[string]any{"enable_thinking": *thinking}
	}
	return p, nil
}

// settings are the engine settings of a /v1/messages request.
func (p *anthropicParsed) settings(seed *uint64) (*genSettings, error) {
	r := &p.req
	if err := checkStop("stop_sequences", r.StopSequences); err != nil {
		return nil, err
	}
	f := samplingFields{
		Model: r.Model, MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK, MinP: r.MinP,
		PresencePenalty: r.PresencePenalty, FrequencyPenalty: r.FrequencyPenalty, RepetitionPenalty: r.RepetitionPenalty,
		Stop: stopField(r.StopSequences), Seed: r.Seed, LogitBias: r.LogitBias, IgnoreEOS: r.IgnoreEOS,
	}
	g, err := f.settings(false, 0, seed)
	if err != nil {
		return nil, err
	}
	g.grammar = p.grammar
	return g, nil
}

// render applies the model's chat template and tokenizes the prompt. The
// texts of several blocks are joined only once the conversation is known
// to fit the context (a join copies them).
func (p *anthropicParsed) render(m *loader.Model, ctxLen int) ([]int32, error) {
	if err := checkTextBytes(m.Tok, ctxLen, messagesBytes(p.msgs)); err != nil {
		return nil, err
	}
	joinBlockTexts(p.msgs)
	return renderPrompt(m, ctxLen, p.msgs, p.opts, "messages")
}

// setBlockTexts gives m the texts of several blocks, to be joined with
// newlines: one text (or none) is the content at once, several are held as
// parts until joinBlockTexts (so that a huge conversation is refused
// before any copy of it is made).
func setBlockTexts(m *chat.Message, texts []string) {
	switch len(texts) {
	case 0:
	case 1:
		m.Content = texts[0]
	default:
		m.Parts = make([]chat.ContentPart, len(texts))
		for i, t := range texts {
			m.Parts[i] = chat.ContentPart{Type: "text", Text: t}
		}
	}
}

// joinBlockTexts joins the texts setBlockTexts held as parts into each
// message's content, as mistral.rs joins an Anthropic turn's text blocks.
func joinBlockTexts(msgs []chat.Message) {
	for i := range msgs {
		m := &msgs[i]
		if m.Parts == nil {
			continue
		}
		texts := make([]string, len(m.Parts))
		for j, p := range m.Parts {
			texts[j] = p.Text
		}
		m.Content, m.Parts = strings.Join(texts, "\n"), nil
	}
}

// anthropicThinking reads thinking ({"type": "enabled"|"adaptive"|"disabled"})
// and the enable_thinking extension into the template's enable_thinking
// (nil: neither is set). The model's thoughts stay in the text: there are
// no thinking blocks in the answer, and budget_tokens is not enforced.
func anthropicThinking(raw json.RawMessage, enable *bool) (*bool, error) {
	var native *bool
	if b := bytes.TrimSpace(raw); len(b) > 0 && string(b) != "null" {
		var th struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &th); err != nil {
			return nil, badRequest("thinking", "thinking must be an object with a type")
		}
		var on bool
		switch th.Type {
		case "enabled", "adaptive":
			on = true
		case "disabled":
		default:
			return nil, badRequest("thinking.type", "thinking.type must be \"enabled\", \"adaptive\" or \"disabled\", got %q", th.Type)
		}
		native = &on
	}
	if native != nil && enable != nil && *native != *enable {
		return nil, badRequest("thinking", "thinking.type conflicts with enable_thinking")
	}
	if enable != nil {
		return enable, nil
	}
	return native, nil
}

// anthropicBlockIn is a content block of a request.
type anthropicBlockIn struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   bodyJSON        `json:"content"`
	Thinking  string          `json:"thinking"`
}

// anthropicBlocks decodes a content field that is an array of blocks.
func anthropicBlocks(raw json.RawMessage, param string) ([]anthropicBlockIn, error) {
	var items []bodyJSON
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, badRequest(param, "%s must be a string or an array of content blocks", param)
	}
	blocks := make([]anthropicBlockIn, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it, &blocks[i]); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				return nil, badRequest(fmt.Sprintf("%s[%d].%s", param, i, te.Field), "%s[%d].%s: expected %s, got JSON %s", param, i, te.Field, jsonType(te.Type.Kind()), te.Value)
			}
			return nil, badRequest(fmt.Sprintf("%s[%d]", param, i), "%s[%d] must be a content block object", param, i)
		}
		if blocks[i].Type == "" {
			return nil, badRequest(fmt.Sprintf("%s[%d].type", param, i), "%s[%d].type is required", param, i)
		}
	}
	return blocks, nil
}

// blockText is a text block's text (required).
func blockText(b *anthropicBlockIn, param string) (string, error) {
	if b.Text == nil {
		return "", badRequest(param+".text", "%s: a text block requires text", param)
	}
	return *b.Text, nil
}

// anthropicMessages turns the system prompt and the messages into the
// OpenAI-style messages the chat templates take: a system message first,
// an assistant message per assistant turn (text joined, tool_use blocks as
// tool_calls, thinking as reasoning_content), and for a user turn its text
// as a user message and each tool_result as a tool message, in order.
func anthropicMessages(system, messages bodyJSON) ([]chat.Message, error) {
	var out []chat.Message
	if b := bytes.TrimSpace(system); len(b) > 0 && string(b) != "null" {
		texts, err := anthropicSystem(b)
		if err != nil {
			return nil, err
		}
		if len(texts) > 1 || len(texts) == 1 && texts[0] != "" {
			m := chat.Message{Role: "system"}
			setBlockTexts(&m, texts)
			out = append(out, m)
		}
	}
	b := bytes.TrimSpace(messages)
	if len(b) == 0 || string(b) == "null" {
		return nil, badRequest("messages", "messages is required")
	}
	var in []struct {
		Role    string   `json:"role"`
		Content bodyJSON `json:"content"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, badRequest("messages", "messages must be an array of {role, content} objects")
	}
	if len(in) == 0 {
		return nil, badRequest("messages", "messages must contain at least one message")
	}
	names := map[string]string{} // tool_use id → tool name, for the tool messages
	for i, m := range in {
		param := fmt.Sprintf("messages[%d]", i)
		if m.Role != "user" && m.Role != "assistant" {
			return nil, badRequest(param+".role", "%s.role must be \"user\" or \"assistant\", got %q", param, m.Role)
		}
		c := bytes.TrimSpace(m.Content)
		if len(c) == 0 || string(c) == "null" {
			return nil, badRequest(param+".content", "%s.content is required", param)
		}
		if c[0] == '"' {
			var text string
			if err := json.Unmarshal(c, &text); err != nil {
				return nil, badRequest(param+".content", "%s.content: %s", param, jsonProblem(err))
			}
			out = append(out, chat.Message{Role: m.Role, Content: text})
			continue
		}
		blocks, err := anthropicBlocks(c, param+".content")
		if err != nil {
			return nil, err
		}
		if m.Role == "assistant" {
			msg, err := assistantBlocks(blocks, param+".content", names)
			if err != nil {
				return nil, err
			}
			out = append(out, msg)
			continue
		}
		msgs, err := userBlocks(blocks, param+".content", names)
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
	}
	return out, nil
}

// anthropicSystem is the system prompt: a string or text blocks (their
// texts, to be joined with newlines).
func anthropicSystem(b []byte) ([]string, error) {
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, badRequest("system", "system: %s", jsonProblem(err))
		}
		return []string{s}, nil
	}
	blocks, err := anthropicBlocks(b, "system")
	if err != nil {
		return nil, err
	}
	texts := make([]string, 0, len(blocks))
	for i := range blocks {
		param := fmt.Sprintf("system[%d]", i)
		if blocks[i].Type != "text" {
			return nil, badRequest(param+".type", "%s: system blocks must be text blocks, got %q", param, blocks[i].Type)
		}
		t, err := blockText(&blocks[i], param)
		if err != nil {
			return nil, err
		}
		texts = append(texts, t)
	}
	return texts, nil
}

func assistantBlocks(blocks []anthropicBlockIn, param string, names map[string]string) (chat.Message, error) {
	msg := chat.Message{Role: "assistant"}
	var texts, thoughts []string
	for i := range blocks {
		b := &blocks[i]
		bp := fmt.Sprintf("%s[%d]", param, i)
		switch b.Type {
		case "text":
			t, err := blockText(b, bp)
			if err != nil {
				return msg, err
			}
			texts = append(texts, t)
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return msg, badRequest(bp, "%s: a tool_use block requires id and name", bp)
			}
			args := "{}"
			if in := bytes.TrimSpace(b.Input); len(in) > 0 && string(in) != "null" {
				if in[0] != '{' {
					return msg, badRequest(bp+".input", "%s.input must be an object", bp)
				}
				var compact bytes.Buffer
				if err := json.Compact(&compact, in); err != nil {
					return msg, badRequest(bp+".input", "%s.input: %v", bp, err)
				}
				args = compact.String()
			}
			names[b.ID] = b.Name
			msg.ToolCalls = append(msg.ToolCalls, chat.ToolCall{ID: b.ID, Type: "function",
				Function: chat.FunctionCall{Name: b.Name, Arguments: args}})
		case "thinking":
			thoughts = append(thoughts, b.Thinking)
		case "redacted_thinking":
		default:
			return msg, badRequest(bp+".type", "%s: content block type %q is not supported in an assistant message", bp, b.Type)
		}
	}
	setBlockTexts(&msg, texts)
	msg.ReasoningContent = strings.Join(thoughts, "\n")
	return msg, nil
}

func userBlocks(blocks []anthropicBlockIn, param string, names map[string]string) ([]chat.Message, error) {
	var out []chat.Message
	var texts []string
	flush := func() {
		if len(texts) > 0 {
			m := chat.Message{Role: "user"}
			setBlockTexts(&m, texts)
			out = append(out, m)
			texts = nil
		}
	}
	for i := range blocks {
		b := &blocks[i]
		bp := fmt.Sprintf("%s[%d]", param, i)
		switch b.Type {
		case "text":
			t, err := blockText(b, bp)
			if err != nil {
				return nil, err
			}
			texts = append(texts, t)
		case "tool_result":
			if b.ToolUseID == "" {
				return nil, badRequest(bp+".tool_use_id", "%s: a tool_result block requires tool_use_id", bp)
			}
			content, err := toolResultText(json.RawMessage(b.Content), bp+".content")
			if err != nil {
				return nil, err
			}
			flush()
			m := chat.Message{Role: "tool", ToolCallID: b.ToolUseID, Name: names[b.ToolUseID]}
			setBlockTexts(&m, content)
			out = append(out, m)
		case "thinking", "redacted_thinking":
		case "image", "document":
			return nil, badRequest(bp+".type", "%s: content block type %q is not supported by a text model", bp, b.Type)
		default:
			return nil, badRequest(bp+".type", "%s: content block type %q is not supported in a user message", bp, b.Type)
		}
	}
	flush()
	return out, nil
}

// toolResultText is a tool_result's content: a string or text blocks
// (their texts, to be joined with newlines).
func toolResultText(raw json.RawMessage, param string) ([]string, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, badRequest(param, "%s: %s", param, jsonProblem(err))
		}
		return []string{s}, nil
	}
	blocks, err := anthropicBlocks(b, param)
	if err != nil {
		return nil, err
	}
	texts := make([]string, 0, len(blocks))
	for i := range blocks {
		bp := fmt.Sprintf("%s[%d]", param, i)
		if blocks[i].Type != "text" {
			return nil, badRequest(bp+".type", "%s: content block type %q is not supported by a text model", bp, blocks[i].Type)
		}
		t, err := blockText(&blocks[i], bp)
		if err != nil {
			return nil, err
		}
		texts = append(texts, t)
	}
	return texts, nil
}

// anthropicTools checks the client tools and returns them in the OpenAI
// form the chat templates take ({"type": "function", "function": {name,
// description, parameters}}), with their names. Server tools (web search,
// code execution, …) are refused.
func anthropicTools(raw []json.RawMessage) ([]any, []string, error) {
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	type tool struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	var tools []any
	var names []string
	for i, r := range raw {
		param := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, nil, badRequest(param, "%s must be a tool object (%s)", param, jsonProblem(err))
		}
		if t.Type != "" && t.Type != "custom" {
			return nil, nil, badRequest(param+".type", "%s.type %q is not supported: this server runs no server tools, only client tools (custom)", param, t.Type)
		}
		if strings.TrimSpace(t.Name) == "" {
			return nil, nil, badRequest(param+".name", "%s.name is required", param)
		}
		schema := bytes.TrimSpace(t.InputSchema)
		if len(schema) == 0 || schema[0] != '{' {
			return nil, nil, badRequest(param+".input_schema", "%s.input_schema must be a JSON Schema object", param)
		}
		b, err := json.Marshal(tool{Type: "function", Function: function{Name: t.Name, Description: t.Description, Parameters: schema}})
		if err != nil {
			return nil, nil, badRequest(param+".input_schema", "%s.input_schema: %v", param, err)
		}
		tools = append(tools, json.RawMessage(b))
		names = append(names, t.Name)
	}
	return tools, names, nil
}

// anthropicToolChoice checks tool_choice ({"type": "auto"|"any"|"none"} or
// {"type": "tool", "name": …}) and returns its type ("auto" when absent).
// As with OpenAI's tool_choice, the model is not forced to call a tool:
// "any" and "tool" read the answer for calls as "auto" does.
func anthropicToolChoice(raw json.RawMessage, names []string) (string, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return "auto", nil
	}
	var tc struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &tc); err != nil {
		return "", badRequest("tool_choice", "tool_choice must be an object: {\"type\": \"auto\"|\"any\"|\"none\"} or {\"type\": \"tool\", \"name\": …}")
	}
	switch tc.Type {
	case "auto", "none":
		return tc.Type, nil
	case "any":
		if len(names) == 0 {
			return "", badRequest("tool_choice", "tool_choice \"any\" needs tools")
		}
		return tc.Type, nil
	case "tool":
		for _, n := range names {
			if n == tc.Name {
				return tc.Type, nil
			}
		}
		return "", badRequest("tool_choice.name", "tool_choice names tool %q, which is not among the tools", tc.Name)
	}
	return "", badRequest("tool_choice.type", "tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\", got %q", tc.Type)
}

// Response shapes.

type anthropicUsageJSON struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// anthropicBlockJSON is a content block of an answer.
type anthropicBlockJSON struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type anthropicMessageJSON struct {
	ID           string               `json:"id"`
	Type         string               `json:"type"` // "message"
	Role         string               `json:"role"`
	Content      []anthropicBlockJSON `json:"content"`
	Model        string               `json:"model"`
	StopReason   *string              `json:"stop_reason"`
	StopSequence *string              `json:"stop_sequence"`
	Usage        anthropicUsageJSON   `json:"usage"`
}

// anthropicID is a fresh id with Anthropic's prefixes (msg_, toolu_).
func anthropicID(prefix string) string {
	id := uuid.New()
	return prefix + hex.EncodeToString(id[:])
}

// toolUseBlock is a tool call as a tool_use block; arguments that are not a
// JSON object are wrapped as {"arguments": …}, as mistral.rs does.
func toolUseBlock(c chat.ToolCall) anthropicBlockJSON {
	input := json.RawMessage(bytes.TrimSpace([]byte(c.Function.Arguments)))
	if len(input) == 0 || input[0] != '{' || !json.Valid(input) {
		b, _ := json.Marshal(map[string]string{"arguments": c.Function.Arguments})
		input = b
	}
	return anthropicBlockJSON{Type: "tool_use", ID: anthropicID("toolu_"), Name: c.Function.Name, Input: input}
}

// anthropicJob is a checked /v1/messages request bound to its model.
type anthropicJob struct {
	job    *job
	stream bool
	tools  *chat.ToolParser
	msgID  string
	// answer is the answer read as tool calls, set by the engine's
	// Request.ToolCalls when it finds calls (so before the stream ends).
	answer toolAnswer
}

// stopReason maps the engine's finish reason to Anthropic's stop_reason,
// and names the stop sequence that ended the answer, if one did (stopToken:
// the last output was an end-of-generation token).
func (aj *anthropicJob) stopReason(res *engine.Result, stopToken bool) (string, *string) {
	switch res.FinishReason {
	case engine.FinishToolCalls:
		return "tool_use", nil
	case engine.FinishLength:
		return "max_tokens", nil
	case engine.FinishStop:
		if stops := aj.job.req.Stop; !stopToken && len(stops) > 0 {
			// The engine cut the text at the stop string: find which one
			// on the decoded tokens, as the engine's matcher did.
			m := sampler.NewStopMatcher(stops)
			m.Push(aj.job.lm.model.Tok.Decode(res.Tokens))
			if s := m.Matched(); s != "" {
				return "stop_sequence", &s
			}
		}
	}
	return "end_turn", nil
}

// handleAnthropicMessages is POST /v1/messages.
func (s *Server) handleAnthropicMessages(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readAnthropicBody(w, r)
	if !ok {
		return
	}
	aj, err := s.prepareAnthropic(r, body)
	if err != nil {
		s.writeAnthropicRequestError(w, r, err)
		return
	}
	defer aj.job.release()
	if aj.stream {
		s.streamAnthropic(w, r, aj)
	} else {
		s.completeAnthropic(w, r, aj)
	}
}

func (s *Server) prepareAnthropic(r *http.Request, body []byte) (*anthropicJob, error) {
	p, err := s.parseAnthropic(body, true)
	if err != nil {
		return nil, err
	}
	g, err := p.settings(s.opts.Seed)
	if err != nil {
		return nil, err
	}
	j, err := s.newJob(r.Context(), p.entry, g)
	if err != nil {
		return nil, err
	}
	prompt, err := p.render(j.lm.model, j.lm.eng.ContextLength())
	if err == nil {
		err = j.setPrompt(prompt)
	}
	if err != nil {
		j.release()
		return nil, err
	}
	aj := &anthropicJob{job: j, stream: p.req.Stream, tools: p.tools, msgID: anthropicID("msg_")}
	if aj.tools != nil {
		j.req.ToolCalls = func(text string) bool {
			content, calls, ok := aj.tools.Parse(text)
			if ok {
				aj.answer = toolAnswer{content: content, calls: calls}
			}
			return ok
		}
	}
	return aj, nil
}

func (s *Server) completeAnthropic(w http.ResponseWriter, r *http.Request, aj *anthropicJob) {
	j := aj.job
	stopToken := false
	gctx, cancel := genContext(r.Context())
	defer cancel()
	res, err := j.lm.eng.Generate(gctx, j.req, func(o engine.Output) error {
		stopToken = o.StopToken
		return nil
	})
	if err != nil {
		s.writeAnthropicRequestError(w, r, generateError(err))
		return
	}
	if res.FinishReason == engine.FinishCanceled {
		// With the client still there: the server's drain time ended (or
		// its model went away). No stop_reason says that the answer was
		// cut, so the client gets what the stream's error event says, as
		// an error (503 overloaded_error: worth retrying elsewhere),
		// rather than a partial answer that looks finished.
		s.writeAnthropicRequestError(w, r, &requestError{status: http.StatusServiceUnavailable, msg: s.canceledMessage()})
		return
	}
	reason, seq := aj.stopReason(res, stopToken)
	content := []anthropicBlockJSON{}
	text := res.Text
	if reason == "tool_use" {
		text = aj.answer.content
	}
	if text != "" {
		content = append(content, anthropicBlockJSON{Type: "text", Text: &text})
	}
	if reason == "tool_use" {
		for _, c := range aj.answer.calls {
			content = append(content, toolUseBlock(c))
		}
	}
	resp := anthropicMessageJSON{
		ID: aj.msgID, Type: "message", Role: "assistant", Content: content, Model: j.entry.spec.ID,
		StopReason: &reason, StopSequence: seq,
		Usage: anthropicUsageJSON{InputTokens: res.PromptTokens, OutputTokens: res.CompletionTokens},
	}
	_ = s.opts.PayloadLog.Response(resp)
	writeJSON(w, http.StatusOK, resp)
}

// Stream events.

type anthropicMessageStart struct {
	Type    string               `json:"type"` // "message_start"
	Message anthropicMessageJSON `json:"message"`
}

type anthropicBlockStart struct {
	Type         string             `json:"type"` // "content_block_start"
	Index        int                `json:"index"`
	ContentBlock anthropicBlockJSON `json:"content_block"`
}

type anthropicDelta struct {
	Type        string  `json:"type"` // text_delta, input_json_delta
	Text        *string `json:"text,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

type anthropicBlockDelta struct {
	Type  string         `json:"type"` // "content_block_delta"
	Index int            `json:"index"`
	Delta anthropicDelta `json:"delta"`
}

type anthropicBlockStop struct {
	Type  string `json:"type"` // "content_block_stop"
	Index int    `json:"index"`
}

type anthropicMessageDelta struct {
	Type  string `json:"type"` // "message_delta"
	Delta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage struct {
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

type anthropicTypeOnly struct {
	Type string `json:"type"` // "message_stop", "ping"
}

// anthropicPing is the Anthropic stream's keep-alive frame.
var anthropicPing = []byte("event: ping\ndata: {\"type\":\"ping\"}\n\n")

// anthropicEvent sends v as one named event.
func anthropicEvent(sw *sseWriter, name string, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	sw.buf = append(sw.buf[:0], "event: "...)
	sw.buf = append(sw.buf, name...)
	sw.buf = append(sw.buf, "\ndata: "...)
	sw.buf = append(sw.buf, body...)
	sw.buf = append(sw.buf, "\n\n"...)
	return sw.frame(sw.buf)
}

// anthropicStreamer writes the events of one streamed answer.
type anthropicStreamer struct {
	s        *Server
	sw       *sseWriter
	index    int  // the current content block
	textOpen bool // a text block is open at index
}

func (a *anthropicStreamer) send(name string, v any) error {
	_ = a.s.opts.PayloadLog.Response(v)
	return anthropicEvent(a.sw, name, v)
}

// text sends a piece of text, opening a text block first if none is open.
func (a *anthropicStreamer) text(piece string) error {
	if piece == "" {
		return nil
	}
	if !a.textOpen {
		empty := ""
		if err := a.send("content_block_start", anthropicBlockStart{Type: "content_block_start", Index: a.index,
			ContentBlock: anthropicBlockJSON{Type: "text", Text: &empty}}); err != nil {
			return err
		}
		a.textOpen = true
	}
	return a.send("content_block_delta", anthropicBlockDelta{Type: "content_block_delta", Index: a.index,
		Delta: anthropicDelta{Type: "text_delta", Text: &piece}})
}

// closeText ends the open text block, if any.
func (a *anthropicStreamer) closeText() error {
	if !a.textOpen {
		return nil
	}
	a.textOpen = false
	a.index++
	return a.send("content_block_stop", anthropicBlockStop{Type: "content_block_stop", Index: a.index - 1})
}

// toolUse sends one tool call as a whole tool_use block: its start with an
// empty input, the arguments in one input_json_delta, its stop.
func (a *anthropicStreamer) toolUse(c chat.ToolCall) error {
	b := toolUseBlock(c)
	args := string(b.Input)
	b.Input = json.RawMessage("{}")
	i := a.index
	a.index++
	if err := a.send("content_block_start", anthropicBlockStart{Type: "content_block_start", Index: i, ContentBlock: b}); err != nil {
		return err
	}
	if err := a.send("content_block_delta", anthropicBlockDelta{Type: "content_block_delta", Index: i,
		Delta: anthropicDelta{Type: "input_json_delta", PartialJSON: &args}}); err != nil {
		return err
	}
	return a.send("content_block_stop", anthropicBlockStop{Type: "content_block_stop", Index: i})
}

// streamAnthropic streams the answer in Anthropic's event order:
// message_start (at once, with the prompt's token count), then per content
// block content_block_start, its deltas and content_block_stop (text as it
// is generated; tool calls, read from the finished answer, one tool_use
// block each with its arguments in one input_json_delta), then
// message_delta (stop_reason, output tokens) and message_stop; no [DONE].
// While nothing is sent for the keep-alive interval, `event: ping` frames
// keep the connection open. Only engine outputs are token steps for TTFT
// and ITL (generateStreaming): the bookkeeping events and pings never are.
func (s *Server) streamAnthropic(w http.ResponseWriter, r *http.Request, aj *anthropicJob) {
	j := aj.job
	st := observe.StreamFromContext(r.Context())
	sw := startSSE(w)
	sw.ping = anthropicPing
	a := &anthropicStreamer{s: s, sw: sw}
	start := anthropicMessageJSON{ID: aj.msgID, Type: "message", Role: "assistant", Content: []anthropicBlockJSON{},
		Model: j.entry.spec.ID, Usage: anthropicUsageJSON{InputTokens: len(j.req.Prompt)}}
	_ = a.send("message_start", anthropicMessageStart{Type: "message_start", Message: start})

	var held *toolStream
	if aj.tools != nil {
		held = &toolStream{p: aj.tools}
	}
	stopToken := false
	res, err := generateStreaming(r.Context(), j.lm.eng, j.req, sw, s.opts.KeepAlive, func(o engine.Output) error {
		stopToken = o.StopToken
		text := o.Text
		if held != nil {
			text = held.push(text)
		}
		return a.text(text)
	})
	if err != nil {
		err = generateError(err)
		msg := err.Error()
		st.Error(msg)
		_ = s.opts.PayloadLog.Error(msg)
		_ = anthropicEvent(sw, "error", anthropicError(errorStatus(err), msg))
		return
	}
	if sw.err != nil || (res.FinishReason == engine.FinishCanceled && clientGone(r)) {
		return
	}
	if res.FinishReason == engine.FinishCanceled {
		// Canceled with the client still there: the server's drain time
		// ended (or its model went away). Anthropic has no stop reason for
		// that, so the stream ends with an error event.
		msg := s.canceledMessage()
		st.Error(msg)
		_ = anthropicEvent(sw, "error", anthropicError(http.StatusServiceUnavailable, msg))
		return
	}
	reason, seq := aj.stopReason(res, stopToken)
	if a.finish(aj, held, reason, seq, res) != nil {
		return
	}
	st.SetUsage(accessUsage(usage(res)))
	st.Done()
}

// finish sends what ends a stream: the held-back text or the tool_use
// blocks, then message_delta and message_stop.
func (a *anthropicStreamer) finish(aj *anthropicJob, held *toolStream, reason string, seq *string, res *engine.Result) error {
	var calls []chat.ToolCall
	if held != nil {
		var answer *toolAnswer
		if reason == "tool_use" {
			answer = &aj.answer
		}
		var rest string
		rest, calls = held.finish(answer)
		if err := a.text(rest); err != nil {
			return err
		}
	}
	if err := a.closeText(); err != nil {
		return err
	}
	for _, c := range calls {
		if err := a.toolUse(c); err != nil {
			return err
		}
	}
	md := anthropicMessageDelta{Type: "message_delta"}
	md.Delta.StopReason, md.Delta.StopSequence = reason, seq
	md.Usage.OutputTokens = res.CompletionTokens
	if err := a.send("message_delta", md); err != nil {
		return err
	}
	return a.send("message_stop", anthropicTypeOnly{Type: "message_stop"})
}

// handleAnthropicCountTokens is POST /v1/messages/count_tokens: the tokens
// of the prompt the request would run (chat template applied, generation
// prompt added); max_tokens is optional here.
func (s *Server) handleAnthropicCountTokens(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readAnthropicBody(w, r)
	if !ok {
		return
	}
	p, err := s.parseAnthropic(body, false)
	if err != nil {
		s.writeAnthropicRequestError(w, r, err)
		return
	}
	lm, release, err := p.entry.acquire(r.Context())
	if err != nil {
		s.writeAnthropicRequestError(w, r, err)
		return
	}
	defer release()
	prompt, err := p.render(lm.model, lm.eng.ContextLength())
	if err != nil {
		s.writeAnthropicRequestError(w, r, err)
		return
	}
	resp := struct {
		InputTokens int `json:"input_tokens"`
	}{len(prompt)}
	_ = s.opts.PayloadLog.Response(resp)
	writeJSON(w, http.StatusOK, resp)
}
