package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// drainCut sends a non-streamed request to a slow server, begins the
// shutdown once its generation runs, and returns the answer the drain
// deadline leaves it (the generations are canceled 500 ms after the
// shutdown begins), once Serve has returned.
func drainCut(t *testing.T, path, id string, body map[string]any, hdr ...string) (*http.Response, []byte, *testServer) {
	t.Helper()
	ts := cutServer(t)
	data, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", ts.url+path, bytes.NewReader(data))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	type answer struct {
		resp *http.Response
		body []byte
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		got <- answer{resp, b, err}
	}()
	ts.waitMetric(t, "the running sequence", func(f map[string]*dto.MetricFamily) bool {
		return value(f, "mistralrs_sequences_running", nil) == 1
	})
	ts.cancel() // SIGINT/SIGTERM
	var a answer
	select {
	case a = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer after the drain deadline")
	}
	if a.err != nil {
		t.Fatalf("request cut without an answer: %v", a.err)
	}
	ts.waitServed(t, 10*time.Second)
	return a.resp, a.body, ts
}

// The drain deadline cuts a non-streamed chat completion: finish_reason
// canceled (as the stream's final chunk), not stop or length.
func TestDrainCutsChatCompletion(t *testing.T) {
	resp, body, _ := drainCut(t, "/v1/chat/completions", "cut-chat", map[string]any{"model": "slow", "max_tokens": 2000, "ignore_eos": true,
		"messages": []map[string]any{{"role": "user", "content": "abc"}}})
	var out chatCompletionJSON
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if fr := out.Choices[0].FinishReason; fr == nil || *fr != "canceled" {
		t.Errorf("finish_reason of an answer cut at the drain deadline: %s", body)
	}
	if out.Usage == nil || out.Usage.CompletionTokens >= 2000 {
		t.Errorf("usage %+v", out.Usage)
	}
}

// The same for a legacy completion.
func TestDrainCutsCompletion(t *testing.T) {
	resp, body, _ := drainCut(t, "/v1/completions", "cut-completion", map[string]any{"model": "slow", "max_tokens": 2000, "ignore_eos": true, "prompt": "abc"})
	var out completionJSON
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if fr := out.Choices[0].FinishReason; fr == nil || *fr != "canceled" {
		t.Errorf("finish_reason of an answer cut at the drain deadline: %s", body)
	}
}

// Anthropic has no stop_reason for an answer the server cut: the request
// fails with a 503 in Anthropic's envelope (overloaded_error, which SDKs
// retry), never a message with stop_reason end_turn.
func TestDrainCutsAnthropicMessage(t *testing.T) {
	resp, body, ts := drainCut(t, "/v1/messages", "cut-anthropic-json", map[string]any{"model": "slow", "max_tokens": 2000, "ignore_eos": true,
		"messages": []map[string]any{{"role": "user", "content": "abc"}}}, "anthropic-version", "2023-06-01")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	var env anthropicErrorBodyJSON
	if err := json.Unmarshal(body, &env); err != nil || env.Type != "error" || env.Error.Type != "overloaded_error" ||
		!strings.Contains(env.Error.Message, "shutting down") {
		t.Errorf("body %s", body)
	}
	line := ts.log.waitLines(t, 1, "request completed: request_id=cut-anthropic-json ")[0]
	if !strings.Contains(line, "status=503") || !strings.Contains(line, "shutting down") {
		t.Errorf("access line %q", line)
	}
}

// A Responses answer the server cut has status failed with a server_error
// (as the stream's response.failed), the text so far in an incomplete
// message; stored, it is failed too and cannot be continued.
func TestDrainCutsResponse(t *testing.T) {
	resp, body, ts := drainCut(t, "/v1/responses", "cut-response-json", map[string]any{"model": "slow", "max_output_tokens": 2000, "ignore_eos": true, "input": "abc"})
	var out struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Error  *struct {
			Code, Message string
		} `json:"error"`
		CompletedAt *int64 `json:"completed_at"`
		Output      []struct {
			Type, Status string
		} `json:"output"`
		Usage *respUsage `json:"usage"`
	}
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if out.Status != respFailed || out.Error == nil || out.Error.Code != "server_error" || !strings.Contains(out.Error.Message, "shutting down") ||
		out.CompletedAt != nil {
		t.Errorf("response cut at the drain deadline: %s", body)
	}
	if len(out.Output) != 1 || out.Output[0].Type != "message" || out.Output[0].Status != "incomplete" {
		t.Errorf("output %+v", out.Output)
	}
	if out.Usage == nil || out.Usage.OutputTokens >= 2000 {
		t.Errorf("usage %+v", out.Usage)
	}
	status, conversation, running, ok := ts.srv.responses.Status(out.ID)
	if !ok {
		t.Fatal("not stored")
	}
	if running || status != "failed" || conversation {
		t.Errorf("stored as %s (running %v, conversation %v)", status, running, conversation)
	}
}
