package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// ContentPart is one part of a multi-part message content. Only text parts matter to a text model;
// other types are passed to the template unchanged (with their text, if any).
type ContentPart struct {
	Type string // "text"
	Text string
}

// FunctionCall is the function a tool call invokes. Arguments is the JSON text of the arguments,
// as in the OpenAI API.
type FunctionCall struct {
	Name      string
	Arguments string
}

// ToolCall is an assistant's request to call a tool.
type ToolCall struct {
	ID       string
	Type     string // "function" when empty
	Function FunctionCall
}

// Message is one turn of a conversation.
type Message struct {
	Role string
	// Content is the message text. It is ignored when Parts is non-nil.
	Content string
	// Parts, when non-nil, is the content as a list of parts (OpenAI's array form).
	Parts            []ContentPart
	Name             string     // optional participant name
	ToolCalls        []ToolCall // assistant tool calls
	ToolCallID       string     // for role "tool": the call this message answers
	ReasoningContent string     // assistant reasoning of an earlier turn (Qwen3-style templates)
}

// Error is a failure to render a conversation.
type Error struct {
	Msg string
	// Raised is true when the template itself rejected the conversation with raise_exception,
	// i.e. the request is at fault (roles out of order, unsupported role, ...).
	Raised bool
	// Limit is true when the render passed one of the limits of limits.go (macro depth, range
	// size, output size).
	Limit bool
}

func (e *Error) Error() string {
	if e.Raised {
		return "chat template error: " + e.Msg
	}
	return "chat template: " + e.Msg
}

// raised carries a raise_exception message through the engine, which returns callable errors
// unwrapped.
type raised struct{ msg string }

func (r *raised) Error() string { return r.msg }

// Template is a compiled chat template. It is safe for concurrent use.
type Template struct {
	src         string
	tmpl        *jinja.Template
	bos, eos    string
	partsAsList bool
}

// Options are the inputs of RenderOptions beyond the messages.
type Options struct {
	AddGenerationPrompt bool
	// Tools are the tool definitions ({"type":"function","function":{...}} objects). Elements may
	// be json.RawMessage (key order kept), or any value encoding/json can marshal.
	Tools []any
	// Vars are extra template variables (chat_template_kwargs, enable_thinking, ...), converted
	// like Tools. They cannot override messages, tools, add_generation_prompt or the token texts.
	Vars map[string]any
	// Now is the time strftime_now formats; the zero value means time.Now().
	Now time.Time
}

// NewTemplate compiles a chat template. bos and eos are the texts of the tokenizer's BOS and EOS
// tokens, exposed to the template as bos_token and eos_token.
func NewTemplate(src, bos, eos string) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, &Error{Msg: fmt.Sprintf("compile: internal error: %v", r)}
		}
	}()
	pre, err := preprocess(src)
	if err != nil {
		return nil, &Error{Msg: "compile: " + err.Error()}
	}
	tmpl, err := jinja.Compile(pre)
	if err != nil {
		return nil, &Error{Msg: "compile: " + err.Error()}
	}
	t = &Template{src: src, tmpl: tmpl, bos: bos, eos: eos, partsAsList: iteratesContent(src)}
	if err := t.check(); err != nil {
		return nil, err
	}
	return t, nil
}

// check renders a small sample conversation and fails if that passes a limit (a macro that
// always recurses, a loop that always runs too long), so that such a template fails when it is
// loaded rather than on every request. Other render errors are ignored: a template may
// legitimately reject the sample.
func (t *Template) check() error {
	sample := []Message{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "Hello"}}
	for _, msgs := range [][]Message{sample[1:], sample} {
		_, err := t.RenderOptions(msgs, Options{AddGenerationPrompt: true, Now: time.Unix(0, 0)})
		var ce *Error
		if errors.As(err, &ce) && ce.Limit {
			return &Error{Msg: "a render of a sample conversation fails: " + ce.Msg, Limit: true}
		}
	}
	return nil
}

// DefaultSource is the ChatML template used for models that ship none (see the package doc).
const DefaultSource = "{%- for message in messages %}" +
	"{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}" +
	"{%- endfor %}" +
	"{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"

// Default returns the ChatML template (DefaultSource).
func Default() *Template {
	t, err := NewTemplate(DefaultSource, "", "")
	if err != nil {
		panic("chat: default template does not compile: " + err.Error())
	}
	return t
}

// Source returns the template text as given to NewTemplate.
func (t *Template) Source() string { return t.src }

// Render renders a conversation. tools may be nil; see Options.Tools for its elements.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool, tools []any) (string, error) {
	return t.RenderOptions(msgs, Options{AddGenerationPrompt: addGenerationPrompt, Tools: tools})
}

// RenderOptions renders a conversation with the given options.
func (t *Template) RenderOptions(msgs []Message, opts Options) (out string, err error) {
	// The engine is third-party code fed with client-controlled data: never let it take the
	// process down.
	defer func() {
		if r := recover(); r != nil {
			out, err = "", &Error{Msg: fmt.Sprintf("internal error: %v", r)}
		}
	}()

	data := make(map[string]jinja.Value, len(opts.Vars)+8)
	for k, v := range opts.Vars {
		val, err := toValue(v)
		if err != nil {
			return "", &Error{Msg: fmt.Sprintf("variable %s: %v", k, err)}
		}
		data[k] = val
	}
	msgVals := make([]jinja.Value, len(msgs))
	for i := range msgs {
		msgVals[i] = t.messageValue(&msgs[i])
	}
	data["messages"] = jinja.NewList(msgVals)
	data["add_generation_prompt"] = jinja.NewBool(opts.AddGenerationPrompt)
	data["bos_token"] = jinja.NewString(t.bos)
	data["eos_token"] = jinja.NewString(t.eos)
	if len(opts.Tools) > 0 {
		items := make([]jinja.Value, len(opts.Tools))
		for i, tool := range opts.Tools {
			v, err := toValue(tool)
			if err != nil {
				return "", &Error{Msg: fmt.Sprintf("tool %d: %v", i, err)}
			}
			items[i] = v
		}
		data["tools"] = jinja.NewList(items)
	} else {
		// transformers passes tools=None when there are none; templates test "tools is not none".
		data["tools"] = jinja.None()
	}
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	data["raise_exception"] = jinja.NewCallable("raise_exception", raiseException)
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) == 0 || !args[0].IsString() {
			return jinja.Undefined(), errors.New("strftime_now: expected a format string")
		}
		return jinja.NewString(strftime(now, args[0].AsString())), nil
	})
	data[toJSONFilter] = jinja.NewCallable("tojson", filterToJSON)
	var limits renderLimits
	limits.install(data)

	s, err := t.tmpl.RenderValues(data)
	if err != nil {
		var r *raised
		if errors.As(err, &r) {
			return "", &Error{Msg: r.msg, Raised: true}
		}
		var l *limitError
		if errors.As(err, &l) {
			return "", &Error{Msg: l.msg, Limit: true}
		}
		return "", &Error{Msg: err.Error()}
	}
	if len(s) > MaxOutput {
		return "", &Error{Msg: fmt.Sprintf("the rendered prompt is larger than %d bytes", MaxOutput), Limit: true}
	}
	return s, nil
}

func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	msg := "raise_exception called"
	if len(args) > 0 {
		if args[0].IsString() {
			msg = args[0].AsString()
		} else {
			msg = args[0].String()
		}
	}
	return jinja.Undefined(), &raised{msg: msg}
}

// messageValue builds the dict a template sees for one message, keys in the order a client
// would send them.
func (t *Template) messageValue(m *Message) jinja.Value {
	dv := jinja.NewDict()
	d := dv.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	switch {
	case m.Parts == nil:
		d.Set("content", jinja.NewString(m.Content))
	case t.partsAsList:
		parts := make([]jinja.Value, len(m.Parts))
		for i, p := range m.Parts {
			pv := jinja.NewDict()
			pd := pv.AsDict()
			typ := p.Type
			if typ == "" {
				typ = "text"
			}
			pd.Set("type", jinja.NewString(typ))
			if typ == "text" || p.Text != "" {
				pd.Set("text", jinja.NewString(p.Text))
			}
			parts[i] = pv
		}
		d.Set("content", jinja.NewList(parts))
	default:
		var texts []string
		for _, p := range m.Parts {
			if p.Type == "" || p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		d.Set("content", jinja.NewString(strings.Join(texts, "\n")))
	}
	if m.Name != "" {
		d.Set("name", jinja.NewString(m.Name))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, tc := range m.ToolCalls {
			fv := jinja.NewDict()
			fd := fv.AsDict()
			fd.Set("name", jinja.NewString(tc.Function.Name))
			fd.Set("arguments", argumentsValue(tc.Function.Arguments))
			cv := jinja.NewDict()
			cd := cv.AsDict()
			if tc.ID != "" {
				cd.Set("id", jinja.NewString(tc.ID))
			}
			typ := tc.Type
			if typ == "" {
				typ = "function"
			}
			cd.Set("type", jinja.NewString(typ))
			cd.Set("function", fv)
			calls[i] = cv
		}
		d.Set("tool_calls", jinja.NewList(calls))
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if m.ReasoningContent != "" {
		d.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
	}
	return dv
}

// argumentsValue passes JSON-object arguments as a dict and anything else as the original string.
func argumentsValue(args string) jinja.Value {
	s := strings.TrimSpace(args)
	if strings.HasPrefix(s, "{") {
		if v, err := decodeJSON([]byte(s)); err == nil && v.IsDict() {
			return v
		}
	}
	return jinja.NewString(args)
}

// contentLoop matches a for loop over a message's content ("for part in message['content']",
// "for c in message.content", "for item in content"), which marks a template that accepts
// OpenAI-style content lists.
var contentLoop = regexp.MustCompile(`\{%[-+]?\s*for\s+\w+\s+in\s+[\w.'"\[\]]*content\b`)

func iteratesContent(src string) bool { return contentLoop.MatchString(src) }

// toValue converts a Go value to a template value, keeping JSON key order where the input has
// one.
func toValue(v any) (jinja.Value, error) {
	switch x := v.(type) {
	case jinja.Value:
		return x, nil
	case json.RawMessage:
		return decodeJSON(x)
	case nil:
		return jinja.None(), nil
	case bool:
		return jinja.NewBool(x), nil
	case string:
		return jinja.NewString(x), nil
	case int:
		return jinja.NewInt(int64(x)), nil
	case int64:
		return jinja.NewInt(x), nil
	case float64:
		return jinja.NewFloat(x), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return jinja.Undefined(), err
	}
	return decodeJSON(b)
}
