package anthropic

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/google/uuid"

	"mistralrs/internal/chat"
	"mistralrs/internal/engine"
	"mistralrs/internal/sampler"
	"mistralrs/internal/server/gen"
)

// Response shapes.

type usageJSON struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// blockJSON is a content block of an answer.
type blockJSON struct {
	Type  string          `json:"type"`
	Text  *string         `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type messageJSON struct {
	ID           string      `json:"id"`
	Type         string      `json:"type"` // "message"
	Role         string      `json:"role"`
	Content      []blockJSON `json:"content"`
	Model        string      `json:"model"`
	StopReason   *string     `json:"stop_reason"`
	StopSequence *string     `json:"stop_sequence"`
	Usage        usageJSON   `json:"usage"`
}

// newID is a fresh id with Anthropic's prefixes (msg_, toolu_).
func newID(prefix string) string {
	id := uuid.New()
	return prefix + hex.EncodeToString(id[:])
}

// toolUseBlock is a tool call as a tool_use block; arguments that are not a
// JSON object are wrapped as {"arguments": …}, as mistral.rs does.
func toolUseBlock(c chat.ToolCall) blockJSON {
	input := json.RawMessage(bytes.TrimSpace([]byte(c.Function.Arguments)))
	if len(input) == 0 || input[0] != '{' || !json.Valid(input) {
		b, _ := json.Marshal(map[string]string{"arguments": c.Function.Arguments})
		input = b
	}
	return blockJSON{Type: "tool_use", ID: newID("toolu_"), Name: c.Function.Name, Input: input}
}

// answer is what both forms of an answer share. Anthropic has no n: the
// job has one choice.
type answer struct {
	b     *gen.Base
	w     http.ResponseWriter
	r     *http.Request
	j     *gen.Job
	msgID string
	// stopToken: the last output was an end-of-generation token.
	stopToken bool
}

// stopReason maps the engine's finish reason to Anthropic's stop_reason,
// and names the stop sequence that ended the answer, if one did.
func (a *answer) stopReason(res *engine.Result) (string, *string) {
	switch res.FinishReason {
	case engine.FinishToolCalls:
		return "tool_use", nil
	case engine.FinishLength:
		return "max_tokens", nil
	case engine.FinishStop:
		if stops := a.j.Req.Stop; !a.stopToken && len(stops) > 0 {
			// The engine cut the text at the stop string: find which one
			// on the decoded tokens, as the engine's matcher did.
			m := sampler.NewStopMatcher(stops)
			m.Push(a.j.Model.Tok.Decode(res.Tokens))
			if s := m.Matched(); s != "" {
				return "stop_sequence", &s
			}
		}
	}
	return "end_turn", nil
}

// canceled answers a generation the server canceled while its client was
// still there (the drain time ended, or the model went away): no
// stop_reason says that the answer was cut, so the client gets an error
// (503 overloaded_error: worth retrying elsewhere) rather than a partial
// answer that looks finished.
func canceled(msg string) *gen.Error {
	return &gen.Error{Status: http.StatusServiceUnavailable, Msg: msg}
}

// bodySink answers in one message body.
type bodySink struct{ *answer }

var (
	_ gen.CancelFailer = (*bodySink)(nil)
	_ gen.CancelFailer = (*streamSink)(nil)
)

func (s *bodySink) Output(o engine.Output, _ string) error {
	s.stopToken = o.StopToken
	return nil
}

func (s *bodySink) Finish(end *gen.End) (bool, error) {
	ch := &end.Choices[0]
	reason, seq := s.stopReason(ch.Result)
	content := []blockJSON{}
	if text := ch.Content(); text != "" {
		content = append(content, blockJSON{Type: "text", Text: &text})
	}
	if reason == "tool_use" {
		for _, c := range ch.Calls {
			content = append(content, toolUseBlock(c))
		}
	}
	s.b.Respond(s.w, s.r, messageJSON{
		ID: s.msgID, Type: "message", Role: "assistant", Content: content, Model: s.j.Served.ID(),
		StopReason: &reason, StopSequence: seq,
		Usage: usageJSON{InputTokens: ch.PromptTokens, OutputTokens: ch.CompletionTokens},
	})
	return false, nil
}

func (s *bodySink) Fail(err error) { s.b.WriteError(s.w, s.r, Envelope, err) }

// Canceled answers the cut generation as an error; what was generated is
// not sent.
func (s *bodySink) Canceled(msg string, _ *gen.End) {
	s.b.WriteError(s.w, s.r, Envelope, canceled(msg))
}
