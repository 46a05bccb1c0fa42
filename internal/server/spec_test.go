package server

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
)

// With speculative decoding, a streamed answer's tokens arrive in order,
// a verified run counts as one token step (ITL samples = tokens - 1 -
// accepted guesses), the counters move, and "speculative": false opts out.
func TestSpeculativeStreamSteps(t *testing.T) {
	ts := startServer(t, func(o *Options) {
		o.Engine.SpecNgram = 2
		o.Engine.SpecTokens = 4
	})
	stream := func(id string, extra map[string]any) (text string, tokens int) {
		body := map[string]any{"model": "tiny", "prompt": "abcabcabcabcabcabc", "max_tokens": 48, "ignore_eos": true, "temperature": 0,
			"stream_options": map[string]any{"include_usage": true}}
		for k, v := range extra {
			body[k] = v
		}
		resp := ts.openStream(t, id, body)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || line == "[DONE]" {
				continue
			}
			var chunk struct {
				Choices []struct{ Text string }
				Usage   *struct {
					CompletionTokens int `json:"completion_tokens"`
				}
			}
			if err := json.Unmarshal([]byte(line), &chunk); err != nil {
				t.Fatal(err)
			}
			for _, c := range chunk.Choices {
				text += c.Text
			}
			if chunk.Usage != nil {
				tokens = chunk.Usage.CompletionTokens
			}
		}
		return text, tokens
	}
	specText, n := stream("spec", nil)
	fams := ts.metrics()
	drafts := value(fams, "mistralrs_speculative_drafts_total", nil)
	accepted := value(fams, "mistralrs_speculative_draft_tokens_accepted_total", nil)
	labels := map[string]string{"path": "/v1/completions", "model": "tiny", "status": "200"}
	itl := value(fams, "mistralrs_inter_token_latency_seconds", labels)
	if n != 48 || drafts <= 0 || accepted <= 0 {
		t.Fatalf("%d tokens, drafts %v, accepted %v: the repeated prompt should get guesses accepted", n, drafts, accepted)
	}
	if want := float64(n-1) - accepted; itl != want {
		t.Errorf("ITL samples %v, want %v (48 tokens, %v accepted guesses: one sample per step)", itl, want, accepted)
	}
	plainText, _ := stream("plain", map[string]any{"speculative": false})
	if plainText != specText {
		t.Errorf("greedy text differs without speculation:\n%q\n%q", plainText, specText)
	}
	if d := value(ts.metrics(), "mistralrs_speculative_drafts_total", nil); d != drafts {
		t.Errorf("drafts %v -> %v for a request with speculative false", drafts, d)
	}
}
