// Package openai is the OpenAI dialect's chat completions and (legacy)
// completions: it decodes their requests into gen.Requests and writes
// their answers (one body, or chunks of a server-sent event stream) from a
// gen.Sink. Unknown request fields are ignored, as in mistral.rs.
package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"mistralrs/internal/chat"
	"mistralrs/internal/server/gen"
)

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	gen.Sampling
	Messages           gen.BodyJSON               `json:"messages"`
	Logprobs           bool                       `json:"logprobs"`
	TopLogprobs        *int                       `json:"top_logprobs"`
	Tools              []json.RawMessage          `json:"tools"`
	ToolChoice         json.RawMessage            `json:"tool_choice"`
	ResponseFormat     json.RawMessage            `json:"response_format"`
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
	EnableThinking     *bool                      `json:"enable_thinking"`
	Adapter            *gen.Adapter               `json:"adapter"`
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	gen.Sampling
	Prompt   gen.BodyJSON `json:"prompt"`
	Echo     bool         `json:"echo"`
	Suffix   *string      `json:"suffix"`
	BestOf   *int         `json:"best_of"`
	Logprobs *int         `json:"logprobs"`
	Adapter  *gen.Adapter `json:"adapter"`
}

// chatMessage is one message of a chat request.
type chatMessage struct {
	Role             string       `json:"role"`
	Content          gen.BodyJSON `json:"content"`
	Name             string       `json:"name"`
	ToolCalls        []toolCall   `json:"tool_calls"`
	ToolCallID       string       `json:"tool_call_id"`
	ReasoningContent string       `json:"reasoning_content"`
}

// toolCall is a tool call of a request's assistant message or of an answer
// (Index only in stream deltas).
type toolCall struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// messages parses the messages field: an array of messages, or (mistral.rs
// extension) a string used as the raw prompt, without the chat template.
// Image parts become their media markers' text, the images collected in
// images.
func (r *chatRequest) messages(images *gen.Images) (msgs []chat.Message, raw string, isRaw bool, err error) {
	b := bytes.TrimSpace(r.Messages)
	if len(b) == 0 || string(b) == "null" {
		return nil, "", false, gen.BadRequest("messages", "messages is required")
	}
	if b[0] == '"' {
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, "", false, gen.BadRequest("messages", "messages: %s", gen.JSONProblem(err))
		}
		if raw == "" {
			return nil, "", false, gen.BadRequest("messages", "messages must not be empty")
		}
		return nil, raw, true, nil
	}
	var in []chatMessage
	if err := json.Unmarshal(b, &in); err != nil {
		// Not err itself: it names Go types.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, "", false, gen.BadRequest("messages", "messages: invalid type for field %q: expected %s, got JSON %s", te.Field, gen.JSONType(te.Type.Kind()), te.Value)
		}
		return nil, "", false, gen.BadRequest("messages", "messages must be a string or an array of message objects")
	}
	if len(in) == 0 {
		return nil, "", false, gen.BadRequest("messages", "messages must not be empty")
	}
	for i, m := range in {
		if m.Role == "" {
			return nil, "", false, gen.BadRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d]: role is required", i)
		}
		if !chatRoles[m.Role] {
			return nil, "", false, gen.BadRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %q is not one of system, developer, user, assistant, tool, function, ipython", i, m.Role)
		}
		if c := bytes.TrimSpace(m.Content); (len(c) == 0 || string(c) == "null") && !(m.Role == "assistant" && (len(m.ToolCalls) > 0 || m.ReasoningContent != "")) {
			return nil, "", false, gen.BadRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d].content is required (only an assistant message with tool_calls may omit it)", i)
		}
		cm := chat.Message{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID, ReasoningContent: m.ReasoningContent}
		if err := setContent(&cm, m.Content, fmt.Sprintf("messages[%d].content", i), images); err != nil {
			var re *gen.Error
			if errors.As(err, &re) {
				return nil, "", false, err
			}
			return nil, "", false, gen.BadRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d].content: %s", i, gen.JSONProblem(err))
		}
		for _, tc := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: tc.ID, Type: tc.Type,
				Function: chat.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
		msgs = append(msgs, cm)
	}
	return msgs, "", false, nil
}

// chatRoles are the message roles a chat request may use: OpenAI's, and
// Llama 3's ipython (tool output) that its templates know.
var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true,
	"tool": true, "function": true, "ipython": true}

// setContent accepts a string, null (assistant tool calls) or an array of
// content parts: text, and image_url parts (param names the content, for
// the errors of its images).
func setContent(m *chat.Message, raw gen.BodyJSON, param string, images *gen.Images) error {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	if b[0] == '"' {
		return json.Unmarshal(b, &m.Content)
	}
	var parts []struct {
		Type     string          `json:"type"`
		Text     *string         `json:"text"`
		ImageURL json.RawMessage `json:"image_url"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return errors.New("must be a string or an array of content parts")
	}
	m.Parts = []chat.ContentPart{}
	for j, p := range parts {
		switch p.Type {
		case "text":
			if p.Text == nil {
				return fmt.Errorf("content[%d] is a text part without text", j)
			}
			m.Parts = append(m.Parts, chat.ContentPart{Type: p.Type, Text: *p.Text})
		case "image_url":
			ip := fmt.Sprintf("%s[%d].image_url", param, j)
			u, err := imageURL(p.ImageURL, ip)
			if err != nil {
				return err
			}
			m.Parts = append(m.Parts, images.Add(ip, u))
		default:
			return gen.BadRequest(fmt.Sprintf("%s[%d].type", param, j), "%s[%d]: content part type %q is not supported (text and image_url are)", param, j, p.Type)
		}
	}
	return nil
}

// imageURL is an image_url part's URL: {"url": …, "detail": …} or, as some
// clients send it, the URL string itself. detail is accepted and has no
// effect: each projector sizes images its own way.
func imageURL(raw json.RawMessage, param string) (string, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return "", gen.BadRequest(param, "%s is required in an image_url part", param)
	}
	if b[0] == '"' {
		var u string
		if err := json.Unmarshal(b, &u); err != nil || u == "" {
			return "", gen.BadRequest(param, "%s must be a non-empty URL", param)
		}
		return u, nil
	}
	var obj struct {
		URL    *string `json:"url"`
		Detail *string `json:"detail"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return "", gen.BadRequest(param, "%s must be an object {url, detail} or a URL string (%s)", param, gen.JSONProblem(err))
	}
	if obj.URL == nil || *obj.URL == "" {
		return "", gen.BadRequest(param+".url", "%s.url is required", param)
	}
	if d := obj.Detail; d != nil && *d != "auto" && *d != "low" && *d != "high" && *d != "original" {
		return "", gen.BadRequest(param+".detail", "%s.detail %q is not one of auto, low, high, original", param, *d)
	}
	return *obj.URL, nil
}

// Response shapes.

type usageJSON struct {
	CompletionTokens       int     `json:"completion_tokens"`
	PromptTokens           int     `json:"prompt_tokens"`
	TotalTokens            int     `json:"total_tokens"`
	AvgTokPerSec           float64 `json:"avg_tok_per_sec"`
	AvgPromptTokPerSec     float64 `json:"avg_prompt_tok_per_sec"`
	AvgComplTokPerSec      float64 `json:"avg_compl_tok_per_sec"`
	TotalTimeSec           float64 `json:"total_time_sec"`
	TotalPromptTimeSec     float64 `json:"total_prompt_time_sec"`
	TotalCompletionTimeSec float64 `json:"total_completion_time_sec"`
}

type chatMessageJSON struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

type chatChoiceJSON struct {
	Index        int              `json:"index"`
	Message      *chatMessageJSON `json:"message,omitempty"`
	Delta        *chatMessageJSON `json:"delta,omitempty"`
	FinishReason *string          `json:"finish_reason"`
	Logprobs     *chatLogprobs    `json:"logprobs"`
}

type chatLogprobs struct {
	Content []TokenLogprob `json:"content"`
}

type TokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type chatCompletionJSON struct {
	ID                string           `json:"id"`
	Object            string           `json:"object"`
	Created           int64            `json:"created"`
	Model             string           `json:"model"`
	SystemFingerprint string           `json:"system_fingerprint"`
	Choices           []chatChoiceJSON `json:"choices"`
	Usage             *usageJSON       `json:"usage,omitempty"`
	AdapterGeneration string           `json:"adapter_generation,omitempty"`
}

type completionChoiceJSON struct {
	Index        int                `json:"index"`
	Text         string             `json:"text"`
	FinishReason *string            `json:"finish_reason"`
	Logprobs     *completionLogprob `json:"logprobs"`
}

// completionLogprob is the legacy completions logprobs object.
type completionLogprob struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type completionJSON struct {
	ID                string                 `json:"id"`
	Object            string                 `json:"object"`
	Created           int64                  `json:"created"`
	Model             string                 `json:"model"`
	SystemFingerprint string                 `json:"system_fingerprint"`
	Choices           []completionChoiceJSON `json:"choices"`
	Usage             *usageJSON             `json:"usage,omitempty"`
	AdapterGeneration string                 `json:"adapter_generation,omitempty"`
}

// systemFingerprint is what mistral.rs reports.
const systemFingerprint = "local"

// unsupported are mistral.rs's extension fields this server does not
// implement (reasoning_effort "off" or "none" asks for nothing and passes).
var unsupported = []gen.Unsupported{
	{Name: "dry_multiplier", Why: "DRY sampling is not implemented"},
	{Name: "dry_base", Why: "DRY sampling is not implemented"},
	{Name: "dry_allowed_length", Why: "DRY sampling is not implemented"},
	{Name: "dry_sequence_breakers", Why: "DRY sampling is not implemented"},
	{Name: "reasoning_effort", Why: "reasoning budgets are not implemented", Pass: gen.ReasoningOff},
	{Name: "web_search_options", Why: "web search is not supported"},
	{Name: "agent_permission", Why: "agentic tool execution is not supported"},
	{Name: "code_execution_permission", Why: "agentic tool execution is not supported"},
}
