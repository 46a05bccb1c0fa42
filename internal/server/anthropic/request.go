package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"mistralrs/internal/chat"
	"mistralrs/internal/constrain"
	"mistralrs/internal/server/gen"
)

// request is the body of POST /v1/messages (and count_tokens).
// Unknown fields are ignored; metadata is accepted and ignored.
type request struct {
	Model         string            `json:"model"`
	MaxTokens     *int              `json:"max_tokens"`
	Messages      gen.BodyJSON      `json:"messages"`
	System        gen.BodyJSON      `json:"system"`
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

// agentic is why the agentic extension fields are refused.
const agentic = "agentic tool execution is not supported"

// unsupported are the mistral.rs extension fields this server does not
// implement: a request that sets one is refused rather than answered as if
// it had not (null counts as absent; keys starting with dry_ too;
// enable_code_execution and truncate_sequence only when true,
// reasoning_effort unless "off" or "none").
var unsupported = []gen.Unsupported{
	{Name: "adapter", Why: "Messages requests select a LoRA adapter by model: \"<model>::<alias>\" (GET /v1/models lists the ids) or the adapter's alias"},
	{Name: "agent_permission", Why: agentic},
	{Name: "code_execution_permission", Why: agentic},
	{Name: "container", Why: "skills and containers are not supported"},
	{Name: "dry_", Prefix: true, Why: "DRY sampling is not implemented"},
	{Name: "enable_code_execution", Why: agentic, Pass: []string{"false"}},
	{Name: "files", Why: "files are not supported"},
	{Name: "max_tool_rounds", Why: agentic},
	{Name: "reasoning_effort", Why: "reasoning budgets are not implemented", Pass: gen.ReasoningOff},
	{Name: "session_id", Why: "sessions are not supported"},
	{Name: "truncate_sequence", Why: "prompts are never truncated", Pass: []string{"false"}},
	{Name: "web_search_options", Why: "web search is not supported"},
}

// parsed is a checked Anthropic request, ready for the template.
type parsed struct {
	req    request
	model  gen.Model
	msgs   []chat.Message
	images gen.Images
	opts   chat.Options
	tools  *chat.ToolParser // nil: the answer is not read for tool calls
	// toolDefs and toolChoice are the tools and tool_choice in the chat
	// form, which gen.Prepare enforces: "any" or a named tool forces a call.
	toolDefs   []json.RawMessage
	toolChoice json.RawMessage
	// grammar is the structured-output constraint (response_format,
	// grammar), nil for free text.
	grammar *constrain.Grammar
	compile gen.GrammarCompile
}

// parse decodes and checks a request; generate is false for count_tokens,
// where max_tokens and the sampling fields are not needed.
func (a *API) parse(body []byte, generate bool) (*parsed, error) {
	p := &parsed{}
	if err := gen.DecodeJSON(body, &p.req); err != nil {
		return nil, err
	}
	// Right after decoding, before the model is resolved: an unsupported
	// field is refused whatever the model. A body that decoded is an
	// object or null, and null sets no field.
	if err := gen.Refuse(body, unsupported); err != nil {
		return nil, err
	}
	req := &p.req
	m, err := a.b.Resolve(req.Model)
	if err != nil {
		return nil, err
	}
	p.model = m
	if generate && req.MaxTokens == nil {
		return nil, gen.BadRequest("max_tokens", "max_tokens is required")
	}
	if p.grammar, p.compile, err = a.b.ConstraintNoted("response_format", req.ResponseFormat, req.Grammar); err != nil {
		return nil, err
	}
	if p.msgs, err = chatMessages(req.System, req.Messages, &p.images); err != nil {
		return nil, err
	}
	if err := p.templateOptions(); err != nil {
		return nil, err
	}
	return p, nil
}

// templateOptions reads the tools, tool_choice and thinking into the chat
// template's options and the answer's tool-call parser.
func (p *parsed) templateOptions() error {
	req := &p.req
	tools, names, err := clientTools(req.Tools)
	if err != nil {
		return err
	}
	mode, err := toolChoice(req.ToolChoice, names)
	if err != nil {
		return err
	}
	p.opts = chat.Options{AddGenerationPrompt: true}
	if mode != "none" && len(tools) > 0 {
		// tool_choice "none" leaves the tools out of the prompt, as mistral.rs does.
		for _, t := range tools {
			p.opts.Tools = append(p.opts.Tools, t)
		}
		p.tools = chat.NewToolParser(names)
		p.toolDefs, p.toolChoice = tools, chatToolChoice(req.ToolChoice, mode)
	}
	on, err := thinking(req.Thinking, req.EnableThinking)
	if err != nil {
		return err
	}
	if on != nil {
		p.opts.Vars = map[string]any{"enable_thinking": *on}
	}
	return nil
}

// settings are the engine settings of a /v1/messages request: Anthropic's
// fields in the shared sampling form.
func (p *parsed) settings(seed *uint64) (*gen.Settings, error) {
	r := &p.req
	if err := gen.CheckStop("stop_sequences", r.StopSequences); err != nil {
		return nil, err
	}
	f := gen.Sampling{
		Model: r.Model, MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK, MinP: r.MinP,
		PresencePenalty: r.PresencePenalty, FrequencyPenalty: r.FrequencyPenalty, RepetitionPenalty: r.RepetitionPenalty,
		Stop: gen.Stop(r.StopSequences), Seed: r.Seed, LogitBias: r.LogitBias, IgnoreEOS: r.IgnoreEOS,
	}
	g, err := f.Settings(false, 0, seed)
	if err != nil {
		return nil, err
	}
	g.Grammar, g.Compile = p.grammar, p.compile
	return g, nil
}

// render applies the model's chat template and tokenizes the prompt. The
// texts of several blocks are joined only once the conversation is known
// to fit the context (a join copies them).
func (p *parsed) render(pr *gen.Prompter) ([]int32, error) {
	if err := gen.CheckTextBytes(pr.Model.Tok, pr.CtxLen, gen.MessagesBytes(p.msgs)); err != nil {
		return nil, err
	}
	joinBlockTexts(p.msgs)
	return pr.Render(p.msgs, p.opts, "messages")
}

// clientTools checks the client tools and returns them in the OpenAI
// form the chat templates take ({"type": "function", "function": {name,
// description, parameters}}), with their names. Server tools (web search,
// code execution, …) are refused.
func clientTools(raw []json.RawMessage) ([]json.RawMessage, []string, error) {
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	type tool struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	var tools []json.RawMessage
	var names []string
	seen := make(map[string]string, len(raw))
	for i, r := range raw {
		param := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, nil, gen.BadRequest(param, "%s must be a tool object (%s)", param, gen.JSONProblem(err))
		}
		if t.Type != "" && t.Type != "custom" {
			return nil, nil, gen.BadRequest(param+".type", "%s.type %q is not supported: this server runs no server tools, only client tools (custom)", param, t.Type)
		}
		if strings.TrimSpace(t.Name) == "" {
			return nil, nil, gen.BadRequest(param+".name", "%s.name is required", param)
		}
		schema := bytes.TrimSpace(t.InputSchema)
		if len(schema) == 0 || schema[0] != '{' {
			return nil, nil, gen.BadRequest(param+".input_schema", "%s.input_schema must be a JSON Schema object", param)
		}
		if err := gen.CheckTool(param, t.Name, "input_schema", schema, seen); err != nil {
			return nil, nil, err
		}
		b, err := json.Marshal(tool{Type: "function", Function: function{Name: t.Name, Description: t.Description, Parameters: schema}})
		if err != nil {
			return nil, nil, gen.BadRequest(param+".input_schema", "%s.input_schema: %v", param, err)
		}
		tools = append(tools, b)
		names = append(names, t.Name)
	}
	return tools, names, nil
}

// chatToolChoice is a checked tool_choice of type mode in the chat form:
// "any" is "required", a named tool a named function.
func chatToolChoice(raw json.RawMessage, mode string) json.RawMessage {
	switch mode {
	case "any":
		return json.RawMessage(`"required"`)
	case "tool":
		var tc struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(raw, &tc)
		b, _ := json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}})
		return b
	}
	return json.RawMessage(`"auto"`)
}

// toolChoice checks tool_choice ({"type": "auto"|"any"|"none"} or
// {"type": "tool", "name": …}) and returns its type ("auto" when absent).
// "any" and "tool" force one call, as OpenAI's "required" and named
// function do (chatToolChoice).
func toolChoice(raw json.RawMessage, names []string) (string, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return "auto", nil
	}
	var tc struct {
		Type string `json:"type"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &tc); err != nil {
		return "", gen.BadRequest("tool_choice", "tool_choice must be an object: {\"type\": \"auto\"|\"any\"|\"none\"} or {\"type\": \"tool\", \"name\": …}")
	}
	switch tc.Type {
	case "auto", "none":
		return tc.Type, nil
	case "any":
		if len(names) == 0 {
			return "", gen.BadRequest("tool_choice", "tool_choice \"any\" needs tools")
		}
		return tc.Type, nil
	case "tool":
		for _, n := range names {
			if n == tc.Name {
				return tc.Type, nil
			}
		}
		return "", gen.BadRequest("tool_choice.name", "tool_choice names tool %q, which is not among the tools", tc.Name)
	}
	return "", gen.BadRequest("tool_choice.type", "tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\", got %q", tc.Type)
}

// thinking reads thinking ({"type": "enabled"|"adaptive"|"disabled"})
// and the enable_thinking extension into the template's enable_thinking
// (nil: neither is set). The model's thoughts stay in the text: there are
// no thinking blocks in the answer, and budget_tokens is not enforced.
func thinking(raw json.RawMessage, enable *bool) (*bool, error) {
	var native *bool
	if b := bytes.TrimSpace(raw); len(b) > 0 && string(b) != "null" {
		var th struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(b, &th); err != nil {
			return nil, gen.BadRequest("thinking", "thinking must be an object with a type")
		}
		var on bool
		switch th.Type {
		case "enabled", "adaptive":
			on = true
		case "disabled":
		default:
			return nil, gen.BadRequest("thinking.type", "thinking.type must be \"enabled\", \"adaptive\" or \"disabled\", got %q", th.Type)
		}
		native = &on
	}
	if native != nil && enable != nil && *native != *enable {
		return nil, gen.BadRequest("thinking", "thinking.type conflicts with enable_thinking")
	}
	if enable != nil {
		return enable, nil
	}
	return native, nil
}
