package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"mistralrs/internal/engine"
)

// Adapter is a request's LoRA adapter selection (the `adapter` field): an
// alias, or {"generation": "<id>"} for one generation of an adapter.
type Adapter struct {
	Alias      string
	Generation string
}

// UnmarshalJSON reads an alias string or {"generation": "<id>"}; anything
// else is refused with a message naming the two forms.
func (a *Adapter) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &a.Alias); err != nil {
			return err
		}
		if a.Alias == "" {
			return BadRequest("adapter", "adapter must not be empty: give an alias or {\"generation\": \"<id>\"}")
		}
		return nil
	}
	var obj struct {
		Generation *string `json:"generation"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if len(b) == 0 || b[0] != '{' || dec.Decode(&obj) != nil || obj.Generation == nil || *obj.Generation == "" {
		return BadRequest("adapter", "adapter must be an alias string or {\"generation\": \"<id>\"}, got %s", Snippet(b))
	}
	a.Generation = *obj.Generation
	return nil
}

// String names the selection in messages.
func (a Adapter) String() string {
	if a.Generation != "" {
		return "generation " + a.Generation
	}
	return a.Alias
}

// Snippet is the start of a JSON value for an error message.
func Snippet(b []byte) string {
	const n = 64
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}

// Adapters is a loaded model's LoRA adapters (Loaded.Adapters; nil: the
// model has no LoRA runtime). Hold selects a resident generation and holds
// it until release: an adapter unloaded or replaced meanwhile is freed only
// after. The *engine.LoRA is shared: the engine only reads it.
type Adapters interface {
	Hold(sel Adapter) (lora *engine.LoRA, generation string, release func(), err error)
}

// AdapterCard is a Model that a request named by a LoRA adapter card id
// ("<model>::<alias>") or a short alias: the base model with that adapter
// selected. Its ID is the string as requested, which answers echo.
type AdapterCard interface {
	Model
	CardAdapter() string
}

// selectAdapter is the request's adapter: its `adapter` field or the card
// its model named; both at once is a validation error.
func selectAdapter(req *Request) (*Adapter, error) {
	card, isCard := req.Model.(AdapterCard)
	switch {
	case isCard && req.Adapter != nil:
		return nil, &Error{Status: http.StatusUnprocessableEntity, Param: "adapter", Msg: fmt.Sprintf(
			"model `%s` already selects LoRA adapter `%s`; drop the adapter field or name the base model", card.ID(), card.CardAdapter())}
	case isCard:
		return &Adapter{Alias: card.CardAdapter()}, nil
	}
	return req.Adapter, nil
}

// holdAdapter resolves sel on the job's model and holds its generation for
// the job: the engine request gets its LoRA, the job the generation id.
func (j *Job) holdAdapter(sel *Adapter) error {
	if sel == nil {
		return nil
	}
	if j.Adapters == nil {
		return &Error{Status: http.StatusUnprocessableEntity, Param: "adapter", Msg: fmt.Sprintf(
			"model %s has no LoRA runtime: it is served without adapters (--enable-lora or --lora enable them)", j.Served.ID())}
	}
	lora, generation, release, err := j.Adapters.Hold(*sel)
	if err != nil {
		return err
	}
	j.Req.LoRA, j.AdapterGeneration = lora, generation
	model := j.release
	j.release = func() { release(); model() }
	return nil
}
