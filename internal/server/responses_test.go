package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	dto "github.com/prometheus/client_model/go"
)

var ignoreEOS = option.WithJSONSet("ignore_eos", true)

func respParams(input string, maxTokens int64) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:           "tiny",
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String(input)},
		MaxOutputTokens: openai.Int(maxTokens),
		Temperature:     openai.Float(0),
	}
}

// apiStatus is the HTTP status of an SDK error (0 if it is not an API error).
func apiStatus(err error) (int, string) {
	var ae *openai.Error
	if errors.As(err, &ae) {
		return ae.StatusCode, ae.Message
	}
	return 0, ""
}

// chatAnswer is the greedy chat completion of msgs: the reference a
// response must equal.
func (ts *testServer) chatAnswer(t *testing.T, msgs []map[string]any, maxTokens int) (string, int) {
	t.Helper()
	r, body := ts.post("/v1/chat/completions", map[string]any{"messages": msgs, "max_tokens": maxTokens, "temperature": 0, "ignore_eos": true})
	if r.StatusCode != 200 {
		t.Fatalf("chat: %d %s", r.StatusCode, body)
	}
	var c struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatal(err)
	}
	return c.Choices[0].Message.Content, c.Usage.PromptTokens
}

func TestResponsesCreateGetDelete(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	p := respParams("hello", 8)
	p.Instructions = openai.String("be brief")
	p.Metadata = map[string]string{"k": "v"}
	resp, err := ts.client.Responses.New(ctx, p, ignoreEOS)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.ID, "resp_") || len(resp.ID) != len("resp_")+36 || resp.Status != "completed" || resp.Model != "tiny" ||
		resp.Object != "response" || resp.CreatedAt == 0 || resp.Metadata["k"] != "v" || resp.Instructions.OfString != "be brief" {
		t.Errorf("envelope: %s", resp.RawJSON())
	}
	if len(resp.Output) != 1 || resp.Output[0].Type != "message" {
		t.Fatalf("output: %s", resp.RawJSON())
	}
	m := resp.Output[0].AsMessage()
	if m.Role != "assistant" || m.Status != "completed" || !strings.HasPrefix(m.ID, "msg_") || len(m.Content) != 1 || m.Content[0].Type != "output_text" {
		t.Errorf("message item %s", resp.Output[0].RawJSON())
	}
	if resp.Usage.OutputTokens != 8 || resp.Usage.InputTokens == 0 || resp.Usage.TotalTokens != resp.Usage.InputTokens+8 {
		t.Errorf("usage %+v", resp.Usage)
	}
	// The answer is the chat completion of the same conversation.
	want, promptTokens := ts.chatAnswer(t, []map[string]any{{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}}, 8)
	if resp.OutputText() != want || int(resp.Usage.InputTokens) != promptTokens {
		t.Errorf("answer %q (%d prompt tokens), chat %q (%d)", resp.OutputText(), resp.Usage.InputTokens, want, promptTokens)
	}

	// GET returns it; DELETE removes it; then both are 404s.
	got, err := ts.client.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != resp.ID || got.OutputText() != resp.OutputText() || got.Status != "completed" {
		t.Fatalf("get: %v %+v", err, got)
	}
	if err := ts.client.Responses.Delete(ctx, resp.ID); err != nil {
		t.Fatal(err)
	}
	_, err = ts.client.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	if st, msg := apiStatus(err); st != 404 || msg != "Response with ID '"+resp.ID+"' not found" {
		t.Errorf("get after delete: %v (%d %q)", err, st, msg)
	}
	if st, _ := apiStatus(ts.client.Responses.Delete(ctx, resp.ID)); st != 404 {
		t.Errorf("second delete: %d", st)
	}

	// store: false keeps nothing.
	p.Store = openai.Bool(false)
	unstored, err := ts.client.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.client.Responses.Get(ctx, unstored.ID, responses.ResponseGetParams{}); func() int { s, _ := apiStatus(err); return s }() != 404 {
		t.Errorf("store false: %v", err)
	}

	// Labels: the route pattern as path; the body's model on POST, none on
	// the id routes.
	fams := ts.metrics()
	for _, c := range []struct {
		method, path, model, status string
		n                           float64
	}{
		{"POST", "/v1/responses", "tiny", "200", 2},
		{"GET", "/v1/responses/{response_id}", "none", "200", 1},
		{"GET", "/v1/responses/{response_id}", "none", "404", 2},
		{"DELETE", "/v1/responses/{response_id}", "none", "200", 1},
		{"DELETE", "/v1/responses/{response_id}", "none", "404", 1},
	} {
		if v := value(fams, "http_requests_total", map[string]string{"method": c.method, "path": c.path, "model": c.model, "status": c.status}); v != c.n {
			t.Errorf("http_requests_total{%s %s model=%s status=%s} = %v, want %v", c.method, c.path, c.model, c.status, v, c.n)
		}
	}
	if l := ts.log.lines("request completed:", "method=DELETE route=/v1/responses/{response_id} model=none status=200"); len(l) != 1 {
		t.Errorf("access line of the delete: %q", l)
	}
}

// namedEvent is one SSE event of a Responses stream.
type namedEvent struct {
	name string
	data map[string]any
	raw  string
}

// responsesEvents parses a Responses stream: named events, then data: [DONE].
func responsesEvents(t *testing.T, body []byte) []namedEvent {
	t.Helper()
	var out []namedEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	name := ""
	done := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "" || line == ":":
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case line == "data: [DONE]":
			if name != "" {
				t.Fatalf("[DONE] after event: %s", name)
			}
			done = true
		case strings.HasPrefix(line, "data: "):
			if done {
				t.Fatalf("data after [DONE]: %s", line)
			}
			ev := namedEvent{name: name, raw: strings.TrimPrefix(line, "data: ")}
			if err := json.Unmarshal([]byte(ev.raw), &ev.data); err != nil {
				t.Fatalf("event %s: %v", line, err)
			}
			out = append(out, ev)
			name = ""
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if !done {
		t.Fatalf("no [DONE] in %s", body)
	}
	return out
}

func TestResponsesStreaming(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	const n = 10

	// The SDK's streaming iterator.
	stream := ts.client.Responses.NewStreaming(ctx, respParams("hello", n), ignoreEOS)
	var types []string
	var deltas strings.Builder
	var doneText string
	var final responses.Response
	for stream.Next() {
		ev := stream.Current()
		if int(ev.SequenceNumber) != len(types) {
			t.Errorf("event %d (%s) has sequence number %d", len(types), ev.Type, ev.SequenceNumber)
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.output_text.done":
			doneText = ev.AsResponseOutputTextDone().Text
		case "response.completed":
			final = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(types) < 9 {
		t.Fatalf("events %q", types)
	}
	head := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	tail := []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"}
	if strings.Join(types[:4], " ") != strings.Join(head, " ") || strings.Join(types[len(types)-4:], " ") != strings.Join(tail, " ") {
		t.Errorf("event order %q", types)
	}
	for _, ty := range types[4 : len(types)-4] {
		if ty != "response.output_text.delta" {
			t.Errorf("event order %q", types)
			break
		}
	}
	if final.Status != "completed" || final.OutputText() != deltas.String() || doneText != deltas.String() || final.Usage.OutputTokens != n {
		t.Errorf("completed %s; deltas %q, done %q", final.RawJSON(), deltas.String(), doneText)
	}
	// Streamed or not, the same greedy answer; the streamed one was stored.
	plain, err := ts.client.Responses.New(ctx, respParams("hello", n), ignoreEOS)
	if err != nil {
		t.Fatal(err)
	}
	if plain.OutputText() != final.OutputText() {
		t.Errorf("streamed %q, not streamed %q", final.OutputText(), plain.OutputText())
	}
	if got, err := ts.client.Responses.Get(ctx, final.ID, responses.ResponseGetParams{}); err != nil || got.OutputText() != final.OutputText() {
		t.Errorf("stored stream: %v", err)
	}

	// The raw stream: every event named as its data's type, numbered in
	// order, then data: [DONE]; the created event says queued.
	r, body := ts.post("/v1/responses", map[string]any{"input": "hello", "max_output_tokens": n, "ignore_eos": true, "stream": true}, "X-Request-Id", "rs-raw")
	if r.StatusCode != 200 || r.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", r.StatusCode, r.Header)
	}
	evs := responsesEvents(t, body)
	for i, ev := range evs {
		if ev.name != ev.data["type"] || ev.data["sequence_number"] != float64(i) {
			t.Errorf("event %d: name %q, data %s", i, ev.name, ev.raw)
		}
	}
	created := evs[0].data["response"].(map[string]any)
	if created["status"] != "queued" || evs[1].data["response"].(map[string]any)["status"] != "in_progress" {
		t.Errorf("created %s, in progress %s", evs[0].raw, evs[1].raw)
	}
	line := ts.log.waitLines(t, 1, "request completed: request_id=rs-raw ")[0]
	if !strings.Contains(line, "route=/v1/responses model=tiny status=200 outcome=completed") || !strings.Contains(line, "completion_tokens="+strconv.Itoa(n)) {
		t.Errorf("access line %q", line)
	}

	// TTFT and ITL count engine steps only: per stream one TTFT sample and
	// n-1 ITL samples, whatever the bookkeeping events around them.
	labels := map[string]string{"method": "POST", "path": "/v1/responses", "model": "tiny", "status": "200"}
	fams := ts.metrics()
	if ttft, itl := value(fams, "mistralrs_time_to_first_token_seconds", labels), value(fams, "mistralrs_inter_token_latency_seconds", labels); ttft != 2 || itl != 2*(n-1) {
		t.Errorf("TTFT samples %v (want 2), ITL samples %v (want %d)", ttft, itl, 2*(n-1))
	}
}

func TestResponsesPreviousResponseChain(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	turns := []string{"my name is Ada", "what is my name?", "and yours?"}
	var convo []map[string]any
	prev := ""
	for i, user := range turns {
		p := respParams(user, 6)
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		if i == 2 {
			// Instructions apply to their own turn only.
			p.Instructions = openai.String("answer briefly")
		}
		resp, err := ts.client.Responses.New(ctx, p, ignoreEOS)
		if err != nil {
			t.Fatal(err)
		}
		convo = append(convo, map[string]any{"role": "user", "content": user})
		msgs := convo
		if i == 2 {
			msgs = append([]map[string]any{{"role": "system", "content": "answer briefly"}}, convo...)
		}
		want, promptTokens := ts.chatAnswer(t, msgs, 6)
		if resp.OutputText() != want || int(resp.Usage.InputTokens) != promptTokens {
			t.Errorf("turn %d: %q with %d prompt tokens; chat over the whole conversation: %q with %d", i, resp.OutputText(), resp.Usage.InputTokens, want, promptTokens)
		}
		if prev != "" && resp.PreviousResponseID != prev {
			t.Errorf("turn %d: previous_response_id %q", i, resp.PreviousResponseID)
		}
		convo = append(convo, map[string]any{"role": "assistant", "content": resp.OutputText()})
		prev = resp.ID
	}
	// An unknown previous response is the client's mistake.
	p := respParams("x", 2)
	p.PreviousResponseID = openai.String("resp_nope")
	_, err := ts.client.Responses.New(ctx, p)
	if st, msg := apiStatus(err); st != 400 || !strings.Contains(msg, "resp_nope") {
		t.Errorf("unknown previous: %v", err)
	}
}

func TestResponsesBackgroundAndCancel(t *testing.T) {
	ts := slowServer(t)
	ctx := context.Background()
	slow := func(max int64) responses.ResponseNewParams {
		p := respParams("abc", max)
		p.Model = "slow"
		p.Background = openai.Bool(true)
		return p
	}

	// A background response answers queued at once, shows in_progress
	// while it runs, then completed. (400 tokens: long enough for the
	// polls to see it running on a fast machine; 60 were over before the
	// first poll on a loaded one.)
	resp, err := ts.client.Responses.New(ctx, slow(400), ignoreEOS)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != "queued" || !resp.Background || len(resp.Output) != 0 {
		t.Fatalf("background create: %s", resp.RawJSON())
	}
	seen := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := ts.client.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		seen[string(got.Status)] = true
		if got.Status == "completed" {
			if got.Usage.OutputTokens != 400 || got.OutputText() == "" {
				t.Errorf("completed %s", got.RawJSON())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %s", got.Status)
		}
		time.Sleep(time.Millisecond)
	}
	if !seen["in_progress"] {
		t.Errorf("statuses seen %v", seen)
	}
	// A finished response cannot be cancelled.
	_, err = ts.client.Responses.Cancel(ctx, resp.ID)
	if st, msg := apiStatus(err); st != 404 || msg != "Response with ID '"+resp.ID+"' not found or cannot be cancelled" {
		t.Errorf("cancel completed: %v %q", err, msg)
	}

	// Cancel mid-generation: the sequence ends canceled and its KV blocks
	// are freed.
	long, err := ts.client.Responses.New(ctx, slow(1500), ignoreEOS)
	if err != nil {
		t.Fatal(err)
	}
	ts.waitMetric(t, "the background sequence running", func(f map[string]*dto.MetricFamily) bool {
		return value(f, "mistralrs_sequences_running", nil) == 1 && value(f, "mistralrs_kv_cache_blocks_used", nil) > 0
	})
	time.Sleep(20 * time.Millisecond)
	cancelled, err := ts.client.Responses.Cancel(ctx, long.ID)
	if err != nil {
		t.Fatal(err)
	}
	if cancelled.Status != "cancelled" || cancelled.Usage.OutputTokens >= 1500 {
		t.Errorf("cancelled %s", cancelled.RawJSON())
	}
	ts.waitMetric(t, "the canceled sequence and its blocks", func(f map[string]*dto.MetricFamily) bool {
		return value(f, "mistralrs_sequences_completed_total", map[string]string{"reason": "canceled"}) == 1 &&
			value(f, "mistralrs_kv_cache_blocks_used", nil) == 0 && value(f, "mistralrs_sequences_running", nil) == 0
	})
	if got, err := ts.client.Responses.Get(ctx, long.ID, responses.ResponseGetParams{}); err != nil || got.Status != "cancelled" {
		t.Errorf("get cancelled: %v %+v", err, got.Status)
	}
	// Cancelling again answers the same; unknown ids and responses that
	// did not run in the background are 404s.
	if again, err := ts.client.Responses.Cancel(ctx, long.ID); err != nil || again.Status != "cancelled" {
		t.Errorf("cancel again: %v", err)
	}
	_, err = ts.client.Responses.Cancel(ctx, "resp_unknown")
	if st, msg := apiStatus(err); st != 404 || msg != "Response with ID 'resp_unknown' not found or cannot be cancelled" {
		t.Errorf("cancel unknown: %v", err)
	}
	fams := ts.metrics()
	if v := value(fams, "http_requests_total", map[string]string{"method": "POST", "path": "/v1/responses/{response_id}/cancel", "model": "none", "status": "200"}); v != 2 {
		t.Errorf("cancel route series %v", v)
	}

	// A DELETE cancels a running background response too; one left running
	// is canceled when the server closes (the test's cleanup).
	del, err := ts.client.Responses.New(ctx, slow(1500), ignoreEOS)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.client.Responses.Delete(ctx, del.ID); err != nil {
		t.Fatal(err)
	}
	ts.waitMetric(t, "the deleted response canceled", func(f map[string]*dto.MetricFamily) bool {
		return value(f, "mistralrs_sequences_completed_total", map[string]string{"reason": "canceled"}) == 2
	})
	if _, err := ts.client.Responses.New(ctx, slow(1500), ignoreEOS); err != nil {
		t.Fatal(err)
	}
}

func TestResponsesEviction(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.ResponsesMaxStored = 2 })
	ctx := context.Background()
	create := func() string {
		t.Helper()
		resp, err := ts.client.Responses.New(ctx, respParams("hi", 2))
		if err != nil {
			t.Fatal(err)
		}
		return resp.ID
	}
	status := func(id string) int {
		t.Helper()
		_, err := ts.client.Responses.Get(ctx, id, responses.ResponseGetParams{})
		if err == nil {
			return 200
		}
		s, _ := apiStatus(err)
		return s
	}
	a, b, c := create(), create(), create()
	if status(a) != 404 || status(b) != 200 || status(c) != 200 {
		t.Errorf("after three: %d %d %d", status(a), status(b), status(c))
	}
	// b was read after c: c is now the least recently used.
	status(b)
	d := create()
	if status(c) != 404 || status(b) != 200 || status(d) != 200 {
		t.Errorf("LRU: c %d, b %d, d %d", status(c), status(b), status(d))
	}
	// An evicted response cannot be continued.
	p := respParams("x", 2)
	p.PreviousResponseID = openai.String(a)
	if _, err := ts.client.Responses.New(ctx, p); func() int { s, _ := apiStatus(err); return s }() != 400 {
		t.Errorf("continue evicted: %v", err)
	}

	// The byte limit evicts as well.
	small := startServer(t, func(o *Options) { o.ResponsesMaxBytes = 6000 })
	var ids []string
	for i := 0; i < 6; i++ {
		resp, err := small.client.Responses.New(ctx, respParams(strings.Repeat("word ", 40), 4))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.ID)
	}
	n, bytes := small.srv.responses.Stored()
	if n < 1 || n >= 6 || bytes > 6000 {
		t.Errorf("byte limit: %d responses, %d bytes", n, bytes)
	}
	if _, err := small.client.Responses.Get(ctx, ids[0], responses.ResponseGetParams{}); func() int { s, _ := apiStatus(err); return s }() != 404 {
		t.Errorf("oldest kept over the byte limit: %v", err)
	}
	if _, err := small.client.Responses.Get(ctx, ids[5], responses.ResponseGetParams{}); err != nil {
		t.Errorf("newest: %v", err)
	}
}

func TestResponsesBadInput(t *testing.T) {
	ts := startServer(t)
	cases := []struct {
		name, body string
		status     int
		param      string
		contains   string
	}{
		{"malformed", `{"input":`, 400, "", "invalid JSON"},
		{"unknown model", `{"model":"gpt-9","input":"x"}`, 404, "model", "Requested model 'gpt-9' is not available"},
		{"no input", `{"max_output_tokens":3}`, 400, "input", "input is required"},
		{"empty input", `{"input":""}`, 400, "input", "must not be empty"},
		{"empty items", `{"input":[]}`, 400, "input", "must not be empty"},
		{"input wrong type", `{"input":5}`, 400, "input", "string or an array"},
		{"n", `{"input":"x","n":2}`, 400, "n", "n = 2 is not supported"},
		{"parallel_tool_calls", `{"input":"x","parallel_tool_calls":false}`, 400, "parallel_tool_calls", "parallel_tool_calls=false is not supported"},
		{"max_tool_calls", `{"input":"x","max_tool_calls":3}`, 400, "max_tool_calls", "max_tool_calls is not supported"},
		{"grammar llguidance", `{"input":"x","grammar":{"type":"llguidance","value":"a+"}}`, 400, "grammar.type", "llguidance is not supported"},
		{"dry", `{"input":"x","dry_multiplier":0.8}`, 400, "dry_multiplier", "dry_multiplier is not supported"},
		{"reasoning_effort", `{"input":"x","reasoning_effort":"high"}`, 400, "reasoning_effort", "reasoning_effort is not supported"},
		{"adapter", `{"input":"x","adapter":"a"}`, 422, "adapter", "no LoRA runtime"},
		{"web_search_options", `{"input":"x","web_search_options":{}}`, 400, "web_search_options", "web_search_options is not supported"},
		{"agent_permission", `{"input":"x","agent_permission":"allow"}`, 400, "agent_permission", "agent_permission is not supported"},
		{"reasoning effort", `{"input":"x","reasoning":{"effort":"high"}}`, 400, "reasoning.effort", "not supported"},
		{"json schema keyword", `{"input":"x","text":{"format":{"type":"json_schema","name":"a","schema":{"type":"object","patternProperties":{"a":{}}}}}}`, 400, "text.format", "patternProperties"},
		{"hosted tool", `{"input":"x","tools":[{"type":"web_search"}]}`, 400, "tools[0].type", "not supported"},
		{"tool without name", `{"input":"x","tools":[{"type":"function"}]}`, 400, "tools[0].name", "name is required"},
		{"unknown tool choice", `{"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}}`, 400, "tool_choice", "not among the tools"},
		{"image part, text-only model", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"http://x"}]}]}`, 400, "input[0].content[0].image_url", "cannot take images"},
		{"audio part", `{"input":[{"role":"user","content":[{"type":"input_audio"}]}]}`, 400, "input[0].content[0].type", "not supported"},
		{"bad role", `{"input":[{"role":"robot","content":"x"}]}`, 400, "input[0].role", "not supported"},
		{"item reference", `{"input":[{"type":"item_reference","id":"msg_1"}]}`, 400, "input[0].type", "not supported"},
		{"call output without id", `{"input":[{"type":"function_call_output","output":"x"}]}`, 400, "input[0].call_id", "needs call_id"},
		{"zero max_output_tokens", `{"input":"x","max_output_tokens":0}`, 400, "max_output_tokens", "at least 1"},
		{"temperature", `{"input":"x","temperature":5}`, 400, "temperature", "temperature must be between 0 and 2"},
		{"previous unknown", `{"input":"x","previous_response_id":"resp_x"}`, 400, "previous_response_id", "Previous response with id 'resp_x' not found"},
		{"background stream", `{"input":"x","background":true,"stream":true}`, 400, "background", "cannot be streamed"},
		{"background unstored", `{"input":"x","background":true,"store":false}`, 400, "store", "must be stored"},
		{"truncation auto", `{"input":"x","truncation":"auto"}`, 400, "truncation", "not supported"},
		{"prompt too long", `{"input":"` + strings.Repeat("a", 600) + `"}`, 400, "", "context length of 512"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := ts.post("/v1/responses", c.body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			var e apiError
			if err := json.Unmarshal(body, &e); err != nil || !strings.Contains(e.Error.Message, c.contains) {
				t.Fatalf("error body %s, want a message containing %q", body, c.contains)
			}
			if got := ""; e.Error.Param != nil {
				got = *e.Error.Param
				if got != c.param {
					t.Errorf("param %q, want %q", got, c.param)
				}
			} else if c.param != "" {
				t.Errorf("param null, want %q", c.param)
			}
		})
	}
	// Null extension fields are as good as absent; the server keeps serving.
	if r, b := ts.post("/v1/responses", `{"input":"x","max_output_tokens":2,"grammar":null,"reasoning":{"effort":null,"summary":"auto"},"text":{"format":{"type":"text"}},"truncation":"disabled","parallel_tool_calls":true,"reasoning_effort":"off"}`); r.StatusCode != 200 {
		t.Errorf("after the bad inputs: %d %s", r.StatusCode, b)
	}
	for _, path := range []string{"/v1/responses/resp_none"} {
		if r, b := ts.get(path); r.StatusCode != 404 || !strings.Contains(string(b), `"message":"Response with ID 'resp_none' not found"`) {
			t.Errorf("GET %s: %d %s", path, r.StatusCode, b)
		}
	}
	if r, b := ts.post("/v1/responses/resp_none/cancel", ""); r.StatusCode != 404 || !strings.Contains(string(b), "not found or cannot be cancelled") {
		t.Errorf("cancel: %d %s", r.StatusCode, b)
	}
}

// Function tools and function-call outputs go through the chat template and
// tool parser as chat completions' do.
func TestResponsesToolCalls(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.Models = []ModelSpec{toolModelSpec(t)} })
	ctx := context.Background()
	params := func() responses.ResponseNewParams {
		p := respParams("Weather in Paris?", 8)
		p.Tools = []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather",
			map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}, false)}
		return p
	}
	bias := option.WithJSONSet("logit_bias", map[string]int{strconv.Itoa(toolCallToken): 60, strconv.Itoa(eosToken): 40})

	resp, err := ts.client.Responses.New(ctx, params(), bias, repeatOnce)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Output) != 1 || resp.Output[0].Type != "function_call" {
		t.Fatalf("output %s", resp.RawJSON())
	}
	fc := resp.Output[0].AsFunctionCall()
	if fc.Name != "get_weather" || fc.Arguments != `{"city":"Paris","days":2}` || !strings.HasPrefix(fc.CallID, "call_") || !strings.HasPrefix(fc.ID, "fc_") || fc.Status != "completed" {
		t.Errorf("function call %s", resp.Output[0].RawJSON())
	}
	if resp.OutputText() != "" {
		t.Errorf("text beside the call: %q", resp.OutputText())
	}

	// Streamed: the call's events, and no text leaks out.
	stream := ts.client.Responses.NewStreaming(ctx, params(), bias, repeatOnce)
	var types []string
	var args string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			t.Errorf("text delta %q", ev.Delta)
		case "response.function_call_arguments.done":
			args = ev.Arguments
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	want := "response.created response.in_progress response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if strings.Join(types, " ") != want || args != `{"city":"Paris","days":2}` {
		t.Errorf("events %q, arguments %q", types, args)
	}

	// The call's output continues the conversation: with previous_response_id
	// or with the whole conversation as input items, the same prompt.
	out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"sky":"clear"}`)
	out.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
	next := respParams("", 4)
	next.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{out}}
	next.PreviousResponseID = openai.String(resp.ID)
	cont, err := ts.client.Responses.New(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	whole := respParams("", 4)
	whole.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
		responses.ResponseInputItemParamOfMessage("Weather in Paris?", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(fc.Arguments, fc.CallID, fc.Name),
		out,
	}}
	again, err := ts.client.Responses.New(ctx, whole)
	if err != nil {
		t.Fatal(err)
	}
	if cont.Usage.InputTokens != again.Usage.InputTokens || cont.OutputText() != again.OutputText() || cont.Usage.InputTokens <= resp.Usage.InputTokens {
		t.Errorf("continued: %d tokens %q; whole: %d tokens %q; first turn %d tokens", cont.Usage.InputTokens, cont.OutputText(),
			again.Usage.InputTokens, again.OutputText(), resp.Usage.InputTokens)
	}
}

// A stream whose client leaves is canceled like a chat stream.
func TestResponsesStreamClientGone(t *testing.T) {
	ts := slowServer(t)
	data, _ := json.Marshal(map[string]any{"model": "slow", "input": "abc", "max_output_tokens": 1500, "ignore_eos": true, "stream": true})
	req, _ := http.NewRequest("POST", ts.url+"/v1/responses", bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "rs-gone")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(line, "response.output_text.delta") {
			break
		}
	}
	resp.Body.Close()
	ts.waitMetric(t, "the canceled sequence", func(f map[string]*dto.MetricFamily) bool {
		return value(f, "mistralrs_sequences_completed_total", map[string]string{"reason": "canceled"}) == 1 &&
			value(f, "mistralrs_kv_cache_blocks_used", nil) == 0
	})
	line := ts.log.waitLines(t, 1, "request completed: request_id=rs-gone ")[0]
	if !strings.Contains(line, "outcome=client_disconnected") {
		t.Errorf("access line %q", line)
	}
}
