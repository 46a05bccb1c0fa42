package responses

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"mistralrs/internal/chat"
	"mistralrs/internal/server/gen"
	"mistralrs/internal/server/openai"
)

// Package responses is the OpenAI Responses API: POST /v1/responses (plain, streamed with the
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
	gen.Sampling
	Input              gen.BodyJSON               `json:"input"`
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
	Adapter            *gen.Adapter               `json:"adapter"`
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
	AdapterGeneration  string             `json:"adapter_generation,omitempty"`
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
	Type        string                `json:"type"` // "output_text"
	Text        string                `json:"text"`
	Annotations []any                 `json:"annotations"`
	Logprobs    []openai.TokenLogprob `json:"logprobs"`
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

func newMessageItem(status, text string, lps []openai.TokenLogprob) *respMessageItem {
	return &respMessageItem{Type: "message", ID: newItemID("msg_"), Status: status, Role: "assistant",
		Content: []respOutputText{outputText(text, lps)}}
}

func outputText(text string, lps []openai.TokenLogprob) respOutputText {
	if lps == nil {
		lps = []openai.TokenLogprob{}
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

// checkResponses refuses the Responses settings the server does not implement.
func (req *responsesRequest) checkResponses() error {
	if req.N != nil && *req.N != 1 {
		return gen.BadRequest("n", "n = %d is not supported on /v1/responses (one output per response)", *req.N)
	}
	if req.ParallelToolCalls != nil && !*req.ParallelToolCalls {
		return gen.BadRequest("parallel_tool_calls", "parallel_tool_calls=false is not supported: this server does not support disabling parallel tool calls")
	}
	if b := bytes.TrimSpace(req.MaxToolCalls); len(b) > 0 && string(b) != "null" {
		return gen.BadRequest("max_tool_calls", "max_tool_calls is not supported: this server does not support limiting the number of tool calls")
	}
	if req.Background && req.Stream {
		return gen.BadRequest("background", "background responses cannot be streamed: create it with stream false and poll GET /v1/responses/{response_id}")
	}
	if req.Background && req.Store != nil && !*req.Store {
		return gen.BadRequest("store", "background responses must be stored (store: true)")
	}
	if req.Truncation != nil && *req.Truncation != "disabled" {
		return gen.BadRequest("truncation", "truncation %q is not supported (only \"disabled\": a conversation longer than the context is refused)", *req.Truncation)
	}

	if b := bytes.TrimSpace(req.Reasoning); len(b) > 0 && string(b) != "null" {
		var rs struct {
			Effort *string `json:"effort"`
		}
		if err := json.Unmarshal(b, &rs); err != nil {
			return gen.BadRequest("reasoning", "reasoning must be an object: %s", gen.JSONProblem(err))
		}
		if rs.Effort != nil && *rs.Effort != "none" {
			return gen.BadRequest("reasoning.effort", "reasoning.effort %q is not supported by this server", *rs.Effort)
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
			return "", nil, gen.BadRequest("text", "text must be an object: %s", gen.JSONProblem(err))
		}
		if !gen.IsNull(t.Format) {
			return "text.format", t.Format, nil
		}
	}
	return "response_format", req.ResponseFormat, nil
}

// respInputItem is one item of an input list.
type respInputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   gen.BodyJSON    `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// respInput turns the input (a string, or a list of items) into messages;
// input_image parts become their media markers' text, the images
// collected in images.
func respInput(raw gen.BodyJSON, images *gen.Images) ([]chat.Message, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return nil, gen.BadRequest("input", "input is required")
	}
	if b[0] == '"' {
		var text string
		if err := json.Unmarshal(b, &text); err != nil {
			return nil, gen.BadRequest("input", "input: %s", gen.JSONProblem(err))
		}
		if text == "" {
			return nil, gen.BadRequest("input", "input must not be empty")
		}
		return []chat.Message{{Role: "user", Content: text}}, nil
	}
	var items []respInputItem
	if err := json.Unmarshal(b, &items); err != nil {
		return nil, gen.BadRequest("input", "input must be a string or an array of input items (%s)", gen.JSONProblem(err))
	}
	if len(items) == 0 {
		return nil, gen.BadRequest("input", "input must not be empty")
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
				return nil, gen.BadRequest(at(".role"), "%s: role is required", at(""))
			default:
				return nil, gen.BadRequest(at(".role"), "%s: role %q is not supported (user, assistant, system or developer)", at(""), role)
			}
			m := chat.Message{Role: role}
			if err := respContent(&m, it.Content, at(".content"), images); err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		case "function_call":
			if it.CallID == "" || it.Name == "" {
				return nil, gen.BadRequest(at(""), "%s: a function_call item needs call_id and name", at(""))
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
				return nil, gen.BadRequest(at(".call_id"), "%s: a function_call_output item needs call_id", at(""))
			}
			m := chat.Message{Role: "tool", ToolCallID: it.CallID, Name: names[it.CallID]}
			if err := respContent(&m, gen.BodyJSON(it.Output), at(".output"), images); err != nil {
				return nil, err
			}
			msgs = append(msgs, m)
		default:
			return nil, gen.BadRequest(at(".type"), "%s: item type %q is not supported (message, function_call, function_call_output)", at(""), it.Type)
		}
	}
	return msgs, nil
}

// respContent accepts a string or a list of parts: text (input_text,
// output_text, text) and input_image (param names the content).
func respContent(m *chat.Message, raw gen.BodyJSON, param string, images *gen.Images) error {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return gen.BadRequest(param, "%s: content is required", param)
	}
	if b[0] == '"' {
		if err := json.Unmarshal(b, &m.Content); err != nil {
			return gen.BadRequest(param, "%s: %s", param, gen.JSONProblem(err))
		}
		return nil
	}
	var parts []struct {
		Type     string  `json:"type"`
		Text     string  `json:"text"`
		ImageURL *string `json:"image_url"`
		FileID   *string `json:"file_id"`
		Detail   *string `json:"detail"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return gen.BadRequest(param, "%s: must be a string or an array of content parts", param)
	}
	m.Parts = []chat.ContentPart{}
	for j, p := range parts {
		pp := fmt.Sprintf("%s[%d]", param, j)
		switch p.Type {
		case "input_text", "output_text", "text":
			m.Parts = append(m.Parts, chat.ContentPart{Type: "text", Text: p.Text})
		case "input_image":
			part, err := inputImage(pp, p.ImageURL, p.FileID, p.Detail, images)
			if err != nil {
				return err
			}
			m.Parts = append(m.Parts, part)
		default:
			return gen.BadRequest(pp+".type", "%s: content part type %q is not supported (input_text, output_text and input_image are)", pp, p.Type)
		}
	}
	return nil
}

// inputImage records an input_image part's image: its image_url (a data:
// URL, or http(s) when remote images are allowed); a file_id is refused,
// as this server stores no files. detail is accepted and has no effect.
func inputImage(param string, u, fileID, detail *string, images *gen.Images) (chat.ContentPart, error) {
	if fileID != nil && *fileID != "" {
		return chat.ContentPart{}, gen.BadRequest(param+".file_id", "%s.file_id is not supported: this server stores no files (send image_url)", param)
	}
	if u == nil || *u == "" {
		return chat.ContentPart{}, gen.BadRequest(param+".image_url", "%s.image_url is required", param)
	}
	if d := detail; d != nil && *d != "auto" && *d != "low" && *d != "high" && *d != "original" {
		return chat.ContentPart{}, gen.BadRequest(param+".detail", "%s.detail %q is not one of auto, low, high, original", param, *d)
	}
	return images.Add(param+".image_url", *u), nil
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
			return nil, nil, gen.BadRequest(fmt.Sprintf("tools[%d]", i), "tools[%d] must be an object (%s)", i, gen.JSONProblem(err))
		}
		if t.Type != "function" {
			return nil, nil, gen.BadRequest(fmt.Sprintf("tools[%d].type", i), "tools[%d].type %q is not supported (only \"function\" tools)", i, t.Type)
		}
		if len(t.Function) > 0 {
			chatTools = append(chatTools, raw)
			continue
		}
		if strings.TrimSpace(t.Name) == "" {
			return nil, nil, gen.BadRequest(fmt.Sprintf("tools[%d].name", i), "tools[%d].name is required", i)
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
			return nil, nil, gen.BadRequest(fmt.Sprintf("tools[%d]", i), "tools[%d]: %v", i, err)
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
		return nil, gen.BadRequest("tool_choice", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"name\": …}")
	}
	if len(c.Function) > 0 {
		return b, nil
	}
	out, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.Name}})
	return out, nil
}

// unsupported are request fields the server does not implement: a request
// that sets one (to anything but null or an empty list) is refused rather
// than answered as if the field were not there.
var unsupported = []gen.Unsupported{
	{Name: "reasoning_effort", Why: "reasoning effort is not implemented", Pass: []string{"[]", `"off"`, `"none"`}},
	{Name: "web_search_options", Why: "web search is not supported", Pass: emptyList},
	{Name: "agent_permission", Why: "server-side agents and tools are not supported", Pass: emptyList},
	{Name: "code_execution_permission", Why: "server-side agents and tools are not supported", Pass: emptyList},
	{Name: "files", Why: "file inputs are not supported", Pass: emptyList},
	{Name: "prompt", Why: "stored prompt templates are not supported", Pass: emptyList},
	{Name: "conversation", Why: "conversation objects are not supported; use previous_response_id", Pass: emptyList},
	{Name: "dry_", Prefix: true, Why: "DRY sampling is not implemented", Pass: emptyList},
}

var emptyList = []string{"[]"}
