package server

import (
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"
)

// repeatReader streams prefix, n bytes of unit repeated, then suffix,
// without holding the body in memory.
type repeatReader struct {
	prefix, unit, suffix string
	n, sent              int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	k := 0
	for k < len(p) {
		switch {
		case r.prefix != "":
			c := copy(p[k:], r.prefix)
			r.prefix = r.prefix[c:]
			k += c
		case r.sent < r.n:
			u := r.unit[r.sent%len(r.unit):]
			c := copy(p[k:], u[:min(len(u), r.n-r.sent)])
			r.sent += c
			k += c
		case r.suffix != "":
			c := copy(p[k:], r.suffix)
			r.suffix = r.suffix[c:]
			k += c
		default:
			if k == 0 {
				return 0, io.EOF
			}
			return k, nil
		}
	}
	return k, nil
}

// heapPeak samples the heap's object bytes until stopped and returns the
// highest value seen.
func heapPeak() (stop func() uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-time.After(50 * time.Microsecond):
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// TestHugePromptMemory: a 40 MB prompt, under the body limit, is refused
// with the route's 400 without its memory growing with the prompt (the
// issue: the whole prompt was tokenized first, GBs of heap). The first case
// sends the 40 MB in a field nobody reads: what reading the body costs (the
// buffered body, 40 MB). The prompt handling may add one decoded copy of
// the prompt (the JSON string) and little else: every route, each way of
// carrying the text (strings, parts, blocks, several blocks, system,
// instructions, tool results), stays under the 100 MB (80 MB
// measured; a second copy, as Responses and Anthropic made before, is 120).
func TestHugePromptMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 40 MB bodies")
	}
	ts := startServer(t)
	// A low GC target keeps garbage from hiding (or faking) the live peak.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	const size = 40 << 20
	const extra = 64 << 20 // the decoded prompt, and slack
	const maxGrowth = 100 << 20
	cases := []struct {
		name, path, prefix, suffix string
		hdr                        []string
	}{
		{"body only", "/v1/completions", `{"model":"tiny","prompt":"","x":"`, `"}`, nil},
		{"chat", "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":"`, `"}]}`, nil},
		{"chat parts", "/v1/chat/completions", `{"model":"tiny","messages":[{"role":"user","content":[{"type":"text","text":"`, `"}]}]}`, nil},
		{"raw chat", "/v1/chat/completions", `{"model":"tiny","messages":"`, `"}`, nil},
		{"completions", "/v1/completions", `{"model":"tiny","prompt":"`, `"}`, nil},
		{"responses", "/v1/responses", `{"model":"tiny","input":"`, `"}`, nil},
		{"responses items", "/v1/responses", `{"model":"tiny","input":[{"role":"user","content":"`, `"}]}`, nil},
		{"anthropic", "/v1/messages", `{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":"`, `"}]}`, []string{"anthropic-version", "2023-06-01"}},
		{"anthropic blocks", "/v1/messages", `{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":[{"type":"text","text":"`, `"}]}]}`, []string{"anthropic-version", "2023-06-01"}},
		{"anthropic two blocks", "/v1/messages", `{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":[{"type":"text","text":"`, `"},{"type":"text","text":"x"}]}]}`, []string{"anthropic-version", "2023-06-01"}},
		{"anthropic system blocks", "/v1/messages", `{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"system":[{"type":"text","text":"x"},{"type":"text","text":"`, `"}]}`, []string{"anthropic-version", "2023-06-01"}},
		{"anthropic assistant blocks", "/v1/messages", `{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"text","text":"`, `"}]}]}`, []string{"anthropic-version", "2023-06-01"}},
		{"anthropic tool result", "/v1/messages", `{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"x"},{"type":"text","text":"`, `"}]}]}]}`, []string{"anthropic-version", "2023-06-01"}},
		{"responses two parts", "/v1/responses", `{"model":"tiny","input":[{"role":"user","content":[{"type":"input_text","text":"`, `"},{"type":"input_text","text":"x"}]}]}`, nil},
		{"anthropic system", "/v1/messages", `{"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"system":"`, `"}`, []string{"anthropic-version", "2023-06-01"}},
		{"count_tokens", "/v1/messages/count_tokens", `{"model":"tiny","messages":[{"role":"user","content":"`, `"}]}`, []string{"anthropic-version", "2023-06-01"}},
		{"responses parts", "/v1/responses", `{"model":"tiny","input":[{"role":"user","content":[{"type":"input_text","text":"`, `"}]}]}`, nil},
		{"responses instructions", "/v1/responses", `{"model":"tiny","input":"hi","instructions":"`, `"}`, nil},
	}
	var bodyOnly int64
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest("POST", ts.url+c.path, &repeatReader{prefix: c.prefix, unit: "hello world ", suffix: c.suffix, n: size})
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = int64(len(c.prefix) + size + len(c.suffix))
			req.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(c.hdr); i += 2 {
				req.Header.Set(c.hdr[i], c.hdr[i+1])
			}
			runtime.GC()
			base := func() uint64 {
				s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
				metrics.Read(s)
				return s[0].Value.Uint64()
			}()
			stop := heapPeak()
			start := time.Now()
			resp, body := ts.do(req)
			took := time.Since(start)
			grew := int64(stop()) - int64(base)
			t.Logf("%d in %v, heap grew by %.1f MB at the peak", resp.StatusCode, took.Round(time.Millisecond), float64(grew)/(1<<20))
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if c.name == "body only" {
				bodyOnly = max(grew, 2*size) // at least the two copies of the body
				return
			}
			if !strings.Contains(string(body), "context length of 512") {
				t.Errorf("body %s", body)
			}
			var env map[string]any
			if err := json.Unmarshal(body, &env); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(c.path, "/v1/messages") {
				if env["type"] != "error" {
					t.Errorf("not the Anthropic envelope: %s", body)
				}
			} else if _, ok := env["error"].(map[string]any); !ok {
				t.Errorf("not the OpenAI envelope: %s", body)
			}
			if grew > bodyOnly+extra {
				t.Errorf("heap grew by %.1f MB for a %d MB prompt, reading the body alone %.1f MB", float64(grew)/(1<<20), size>>20, float64(bodyOnly)/(1<<20))
			}
			// The bound, on every route: the body and one decoded
			// copy of the prompt (80 MB), never a second copy (120 MB).
			if grew >= maxGrowth {
				t.Errorf("heap grew by %.1f MB for a %d MB prompt; the bound is %d MB", float64(grew)/(1<<20), size>>20, maxGrowth>>20)
			}
		})
	}
}
