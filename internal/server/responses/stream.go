package responses

import (
	"errors"
	"strings"

	"mistralrs/internal/chat"
	"mistralrs/internal/engine"
	"mistralrs/internal/observe"
	"mistralrs/internal/server/gen"
	"mistralrs/internal/server/openai"
)

// stream answers with the Responses event stream: response.created,
// response.in_progress at the first token, the message item
// (output_item.added, content_part.added, output_text.delta per piece of
// text, output_text.done, content_part.done, output_item.done), then each
// function call item (output_item.added, function_call_arguments.delta and
// .done, output_item.done), response.completed and data: [DONE]. Only the
// engine's token steps are TTFT/ITL samples (gen.Run); the bookkeeping
// events are not.
type stream struct {
	a            *API
	p            *job
	ev           *gen.Events
	lps          openai.Logprobs
	seq          int
	started      bool
	msg          *respMessageItem // the open message item
	sent         strings.Builder  // its text so far
	pending, all []openai.TokenLogprob
}

func newStream(a *API, p *job, ev *gen.Events, lps openai.Logprobs) *stream {
	s := &stream{a: a, p: p, ev: ev, lps: lps}
	_ = s.send("response.created", &responseEvent{Response: p.object(respQueued)})
	return s
}

// send writes one event: `event: <type>` and its data, numbered.
func (s *stream) send(typ string, e event) error {
	e.stamp(typ, s.seq)
	s.seq++
	return s.ev.Event(typ, e)
}

func (s *stream) inProgress() error {
	if s.started {
		return nil
	}
	s.started = true
	return s.send("response.in_progress", &responseEvent{Response: s.p.object(respInProgress)})
}

func (s *stream) openMessage() error {
	if s.msg != nil {
		return nil
	}
	s.msg = &respMessageItem{Type: "message", ID: newItemID("msg_"), Status: respInProgress, Role: "assistant", Content: []respOutputText{}}
	if err := s.send("response.output_item.added", &itemEvent{OutputIndex: 0, Item: s.msg}); err != nil {
		return err
	}
	return s.send("response.content_part.added", &partEvent{ItemID: s.msg.ID, Part: outputText("", nil)})
}

func (s *stream) delta(text string) error {
	if err := s.openMessage(); err != nil {
		return err
	}
	s.sent.WriteString(text)
	lp := s.pending
	if lp == nil {
		lp = []openai.TokenLogprob{}
	}
	s.pending = nil
	return s.send("response.output_text.delta", &textDeltaEvent{ItemID: s.msg.ID, Delta: text, Logprobs: lp})
}

func (s *stream) Output(o engine.Output, text string) error {
	if err := s.inProgress(); err != nil {
		return err
	}
	if l := s.lps.Of(o); l != nil {
		s.pending = append(s.pending, *l)
		s.all = append(s.all, *l)
	}
	if text == "" {
		return nil
	}
	return s.delta(text)
}

func (s *stream) Finish(end *gen.End) (bool, error) {
	ch := &end.Choices[0]
	_ = s.inProgress()
	if ch.Rest != "" {
		_ = s.delta(ch.Rest)
	}
	done := s.closeMessage(ch.Calls)
	fcs := s.functionCalls(ch.Calls, done != nil)
	obj, conv := s.p.finish(respCompleted, ch.Result, s.sent.String(), done, fcs)
	if s.p.store {
		// Stored before the client hears of it, so that it can continue
		// the conversation at once.
		s.a.store.add(&storedResponse{id: s.p.id, obj: obj, msgs: conv})
	}
	if err := s.send("response.completed", &responseEvent{Response: obj}); err != nil {
		return false, err
	}
	return true, s.ev.Done()
}

// closeMessage ends the message item (opening it first when the answer
// has neither text nor calls) and returns it; nil when the answer is only
// calls.
func (s *stream) closeMessage(calls []chat.ToolCall) *respMessageItem {
	if s.msg == nil && len(calls) > 0 {
		return nil
	}
	_ = s.openMessage()
	text := s.sent.String()
	done := &respMessageItem{Type: "message", ID: s.msg.ID, Status: respCompleted, Role: "assistant",
		Content: []respOutputText{outputText(text, s.all)}}
	lp := s.all
	if lp == nil {
		lp = []openai.TokenLogprob{}
	}
	_ = s.send("response.output_text.done", &textDoneEvent{ItemID: s.msg.ID, Text: text, Logprobs: lp})
	_ = s.send("response.content_part.done", &partEvent{ItemID: s.msg.ID, Part: done.Content[0]})
	_ = s.send("response.output_item.done", &itemEvent{OutputIndex: 0, Item: done})
	return done
}

// functionCalls sends each call's item; after a message item they start
// at output index 1.
func (s *stream) functionCalls(calls []chat.ToolCall, afterMessage bool) []*respFunctionCall {
	fcs := functionCalls(calls)
	for i, fc := range fcs {
		idx := i
		if afterMessage {
			idx++
		}
		added := *fc
		added.Status, added.Arguments = respInProgress, ""
		_ = s.send("response.output_item.added", &itemEvent{OutputIndex: idx, Item: &added})
		_ = s.send("response.function_call_arguments.delta", &argsDeltaEvent{ItemID: fc.ID, OutputIndex: idx, Delta: fc.Arguments})
		_ = s.send("response.function_call_arguments.done", &argsDoneEvent{ItemID: fc.ID, OutputIndex: idx, Name: fc.Name, Arguments: fc.Arguments})
		_ = s.send("response.output_item.done", &itemEvent{OutputIndex: idx, Item: fc})
	}
	return fcs
}

// Fail ends the stream: a request the engine refused gets an error event
// (mistral.rs's validation error path), anything else response.failed.
func (s *stream) Fail(err error) {
	var re *gen.Error
	if errors.As(err, &re) {
		typ := observe.ErrorType(re.Status)
		_ = s.send("error", &errorEvent{Code: typ, Message: re.Msg, Error: errorEventErr{Type: typ, Message: re.Msg}})
	} else {
		s.failed(err.Error())
	}
	_ = s.ev.Done()
}

// Canceled: the server canceled the generation with the client still
// there (its drain time ended, or its model went away): the response
// failed.
func (s *stream) Canceled(msg string, _ *gen.End) {
	s.failed(msg)
	_ = s.ev.Done()
}

func (s *stream) failed(msg string) {
	obj := s.p.object(respFailed)
	obj.Error = &responseErrorJSON{Code: "server_error", Message: msg}
	_ = s.send("response.failed", &responseEvent{Response: obj})
}

// The sinks of both forms answer a generation the server canceled as failed.
var (
	_ gen.CancelFailer = (*bodySink)(nil)
	_ gen.CancelFailer = (*stream)(nil)
)
