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

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3/option"

	"mistralrs/internal/gguf"
	"mistralrs/internal/loader"
	"mistralrs/internal/server/gen"
)

// anthropicClient is the official Anthropic SDK pointed at the test server;
// its requests are greedy (the SDK has no temperature field).
func (ts *testServer) anthropicClient() anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(ts.url), aoption.WithAPIKey("unused"), aoption.WithMaxRetries(0),
		aoption.WithJSONSet("temperature", 0))
}

func anthropicParams(maxTokens int64) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "tiny",
		MaxTokens: maxTokens,
		System:    []anthropic.TextBlockParam{{Text: "be brief"}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))},
	}
}

var anthropicIgnoreEOS = aoption.WithJSONSet("ignore_eos", true)

func TestAnthropicMessages(t *testing.T) {
	ts := startServer(t)
	client := ts.anthropicClient()
	ctx := context.Background()

	msg, err := client.Messages.New(ctx, anthropicParams(8), anthropicIgnoreEOS)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(msg.ID, "msg_") || msg.Type != "message" || msg.Role != "assistant" || msg.Model != "tiny" {
		t.Errorf("envelope: %s", msg.RawJSON())
	}
	if msg.StopReason != anthropic.StopReasonMaxTokens || msg.StopSequence != "" || msg.Usage.OutputTokens != 8 || msg.Usage.InputTokens == 0 {
		t.Errorf("stop %q %q, usage %+v", msg.StopReason, msg.StopSequence, msg.Usage)
	}
	if len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text == "" {
		t.Fatalf("content: %s", msg.RawJSON())
	}

	// The same prompt through the chat route (system message, then the
	// user's) gives the same greedy answer.
	chatResp, err := ts.client.Chat.Completions.New(ctx, chatParams(8), chatIgnoreEOSForAnthropic)
	if err != nil {
		t.Fatal(err)
	}
	if got := chatResp.Choices[0].Message.Content; got != msg.Content[0].Text || int64(chatResp.Usage.PromptTokens) != msg.Usage.InputTokens {
		t.Errorf("chat %q (%d prompt tokens), messages %q (%d)", got, chatResp.Usage.PromptTokens, msg.Content[0].Text, msg.Usage.InputTokens)
	}

	// count_tokens counts the same prompt.
	p := anthropicParams(8)
	count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: p.Model, Messages: p.Messages,
		System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: p.System}})
	if err != nil {
		t.Fatal(err)
	}
	if count.InputTokens != msg.Usage.InputTokens {
		t.Errorf("count_tokens %d, input tokens %d", count.InputTokens, msg.Usage.InputTokens)
	}

	// End of generation first (logit bias): end_turn, no content.
	eos, err := client.Messages.New(ctx, anthropicParams(8), aoption.WithJSONSet("logit_bias", map[string]float64{strconv.Itoa(eosToken): 100}))
	if err != nil {
		t.Fatal(err)
	}
	if eos.StopReason != anthropic.StopReasonEndTurn || len(eos.Content) != 0 || eos.Usage.OutputTokens != 1 {
		t.Errorf("end of generation: %s", eos.RawJSON())
	}

	// A stop sequence from the greedy text ends it there: stop_reason
	// stop_sequence, and the sequence is named. The logit bias keeps the text
	// to x, y and z so that any slice of it is a valid stop string.
	xyz := aoption.WithJSONSet("logit_bias", map[string]float64{"120": 100, "121": 100, "122": 100})
	full, err := client.Messages.New(ctx, anthropicParams(8), anthropicIgnoreEOS, xyz)
	if err != nil {
		t.Fatal(err)
	}
	text := full.Content[0].Text
	if len(text) != 8 || strings.Trim(text, "xyz") != "" {
		t.Fatalf("biased text %q", text)
	}
	stop := text[3:5]
	p = anthropicParams(8)
	p.StopSequences = []string{"never", stop}
	cut, err := client.Messages.New(ctx, p, anthropicIgnoreEOS, xyz)
	if err != nil {
		t.Fatal(err)
	}
	want := text[:strings.Index(text, stop)]
	if cut.StopReason != anthropic.StopReasonStopSequence || cut.StopSequence != stop || (want != "" && (len(cut.Content) != 1 || cut.Content[0].Text != want)) {
		t.Errorf("with stop %q: %s, want text %q", stop, cut.RawJSON(), want)
	}

	// Streamed, with the SDK's accumulator: the same message.
	stream := client.Messages.NewStreaming(ctx, p, anthropicIgnoreEOS, xyz)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.StopReason != anthropic.StopReasonStopSequence || acc.StopSequence != stop || acc.Usage.OutputTokens != cut.Usage.OutputTokens ||
		acc.Usage.InputTokens != cut.Usage.InputTokens || !strings.HasPrefix(acc.ID, "msg_") || acc.Model != "tiny" {
		t.Errorf("streamed stop: %s", acc.RawJSON())
	}
	if want != "" && (len(acc.Content) != 1 || acc.Content[0].Text != want) {
		t.Errorf("streamed content %s, want %q", acc.RawJSON(), want)
	}

	stream = client.Messages.NewStreaming(ctx, anthropicParams(8), anthropicIgnoreEOS)
	acc = anthropic.Message{}
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.StopReason != anthropic.StopReasonMaxTokens || acc.Usage.OutputTokens != 8 || len(acc.Content) != 1 || acc.Content[0].Text != msg.Content[0].Text {
		t.Errorf("streamed: %s, non-streamed %s", acc.RawJSON(), msg.RawJSON())
	}

	// metadata is ignored; a string system prompt and string content work.
	resp, body := ts.post("/v1/messages", map[string]any{"model": "tiny", "max_tokens": 2, "system": "be brief",
		"messages": []map[string]any{{"role": "user", "content": "hello"}}, "metadata": map[string]any{"user_id": "u1"},
		"enable_code_execution": false, "reasoning_effort": "none"})
	if resp.StatusCode != 200 {
		t.Errorf("metadata: %d %s", resp.StatusCode, body)
	}
}

var chatIgnoreEOSForAnthropic = option.WithJSONSet("ignore_eos", true)

// TestAnthropicStreamEvents reads the raw stream: named events in
// Anthropic's order, each data payload's type equal to its event name, no
// [DONE].
func TestAnthropicStreamEvents(t *testing.T) {
	ts := startServer(t)
	resp, body := ts.post("/v1/messages", map[string]any{"model": "tiny", "max_tokens": 6, "ignore_eos": true, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": []map[string]any{{"type": "text", "text": "hello"}}}}},
		"X-Request-Id", "anth-stream")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	events := anthropicEvents(t, body)
	var names []string
	for _, e := range events {
		if e.name != "ping" {
			names = append(names, e.name)
		}
	}
	if len(names) < 6 || names[0] != "message_start" || names[1] != "content_block_start" ||
		names[len(names)-3] != "content_block_stop" || names[len(names)-2] != "message_delta" || names[len(names)-1] != "message_stop" {
		t.Fatalf("event order %q", names)
	}
	for _, n := range names[2 : len(names)-3] {
		if n != "content_block_delta" {
			t.Fatalf("event order %q", names)
		}
	}
	if bytes.Contains(body, []byte("[DONE]")) {
		t.Errorf("[DONE] in an Anthropic stream")
	}
	var text strings.Builder
	for _, e := range events {
		var d struct {
			Type    string `json:"type"`
			Index   *int   `json:"index"`
			Message struct {
				ID    string         `json:"id"`
				Usage map[string]int `json:"usage"`
			} `json:"message"`
			ContentBlock map[string]any `json:"content_block"`
			Delta        map[string]any `json:"delta"`
			Usage        map[string]int `json:"usage"`
		}
		if err := json.Unmarshal([]byte(e.data), &d); err != nil || d.Type != e.name {
			t.Fatalf("event %s: data %s", e.name, e.data)
		}
		switch e.name {
		case "message_start":
			if !strings.HasPrefix(d.Message.ID, "msg_") || d.Message.Usage["input_tokens"] == 0 {
				t.Errorf("message_start %s", e.data)
			}
		case "content_block_start":
			if *d.Index != 0 || d.ContentBlock["type"] != "text" || d.ContentBlock["text"] != "" {
				t.Errorf("content_block_start %s", e.data)
			}
		case "content_block_delta":
			if *d.Index != 0 || d.Delta["type"] != "text_delta" {
				t.Errorf("delta %s", e.data)
			}
			text.WriteString(d.Delta["text"].(string))
		case "content_block_stop":
			if *d.Index != 0 {
				t.Errorf("stop %s", e.data)
			}
		case "message_delta":
			if d.Delta["stop_reason"] != "max_tokens" || d.Delta["stop_sequence"] != nil || d.Usage["output_tokens"] != 6 {
				t.Errorf("message_delta %s", e.data)
			}
		}
	}
	if text.Len() == 0 {
		t.Errorf("no text")
	}

	// Access log: the stream's completed line with its usage; labels.
	line := ts.log.waitLines(t, 1, "request completed: request_id=anth-stream ")[0]
	if !strings.Contains(line, "route=/v1/messages model=tiny status=200 outcome=completed") || !strings.Contains(line, "completion_tokens=6") {
		t.Errorf("access line %q", line)
	}
	labels := map[string]string{"method": "POST", "path": "/v1/messages", "model": "tiny", "status": "200"}
	fams := ts.metrics()
	if v := value(fams, "http_requests_total", labels); v != 1 {
		t.Errorf("http_requests_total %v", v)
	}
	// One TTFT sample; an ITL sample per token step after the first: the
	// bookkeeping events are not steps.
	if ttft, itl := value(fams, "mistralrs_time_to_first_token_seconds", labels), value(fams, "mistralrs_inter_token_latency_seconds", labels); ttft != 1 || itl != 5 {
		t.Errorf("TTFT samples %v, ITL samples %v", ttft, itl)
	}
}

type anthropicSSE struct{ name, data string }

// anthropicEvents splits a named-event stream; a comment frame fails the test.
func anthropicEvents(t *testing.T, body []byte) []anthropicSSE {
	t.Helper()
	var out []anthropicSSE
	var cur anthropicSSE
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.name != "" || cur.data != "" {
				out = append(out, cur)
			}
			cur = anthropicSSE{}
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return out
}

// TestAnthropicPing: a stream idle for longer than the keep-alive interval
// (the prefill of a long prompt on the slow model) gets `event: ping`
// frames, never `:` comments, and the pings are not token steps.
func TestAnthropicPing(t *testing.T) {
	ts := slowServer(t, func(o *Options) { o.KeepAlive = 2 * time.Millisecond })
	resp, body := ts.post("/v1/messages", map[string]any{"model": "slow", "max_tokens": 3, "ignore_eos": true, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": strings.Repeat("abcdefghij", 150)}}})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	events := anthropicEvents(t, body)
	pings, firstDelta := 0, -1
	for i, e := range events {
		switch e.name {
		case "ping":
			if e.data != `{"type":"ping"}` {
				t.Errorf("ping data %q", e.data)
			}
			if firstDelta < 0 {
				pings++
			}
		case "content_block_delta", "message_delta":
			// (Sampled bytes may not complete a UTF-8 character within
			// the 3 tokens: then the first thing after the prefill is the
			// message_delta.)
			if firstDelta < 0 {
				firstDelta = i
			}
		}
	}
	if pings < 2 || firstDelta < 0 || events[0].name != "message_start" || events[len(events)-1].name != "message_stop" {
		t.Fatalf("%d pings before the first delta; events %v", pings, events)
	}
	labels := map[string]string{"path": "/v1/messages", "model": "slow", "status": "200"}
	fams := ts.metrics()
	if ttft, itl := value(fams, "mistralrs_time_to_first_token_seconds", labels), value(fams, "mistralrs_inter_token_latency_seconds", labels); ttft != 1 || itl != 2 {
		t.Errorf("TTFT samples %v, ITL samples %v", ttft, itl)
	}
}

// anthropicTestTemplate shows everything the tool round trip carries.
const anthropicTestTemplate = `{%- if tools %}tools:{% for t in tools %}{{ t.function.name }}({{ t.function.description }});{% endfor %}{{ '\n' }}{% endif -%}
{%- for m in messages %}<{{ m.role }}>{{ m.content }}
{%- if m.reasoning_content %}[thought {{ m.reasoning_content }}]{% endif %}
{%- if m.tool_calls %}{% for c in m.tool_calls %}[call {{ c.id }} {{ c.function.name }} {{ c.function.arguments | tojson }}]{% endfor %}{% endif %}
{%- if m.tool_call_id %}[result of {{ m.tool_call_id }} ({{ m.name }})]{% endif %}{{ '\n' }}
{%- endfor -%}
{%- if add_generation_prompt %}<assistant>{% endif %}`

// anthropicToolSpec is the tool model (tools_test.go) with anthropicTestTemplate.
func anthropicToolSpec(t *testing.T) ModelSpec {
	toolModelSpec(t) // builds toolModelData
	tmpl := writeTemplate(t, anthropicTestTemplate)
	return ModelSpec{ID: "tiny", Load: func() (*loader.Model, error) {
		f, err := gguf.Parse("tiny", toolModelData)
		if err != nil {
			return nil, err
		}
		return loader.FromFile(f, loader.Options{ID: "tiny", ChatTemplatePath: tmpl})
	}}
}

func anthropicWeatherTool() anthropic.ToolUnionParam {
	tool := anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}, "get_weather")
	tool.OfTool.Description = anthropic.String("Weather forecast")
	return tool
}

// TestAnthropicToolUse: a tool call made by the model (the tool-call token
// of the tool model) comes back as a tool_use block, streamed or not; sent
// back with a tool_result it reaches the chat template as an assistant
// message with tool_calls and a tool message.
func TestAnthropicToolUse(t *testing.T) {
	ts := startServer(t, func(o *Options) { o.Models = []ModelSpec{anthropicToolSpec(t)} })
	client := ts.anthropicClient()
	ctx := context.Background()
	bias := func(token int) aoption.RequestOption {
		return aoption.WithJSONSet("logit_bias", map[string]float64{strconv.Itoa(token): 60, strconv.Itoa(eosToken): 40})
	}
	repeat := aoption.WithJSONSet("repetition_penalty", 4)
	params := func() anthropic.MessageNewParams {
		return anthropic.MessageNewParams{Model: "tiny", MaxTokens: 8,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in Paris?"))},
			Tools:    []anthropic.ToolUnionParam{anthropicWeatherTool()}}
	}

	msg, err := client.Messages.New(ctx, params(), bias(toolCallToken), repeat)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 1 {
		t.Fatalf("answer: %s", msg.RawJSON())
	}
	use := msg.Content[0].AsToolUse()
	if use.Type != "tool_use" || !strings.HasPrefix(use.ID, "toolu_") || use.Name != "get_weather" || string(use.Input) != `{"city":"Paris","days":2}` {
		t.Errorf("tool_use %s", msg.Content[0].RawJSON())
	}

	// Streamed: one tool_use block, its input in one input_json_delta, no text.
	stream := client.Messages.NewStreaming(ctx, params(), bias(toolCallToken), repeat)
	var acc anthropic.Message
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			t.Errorf("text leaked: %q", ev.Delta.Text)
		}
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.StopReason != anthropic.StopReasonToolUse || len(acc.Content) != 1 || acc.Content[0].Type != "tool_use" ||
		acc.Content[0].Name != "get_weather" || string(acc.Content[0].Input) != `{"city":"Paris","days":2}` {
		t.Errorf("streamed: %s", acc.RawJSON())
	}

	// tool_choice none: the tools are left out and the answer is text.
	p := params()
	p.ToolChoice = anthropic.ToolChoiceUnionParam{OfNone: &anthropic.ToolChoiceNoneParam{}}
	none, err := client.Messages.New(ctx, p, bias(toolCallToken), repeat)
	if err != nil {
		t.Fatal(err)
	}
	if none.StopReason != anthropic.StopReasonEndTurn || len(none.Content) != 1 || none.Content[0].Text != toolCallText {
		t.Errorf("tool_choice none: %s", none.RawJSON())
	}
	// any and a named tool force a call (issue 26), auto reads the answer
	// for calls. A forced call is written byte by byte in the template's
	// bare JSON format, not as the tool-call token: its input is pinned
	// (city "Paris") and it is given the tokens it takes.
	for _, choice := range []anthropic.ToolChoiceUnionParam{{OfAny: &anthropic.ToolChoiceAnyParam{}}, anthropic.ToolChoiceParamOfTool("get_weather"),
		{OfAuto: &anthropic.ToolChoiceAutoParam{}}} {
		p := params()
		p.ToolChoice = choice
		if choice.OfAuto == nil {
			p.MaxTokens = 100
			p.Tools = []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
				Properties: map[string]any{"city": map[string]any{"enum": []string{"Paris"}}}, Required: []string{"city"}}, "get_weather")}
		}
		r, err := client.Messages.New(ctx, p, bias(toolCallToken), repeat)
		if err != nil {
			t.Fatal(err)
		}
		if r.StopReason != anthropic.StopReasonToolUse {
			t.Errorf("tool_choice %+v: %s", choice, r.RawJSON())
		}
	}

	// The round trip: the call and its result go back to the model.
	p = params()
	p.System = []anthropic.TextBlockParam{{Text: "Use tools."}}
	p.Messages = append(p.Messages, msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, "sunny, 21 C", false), anthropic.NewTextBlock("Thanks")))
	wantPrompt := "tools:get_weather(Weather forecast);\n" +
		"<system>Use tools.\n" +
		"<user>Weather in Paris?\n" +
		"<assistant>[call " + use.ID + ` get_weather {"city": "Paris", "days": 2}]` + "\n" +
		"<tool>sunny, 21 C[result of " + use.ID + " (get_weather)]\n" +
		"<user>Thanks\n" +
		"<assistant>"
	count, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "tiny", Messages: p.Messages,
		System: anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: p.System},
		Tools:  []anthropic.MessageCountTokensToolUnionParam{{OfTool: anthropicWeatherTool().OfTool}}})
	if err != nil {
		t.Fatal(err)
	}
	// Byte-level vocabulary: one token per byte.
	if count.InputTokens != int64(len(wantPrompt)) {
		t.Errorf("count_tokens %d, want %d for %q", count.InputTokens, len(wantPrompt), wantPrompt)
	}
	// JSON that is no call comes back as text.
	next, err := client.Messages.New(ctx, p, bias(jsonToken), repeat)
	if err != nil {
		t.Fatal(err)
	}
	if next.StopReason != anthropic.StopReasonEndTurn || len(next.Content) != 1 || next.Content[0].Text != jsonText ||
		next.Usage.InputTokens != int64(len(wantPrompt)) {
		t.Errorf("after the tool result: %s", next.RawJSON())
	}

	// Tool-use answers count as tool_calls in the engine metrics.
	if v := value(ts.metrics(), "mistralrs_sequences_completed_total", map[string]string{"reason": "tool_calls"}); v != 5 {
		t.Errorf("completed{reason=tool_calls} = %v, want 5", v)
	}
}

// anthropicErrorBodyJSON is the Anthropic error envelope.
type anthropicErrorBodyJSON struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func TestAnthropicErrors(t *testing.T) {
	ts := startServer(t)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	ok := `"max_tokens":2,` + msgs
	weather := `{"name":"get_weather","input_schema":{"type":"object"}}`
	cases := []struct {
		name, path, body string
		status           int
		typ, contains    string
	}{
		{"malformed JSON", "/v1/messages", `{"model":"tiny",`, 400, "invalid_request_error", "invalid JSON"},
		{"too many stop_sequences", "/v1/messages", `{"stop_sequences":[` + strings.Repeat(`"x",`, gen.MaxStopStrings) + `"y"],` + ok + `}`, 400, "invalid_request_error", "stop_sequences has 17 strings"},
		{"stop_sequences too long", "/v1/messages", `{"stop_sequences":["` + strings.Repeat("x", gen.MaxStopStringBytes+1) + `"],` + ok + `}`, 400, "invalid_request_error", "stop_sequences[0] is 257 bytes"},
		{"not an object", "/v1/messages", `[1]`, 400, "invalid_request_error", "JSON object"},
		{"empty body", "/v1/messages", ``, 400, "invalid_request_error", "empty"},
		{"invalid UTF-8", "/v1/messages", "{\"max_tokens\":2,\"messages\":[{\"role\":\"user\",\"content\":\"a\xffb\"}]}", 400, "invalid_request_error", "UTF-8"},
		{"wrong type", "/v1/messages", `{"max_tokens":"many",` + msgs + `}`, 400, "invalid_request_error", `"max_tokens"`},
		{"wrong type temperature", "/v1/messages", `{"temperature":"hot",` + ok + `}`, 400, "invalid_request_error", `"temperature"`},
		{"messages not an array", "/v1/messages", `{"max_tokens":2,"messages":"hi"}`, 400, "invalid_request_error", "messages must be an array"},
		{"unknown model", "/v1/messages", `{"model":"gpt-9",` + ok + `}`, 404, "not_found_error", "Requested model 'gpt-9' is not available"},
		{"unknown model (count)", "/v1/messages/count_tokens", `{"model":"gpt-9",` + msgs + `}`, 404, "not_found_error", "gpt-9"},
		{"no max_tokens", "/v1/messages", `{` + msgs + `}`, 400, "invalid_request_error", "max_tokens is required"},
		{"zero max_tokens", "/v1/messages", `{"max_tokens":0,` + msgs + `}`, 400, "invalid_request_error", "max_tokens must be at least 1"},
		{"no messages", "/v1/messages", `{"max_tokens":2}`, 400, "invalid_request_error", "messages is required"},
		{"empty messages", "/v1/messages", `{"max_tokens":2,"messages":[]}`, 400, "invalid_request_error", "at least one message"},
		{"empty messages (count)", "/v1/messages/count_tokens", `{"messages":[]}`, 400, "invalid_request_error", "at least one message"},
		{"system role", "/v1/messages", `{"max_tokens":2,"messages":[{"role":"system","content":"x"}]}`, 400, "invalid_request_error", `messages[0].role must be "user" or "assistant"`},
		{"no content", "/v1/messages", `{"max_tokens":2,"messages":[{"role":"user"}]}`, 400, "invalid_request_error", "messages[0].content is required"},
		{"image block", "/v1/messages", `{"max_tokens":2,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]}`, 400, "invalid_request_error", "messages[0].content[0].source.type"},
		{"unknown block", "/v1/messages", `{"max_tokens":2,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"b"}]}]}`, 400, "invalid_request_error", "not supported in a user message"},
		{"text block without text", "/v1/messages", `{"max_tokens":2,"messages":[{"role":"user","content":[{"type":"text"}]}]}`, 400, "invalid_request_error", "requires text"},
		{"block of the wrong type", "/v1/messages", `{"max_tokens":2,"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, 400, "invalid_request_error", "messages[0].content[0].text"},
		{"tool_result without id", "/v1/messages", `{"max_tokens":2,"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, 400, "invalid_request_error", "tool_use_id"},
		{"tool_use input not an object", "/v1/messages", `{"max_tokens":2,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"b","input":[1]}]}]}`, 400, "invalid_request_error", "input must be an object"},
		{"system image", "/v1/messages", `{"system":[{"type":"image"}],` + ok + `}`, 400, "invalid_request_error", "system blocks must be text"},
		{"server tool", "/v1/messages", `{"tools":[{"type":"web_search_20250305","name":"web_search"}],` + ok + `}`, 400, "invalid_request_error", "web_search_20250305"},
		{"tool without schema", "/v1/messages", `{"tools":[{"name":"f"}],` + ok + `}`, 400, "invalid_request_error", "input_schema"},
		{"tool without name", "/v1/messages", `{"tools":[{"input_schema":{}}],` + ok + `}`, 400, "invalid_request_error", "tools[0].name is required"},
		{"tool_choice unknown tool", "/v1/messages", `{"tools":[` + weather + `],"tool_choice":{"type":"tool","name":"g"},` + ok + `}`, 400, "invalid_request_error", "not among the tools"},
		{"tool_choice bad type", "/v1/messages", `{"tools":[` + weather + `],"tool_choice":{"type":"required"},` + ok + `}`, 400, "invalid_request_error", "tool_choice.type"},
		{"tool_choice string", "/v1/messages", `{"tools":[` + weather + `],"tool_choice":"auto",` + ok + `}`, 400, "invalid_request_error", "tool_choice must be an object"},
		{"tool_choice any without tools", "/v1/messages", `{"tool_choice":{"type":"any"},` + ok + `}`, 400, "invalid_request_error", "needs tools"},
		{"thinking bad type", "/v1/messages", `{"thinking":{"type":"max"},` + ok + `}`, 400, "invalid_request_error", "thinking.type"},
		{"thinking conflict", "/v1/messages", `{"thinking":{"type":"disabled"},"enable_thinking":true,` + ok + `}`, 400, "invalid_request_error", "conflicts"},
		{"temperature out of range", "/v1/messages", `{"temperature":5,` + ok + `}`, 400, "invalid_request_error", "temperature"},
		{"unknown response format", "/v1/messages", `{"response_format":{"type":"xml"},` + ok + `}`, 400, "invalid_request_error", "response_format"},
		{"prompt too long", "/v1/messages", `{"max_tokens":2,"messages":[{"role":"user","content":"` + strings.Repeat("a", 600) + `"}]}`, 400, "invalid_request_error", "context length of 512"},
		{"grammar llguidance", "/v1/messages", `{"grammar":{"type":"llguidance","value":"a"},` + ok + `}`, 400, "invalid_request_error", "llguidance is not supported"},
		{"dry", "/v1/messages", `{"dry_multiplier":0.8,` + ok + `}`, 400, "invalid_request_error", "dry_multiplier is not supported"},
		{"reasoning_effort", "/v1/messages", `{"reasoning_effort":"high",` + ok + `}`, 400, "invalid_request_error", "reasoning_effort is not supported"},
		{"adapter", "/v1/messages", `{"adapter":"x",` + ok + `}`, 400, "invalid_request_error", "adapter is not supported"},
		{"web_search_options", "/v1/messages", `{"web_search_options":{},` + ok + `}`, 400, "invalid_request_error", "web_search_options is not supported"},
		{"agent_permission", "/v1/messages", `{"agent_permission":"ask",` + ok + `}`, 400, "invalid_request_error", "agent_permission is not supported"},
		{"code_execution_permission", "/v1/messages", `{"code_execution_permission":"allow",` + ok + `}`, 400, "invalid_request_error", "code_execution_permission is not supported"},
		{"enable_code_execution", "/v1/messages", `{"enable_code_execution":true,` + ok + `}`, 400, "invalid_request_error", "enable_code_execution is not supported"},
		{"extension on count_tokens", "/v1/messages/count_tokens", `{"dry_base":1.5,` + msgs + `}`, 400, "invalid_request_error", "dry_base is not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "aerr-" + strings.Map(func(r rune) rune {
				if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
					return r
				}
				return '-'
			}, c.name)
			resp, body := ts.post(c.path, c.body, "X-Request-Id", id)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("content type %q", ct)
			}
			var e anthropicErrorBodyJSON
			if err := json.Unmarshal(body, &e); err != nil || e.Type != "error" || e.Error.Type != c.typ || !strings.Contains(e.Error.Message, c.contains) {
				t.Errorf("body %s, want type %s and a message containing %q", body, c.typ, c.contains)
			}
			line := ts.log.waitLines(t, 1, "request completed: request_id="+id+" ")[0]
			if !strings.Contains(line, "route="+c.path+" ") || !strings.Contains(line, " status="+strconv.Itoa(c.status)+" ") || !strings.Contains(line, " error=") {
				t.Errorf("access line %q", line)
			}
		})
	}

	// A wrong method and a body over the limit, answered by the middleware,
	// use the envelope too.
	resp, body := ts.get("/v1/messages")
	var e anthropicErrorBodyJSON
	if resp.StatusCode != 405 || json.Unmarshal(body, &e) != nil || e.Type != "error" || e.Error.Type != "invalid_request_error" {
		t.Errorf("GET /v1/messages: %d %s", resp.StatusCode, body)
	}
	big := strings.NewReader(`{"max_tokens":2,"messages":"` + strings.Repeat("a", 50<<20) + `"}`)
	req, _ := http.NewRequest("POST", ts.url+"/v1/messages", big)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "anth-big")
	resp, body = ts.do(req)
	e = anthropicErrorBodyJSON{}
	if resp.StatusCode != 413 || json.Unmarshal(body, &e) != nil || e.Type != "error" || e.Error.Type != "request_too_large" || e.Error.Message != "request body too large" {
		t.Errorf("413: %d %s", resp.StatusCode, body)
	}
	line := ts.log.waitLines(t, 1, "request completed: request_id=anth-big ")[0]
	if !strings.Contains(line, "route=/v1/messages model=unknown status=413") || !strings.Contains(line, `error="request body too large"`) {
		t.Errorf("access line %q", line)
	}
	// The OpenAI routes keep their own shape.
	resp, body = ts.get("/v1/chat/completions")
	var oe apiError
	if resp.StatusCode != 405 || json.Unmarshal(body, &oe) != nil || oe.Error.Type != "invalid_request_error" {
		t.Errorf("GET /v1/chat/completions: %d %s", resp.StatusCode, body)
	}

	// The labels: an unknown model is labelled unknown, a known one by its id.
	fams := ts.metrics()
	if v := value(fams, "http_requests_total", map[string]string{"path": "/v1/messages", "model": "unknown", "status": "404"}); v != 1 {
		t.Errorf("404 series %v", v)
	}
	if v := value(fams, "http_requests_total", map[string]string{"path": "/v1/messages/count_tokens", "model": "tiny", "status": "400"}); v != 2 {
		t.Errorf("count_tokens 400 series %v", v)
	}

	// The SDK reads the envelope into its error type.
	client := ts.anthropicClient()
	p := anthropicParams(2)
	p.Model = "nope"
	_, err := client.Messages.New(context.Background(), p)
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 404 || ae.Type() != "not_found_error" || !strings.Contains(ae.Message, "'nope'") {
		t.Errorf("SDK error %v", err)
	}
	_, err = client.Messages.CountTokens(context.Background(), anthropic.MessageCountTokensParams{Model: "tiny", Messages: []anthropic.MessageParam{}})
	if !errors.As(err, &ae) || ae.StatusCode != 400 || ae.Type() != "invalid_request_error" {
		t.Errorf("SDK count_tokens error %v", err)
	}
	// The server still serves.
	if _, err := client.Messages.New(context.Background(), anthropicParams(2)); err != nil {
		t.Errorf("after the errors: %v", err)
	}
}

// TestAnthropicStreamError: an error after the stream started (a prompt
// longer than the whole KV cache, found when the engine takes the request)
// is an `event: error` with the envelope, and ends the stream; the SDK
// reads it as an API error. Not streamed, the same request is a 400.
func TestAnthropicStreamError(t *testing.T) {
	ts := startServer(t, func(o *Options) {
		o.Engine.ContextLen, o.Engine.MemoryFraction = 32, 0 // a KV cache of 32 tokens
	})
	body := map[string]any{"model": "tiny", "max_tokens": 2, "stream": true,
		"messages": []map[string]any{{"role": "user", "content": strings.Repeat("a", 100)}}}
	resp, data := ts.post("/v1/messages", body, "X-Request-Id", "anth-stream-err")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	events := anthropicEvents(t, data)
	last := events[len(events)-1]
	var e anthropicErrorBodyJSON
	if last.name != "error" || json.Unmarshal([]byte(last.data), &e) != nil || e.Type != "error" ||
		e.Error.Type != "invalid_request_error" || !strings.Contains(e.Error.Message, "KV cache") {
		t.Errorf("events %v", events)
	}
	line := ts.log.waitLines(t, 1, "request completed: request_id=anth-stream-err ")[0]
	if !strings.Contains(line, "outcome=error") || !strings.Contains(line, "KV cache") {
		t.Errorf("access line %q", line)
	}

	client := ts.anthropicClient()
	stream := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "tiny", MaxTokens: 2,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(strings.Repeat("a", 100)))}})
	for stream.Next() {
	}
	var ae *anthropic.Error
	if err := stream.Err(); !errors.As(err, &ae) || ae.Type() != "invalid_request_error" {
		t.Errorf("SDK stream error %v", err)
	}

	body["stream"] = false
	resp, data = ts.post("/v1/messages", body)
	if resp.StatusCode != 400 || json.Unmarshal(data, &e) != nil || e.Error.Type != "invalid_request_error" {
		t.Errorf("not streamed: %d %s", resp.StatusCode, data)
	}
}
