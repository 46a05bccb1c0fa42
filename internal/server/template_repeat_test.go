package server

import (
	"encoding/json"
	"strings"
	"testing"

	"mistralrs/internal/loader"
)

// String repetition in a chat template is bounded by the rendered prompt's size limit: a
// constant one fails the model's load naming the file; one the request sizes fails that request
// with a 500 saying so (no gigabyte allocated), and the server keeps serving.
func TestChatTemplateRepetitionBounded(t *testing.T) {
	tmpl := writeTemplate(t, `{{ "x" * 1000000000 }}`)
	_, err := tinySpec(t, "bad", tinyConfig, loader.Options{ChatTemplatePath: tmpl}).Load()
	if err == nil || !strings.Contains(err.Error(), tmpl+": chat template: a render of a sample conversation fails: string repetition") {
		t.Fatalf("load: %v", err)
	}

	tmpl = writeTemplate(t, `{%- for m in messages %}{{ '.' * (m.content|int) }}{% endfor -%}`+
		`{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`)
	ts := startServer(t, func(o *Options) {
		o.Models = []ModelSpec{tinySpec(t, "tiny", tinyConfig, loader.Options{ChatTemplatePath: tmpl})}
	})
	for _, route := range []string{"/v1/chat/completions", "/v1/responses", "/v1/messages"} {
		ask := func(content string) (int, []byte) {
			resp, body := ts.post(route, map[string]any{"model": "tiny", "max_tokens": 1,
				"messages": []map[string]string{{"role": "user", "content": content}}, "input": content},
				"anthropic-version", "2023-06-01")
			return resp.StatusCode, body
		}
		code, body := ask("100000000000")
		var e struct {
			Error struct{ Message string }
		}
		if code != 500 || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error.Message, "chat template: string repetition: 1 bytes * 100000000000 is more than 16777216 bytes") {
			t.Fatalf("%s: huge repetition: %d %s", route, code, body)
		}
		if code, body := ask("3"); code != 200 {
			t.Fatalf("%s: after the failed request: %d %s", route, code, body)
		}
	}
}
