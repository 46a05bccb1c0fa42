package responses

import "mistralrs/internal/server/openai"

// The typed events of a Responses stream. Each carries its type and the
// stream's sequence number (eventHead, set by stream.send).

type eventHead struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
}

func (h *eventHead) stamp(typ string, seq int) { h.Type, h.SequenceNumber = typ, seq }

// event is any of the events below.
type event interface{ stamp(typ string, seq int) }

// responseEvent is response.created, .in_progress, .completed, .failed.
type responseEvent struct {
	eventHead
	Response *responseObject `json:"response"`
}

// itemEvent is response.output_item.added and .done.
type itemEvent struct {
	eventHead
	OutputIndex int `json:"output_index"`
	Item        any `json:"item"`
}

// partEvent is response.content_part.added and .done.
type partEvent struct {
	eventHead
	ItemID       string         `json:"item_id"`
	OutputIndex  int            `json:"output_index"`
	ContentIndex int            `json:"content_index"`
	Part         respOutputText `json:"part"`
}

// textDeltaEvent is response.output_text.delta.
type textDeltaEvent struct {
	eventHead
	ItemID       string                `json:"item_id"`
	OutputIndex  int                   `json:"output_index"`
	ContentIndex int                   `json:"content_index"`
	Delta        string                `json:"delta"`
	Logprobs     []openai.TokenLogprob `json:"logprobs"`
}

// textDoneEvent is response.output_text.done.
type textDoneEvent struct {
	eventHead
	ItemID       string                `json:"item_id"`
	OutputIndex  int                   `json:"output_index"`
	ContentIndex int                   `json:"content_index"`
	Text         string                `json:"text"`
	Logprobs     []openai.TokenLogprob `json:"logprobs"`
}

// argsDeltaEvent is response.function_call_arguments.delta.
type argsDeltaEvent struct {
	eventHead
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Delta       string `json:"delta"`
}

// argsDoneEvent is response.function_call_arguments.done.
type argsDoneEvent struct {
	eventHead
	ItemID      string `json:"item_id"`
	OutputIndex int    `json:"output_index"`
	Name        string `json:"name"`
	Arguments   string `json:"arguments"`
}

// errorEvent is the error event of a request the engine refused
// (mistral.rs's validation error path): the error's fields at the top and
// in an OpenAI error object.
type errorEvent struct {
	eventHead
	Code    string        `json:"code"`
	Message string        `json:"message"`
	Param   *string       `json:"param"`
	Error   errorEventErr `json:"error"`
}

type errorEventErr struct {
	Type    string  `json:"type"`
	Code    *string `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}
