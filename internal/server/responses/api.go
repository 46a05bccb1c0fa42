package responses

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"mistralrs/internal/chat"
	"mistralrs/internal/engine"
	"mistralrs/internal/observe"
	"mistralrs/internal/server/gen"
	"mistralrs/internal/server/openai"
)

// API serves the Responses routes over the seam, with its store.
type API struct {
	b     *gen.Base
	store *responseStore
}

// New is the Responses API over b, keeping at most maxCount stored
// responses of at most maxBytes in all (0: the defaults).
func New(b *gen.Base, maxCount int, maxBytes int64) *API {
	return &API{b: b, store: newResponseStore(maxCount, maxBytes)}
}

// Close cancels the background responses and waits for them: they hold
// their models, so this comes before the models are freed.
func (a *API) Close() { a.store.close() }

// Stored reports the entries and bytes the store holds.
func (a *API) Stored() (int, int64) { return a.store.usage() }

// Status reports a stored response's status, whether it ended a
// conversation that previous_response_id can continue, and whether it is
// running; ok is false when the store does not hold it.
func (a *API) Status(id string) (status string, conversation, running, ok bool) {
	e, ok := a.store.get(id)
	if !ok {
		return "", false, false, false
	}
	obj, msgs, running := a.store.state(e)
	return obj.Status, msgs != nil, running, true
}

// job is a checked Responses request, bound to a loaded model.
type job struct {
	*gen.Job
	id         string
	stream     bool
	background bool
	store      bool
	logprobs   bool
	history    []chat.Message // earlier turns (previous_response_id) and this input, without the instructions
	images     gen.Images     // the images of history, which its media markers stand for
	base       responseObject // the request's echo fields
}

// object is the response in the given status, without output.
func (p *job) object(status string) *responseObject {
	o := p.base
	o.Status = status
	o.Output = []any{}
	return &o
}

// answer is the tool-call reading of a finished choice (nil: plain text).
func (p *job) answer(res *engine.Result) *gen.ToolAnswer {
	if res.FinishReason != engine.FinishToolCalls {
		return nil
	}
	return p.Answer(res.Text)
}

// finish is the response of a finished generation with its output items,
// and the conversation it ends (for previous_response_id).
func (p *job) finish(status string, res *engine.Result, text string, msg *respMessageItem, fcs []*respFunctionCall) (*responseObject, []chat.Message) {
	o := p.object(status)
	if msg != nil {
		o.Output = append(o.Output, msg)
	}
	assistant := chat.Message{Role: "assistant", Content: text}
	for _, fc := range fcs {
		o.Output = append(o.Output, fc)
		assistant.ToolCalls = append(assistant.ToolCalls, chat.ToolCall{ID: fc.CallID, Type: "function",
			Function: chat.FunctionCall{Name: fc.Name, Arguments: fc.Arguments}})
	}
	if status == respCompleted {
		now := time.Now().Unix()
		o.CompletedAt = &now
	}
	if res != nil {
		u := &respUsage{InputTokens: res.PromptTokens, OutputTokens: res.CompletionTokens, TotalTokens: res.PromptTokens + res.CompletionTokens}
		u.InputTokensDetails.CachedTokens = res.CachedTokens
		o.Usage = u
		if res.FinishReason == engine.FinishLength {
			o.IncompleteDetails = &respIncomplete{Reason: "max_output_tokens"}
		}
	}
	msgs := make([]chat.Message, 0, len(p.history)+1)
	msgs = append(append(msgs, storedImages(p.history, p.images)...), assistant)
	return o, msgs
}

// output reads a finished generation's answer: its text and message item,
// and its function calls.
func (p *job) output(res *engine.Result, lps []openai.TokenLogprob) (string, *respMessageItem, []*respFunctionCall) {
	if a := p.answer(res); a != nil {
		var msg *respMessageItem
		if a.Content != "" {
			msg = newMessageItem(respCompleted, a.Content, lps)
		}
		return a.Content, msg, functionCalls(a.Calls)
	}
	return res.Text, newMessageItem(respCompleted, res.Text, lps), nil
}

// Create is POST /v1/responses.
func (a *API) Create(w http.ResponseWriter, r *http.Request) {
	body, ok := a.b.ReadBody(w, r, gen.OpenAI)
	if !ok {
		return
	}
	p, err := a.prepare(r, body)
	if err != nil {
		a.b.WriteError(w, r, gen.OpenAI, err)
		return
	}
	if p.background {
		a.startBackground(w, r, p)
		return
	}
	defer p.Release()
	lps := openai.NewLogprobs(p.Model.Tok, p.logprobs)
	p.Job.ResponseID = p.id
	a.b.Run(w, r, p.Job, p.stream, func(ev *gen.Events) gen.Sink {
		if ev == nil {
			return &bodySink{a: a, w: w, r: r, p: p, lps: lps}
		}
		return newStream(a, p, ev, lps)
	})
}

func (a *API) prepare(r *http.Request, body []byte) (*job, error) {
	var req responsesRequest
	if err := gen.DecodeJSON(body, &req); err != nil {
		return nil, err
	}
	if err := gen.Refuse(body, unsupported); err != nil {
		return nil, err
	}
	m, err := a.b.Resolve(req.Model)
	if err != nil {
		return nil, err
	}
	if err := req.checkResponses(); err != nil {
		return nil, err
	}
	gr, p, err := a.request(&req, m)
	if err != nil {
		return nil, err
	}
	j, err := a.b.Prepare(r.Context(), gr)
	if err != nil {
		return nil, err
	}
	p.Job = j
	p.base.CreatedAt = j.Created
	p.base.AdapterGeneration = j.AdapterGeneration
	return p, nil
}

// request translates a checked request: its settings, format, input,
// history, tools and the echo fields of the response object.
func (a *API) request(req *responsesRequest, m gen.Model) (*gen.Request, *job, error) {
	logprobs := req.Logprobs || req.TopLogprobs != nil
	for _, inc := range req.Include {
		logprobs = logprobs || inc == "message.output_text.logprobs"
	}
	top := 0
	if req.TopLogprobs != nil {
		top = *req.TopLogprobs
	}
	if req.MaxOutputTokens != nil {
		if *req.MaxOutputTokens < 1 {
			return nil, nil, gen.BadRequest("max_output_tokens", "max_output_tokens must be at least 1, got %d", *req.MaxOutputTokens)
		}
		req.MaxCompletionTokens = req.MaxOutputTokens
	}
	req.N = nil // checked above: one choice
	g, err := req.Settings(logprobs, top, a.b.Seed)
	if err != nil {
		return nil, nil, err
	}
	param, format, err := req.format()
	if err != nil {
		return nil, nil, err
	}
	if g.Grammar, g.Compile, err = a.b.ConstraintNoted(param, format, req.Grammar); err != nil {
		return nil, nil, err
	}
	var images gen.Images
	history, err := a.history(req, &images)
	if err != nil {
		return nil, nil, err
	}
	chatTools, toolsEcho, err := respTools(req.Tools)
	if err != nil {
		return nil, nil, err
	}
	choice, err := respToolChoice(req.ToolChoice)
	if err != nil {
		return nil, nil, err
	}
	tools, err := gen.ToolsParser(chatTools, choice)
	if err != nil {
		return nil, nil, err
	}
	p := &job{id: "resp_" + uuid.New().String(), stream: req.Stream, background: req.Background,
		store: req.Store == nil || *req.Store, logprobs: logprobs, history: history, images: images}
	p.base = echo(req, p, m.ID(), toolsEcho, top)
	msgs := history
	if req.Instructions != nil && *req.Instructions != "" {
		msgs = append([]chat.Message{{Role: "system", Content: *req.Instructions}}, history...)
	}
	return &gen.Request{Model: m, Settings: g, Messages: msgs, Param: "input", Images: images, Tools: tools, ToolDefs: chatTools, ToolChoice: choice, Adapter: req.Adapter,
		Template: gen.TemplateOptions(chatTools, req.ChatTemplateKwargs, req.EnableThinking)}, p, nil
}

// history is the conversation of previous_response_id followed by this
// request's input, with their images in images.
func (a *API) history(req *responsesRequest, images *gen.Images) ([]chat.Message, error) {
	var history []chat.Message
	if req.PreviousResponseID != nil && *req.PreviousResponseID != "" {
		prev, err := a.previousConversation(*req.PreviousResponseID)
		if err != nil {
			return nil, err
		}
		history = append(history, withImages(prev, images)...)
	}
	input, err := respInput(req.Input, images)
	if err != nil {
		return nil, err
	}
	return append(history, input...), nil
}

// storedImage is the part type of an image in a stored conversation, whose
// text is the image's URL: media markers are a request's own, so a stored
// conversation keeps the images themselves.
const storedImage = "input_image"

// storedImages is msgs with each media marker part back as its image.
func storedImages(msgs []chat.Message, images gen.Images) []chat.Message {
	if len(images) == 0 {
		return msgs
	}
	byMarker := make(map[string]string, len(images))
	for _, im := range images {
		byMarker[im.Marker()] = im.URL
	}
	return mapParts(msgs, func(p chat.ContentPart) chat.ContentPart {
		if u, ok := byMarker[p.Text]; ok && p.Type == "text" {
			return chat.ContentPart{Type: storedImage, Text: u}
		}
		return p
	})
}

// withImages is a stored conversation with its images as media markers of
// this request, collected in images (named by previous_response_id).
func withImages(msgs []chat.Message, images *gen.Images) []chat.Message {
	return mapParts(msgs, func(p chat.ContentPart) chat.ContentPart {
		if p.Type == storedImage {
			return images.Add("previous_response_id", p.Text)
		}
		return p
	})
}

// mapParts is msgs with f applied to every content part (copied where a
// part changes).
func mapParts(msgs []chat.Message, f func(chat.ContentPart) chat.ContentPart) []chat.Message {
	out := msgs
	for i, m := range msgs {
		for j, p := range m.Parts {
			q := f(p)
			if q == p {
				continue
			}
			if &out[0] == &msgs[0] {
				out = append([]chat.Message(nil), msgs...)
			}
			if &out[i].Parts[0] == &msgs[i].Parts[0] {
				out[i].Parts = append([]chat.ContentPart(nil), m.Parts...)
			}
			out[i].Parts[j] = q
		}
	}
	return out
}

// echo is the response object's copy of the request's settings.
func echo(req *responsesRequest, p *job, model string, tools []json.RawMessage, top int) responseObject {
	o := responseObject{
		ID: p.id, Object: "response", Background: req.Background, Instructions: req.Instructions,
		MaxOutputTokens: req.MaxCompletionTokens, Model: model, ParallelToolCalls: true,
		PreviousResponseID: req.PreviousResponseID, Store: p.store, Temperature: 1, TopP: 1,
		ToolChoice: json.RawMessage(`"auto"`), Tools: tools, TopLogprobs: top, Truncation: "disabled",
		User: req.User, Metadata: req.Metadata,
	}
	if o.MaxOutputTokens == nil {
		o.MaxOutputTokens = req.MaxTokens
	}
	if req.Temperature != nil {
		o.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		o.TopP = *req.TopP
	}
	if b := bytes.TrimSpace(req.ToolChoice); len(b) > 0 && string(b) != "null" {
		o.ToolChoice = b
	}
	if o.Metadata == nil {
		o.Metadata = map[string]string{}
	}
	o.Text.Format.Type = "text"
	return o
}

// previousConversation is the conversation a stored response ended.
func (a *API) previousConversation(id string) ([]chat.Message, error) {
	e, ok := a.store.get(id)
	if !ok {
		return nil, gen.BadRequest("previous_response_id", "Previous response with id '%s' not found.", id)
	}
	obj, msgs, running := a.store.state(e)
	if running || msgs == nil {
		return nil, gen.BadRequest("previous_response_id", "Previous response with id '%s' is %s and cannot be continued yet.", id, obj.Status)
	}
	return msgs, nil
}

// startBackground stores the response as queued, answers with it, and runs
// the generation on its own goroutine with a context that outlives the
// request; POST …/cancel (or a DELETE, or the server's shutdown) cancels it.
func (a *API) startBackground(w http.ResponseWriter, r *http.Request, p *job) {
	if err := a.store.startRun(); err != nil {
		p.Release()
		a.b.WriteRequestError(w, r, gen.OpenAI, &gen.Error{Status: http.StatusServiceUnavailable, Msg: err.Error()})
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &storedResponse{id: p.id, obj: p.object(respQueued), background: true, running: true, cancel: cancel, done: make(chan struct{})}
	a.store.add(e)
	queued := e.obj
	go a.runBackground(ctx, p, e)
	a.b.Respond(w, r, queued)
}

func (a *API) runBackground(ctx context.Context, p *job, e *storedResponse) {
	defer a.store.runs.Done()
	defer close(e.done)
	defer e.cancel()
	defer p.Release()
	a.store.set(e, p.object(respInProgress), nil, true)
	lp := openai.NewLogprobs(p.Model.Tok, p.logprobs)
	var lps []openai.TokenLogprob
	res, err := p.Engine.Generate(ctx, p.Req, func(o engine.Output) error {
		if l := lp.Of(o); l != nil {
			lps = append(lps, *l)
		}
		return nil
	})
	switch {
	case err != nil:
		obj := p.object(respFailed)
		obj.Error = &responseErrorJSON{Code: "server_error", Message: gen.GenerateError(err).Error()}
		a.b.Log.Warn(fmt.Sprintf("background response %s failed: %v", p.id, err))
		a.store.set(e, obj, nil, false)
	case res.FinishReason == engine.FinishCanceled:
		// What was generated before the cancel stays readable.
		msg := newMessageItem("incomplete", res.Text, lps)
		obj, conv := p.finish(respCancelled, res, res.Text, msg, nil)
		a.store.set(e, obj, conv, false)
	default:
		text, msg, fcs := p.output(res, lps)
		obj, conv := p.finish(respCompleted, res, text, msg, fcs)
		a.store.set(e, obj, conv, false)
	}
}

// notFound answers an id the store does not hold (never stored, deleted,
// evicted, or lost in a restart).
func (a *API) notFound(w http.ResponseWriter, r *http.Request, msg string) {
	_ = a.b.PayloadLog.ErrorCtx(r.Context(), msg)
	observe.WriteError(w, r, http.StatusNotFound, observe.APIError{Message: msg})
}

// Get is GET /v1/responses/{response_id}.
func (a *API) Get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("response_id")
	e, ok := a.store.get(id)
	if !ok {
		a.notFound(w, r, fmt.Sprintf("Response with ID '%s' not found", id))
		return
	}
	obj, _, _ := a.store.state(e)
	a.b.Respond(w, r, obj)
}

// Delete is DELETE /v1/responses/{response_id}; a running background
// response is canceled.
func (a *API) Delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("response_id")
	e, ok := a.store.remove(id)
	if !ok {
		a.notFound(w, r, fmt.Sprintf("Response with ID '%s' not found", id))
		return
	}
	if e.cancel != nil {
		e.cancel()
	}
	a.b.Respond(w, r, struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Deleted bool   `json:"deleted"`
	}{id, "response.deleted", true})
}

// Cancel is POST /v1/responses/{response_id}/cancel: it cancels a running
// background response (its sequence ends with reason canceled and frees
// its KV cache) and answers it once it has stopped. Cancelling a cancelled
// response again answers it again; anything else (unknown, not background,
// already finished) is a 404.
func (a *API) Cancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("response_id")
	cannot := fmt.Sprintf("Response with ID '%s' not found or cannot be cancelled", id)
	e, ok := a.store.get(id)
	if !ok || !e.background {
		a.notFound(w, r, cannot)
		return
	}
	if _, _, running := a.store.state(e); running {
		e.cancel()
		select {
		case <-e.done:
		case <-r.Context().Done():
			observe.WriteErrorMessage(w, r, gen.StatusClientClosed, "client closed the request")
			return
		}
	}
	obj, _, _ := a.store.state(e)
	if obj.Status != respCancelled {
		a.notFound(w, r, cannot)
		return
	}
	a.b.Respond(w, r, obj)
}
