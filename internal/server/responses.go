package server

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"mistralrs/internal/chat"
	"mistralrs/internal/engine"
	"mistralrs/internal/observe"
)

// The OpenAI Responses API: POST /v1/responses (plain, streamed with the
// named response.* events, or in the background), GET and DELETE
// /v1/responses/{response_id}, POST /v1/responses/{response_id}/cancel.
// A response runs through the chat template like a chat completion: the
// instructions become a system message, the input items become messages
// (function_call and function_call_output items become assistant tool
// calls and tool messages), and previous_response_id prepends the stored
// conversation of an earlier response. Stored responses live in memory
// (responseStore), bounded in count and bytes.

// responsesRequest is the body of POST /v1/responses.
type responsesRequest struct {
	samplingFields
	Input              bodyJSON                   `json:"input"`
	Instructions       *string                    `json:"instructions"`
	PreviousResponseID *string                    `json:"previous_response_id"`
	Store              *bool                      `json:"store"`
	Background         bool                       `json:"background"`
	MaxOutputTokens    *int                       `json:"max_output_tokens"`
	Tools              []json.RawMessage          `json:"tools"`
	ToolChoice         json.RawMessage            `json:"tool_choice"`
	ParallelToolCalls  *bool                      `json:"parallel_tool_calls"`
	MaxToolCalls       json.RawMessage            `json:"max_tool_calls"`
	Metadata           map[string]string          `json:"metadata"`
	Text               json.RawMessage            `json:"text"`
	ResponseFormat     json.RawMessage            `json:"response_format"`
	Reasoning          json.RawMessage            `json:"reasoning"`
	Truncation         *string                    `json:"truncation"`
	Include            []string                   `json:"include"`
	Logprobs           bool                       `json:"logprobs"`
	TopLogprobs        *int                       `json:"top_logprobs"`
	User               *string                    `json:"user"`
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
	EnableThinking     *bool                      `json:"enable_thinking"`
}

// respRefused are request fields the server does not implement: a request
// that sets one (to anything but null or an empty list) is refused rather
// than answered as if the field were not there. Any dry_* field is too;
// reasoning_effort "off" or "none" asks for nothing and passes.
var respRefused = map[string]string{
	"reasoning_effort":          "reasoning effort is not implemented",
	"adapter":                   "LoRA adapters are not supported",
	"web_search_options":        "web search is not supported",
	"agent_permission":          "server-side agents and tools are not supported",
	"code_execution_permission": "server-side agents and tools are not supported",
	"files":                     "file inputs are not supported",
	"prompt":                    "stored prompt templates are not supported",
	"conversation":              "conversation objects are not supported; use previous_response_id",
}

// respUnsupported refuses the first (in name order) unimplemented field the
// body sets.
func respUnsupported(body []byte) error {
	// bodyJSON, not json.RawMessage: the values (the input among them) stay
	// in the body instead of being copied.
	var top map[string]bodyJSON
	if json.Unmarshal(body, &top) != nil {
		return nil
	}
	var names []string
	for k, v := range top {
		v = bytes.TrimSpace(v)
		if isJSON(v, "null") || isJSON(v, "[]") ||
			k == "reasoning_effort" && (isJSON(v, `"off"`) || isJSON(v, `"none"`)) {
			continue
		}
		if _, ok := respRefused[k]; ok || strings.HasPrefix(k, "dry_") {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	why, ok := respRefused[names[0]]
	if !ok {
		why = "DRY sampling is not implemented"
	}
	return badRequest(names[0], "%s is not supported by this server: %s", names[0], why)
}

// Response objects.

type responseObject struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	CompletedAt        *int64             `json:"completed_at"`
	Error              *responseErrorJSON `json:"error"`
	IncompleteDetails  *respIncomplete    `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	MaxToolCalls       *int               `json:"max_tool_calls"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          respReasoning      `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               respTextConfig     `json:"text"`
	ToolChoice         json.RawMessage    `json:"tool_choice"`
	Tools              []json.RawMessage  `json:"tools"`
	TopLogprobs        int                `json:"top_logprobs"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *respUsage         `json:"usage"`
	User               *string            `json:"user"`
	Metadata           map[string]string  `json:"metadata"`
}

type responseErrorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type respIncomplete struct {
	Reason string `json:"reason"`
}

type respReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type respTextConfig struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

type respUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// respMessageItem is an output message (the answer's text).
type respMessageItem struct {
	Type    string           `json:"type"` // "message"
	ID      string           `json:"id"`
	Status  string           `json:"status"`
	Role    string           `json:"role"`
	Content []respOutputText `json:"content"`
}

type respOutputText struct {
	Type        string         `json:"type"` // "output_text"
	Text        string         `json:"text"`
	Annotations []any          `json:"annotations"`
	Logprobs    []tokenLogprob `json:"logprobs"`
}

// respFunctionCall is an output function call.
type respFunctionCall struct {
	Type      string `json:"type"` // "function_call"
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// Response status values.
const (
	respQueued     = "queued"
	respInProgress = "in_progress"
	respCompleted  = "completed"
	respFailed     = "failed"
	respCancelled  = "cancelled"
)

func newItemID(prefix string) string {
	id := uuid.New()
	return prefix + hex.EncodeToString(id[:])
}

func newMessageItem(status, text string, lps []tokenLogprob) *respMessageItem {
	return &respMessageItem{Type: "message", ID: newItemID("msg_"), Status: status, Role: "assistant",
		Content: []respOutputText{outputText(text, lps)}}
}

func outputText(text string, lps []tokenLogprob) respOutputText {
	if lps == nil {
		lps = []tokenLogprob{}
	}
	return respOutputText{Type: "output_text", Text: text, Annotations: []any{}, Logprobs: lps}
}

// functionCalls makes the output items of an answer's tool calls.
func functionCalls(calls []chat.ToolCall) []*respFunctionCall {
	out := make([]*respFunctionCall, len(calls))
	for i, c := range calls {
		out[i] = &respFunctionCall{Type: "function_call", ID: newItemID("fc_"), CallID: newItemID("call_"),
			Name: c.Function.Name, Arguments: c.Function.Arguments, Status: respCompleted}
	}
	return out
}

// respJob is a checked Responses request, bound to a loaded model.
type respJob struct {
	job        *job
	id         string
	stream     bool
	background bool
	store      bool
	logprobs   bool
	tools      *chat.ToolParser // nil: the answer is not read for tool calls
	answer     toolAnswer       // set by the engine's ToolCalls hook
	history    []chat.Message   // earlier turns (previous_response_id) and this input, without the instructions
	base       responseObject   // the request's echo fields
}

// object is the response in the given status, without output.
func (p *respJob) object(status string) *responseObject {
	o := p.base
	o.Status = status
	o.Output = []any{}
	return &o
}

// finish is the response of a finished generation with its output items,
// and the conversation it ends (for previous_response_id).
func (p *respJob) finish(status string, res *engine.Result, text string, msg *respMessageItem, fcs []*respFunctionCall) (*responseObject, []chat.Message) {
	o := p.object(status)
	if msg != nil {
		o.Output = append(o.Output, msg)
	}
	assistant := chat.Message{Role: "assistant", Content: text}
	for _, fc := range fcs {
		o.Output = append(o.Output, fc)
		assistant.ToolCalls = append(assistant.ToolCalls, chat.ToolCall{ID: fc.CallID, Type: "function",
			Function: chat.FunctionCall{Name: fc.Name, Arguments: fc.Arguments}})
	}
	if status == respCompleted {
		now := time.Now().Unix()
		o.CompletedAt = &now
	}
	if res != nil {
		u := &respUsage{InputTokens: res.PromptTokens, OutputTokens: res.CompletionTokens, TotalTokens: res.PromptTokens + res.CompletionTokens}
		u.InputTokensDetails.CachedTokens = res.CachedTokens
		o.Usage = u
		if res.FinishReason == engine.FinishLength {
			o.IncompleteDetails = &respIncomplete{Reason: "max_output_tokens"}
		}
	}
	msgs := make([]chat.Message, 0, len(p.history)+1)
	msgs = append(append(msgs, p.history...), assistant)
	return o, msgs
}

// output reads a finished generation's answer: its text and message item,
// and its function calls.
func (p *respJob) output(res *engine.Result, lps []tokenLogprob) (string, *respMessageItem, []*respFunctionCall) {
	if res.FinishReason == engine.FinishToolCalls {
		var msg *respMessageItem
		if p.answer.content != "" {
			msg = newMessageItem(respCompleted, p.answer.content, lps)
		}
		return p.answer.content, msg, functionCalls(p.answer.calls)
	}
	return res.Text, newMessageItem(respCompleted, res.Text, lps), nil
}

// handleCreateResponse is POST /v1/responses.
func (s *Server) handleCreateResponse(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	p, err := s.prepareResponse(r, body)
	if err != nil {
		s.writePrepareError(w, r, err)
		return
	}
	switch {
	case p.background:
		s.startBackground(w, r, p)
	case p.stream:
		defer p.job.release()
		s.streamResponse(w, r, p)
	default:
		defer p.job.release()
		s.completeResponse(w, r, p)
	}
}

func (s *Server) prepareResponse(r *http.Request, body []byte) (*respJob, error) {
	var req responsesRequest
	if err := decodeJSON(body, &req); err != nil {
		return nil, err
	}
	if err := respUnsupported(body); err != nil {
		return nil, err
	}
	entry, err := s.resolveModel(req.Model)
	if err != nil {
		return nil, err
	}
	if err := req.checkResponses(); err != nil {
		return nil, err
	}
	logprobs := req.Logprobs || req.TopLogprobs != nil
	for _, inc := range req.Include {
		logprobs = logprobs || inc == "message.output_text.logprobs"
	}
	top := 0
	if req.TopLogprobs != nil {
		top = *req.TopLogprobs
	}
	if req.MaxOutputTokens != nil {
		if *req.MaxOutputTokens < 1 {
			return nil, badRequest("max_output_tokens", "max_output_tokens must be at least 1, got %d", *req.MaxOutputTokens)
		}
		req.MaxCompletionTokens = req.MaxOutputTokens
	}
	req.N = nil // checked above: one choice
	g, err := req.settings(logprobs, top, s.opts.Seed)
	if err != nil {
		return nil, err
	}
	param, format, err := req.format()
	if err != nil {
		return nil, err
	}
	if g.grammar, err = s.constraint(param, format, req.Grammar); err != nil {
		return nil, err
	}
	input, err := respInput(req.Input)
	if err != nil {
		return nil, err
	}
	var history []chat.Message
	if req.PreviousResponseID != nil && *req.PreviousResponseID != "" {
		prev, err := s.previousConversation(*req.PreviousResponseID)
		if err != nil {
			return nil, err
		}
		history = append(history, prev...)
	}
	history = append(history, input...)
	chatTools, toolsEcho, err := respTools(req.Tools)
	if err != nil {
		return nil, err
	}
	choice, err := respToolChoice(req.ToolChoice)
	if err != nil {
		return nil, err
	}
	tools, err := toolsParser(chatTools, choice)
	if err != nil {
		return nil, err
	}

	p := &respJob{id: "resp_" + uuid.New().String(), stream: req.Stream, background: req.Background,
		store: req.Store == nil || *req.Store, logprobs: logprobs, tools: tools, history: history}
	p.base = responseObject{
		ID: p.id, Object: "response", Background: req.Background, Instructions: req.Instructions,
		MaxOutputTokens: req.MaxCompletionTokens, Model: entry.spec.ID, ParallelToolCalls: true,
		PreviousResponseID: req.PreviousResponseID, Store: p.store, Temperature: 1, TopP: 1,
		ToolChoice: json.RawMessage(`"auto"`), Tools: toolsEcho, TopLogprobs: top, Truncation: "disabled",
		User: req.User, Metadata: req.Metadata,
	}
	if p.base.MaxOutputTokens == nil {
		p.base.MaxOutputTokens = req.MaxTokens
	}
	if req.Temperature != nil {
		p.base.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		p.base.TopP = *req.TopP
	}
	if b := bytes.TrimSpace(req.ToolChoice); len(b) > 0 && string(b) != "null" {
		p.base.ToolChoice = b
	}
	if p.base.Metadata == nil {
		p.base.Metadata = map[string]string{}
	}
	p.base.Text.Format.Type = "text"

	msgs := history
	if req.Instructions != nil && *req.Instructions != "" {
		msgs = append([]chat.Message{{Role: "system", Content: *req.Instructions}}, history...)
	}
	opts := templateOptions(chatTools, req.ChatTemplateKwargs, req.EnableThinking)

	j, err := s.newJob(r.Context(), entry, g)
	if err != nil {
		return nil, err
	}
	m := j.lm.model
	prompt, err := renderPrompt(m, j.lm.eng.ContextLength(), msgs, opts, "input")
	if err == nil {
		err = j.setPrompt(prompt)
	}
	if err != nil {
		j.release()
		return nil, err
	}
	p.job = j
	p.base.CreatedAt = j.created
	if tools != nil {
		j.req.ToolCalls = func(text string) bool {
			content, calls, ok := tools.Parse(text)
			if ok {
				p.answer = toolAnswer{content: content, calls: calls}
			}
			return ok
		}
	}
	return p, nil
}

// checkResponses refuses the Responses settings the server does not implement.
func (req *responsesRequest) checkResponses() error {
	if req.N != nil && *req.N != 1 {
		return badRequest("n", "n = %d is not supported on /v1/responses (one output per response)", *req.N)
	}
	if req.ParallelToolCalls != nil && !*req.ParallelToolCalls {
		return badRequest("parallel_tool_calls", "parallel_tool_calls=false is not supported: this server does not support disabling parallel tool calls")
	}
	if b := bytes.TrimSpace(req.MaxToolCalls); len(b) > 0 && string(b) != "null" {
		return badRequest("max_tool_calls", "max_tool_calls is not supported: this server does not support limiting the number of tool calls")
	}
	if req.Background && req.Stream {
		return badRequest("background", "background responses cannot be streamed: create it with stream false and poll GET /v1/responses/{response_id}")
	}
	if req.Background && req.Store != nil && !*req.Store {
		return badRequest("store", "background responses must be stored (store: true)")
	}
	if req.Truncation != nil && *req.Truncation != "disabled" {
		return badRequest("truncation", "truncation %q is not supported (only \"disabled\": a conversation longer than the context is refused)", *req.Truncation)
	}

	if b := bytes.TrimSpace(req.Reasoning); len(b) > 0 && string(b) != "null" {
		var rs struct {
			Effort *string `json:"effort"`
		}
		if err := json.Unmarshal(b, &rs); err != nil {
			return badRequest("reasoning", "reasoning must be an object: %s", jsonProblem(err))
		}
		if rs.Effort != nil && *rs.Effort != "none" {
			return badRequest("reasoning.effort", "reasoning.effort %q is not supported by this server", *rs.Effort)
		}
	}
	return nil
}

// format is the request's output format: text.format, else mistral.rs's
// response_format; param names it for errors.
func (req *responsesRequest) format() (param string, raw json.RawMessage, err error) {
	if b := bytes.TrimSpace(req.Text); len(b) > 0 && string(b) != "null" {
		var t struct {
			Format json.RawMessage `json:"format"`
		}
		if err := json.Unmarshal(b, &t); err != nil {
			return "", nil, badRequest("text", "text must be an object: %s", jsonProblem(err))
		}
		if !isNull(t.Format) {
			return "text.format", t.Format, nil
		}
	}
	return "response_format", req.ResponseFormat, nil
}

// previousConversation is the conversation a stored response ended.
func (s *Server) previousConversation(id string) ([]chat.Message, error) {
	e, ok := s.responses.get(id)
	if !ok {
		return nil, badRequest("previous_response_id", "Previous response with id '%s' not found.", id)
	}
	obj, msgs, running := s.responses.state(e)
	if running || msgs == nil {
		return nil, badRequest("previous_response_id", "Previous response with id '%s' is %s and cannot be continued yet.", id, obj.Status)
	}
	return msgs, nil
}

// respInputItem is one item of an input list.
type respInputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   bodyJSON        `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// respInput turns the input (a string, or a list of items) into messages.
func respInput(raw bodyJSON) ([]chat.Message, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return nil, badRequest("input", "input is required")
	}
	if b[0] == '"' {
		var text string
		if err := json.Unmarshal(b, &text); err != nil {
			return nil, badRequest("input", "input: %s", jsonProblem(err))
		}
		if text == "" {
			return nil, badRequest("input", "input must not be empty")
		}
		return []chat.Message{{Role: "user", Content: text}}, nil
	}
	var items []respInputItem
	if err := json.Unmarshal(b, &items); err != nil {
		return nil, badRequest("input", "input must be a string or an array of input items (%s)", jsonProblem(err))
	}
	if len(items) == 0 {
		return nil, badRequest("input", "input must not be empty")
	}
	var msgs []chat.Message
	names := map[string]string{} // call id -> function name
	for i, it := range items {
		at := func(field string) string { return fmt.Sprintf("input[%d]%s", i, field) }
		switch it.Type {
		case "", "message":
			role := it.Role
			switch role {
			case "user", "assistant", "system":
			case "developer":
				role = "system"
			case "":
				return nil, badRequest(at(".role"), "%s: role is required", at(""))
			default:
				return nil, badRequest(at(".role"), "%s: role %q is not supported (user, assistant, system or developer)", at(""), role)
			}
			m := chat.Message{Role: role}
			if err := respContent(&m, it.Content); err != nil {
				return nil, badRequest(at(".content"), "%s.content: %s", at(""), jsonProblem(err))
			}
			msgs = append(msgs, m)
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, badRequest(at(""), "%s: a function_call item needs call_id and name", at(""))
			}
			names[it.CallID] = it.Name
			tc := chat.ToolCall{ID: it.CallID, Type: "function", Function: chat.FunctionCall{Name: it.Name, Arguments: it.Arguments}}
			if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
				// Calls after an assistant message (or other calls) are
				// one assistant turn, as a chat completion has them.
				msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, tc)
			} else {
				msgs = append(msgs, chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{tc}})
			}
		case "function_call_output":
			if it.CallID == "" {
				return nil, badRequest(at(".call_id"), "%s: a function_call_output item needs call_id", at(""))
			}
			m := chat.Message{Role: "tool", ToolCallID: it.CallID, Name: names[it.CallID]}
			if err := respContent(&m, bodyJSON(it.Output)); err != nil {
				return nil, badRequest(at(".output"), "%s.output: %s", at(""), jsonProblem(err))
			}
			msgs = append(msgs, m)
		default:
			return nil, badRequest(at(".type"), "%s: item type %q is not supported (message, function_call, function_call_output)", at(""), it.Type)
		}
	}
	return msgs, nil
}

// respContent accepts a string or a list of text parts (input_text,
// output_text, text); a text model takes nothing else.
func respContent(m *chat.Message, raw bodyJSON) error {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return errors.New("content is required")
	}
	if b[0] == '"' {
		return json.Unmarshal(b, &m.Content)
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return errors.New("must be a string or an array of content parts")
	}
	m.Parts = []chat.ContentPart{}
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			m.Parts = append(m.Parts, chat.ContentPart{Type: "text", Text: p.Text})
		default:
			return fmt.Errorf("content part type %q is not supported by a text model", p.Type)
		}
	}
	return nil
}

// respTools turns Responses function tools ({"type": "function", "name":
// …, "parameters": …}) into the chat form the template and the tool parser
// take; the chat form itself is accepted too. The second result is what
// the response echoes.
func respTools(tools []json.RawMessage) ([]json.RawMessage, []json.RawMessage, error) {
	chatTools := make([]json.RawMessage, 0, len(tools))
	for i, raw := range tools {
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description json.RawMessage `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Function    json.RawMessage `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil {
			return nil, nil, badRequest(fmt.Sprintf("tools[%d]", i), "tools[%d] must be an object (%s)", i, jsonProblem(err))
		}
		if t.Type != "function" {
			return nil, nil, badRequest(fmt.Sprintf("tools[%d].type", i), "tools[%d].type %q is not supported (only \"function\" tools)", i, t.Type)
		}
		if len(t.Function) > 0 {
			chatTools = append(chatTools, raw)
			continue
		}
		if strings.TrimSpace(t.Name) == "" {
			return nil, nil, badRequest(fmt.Sprintf("tools[%d].name", i), "tools[%d].name is required", i)
		}
		fn := struct {
			Name        string          `json:"name"`
			Description json.RawMessage `json:"description,omitempty"`
			Parameters  json.RawMessage `json:"parameters,omitempty"`
		}{t.Name, t.Description, t.Parameters}
		b, err := json.Marshal(struct {
			Type     string `json:"type"`
			Function any    `json:"function"`
		}{"function", fn})
		if err != nil {
			return nil, nil, badRequest(fmt.Sprintf("tools[%d]", i), "tools[%d]: %v", i, err)
		}
		chatTools = append(chatTools, b)
	}
	echo := tools
	if echo == nil {
		echo = []json.RawMessage{}
	}
	return chatTools, echo, nil
}

// respToolChoice turns a Responses tool_choice ("auto", "none",
// "required", {"type": "function", "name": …}) into the chat form.
func respToolChoice(raw json.RawMessage) (json.RawMessage, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" || b[0] == '"' {
		return b, nil
	}
	var c struct {
		Type     string          `json:"type"`
		Name     string          `json:"name"`
		Function json.RawMessage `json:"function"`
	}
	if err := json.Unmarshal(b, &c); err != nil || c.Type != "function" {
		return nil, badRequest("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"name\": …}")
	}
	if len(c.Function) > 0 {
		return b, nil
	}
	out, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
	return out, nil
}

// completeResponse answers a response in one JSON body.
func (s *Server) completeResponse(w http.ResponseWriter, r *http.Request, p *respJob) {
	j := p.job
	tok := j.lm.model.Tok
	var lps []tokenLogprob
	gctx, cancel := genContext(r.Context())
	defer cancel()
	res, err := j.lm.eng.Generate(gctx, j.req, func(o engine.Output) error {
		if p.logprobs && o.Logprob != nil && !o.StopToken {
			lps = append(lps, chatLogprob(tok, o.Logprob))
		}
		return nil
	})
	if err != nil {
		err = generateError(err)
		var re *requestError
		if !errors.As(err, &re) && p.store {
			// A failed generation is kept, as mistral.rs keeps it.
			obj := p.object(respFailed)
			obj.Error = &responseErrorJSON{Code: "server_error", Message: err.Error()}
			s.responses.add(&storedResponse{id: p.id, obj: obj})
		}
		s.writeRequestError(w, r, err)
		return
	}
	if res.FinishReason == engine.FinishCanceled {
		if clientGone(r) {
			observe.WriteErrorMessage(w, r, statusClientClosed, "client closed the request")
			return
		}
		// With the client still there: the server's drain time ended (or
		// its model went away). The response failed, as the stream's
		// response.failed says; what was generated is kept as an
		// incomplete message.
		s.writeCanceledResponse(w, r, p, res, lps)
		return
	}
	text, msg, fcs := p.output(res, lps)
	obj, conv := p.finish(respCompleted, res, text, msg, fcs)
	if p.store {
		s.responses.add(&storedResponse{id: p.id, obj: obj, msgs: conv})
	}
	_ = s.opts.PayloadLog.Response(obj)
	writeJSON(w, http.StatusOK, obj)
}

// writeCanceledResponse answers a response whose generation the server
// canceled: status failed with a server_error naming the cause, the text
// so far in an incomplete message item, and the usage. It is stored (when
// store is on) as failed, so it cannot be continued.
func (s *Server) writeCanceledResponse(w http.ResponseWriter, r *http.Request, p *respJob, res *engine.Result, lps []tokenLogprob) {
	m := s.canceledMessage()
	observe.SetError(r.Context(), m)
	_ = s.opts.PayloadLog.Error(m)
	obj, _ := p.finish(respFailed, res, res.Text, newMessageItem("incomplete", res.Text, lps), nil)
	obj.Error = &responseErrorJSON{Code: "server_error", Message: m}
	if p.store {
		s.responses.add(&storedResponse{id: p.id, obj: obj})
	}
	_ = s.opts.PayloadLog.Response(obj)
	writeJSON(w, http.StatusOK, obj)
}

// respEvents writes the named events of a Responses stream, numbering them.
type respEvents struct {
	sw  *sseWriter
	pl  *observe.PayloadLog
	seq int
	buf []byte
}

// send writes one event: `event: <type>` and its data, which gets the type
// and the next sequence number.
func (e *respEvents) send(typ string, ev map[string]any) error {
	ev["type"] = typ
	ev["sequence_number"] = e.seq
	e.seq++
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_ = e.pl.Response(ev)
	e.buf = append(e.buf[:0], "event: "...)
	e.buf = append(e.buf, typ...)
	e.buf = append(e.buf, "\ndata: "...)
	e.buf = append(e.buf, body...)
	e.buf = append(e.buf, "\n\n"...)
	return e.sw.frame(e.buf)
}

// streamResponse answers with the Responses event stream: response.created,
// response.in_progress at the first token, the message item
// (output_item.added, content_part.added, output_text.delta per piece of
// text, output_text.done, content_part.done, output_item.done), then each
// function call item (output_item.added, function_call_arguments.delta and
// .done, output_item.done), response.completed and data: [DONE]. Only the
// engine's token steps are TTFT/ITL samples (generateStreaming); the
// bookkeeping events are not.
func (s *Server) streamResponse(w http.ResponseWriter, r *http.Request, p *respJob) {
	j := p.job
	tok := j.lm.model.Tok
	st := observe.StreamFromContext(r.Context())
	sw := startSSE(w)
	ev := &respEvents{sw: sw, pl: s.opts.PayloadLog}
	_ = ev.send("response.created", map[string]any{"response": p.object(respQueued)})

	var (
		started      bool
		msg          *respMessageItem // the open message item
		sent         strings.Builder  // its text so far
		pending, all []tokenLogprob
		held         *toolStream
	)
	if p.tools != nil {
		held = &toolStream{p: p.tools}
	}
	inProgress := func() error {
		if started {
			return nil
		}
		started = true
		return ev.send("response.in_progress", map[string]any{"response": p.object(respInProgress)})
	}
	openMessage := func() error {
		if msg != nil {
			return nil
		}
		msg = &respMessageItem{Type: "message", ID: newItemID("msg_"), Status: respInProgress, Role: "assistant", Content: []respOutputText{}}
		if err := ev.send("response.output_item.added", map[string]any{"output_index": 0, "item": msg}); err != nil {
			return err
		}
		return ev.send("response.content_part.added", map[string]any{"item_id": msg.ID, "output_index": 0, "content_index": 0,
			"part": outputText("", nil)})
	}
	delta := func(text string) error {
		if err := openMessage(); err != nil {
			return err
		}
		sent.WriteString(text)
		lp := pending
		if lp == nil {
			lp = []tokenLogprob{}
		}
		pending = nil
		return ev.send("response.output_text.delta", map[string]any{"item_id": msg.ID, "output_index": 0, "content_index": 0,
			"delta": text, "logprobs": lp})
	}
	res, err := generateStreaming(r.Context(), j.lm.eng, j.req, sw, s.opts.KeepAlive, func(o engine.Output) error {
		if err := inProgress(); err != nil {
			return err
		}
		if p.logprobs && o.Logprob != nil && !o.StopToken {
			l := chatLogprob(tok, o.Logprob)
			pending = append(pending, l)
			all = append(all, l)
		}
		text := o.Text
		if held != nil {
			text = held.push(text)
		}
		if text == "" {
			return nil
		}
		return delta(text)
	})
	if err != nil {
		err = generateError(err)
		m := err.Error()
		st.Error(m)
		_ = s.opts.PayloadLog.Error(m)
		var re *requestError
		if errors.As(err, &re) {
			// Refused by the engine: an error event (mistral.rs's
			// validation error path).
			_ = ev.send("error", map[string]any{"code": observe.ErrorType(re.status), "message": m, "param": nil,
				"error": map[string]any{"type": observe.ErrorType(re.status), "code": nil, "message": m, "param": nil}})
		} else {
			obj := p.object(respFailed)
			obj.Error = &responseErrorJSON{Code: "server_error", Message: m}
			_ = ev.send("response.failed", map[string]any{"response": obj})
		}
		_ = sw.done()
		return
	}
	if sw.err != nil || (res.FinishReason == engine.FinishCanceled && clientGone(r)) {
		return
	}
	if res.FinishReason == engine.FinishCanceled {
		// Canceled with the client still there: the server's drain time
		// ended (or its model went away). The response failed.
		m := s.canceledMessage()
		st.Error(m)
		obj := p.object(respFailed)
		obj.Error = &responseErrorJSON{Code: "server_error", Message: m}
		_ = ev.send("response.failed", map[string]any{"response": obj})
		_ = sw.done()
		return
	}
	_ = inProgress()
	var calls []chat.ToolCall
	if held != nil {
		var answer *toolAnswer
		if res.FinishReason == engine.FinishToolCalls {
			answer = &p.answer
		}
		var rest string
		rest, calls = held.finish(answer)
		if rest != "" {
			_ = delta(rest)
		}
	}
	var done *respMessageItem
	if msg != nil || len(calls) == 0 {
		_ = openMessage()
		text := sent.String()
		done = &respMessageItem{Type: "message", ID: msg.ID, Status: respCompleted, Role: "assistant",
			Content: []respOutputText{outputText(text, all)}}
		lp := all
		if lp == nil {
			lp = []tokenLogprob{}
		}
		_ = ev.send("response.output_text.done", map[string]any{"item_id": msg.ID, "output_index": 0, "content_index": 0,
			"text": text, "logprobs": lp})
		_ = ev.send("response.content_part.done", map[string]any{"item_id": msg.ID, "output_index": 0, "content_index": 0,
			"part": done.Content[0]})
		_ = ev.send("response.output_item.done", map[string]any{"output_index": 0, "item": done})
	}
	fcs := functionCalls(calls)
	for i, fc := range fcs {
		idx := i
		if done != nil {
			idx++
		}
		added := *fc
		added.Status, added.Arguments = respInProgress, ""
		_ = ev.send("response.output_item.added", map[string]any{"output_index": idx, "item": &added})
		_ = ev.send("response.function_call_arguments.delta", map[string]any{"item_id": fc.ID, "output_index": idx, "delta": fc.Arguments})
		_ = ev.send("response.function_call_arguments.done", map[string]any{"item_id": fc.ID, "output_index": idx, "name": fc.Name, "arguments": fc.Arguments})
		_ = ev.send("response.output_item.done", map[string]any{"output_index": idx, "item": fc})
	}
	obj, conv := p.finish(respCompleted, res, sent.String(), done, fcs)
	if p.store {
		// Stored before the client hears of it, so that it can continue
		// the conversation at once.
		s.responses.add(&storedResponse{id: p.id, obj: obj, msgs: conv})
	}
	if ev.send("response.completed", map[string]any{"response": obj}) != nil {
		return
	}
	st.SetUsage(accessUsage(usage(res)))
	if sw.done() == nil {
		st.Done()
	}
}

// startBackground stores the response as queued, answers with it, and runs
// the generation on its own goroutine with a context that outlives the
// request; POST …/cancel (or a DELETE, or the server's shutdown) cancels it.
func (s *Server) startBackground(w http.ResponseWriter, r *http.Request, p *respJob) {
	if err := s.responses.startRun(); err != nil {
		p.job.release()
		s.writeRequestError(w, r, &requestError{status: http.StatusServiceUnavailable, msg: err.Error()})
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &storedResponse{id: p.id, obj: p.object(respQueued), background: true, running: true, cancel: cancel, done: make(chan struct{})}
	s.responses.add(e)
	queued := e.obj
	go s.runBackground(ctx, p, e)
	_ = s.opts.PayloadLog.Response(queued)
	writeJSON(w, http.StatusOK, queued)
}

func (s *Server) runBackground(ctx context.Context, p *respJob, e *storedResponse) {
	defer s.responses.runs.Done()
	defer close(e.done)
	defer e.cancel()
	defer p.job.release()
	s.responses.set(e, p.object(respInProgress), nil, true)
	j := p.job
	tok := j.lm.model.Tok
	var lps []tokenLogprob
	res, err := j.lm.eng.Generate(ctx, j.req, func(o engine.Output) error {
		if p.logprobs && o.Logprob != nil && !o.StopToken {
			lps = append(lps, chatLogprob(tok, o.Logprob))
		}
		return nil
	})
	switch {
	case err != nil:
		obj := p.object(respFailed)
		obj.Error = &responseErrorJSON{Code: "server_error", Message: generateError(err).Error()}
		s.log.Warn(fmt.Sprintf("background response %s failed: %v", p.id, err))
		s.responses.set(e, obj, nil, false)
	case res.FinishReason == engine.FinishCanceled:
		// What was generated before the cancel stays readable.
		msg := newMessageItem("incomplete", res.Text, lps)
		obj, conv := p.finish(respCancelled, res, res.Text, msg, nil)
		s.responses.set(e, obj, conv, false)
	default:
		text, msg, fcs := p.output(res, lps)
		obj, conv := p.finish(respCompleted, res, text, msg, fcs)
		s.responses.set(e, obj, conv, false)
	}
}

// respNotFound answers an id the store does not hold (never stored,
// deleted, evicted, or lost in a restart).
func (s *Server) respNotFound(w http.ResponseWriter, r *http.Request, msg string) {
	_ = s.opts.PayloadLog.Error(msg)
	observe.WriteError(w, r, http.StatusNotFound, observe.APIError{Message: msg})
}

// handleGetResponse is GET /v1/responses/{response_id}.
func (s *Server) handleGetResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("response_id")
	e, ok := s.responses.get(id)
	if !ok {
		s.respNotFound(w, r, fmt.Sprintf("Response with ID '%s' not found", id))
		return
	}
	obj, _, _ := s.responses.state(e)
	_ = s.opts.PayloadLog.Response(obj)
	writeJSON(w, http.StatusOK, obj)
}

// handleDeleteResponse is DELETE /v1/responses/{response_id}; a running
// background response is canceled.
func (s *Server) handleDeleteResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("response_id")
	e, ok := s.responses.remove(id)
	if !ok {
		s.respNotFound(w, r, fmt.Sprintf("Response with ID '%s' not found", id))
		return
	}
	if e.cancel != nil {
		e.cancel()
	}
	out := struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{id, "response.deleted", true}
	_ = s.opts.PayloadLog.Response(out)
	writeJSON(w, http.StatusOK, out)
}

// handleCancelResponse is POST /v1/responses/{response_id}/cancel: it
// cancels a running background response (its sequence ends with reason
// canceled and frees its KV cache) and answers it once it has stopped.
// Cancelling a cancelled response again answers it again; anything else
// (unknown, not background, already finished) is a 404.
func (s *Server) handleCancelResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("response_id")
	cannot := fmt.Sprintf("Response with ID '%s' not found or cannot be cancelled", id)
	e, ok := s.responses.get(id)
	if !ok || !e.background {
		s.respNotFound(w, r, cannot)
		return
	}
	if _, _, running := s.responses.state(e); running {
		e.cancel()
		select {
		case <-e.done:
		case <-r.Context().Done():
			observe.WriteErrorMessage(w, r, statusClientClosed, "client closed the request")
			return
		}
	}
	obj, _, _ := s.responses.state(e)
	if obj.Status != respCancelled {
		s.respNotFound(w, r, cannot)
		return
	}
	_ = s.opts.PayloadLog.Response(obj)
	writeJSON(w, http.StatusOK, obj)
}
