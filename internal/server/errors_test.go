package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"mistralrs/internal/server/gen"
)

// apiError is the OpenAI error body.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func TestErrorResponses(t *testing.T) {
	ts := startServer(t)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	cases := []struct {
		name, path, body string
		status           int
		param, contains  string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"model":"tiny",`, 400, "", "invalid JSON"},
		{"too many stop strings", "/v1/chat/completions", `{"stop":[` + strings.Repeat(`"x",`, gen.MaxStopStrings) + `"y"],` + msgs + `}`, 400, "stop", "at most 16"},
		{"stop string too long", "/v1/completions", `{"prompt":"a","stop":["` + strings.Repeat("x", gen.MaxStopStringBytes+1) + `"]}`, 400, "stop", "stop[0] is 257 bytes"},
		{"stop too long (responses)", "/v1/responses", `{"input":"a","stop":"` + strings.Repeat("x", gen.MaxStopStringBytes+1) + `"}`, 400, "stop", "at most 256"},
		{"logit_bias outside the vocabulary", "/v1/chat/completions", `{"logit_bias":{"5":1,"99999":2},` + msgs + `}`, 400, "logit_bias", "token id 99999 is outside the vocabulary"},
		{"logit_bias too big a float", "/v1/completions", `{"prompt":"a","logit_bias":{"5":1e308}}`, 400, "logit_bias", "got 1e+308"},
		{"temperature beyond float32", "/v1/chat/completions", `{"temperature":1e308,` + msgs + `}`, 400, "temperature", "got 1e+308"},
		{"messages a number", "/v1/chat/completions", `{"messages":123}`, 400, "messages", "array of message objects"},
		{"responses input a number", "/v1/responses", `{"input":123}`, 400, "input", "input must be a string or an array of input items (expected an array, got JSON number)"},
		{"responses input item a number", "/v1/responses", `{"input":[123]}`, 400, "input", "expected an object, got JSON number"},
		{"responses item role a number", "/v1/responses", `{"input":[{"role":5,"content":"x"}]}`, 400, "input", `field "role": expected a string, got JSON number`},
		{"responses tool a number", "/v1/responses", `{"input":"a","tools":[5]}`, 400, "tools[0]", "tools[0] must be an object (expected an object, got JSON number)"},
		{"responses reasoning a number", "/v1/responses", `{"input":"a","reasoning":5}`, 400, "reasoning", "reasoning must be an object"},
		{"responses text a number", "/v1/responses", `{"input":"a","text":5}`, 400, "text", "text must be an object"},
		{"chat tool a number", "/v1/chat/completions", `{"tools":[5],` + msgs + `}`, 400, "tools[0]", "tools[0] must be an object (expected an object, got JSON number)"},
		{"message role a number", "/v1/chat/completions", `{"messages":[{"role":5,"content":"x"}]}`, 400, "messages", `field "role": expected a string`},
		{"unknown role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"x"}]}`, 400, "messages[0].role", `"wizard" is not one of`},
		{"message without content", "/v1/chat/completions", `{"messages":[{"role":"user"}]}`, 400, "messages[0].content", "content is required"},
		{"text part without text", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text"}]}]}`, 400, "messages[0].content", "content[0] is a text part without text"},
		{"logit_bias too large", "/v1/chat/completions", `{"logit_bias":{` + manyBiases(gen.MaxLogitBias+1) + `},` + msgs + `}`, 400, "logit_bias", "at most 1024"},
		{"invalid UTF-8", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"a\xffb\"}]}", 400, "", "not valid UTF-8"},
		{"invalid UTF-8 prompt", "/v1/completions", "{\"prompt\":\"\xc3\"}", 400, "", "not valid UTF-8"},
		{"not an object", "/v1/chat/completions", `[1,2]`, 400, "", "JSON object"},
		{"wrong type", "/v1/chat/completions", `{"temperature":"hot",` + msgs + `}`, 400, "temperature", "temperature"},
		{"empty body", "/v1/completions", ``, 400, "", "empty"},
		{"unknown model", "/v1/chat/completions", `{"model":"gpt-9",` + msgs + `}`, 404, "model", "Requested model 'gpt-9' is not available. Available models: tiny."},
		{"unknown model (completions)", "/v1/completions", `{"model":"nope","prompt":"x"}`, 404, "model", "'nope'"},
		{"negative max_tokens", "/v1/chat/completions", `{"max_tokens":-1,` + msgs + `}`, 400, "max_tokens", "max_tokens must be at least 1"},
		{"zero max_tokens", "/v1/completions", `{"max_tokens":0,"prompt":"x"}`, 400, "max_tokens", "at least 1"},
		{"temperature out of range", "/v1/chat/completions", `{"temperature":3,` + msgs + `}`, 400, "temperature", "temperature must be between 0 and 2"},
		{"top_p out of range", "/v1/chat/completions", `{"top_p":0,` + msgs + `}`, 400, "top_p", "top_p"},
		{"penalty out of range", "/v1/completions", `{"presence_penalty":5,"prompt":"x"}`, 400, "presence_penalty", "presence_penalty"},
		{"top_logprobs without logprobs", "/v1/chat/completions", `{"top_logprobs":2,` + msgs + `}`, 400, "top_logprobs", "requires logprobs"},
		{"n over the maximum", "/v1/chat/completions", `{"n":17,` + msgs + `}`, 400, "n", "n must be between 1 and 16"},
		{"n zero", "/v1/completions", `{"n":0,"prompt":"x"}`, 400, "n", "n must be between 1 and 16"},
		{"grammar llguidance", "/v1/chat/completions", `{"grammar":{"type":"llguidance","value":"x"},` + msgs + `}`, 400, "grammar.type", "llguidance is not supported"},
		{"bad regex", "/v1/chat/completions", `{"grammar":{"type":"regex","value":"[0-9"},` + msgs + `}`, 400, "grammar.value", "regex"},
		{"bad schema keyword", "/v1/chat/completions", `{"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","patternProperties":{"a":{}}}}},` + msgs + `}`, 400, "response_format", "patternProperties"},
		{"bad lark", "/v1/completions", `{"grammar":{"type":"lark","value":"start: ("},"prompt":"x"}`, 400, "grammar.value", "lark"},
		{"format and grammar", "/v1/chat/completions", `{"grammar":{"type":"regex","value":"a"},"response_format":{"type":"json_object"},` + msgs + `}`, 400, "grammar", "not both"},
		{"dry sampling", "/v1/completions", `{"dry_multiplier":0.8,"prompt":"x"}`, 400, "dry_multiplier", "DRY sampling"},
		{"reasoning effort", "/v1/chat/completions", `{"reasoning_effort":"high",` + msgs + `}`, 400, "reasoning_effort", "not supported"},
		{"adapter without LoRA runtime", "/v1/completions", `{"adapter":"lora1","prompt":"x"}`, 422, "adapter", "no LoRA runtime"},
		{"adapter of a bad shape", "/v1/completions", `{"adapter":{"name":"x"},"prompt":"x"}`, 400, "adapter", `{"generation": "<id>"}`},
		{"web search", "/v1/chat/completions", `{"web_search_options":{},` + msgs + `}`, 400, "web_search_options", "web search"},
		{"agent permission", "/v1/chat/completions", `{"agent_permission":"auto",` + msgs + `}`, 400, "agent_permission", "agentic"},
		{"no messages", "/v1/chat/completions", `{"model":"tiny"}`, 400, "messages", "messages is required"},
		{"empty messages", "/v1/chat/completions", `{"messages":[]}`, 400, "messages", "must not be empty"},
		{"image part without image_url", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "messages[0].content[0].image_url", "is required"},
		{"audio content", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, 400, "messages[0].content[0].type", "not supported"},
		{"unknown response format", "/v1/chat/completions", `{"response_format":{"type":"xml"},` + msgs + `}`, 400, "response_format", "not supported"},
		{"bad logit bias", "/v1/chat/completions", `{"logit_bias":{"x":1},` + msgs + `}`, 400, "logit_bias", "not a token id"},
		{"prompt too long", "/v1/completions", `{"prompt":"` + strings.Repeat("a", 600) + `"}`, 400, "", "context length of 512"},
		{"token outside vocabulary", "/v1/completions", `{"prompt":[1,99999]}`, 400, "prompt", "outside the vocabulary"},
		{"two prompts", "/v1/completions", `{"prompt":["a","b"]}`, 400, "prompt", "one prompt per request"},
		{"best_of", "/v1/completions", `{"prompt":"a","best_of":3}`, 400, "best_of", "not supported"},
		{"management without model_id", "/v1/models/status", `{}`, 400, "model_id", "model_id is required"},
		{"management malformed", "/v1/models/unload", `{`, 400, "", "invalid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id := "err-" + strings.Map(func(r rune) rune {
				if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
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
			var e apiError
			if err := json.Unmarshal(body, &e); err != nil {
				t.Fatalf("not an OpenAI error body: %s", body)
			}
			wantType := "invalid_request_error"
			if !strings.Contains(e.Error.Message, c.contains) || e.Error.Type != wantType {
				t.Errorf("error %+v, want message containing %q", e.Error, c.contains)
			}
			if goTypeNamed(e.Error.Message) {
				t.Errorf("the message names Go types: %s", e.Error.Message)
			}
			if got := ""; e.Error.Param != nil {
				got = *e.Error.Param
				if got != c.param {
					t.Errorf("param %q, want %q", got, c.param)
				}
			} else if c.param != "" {
				t.Errorf("param null, want %q", c.param)
			}
			if c.status == 404 && (e.Error.Code == nil || *e.Error.Code != "model_not_found") {
				t.Errorf("404 code %v", e.Error.Code)
			}
			// The access log carries the message, quoted.
			line := ts.log.waitLines(t, 1, "request completed: request_id="+id+" ")[0]
			q, _ := json.Marshal(e.Error.Message)
			if !strings.Contains(line, " status="+strconv.Itoa(c.status)+" ") || !strings.Contains(line, " error=") ||
				!strings.Contains(line, strings.Trim(string(q), `"`)[:min(20, len(q)-2)]) {
				t.Errorf("access line %q lacks the status or message %s", line, q)
			}
		})
	}
}

// goTypeNamed reports whether an error message shows Go's names for types
// (encoding/json's "Go value of type []server.respInputItem").
func goTypeNamed(msg string) bool {
	for _, s := range []string{"Go value", "Go struct", "server.", "struct {", "[]", "json:", "RawMessage", "int64", "float64"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// The same on the Anthropic routes, whose envelope is their own.
func TestAnthropicErrorsNameNoGoTypes(t *testing.T) {
	ts := startServer(t)
	for _, c := range []struct{ body, contains string }{
		{`{"model":"tiny","max_tokens":5,"messages":123}`, "messages must be an array"},
		{`{"model":"tiny","max_tokens":5,"messages":[123]}`, "messages must be an array"},
		{`{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":123}]}`, "messages[0].content must be a string or an array of content blocks"},
		{`{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "messages[0].content[0].text: expected a string, got JSON number"},
		{`{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"system":123}`, "system must be a string"},
		{`{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[5]}`, "tools[0] must be a tool object (expected an object, got JSON number)"},
		{`{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":5}]}`, `tools[0] must be a tool object (field "name": expected a string, got JSON number)`},
		{`{"model":"tiny","max_tokens":"5","messages":[{"role":"user","content":"hi"}]}`, `invalid type for field "max_tokens": expected an integer, got JSON string`},
		{`{"model":"tiny","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"temperature":1e308}`, "got 1e+308"},
	} {
		for _, path := range []string{"/v1/messages", "/v1/messages/count_tokens"} {
			resp, body := ts.post(path, c.body, "anthropic-version", "2023-06-01")
			var e anthropicErrorBodyJSON
			if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != 400 || e.Type != "error" {
				if path == "/v1/messages/count_tokens" && strings.Contains(c.body, "temperature") {
					continue // count_tokens samples nothing
				}
				t.Errorf("%s %s: %d %s", path, c.body, resp.StatusCode, body)
				continue
			}
			if !strings.Contains(e.Error.Message, c.contains) || goTypeNamed(e.Error.Message) {
				t.Errorf("%s %s: message %q, want one containing %q and no Go type", path, c.body, e.Error.Message, c.contains)
			}
		}
	}
}

func TestBodyTooLarge(t *testing.T) {
	ts := startServer(t)
	// Declared length over the limit: answered before the body is read.
	big := strings.NewReader(`{"messages":"` + strings.Repeat("a", 50<<20) + `"}`)
	req, _ := http.NewRequest("POST", ts.url+"/v1/chat/completions", big)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "too-big")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e apiError
	if resp.StatusCode != 413 || json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error.Message == "" {
		t.Fatalf("status %d, error %+v", resp.StatusCode, e)
	}
	if resp.Header.Get("X-Request-Id") != "too-big" {
		t.Errorf("413 without the request id: %v", resp.Header)
	}
	line := ts.log.waitLines(t, 1, "request completed: request_id=too-big ")[0]
	if !strings.Contains(line, "status=413") || !strings.Contains(line, "model=unknown") || !strings.Contains(line, `error="request body too large"`) {
		t.Errorf("access line %q", line)
	}
}

// manyBiases is n logit_bias entries, without the braces.
func manyBiases(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"%d":1`, i)
	}
	return strings.Join(parts, ",")
}
