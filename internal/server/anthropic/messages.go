package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"mistralrs/internal/chat"
	"mistralrs/internal/server/gen"
)

// chatMessages turns the system prompt and the messages into the
// OpenAI-style messages the chat templates take: a system message first,
// an assistant message per assistant turn (text joined, tool_use blocks as
// tool_calls, thinking as reasoning_content), and for a user turn its text
// as a user message and each tool_result as a tool message, in order.
// Image blocks become their media markers' text, the images collected in
// images.
func chatMessages(system, messages gen.BodyJSON, images *gen.Images) ([]chat.Message, error) {
	var out []chat.Message
	if b := bytes.TrimSpace(system); len(b) > 0 && string(b) != "null" {
		texts, err := systemTexts(b)
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
		return nil, gen.BadRequest("messages", "messages is required")
	}
	var in []struct {
		Role    string       `json:"role"`
		Content gen.BodyJSON `json:"content"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, gen.BadRequest("messages", "messages must be an array of {role, content} objects")
	}
	if len(in) == 0 {
		return nil, gen.BadRequest("messages", "messages must contain at least one message")
	}
	names := map[string]string{} // tool_use id → tool name, for the tool messages
	for i, m := range in {
		param := fmt.Sprintf("messages[%d]", i)
		if m.Role != "user" && m.Role != "assistant" {
			return nil, gen.BadRequest(param+".role", "%s.role must be \"user\" or \"assistant\", got %q", param, m.Role)
		}
		c := bytes.TrimSpace(m.Content)
		if len(c) == 0 || string(c) == "null" {
			return nil, gen.BadRequest(param+".content", "%s.content is required", param)
		}
		if c[0] == '"' {
			var text string
			if err := json.Unmarshal(c, &text); err != nil {
				return nil, gen.BadRequest(param+".content", "%s.content: %s", param, gen.JSONProblem(err))
			}
			out = append(out, chat.Message{Role: m.Role, Content: text})
			continue
		}
		blocks, err := contentBlocks(c, param+".content")
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
		msgs, err := userBlocks(blocks, param+".content", names, images)
		if err != nil {
			return nil, err
		}
		out = append(out, msgs...)
	}
	return out, nil
}

// systemTexts is the system prompt: a string or text blocks (their
// texts, to be joined with newlines).
func systemTexts(b []byte) ([]string, error) {
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, gen.BadRequest("system", "system: %s", gen.JSONProblem(err))
		}
		return []string{s}, nil
	}
	blocks, err := contentBlocks(b, "system")
	if err != nil {
		return nil, err
	}
	texts := make([]string, 0, len(blocks))
	for i := range blocks {
		param := fmt.Sprintf("system[%d]", i)
		if blocks[i].Type != "text" {
			return nil, gen.BadRequest(param+".type", "%s: system blocks must be text blocks, got %q", param, blocks[i].Type)
		}
		t, err := blockText(&blocks[i], param)
		if err != nil {
			return nil, err
		}
		texts = append(texts, t)
	}
	return texts, nil
}

func assistantBlocks(blocks []blockIn, param string, names map[string]string) (chat.Message, error) {
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
				return msg, gen.BadRequest(bp, "%s: a tool_use block requires id and name", bp)
			}
			args := "{}"
			if in := bytes.TrimSpace(b.Input); len(in) > 0 && string(in) != "null" {
				if in[0] != '{' {
					return msg, gen.BadRequest(bp+".input", "%s.input must be an object", bp)
				}
				var compact bytes.Buffer
				if err := json.Compact(&compact, in); err != nil {
					return msg, gen.BadRequest(bp+".input", "%s.input: %v", bp, err)
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
			return msg, gen.BadRequest(bp+".type", "%s: content block type %q is not supported in an assistant message", bp, b.Type)
		}
	}
	setBlockTexts(&msg, texts)
	msg.ReasoningContent = strings.Join(thoughts, "\n")
	return msg, nil
}

func userBlocks(blocks []blockIn, param string, names map[string]string, images *gen.Images) ([]chat.Message, error) {
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
				return nil, gen.BadRequest(bp+".tool_use_id", "%s: a tool_result block requires tool_use_id", bp)
			}
			content, err := toolResultText(json.RawMessage(b.Content), bp+".content", images)
			if err != nil {
				return nil, err
			}
			flush()
			m := chat.Message{Role: "tool", ToolCallID: b.ToolUseID, Name: names[b.ToolUseID]}
			setBlockTexts(&m, content)
			out = append(out, m)
		case "thinking", "redacted_thinking":
		case "image":
			part, err := imageBlock(b, bp, images)
			if err != nil {
				return nil, err
			}
			texts = append(texts, part)
		case "document":
			return nil, gen.BadRequest(bp+".type", "%s: content block type %q is not supported (documents are not read; text and image blocks are)", bp, b.Type)
		default:
			return nil, gen.BadRequest(bp+".type", "%s: content block type %q is not supported in a user message", bp, b.Type)
		}
	}
	flush()
	return out, nil
}

// toolResultText is a tool_result's content: a string or text blocks
// (their texts, to be joined with newlines).
func toolResultText(raw json.RawMessage, param string, images *gen.Images) ([]string, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || string(b) == "null" {
		return nil, nil
	}
	if b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, gen.BadRequest(param, "%s: %s", param, gen.JSONProblem(err))
		}
		return []string{s}, nil
	}
	blocks, err := contentBlocks(b, param)
	if err != nil {
		return nil, err
	}
	texts := make([]string, 0, len(blocks))
	for i := range blocks {
		bp := fmt.Sprintf("%s[%d]", param, i)
		if blocks[i].Type == "image" {
			part, err := imageBlock(&blocks[i], bp, images)
			if err != nil {
				return nil, err
			}
			texts = append(texts, part)
			continue
		}
		if blocks[i].Type != "text" {
			return nil, gen.BadRequest(bp+".type", "%s: content block type %q is not supported in a tool_result (text and image blocks are)", bp, blocks[i].Type)
		}
		t, err := blockText(&blocks[i], bp)
		if err != nil {
			return nil, err
		}
		texts = append(texts, t)
	}
	return texts, nil
}

// blockIn is a content block of a request.
type blockIn struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   gen.BodyJSON    `json:"content"`
	Thinking  string          `json:"thinking"`
	Source    json.RawMessage `json:"source"`
}

// imageMediaTypes are the media types an image block's base64 source may
// name (Anthropic's list).
var imageMediaTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// imageBlock records an image block's image (its source: base64 data with
// a media type, or a URL) and returns the text standing for it.
func imageBlock(b *blockIn, param string, images *gen.Images) (string, error) {
	sp := param + ".source"
	var src struct {
		Type      string  `json:"type"`
		MediaType string  `json:"media_type"`
		Data      *string `json:"data"`
		URL       *string `json:"url"`
	}
	if s := bytes.TrimSpace(b.Source); len(s) == 0 || string(s) == "null" {
		return "", gen.BadRequest(sp, "%s is required in an image block", sp)
	}
	if err := json.Unmarshal(b.Source, &src); err != nil {
		return "", gen.BadRequest(sp, "%s must be an object {type, media_type, data} or {type, url} (%s)", sp, gen.JSONProblem(err))
	}
	switch src.Type {
	case "base64":
		if !imageMediaTypes[src.MediaType] {
			return "", gen.BadRequest(sp+".media_type", "%s.media_type %q is not one of image/jpeg, image/png, image/gif, image/webp", sp, src.MediaType)
		}
		if src.Data == nil || *src.Data == "" {
			return "", gen.BadRequest(sp+".data", "%s.data is required (the image, base64-encoded)", sp)
		}
		return images.Add(sp, "data:"+src.MediaType+";base64,"+*src.Data).Text, nil
	case "url":
		if src.URL == nil || *src.URL == "" {
			return "", gen.BadRequest(sp+".url", "%s.url is required", sp)
		}
		return images.Add(sp, *src.URL).Text, nil
	case "file":
		return "", gen.BadRequest(sp+".type", "%s.type \"file\" is not supported: this server stores no files (send base64 or url)", sp)
	}
	return "", gen.BadRequest(sp+".type", "%s.type %q is not supported (base64 or url)", sp, src.Type)
}

// contentBlocks decodes a content field that is an array of blocks.
func contentBlocks(raw json.RawMessage, param string) ([]blockIn, error) {
	var items []gen.BodyJSON
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, gen.BadRequest(param, "%s must be a string or an array of content blocks", param)
	}
	blocks := make([]blockIn, len(items))
	for i, it := range items {
		if err := json.Unmarshal(it, &blocks[i]); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				return nil, gen.BadRequest(fmt.Sprintf("%s[%d].%s", param, i, te.Field), "%s[%d].%s: expected %s, got JSON %s", param, i, te.Field, gen.JSONType(te.Type.Kind()), te.Value)
			}
			return nil, gen.BadRequest(fmt.Sprintf("%s[%d]", param, i), "%s[%d] must be a content block object", param, i)
		}
		if blocks[i].Type == "" {
			return nil, gen.BadRequest(fmt.Sprintf("%s[%d].type", param, i), "%s[%d].type is required", param, i)
		}
	}
	return blocks, nil
}

// blockText is a text block's text (required).
func blockText(b *blockIn, param string) (string, error) {
	if b.Text == nil {
		return "", gen.BadRequest(param+".text", "%s: a text block requires text", param)
	}
	return *b.Text, nil
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
