package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"mistralrs/internal/chat"
	"mistralrs/internal/constrain"
	"mistralrs/internal/engine"
	"mistralrs/internal/sampler"
)

// Request and response shapes of the OpenAI API (as mistral.rs serves it).
// Unknown request fields are ignored, as there.

// samplingFields are the sampling settings shared by chat and completions.
type samplingFields struct {
	Model               string             `json:"model"`
	MaxTokens           *int               `json:"max_tokens"`
	MaxCompletionTokens *int               `json:"max_completion_tokens"`
	N                   *int               `json:"n"`
	Temperature         *float64           `json:"temperature"`
	TopP                *float64           `json:"top_p"`
	TopK                *int               `json:"top_k"`
	MinP                *float64           `json:"min_p"`
	PresencePenalty     *float64           `json:"presence_penalty"`
	FrequencyPenalty    *float64           `json:"frequency_penalty"`
	RepetitionPenalty   *float64           `json:"repetition_penalty"`
	Stop                stopField          `json:"stop"`
	Seed                *int64             `json:"seed"`
	LogitBias           map[string]float64 `json:"logit_bias"`
	Stream              bool               `json:"stream"`
	StreamOptions       *streamOptions     `json:"stream_options"`
	IgnoreEOS           bool               `json:"ignore_eos"`
	// Speculative false turns speculative decoding off for the request (an
	// extension; default: on where the model has a proposer).
	Speculative *bool `json:"speculative"`
	// Grammar is mistral.rs's constraint field ({"type": "regex" |
	// "json_schema" | "lark", "value": …}), compiled by Server.constraint.
	Grammar json.RawMessage `json:"grammar"`

	unimplemented
}

// unimplemented are mistral.rs's extension fields this server does not
// implement: a request that sets one is refused with a 400 naming it
// rather than answered as if it had not been asked.
type unimplemented struct {
	DryMultiplier           json.RawMessage `json:"dry_multiplier"`
	DryBase                 json.RawMessage `json:"dry_base"`
	DryAllowedLength        json.RawMessage `json:"dry_allowed_length"`
	DrySequenceBreakers     json.RawMessage `json:"dry_sequence_breakers"`
	ReasoningEffort         json.RawMessage `json:"reasoning_effort"`
	Adapter                 json.RawMessage `json:"adapter"`
	WebSearchOptions        json.RawMessage `json:"web_search_options"`
	AgentPermission         json.RawMessage `json:"agent_permission"`
	CodeExecutionPermission json.RawMessage `json:"code_execution_permission"`
}

// check refuses the first unimplemented field set to something other than
// null (reasoning_effort "off" or "none" asks for nothing and passes).
func (u *unimplemented) check() error {
	set := func(raw json.RawMessage) bool {
		b := bytes.TrimSpace(raw)
		return len(b) > 0 && string(b) != "null"
	}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		why  string
	}{
		{"dry_multiplier", u.DryMultiplier, "DRY sampling is not implemented"},
		{"dry_base", u.DryBase, "DRY sampling is not implemented"},
		{"dry_allowed_length", u.DryAllowedLength, "DRY sampling is not implemented"},
		{"dry_sequence_breakers", u.DrySequenceBreakers, "DRY sampling is not implemented"},
		{"reasoning_effort", u.ReasoningEffort, "reasoning budgets are not implemented"},
		{"adapter", u.Adapter, "LoRA adapters are not supported"},
		{"web_search_options", u.WebSearchOptions, "web search is not supported"},
		{"agent_permission", u.AgentPermission, "agentic tool execution is not supported"},
		{"code_execution_permission", u.CodeExecutionPermission, "agentic tool execution is not supported"},
	} {
		if !set(f.raw) {
			continue
		}
		if f.name == "reasoning_effort" {
			var v string
			if json.Unmarshal(f.raw, &v) == nil && (v == "off" || v == "none") {
				continue
			}
		}
		return badRequest(f.name, "%s is not supported by this server: %s", f.name, f.why)
	}
	return nil
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// bodyJSON is a json.RawMessage that keeps the decoder's bytes instead of
// copying them, for the fields that carry the prompt: the request body they
// point into is never changed after it is read, and a large prompt is then
// not copied once per level of nesting (json.Unmarshal hands UnmarshalJSON
// a part of its input).
type bodyJSON []byte

func (b *bodyJSON) UnmarshalJSON(data []byte) error {
	*b = data
	return nil
}

// MarshalJSON writes the JSON as it came, as json.RawMessage does.
func (b bodyJSON) MarshalJSON() ([]byte, error) {
	if b == nil {
		return []byte("null"), nil
	}
	return b, nil
}

// isJSON reports whether the JSON bytes b are lit (a comparison that never
// copies b, which may be a whole prompt).
func isJSON(b []byte, lit string) bool { return string(b) == lit }

// stopField is "stop": a string or a list of strings.
type stopField []string

func (s *stopField) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = stopField{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("must be a string or an array of strings")
	}
	*s = many
	return nil
}

// Limits on the stop strings and logit_bias of one request: every stop
// string is matched against each generated token's text and every bias
// applied to each step's logits, so their size is the cost of every step
// (OpenAI allows 4 stop strings and 300 biases).
const (
	MaxStopStrings     = 16   // stop strings per request
	MaxStopStringBytes = 256  // bytes per stop string
	MaxLogitBias       = 1024 // logit_bias entries per request
)

// checkStop refuses more than MaxStopStrings stop strings or one longer
// than MaxStopStringBytes; param is the field's name on the route.
func checkStop(param string, stops []string) error {
	if len(stops) > MaxStopStrings {
		return badRequest(param, "%s has %d strings; at most %d are allowed", param, len(stops), MaxStopStrings)
	}
	for i, v := range stops {
		if len(v) > MaxStopStringBytes {
			return badRequest(param, "%s[%d] is %d bytes long; at most %d are allowed", param, i, len(v), MaxStopStringBytes)
		}
	}
	return nil
}

// strings returns the non-empty stop strings.
func (s stopField) strings() []string {
	var out []string
	for _, v := range s {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	samplingFields
	Messages           bodyJSON                   `json:"messages"`
	Logprobs           bool                       `json:"logprobs"`
	TopLogprobs        *int                       `json:"top_logprobs"`
	Tools              []json.RawMessage          `json:"tools"`
	ToolChoice         json.RawMessage            `json:"tool_choice"`
	ResponseFormat     json.RawMessage            `json:"response_format"`
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
	EnableThinking     *bool                      `json:"enable_thinking"`
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	samplingFields
	Prompt   bodyJSON `json:"prompt"`
	Echo     bool     `json:"echo"`
	Suffix   *string  `json:"suffix"`
	BestOf   *int     `json:"best_of"`
	Logprobs *int     `json:"logprobs"`
}

// chatMessage is one message of a chat request.
type chatMessage struct {
	Role             string     `json:"role"`
	Content          bodyJSON   `json:"content"`
	Name             string     `json:"name"`
	ToolCalls        []toolCall `json:"tool_calls"`
	ToolCallID       string     `json:"tool_call_id"`
	ReasoningContent string     `json:"reasoning_content"`
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

// requestError is a client mistake: 400 unless status says otherwise.
type requestError struct {
	status int
	param  string
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(param, format string, args ...any) *requestError {
	return &requestError{status: 400, param: param, msg: fmt.Sprintf(format, args...)}
}

// decodeJSON decodes a request body, turning syntax and type errors into 400s
// that name the offending field.
func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return badRequest("", "request body is empty; expected a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return badRequest("", "invalid JSON in request body at byte %d: %v", se.Offset, se)
		case errors.As(err, &te):
			if te.Field != "" {
				// Fields of the embedded samplingFields are top-level fields.
				field := strings.TrimPrefix(te.Field, "samplingFields.")
				return badRequest(field, "invalid type for field %q: expected %s, got JSON %s", field, jsonType(te.Type.Kind()), te.Value)
			}
			return badRequest("", "request body must be a JSON object, got JSON %s", te.Value)
		}
		return badRequest("", "invalid request body: %s", jsonProblem(err))
	}
	return nil
}

// jsonProblem says what is wrong with a JSON value in the client's terms:
// encoding/json's own messages name Go types ("cannot unmarshal number
// into Go value of type []server.respInputItem").
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q: expected %s, got JSON %s", strings.TrimPrefix(te.Field, "samplingFields."), jsonType(te.Type.Kind()), te.Value)
		}
		return fmt.Sprintf("expected %s, got JSON %s", jsonType(te.Type.Kind()), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("invalid JSON: %v", se)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonType names a Go kind in JSON terms for error messages.
func jsonType(k reflect.Kind) string {
	switch k {
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Bool:
		return "a boolean"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return k.String()
}

// messages parses the messages field: an array of messages, or (mistral.rs
// extension) a string used as the raw prompt, without the chat template.
func (r *chatRequest) messages() (msgs []chat.Message, raw string, isRaw bool, err error) {
	b := bytes.TrimSpace(r.Messages)
	if len(b) == 0 || string(b) == "null" {
		return nil, "", false, badRequest("messages", "messages is required")
	}
	if b[0] == '"' {
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, "", false, badRequest("messages", "messages: %s", jsonProblem(err))
		}
		if raw == "" {
			return nil, "", false, badRequest("messages", "messages must not be empty")
		}
		return nil, raw, true, nil
	}
	var in []chatMessage
	if err := json.Unmarshal(b, &in); err != nil {
		// Not err itself: it names Go types.
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, "", false, badRequest("messages", "messages: invalid type for field %q: expected %s, got JSON %s", te.Field, jsonType(te.Type.Kind()), te.Value)
		}
		return nil, "", false, badRequest("messages", "messages must be a string or an array of message objects")
	}
	if len(in) == 0 {
		return nil, "", false, badRequest("messages", "messages must not be empty")
	}
	for i, m := range in {
		if m.Role == "" {
			return nil, "", false, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d]: role is required", i)
		}
		if !chatRoles[m.Role] {
			return nil, "", false, badRequest(fmt.Sprintf("messages[%d].role", i), "messages[%d].role %q is not one of system, developer, user, assistant, tool, function, ipython", i, m.Role)
		}
		if c := bytes.TrimSpace(m.Content); (len(c) == 0 || string(c) == "null") && !(m.Role == "assistant" && (len(m.ToolCalls) > 0 || m.ReasoningContent != "")) {
			return nil, "", false, badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d].content is required (only an assistant message with tool_calls may omit it)", i)
		}
		cm := chat.Message{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID, ReasoningContent: m.ReasoningContent}
		if err := setContent(&cm, m.Content); err != nil {
			return nil, "", false, badRequest(fmt.Sprintf("messages[%d].content", i), "messages[%d].content: %s", i, jsonProblem(err))
		}
		for _, tc := range m.ToolCalls {
			cm.ToolCalls = append(cm.ToolCalls, chat.ToolCall{ID: tc.ID, Type: tc.Type,
				Function: chat.FunctionCall{Name: tc.Function.Name, Arguments: tc.Function.Arguments}})
		}
		msgs = append(msgs, cm)
	}
	return msgs, "", false, nil
}

// setContent accepts a string, null (assistant tool calls) or an array of
// content parts; only text parts carry anything for a text model.
// chatRoles are the message roles a chat request may use: OpenAI's, and
// Llama 3's ipython (tool output) that its templates know.
var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true,
	"tool": true, "function": true, "ipython": true}

func setContent(m *chat.Message, raw bodyJSON) error {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return nil
	}
	if b[0] == '"' {
		return json.Unmarshal(b, &m.Content)
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(b, &parts); err != nil {
		return errors.New("must be a string or an array of content parts")
	}
	m.Parts = []chat.ContentPart{}
	for j, p := range parts {
		if p.Type != "text" {
			return fmt.Errorf("content part type %q is not supported by a text model", p.Type)
		}
		if p.Text == nil {
			return fmt.Errorf("content[%d] is a text part without text", j)
		}
		m.Parts = append(m.Parts, chat.ContentPart{Type: p.Type, Text: *p.Text})
	}
	return nil
}

// genSettings are the checked, engine-ready settings of a request.
type genSettings struct {
	params    sampler.Params
	maxTokens int // 0: up to the context length
	stop      []string
	ignoreEOS bool
	noSpec    bool // "speculative": false
	n         int  // choices
	grammar   *constrain.Grammar
}

// settings checks the sampling fields; logprobs and topLogprobs come from
// the endpoint's own fields. globalSeed applies when the request has none.
func (f *samplingFields) settings(logprobs bool, topLogprobs int, globalSeed *uint64) (*genSettings, error) {
	if err := f.unimplemented.check(); err != nil {
		return nil, err
	}
	if err := checkStop("stop", f.Stop); err != nil {
		return nil, err
	}
	if len(f.LogitBias) > MaxLogitBias {
		return nil, badRequest("logit_bias", "logit_bias has %d entries; at most %d are allowed", len(f.LogitBias), MaxLogitBias)
	}
	g := &genSettings{params: sampler.DefaultParams(), stop: f.Stop.strings(), ignoreEOS: f.IgnoreEOS,
		noSpec: f.Speculative != nil && !*f.Speculative}
	max := f.MaxTokens
	if f.MaxCompletionTokens != nil {
		max = f.MaxCompletionTokens
	}
	if max != nil {
		if *max < 1 {
			return nil, badRequest("max_tokens", "max_tokens must be at least 1, got %d", *max)
		}
		g.maxTokens = *max
	}
	g.n = 1
	if f.N != nil {
		if *f.N < 1 || *f.N > engine.MaxChoices {
			return nil, badRequest("n", "n must be between 1 and %d, got %d", engine.MaxChoices, *f.N)
		}
		g.n = *f.N
	}
	p := &g.params
	if f.Temperature != nil {
		p.Temperature = float32(*f.Temperature)
	}
	if f.TopP != nil {
		p.TopP = float32(*f.TopP)
	}
	if f.TopK != nil {
		p.TopK = *f.TopK
	}
	if f.MinP != nil {
		p.MinP = float32(*f.MinP)
	}
	if f.PresencePenalty != nil {
		p.PresencePenalty = float32(*f.PresencePenalty)
	}
	if f.FrequencyPenalty != nil {
		p.FrequencyPenalty = float32(*f.FrequencyPenalty)
	}
	if f.RepetitionPenalty != nil {
		p.RepetitionPenalty = float32(*f.RepetitionPenalty)
	}
	if f.Seed != nil {
		s := uint64(*f.Seed)
		p.Seed = &s
	} else if globalSeed != nil {
		s := *globalSeed
		p.Seed = &s
	}
	if len(f.LogitBias) > 0 {
		p.LogitBias = make(map[int32]float32, len(f.LogitBias))
		for k, v := range f.LogitBias {
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return nil, badRequest("logit_bias", "logit_bias: key %q is not a token id", k)
			}
			if v < -100 || v > 100 {
				return nil, badRequest("logit_bias", "logit_bias: bias for token %d must be between -100 and 100, got %v", id, v)
			}
			p.LogitBias[int32(id)] = float32(v)
		}
	}
	p.Logprobs = logprobs
	p.TopLogprobs = topLogprobs
	if err := p.Validate(); err != nil {
		msg := err.Error()
		param := paramOf(msg)
		given := map[string]*float64{"temperature": f.Temperature, "top_p": f.TopP, "min_p": f.MinP,
			"presence_penalty": f.PresencePenalty, "frequency_penalty": f.FrequencyPenalty, "repetition_penalty": f.RepetitionPenalty}
		if v := given[param]; v != nil && math.IsInf(float64(float32(*v)), 0) && !math.IsInf(*v, 0) {
			// Beyond float32: say what the client sent, not +Inf.
			if i := strings.LastIndex(msg, ", got "); i >= 0 {
				msg = msg[:i] + ", got " + strconv.FormatFloat(*v, 'g', -1, 64)
			}
		}
		return nil, badRequest(param, "%s", msg)
	}
	return g, nil
}

// paramOf takes the field name that sampler.Params.Validate's messages start with.
func paramOf(msg string) string {
	if i := strings.IndexAny(msg, " :"); i > 0 {
		return msg[:i]
	}
	return ""
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
	Content []tokenLogprob `json:"content"`
}

type tokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

type topLogprob struct {
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
}

// systemFingerprint is what mistral.rs reports.
const systemFingerprint = "local"
