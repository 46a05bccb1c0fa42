package anthropic

import (
	"encoding/json"

	"mistralrs/internal/chat"
	"mistralrs/internal/engine"
	"mistralrs/internal/server/gen"
)

// A stream follows Anthropic's event order: message_start (at once, with
// the prompt's token count), then per content block content_block_start,
// its deltas and content_block_stop (text as it is generated; tool calls,
// read from the finished answer, one tool_use block each with its
// arguments in one input_json_delta), then message_delta (stop_reason,
// output tokens) and message_stop; no [DONE]. While nothing is sent for
// the keep-alive interval, `event: ping` frames keep the connection open.
// Only engine outputs are token steps for TTFT and ITL (gen.Run): the
// bookkeeping events and pings never are.

type messageStart struct {
	Type    string      `json:"type"` // "message_start"
	Message messageJSON `json:"message"`
}

type blockStart struct {
	Type         string    `json:"type"` // "content_block_start"
	Index        int       `json:"index"`
	ContentBlock blockJSON `json:"content_block"`
}

type delta struct {
	Type        string  `json:"type"` // text_delta, input_json_delta
	Text        *string `json:"text,omitempty"`
	PartialJSON *string `json:"partial_json,omitempty"`
}

type blockDelta struct {
	Type  string `json:"type"` // "content_block_delta"
	Index int    `json:"index"`
	Delta delta  `json:"delta"`
}

type blockStop struct {
	Type  string `json:"type"` // "content_block_stop"
	Index int    `json:"index"`
}

type messageDelta struct {
	Type  string `json:"type"` // "message_delta"
	Delta struct {
		StopReason   string  `json:"stop_reason"`
		StopSequence *string `json:"stop_sequence"`
	} `json:"delta"`
	Usage struct {
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

type typeOnly struct {
	Type string `json:"type"` // "message_stop", "ping"
}

// ping is the Anthropic stream's keep-alive frame.
var ping = []byte("event: ping\ndata: {\"type\":\"ping\"}\n\n")

// streamSink writes the events of one streamed answer.
type streamSink struct {
	*answer
	ev       *gen.Events
	index    int  // the current content block
	textOpen bool // a text block is open at index
}

// newStreamSink starts the stream: message_start, and pings as its
// keep-alive frames.
func newStreamSink(a *answer, ev *gen.Events) *streamSink {
	ev.SetPing(ping)
	start := messageJSON{ID: a.msgID, Type: "message", Role: "assistant", Content: []blockJSON{},
		Model: a.j.Served.ID(), Usage: usageJSON{InputTokens: len(a.j.Req.Prompt)}}
	_ = ev.Event("message_start", messageStart{Type: "message_start", Message: start})
	return &streamSink{answer: a, ev: ev}
}

// Output sends the text that can be shown now (Run holds back what may
// still be a tool call).
func (s *streamSink) Output(o engine.Output, text string) error {
	s.stopToken = o.StopToken
	return s.text(text)
}

// text sends a piece of text, opening a text block first if none is open.
func (s *streamSink) text(piece string) error {
	if piece == "" {
		return nil
	}
	if !s.textOpen {
		empty := ""
		if err := s.ev.Event("content_block_start", blockStart{Type: "content_block_start", Index: s.index,
			ContentBlock: blockJSON{Type: "text", Text: &empty}}); err != nil {
			return err
		}
		s.textOpen = true
	}
	return s.ev.Event("content_block_delta", blockDelta{Type: "content_block_delta", Index: s.index,
		Delta: delta{Type: "text_delta", Text: &piece}})
}

// closeText ends the open text block, if any.
func (s *streamSink) closeText() error {
	if !s.textOpen {
		return nil
	}
	s.textOpen = false
	s.index++
	return s.ev.Event("content_block_stop", blockStop{Type: "content_block_stop", Index: s.index - 1})
}

// toolUse sends one tool call as a whole tool_use block: its start with an
// empty input, the arguments in one input_json_delta, its stop.
func (s *streamSink) toolUse(c chat.ToolCall) error {
	b := toolUseBlock(c)
	args := string(b.Input)
	b.Input = json.RawMessage("{}")
	i := s.index
	s.index++
	if err := s.ev.Event("content_block_start", blockStart{Type: "content_block_start", Index: i, ContentBlock: b}); err != nil {
		return err
	}
	if err := s.ev.Event("content_block_delta", blockDelta{Type: "content_block_delta", Index: i,
		Delta: delta{Type: "input_json_delta", PartialJSON: &args}}); err != nil {
		return err
	}
	return s.ev.Event("content_block_stop", blockStop{Type: "content_block_stop", Index: i})
}

// Finish sends what ends a stream: the held-back text or the tool_use
// blocks, then message_delta and message_stop. The usage reached the
// client only if all of it was sent.
func (s *streamSink) Finish(end *gen.End) (bool, error) {
	ch := &end.Choices[0]
	if err := s.blocks(ch); err != nil {
		return false, err
	}
	reason, seq := s.stopReason(ch.Result)
	md := messageDelta{Type: "message_delta"}
	md.Delta.StopReason, md.Delta.StopSequence = reason, seq
	md.Usage.OutputTokens = ch.CompletionTokens
	if err := s.ev.Event("message_delta", md); err != nil {
		return false, err
	}
	if err := s.ev.Event("message_stop", typeOnly{Type: "message_stop"}); err != nil {
		return false, err
	}
	return true, nil
}

// blocks sends the rest of the text, closes the text block and sends the
// tool calls.
func (s *streamSink) blocks(ch *gen.Choice) error {
	if err := s.text(ch.Rest); err != nil {
		return err
	}
	if err := s.closeText(); err != nil {
		return err
	}
	for _, c := range ch.Calls {
		if err := s.toolUse(c); err != nil {
			return err
		}
	}
	return nil
}

// Fail ends the stream with an error event (Run has logged the message).
func (s *streamSink) Fail(err error) {
	_ = s.ev.Unlogged("error", apiError(gen.Status(err), err.Error()))
}

// Canceled ends the stream with an error event: Anthropic has no stop
// reason for an answer the server cut.
func (s *streamSink) Canceled(msg string, _ *gen.End) { s.Fail(canceled(msg)) }
