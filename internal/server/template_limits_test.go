package server

import (
	"encoding/json"
	"strings"
	"testing"

	"mistralrs/internal/config"
	"mistralrs/internal/loader"
	"mistralrs/internal/observe"
)

// A chat template that would recurse without bound on every request fails the model's load,
// with an error naming the template file, instead of overflowing the stack on the first request.
func TestRecursiveChatTemplateFailsLoad(t *testing.T) {
	tmpl := writeTemplate(t, `{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}`)
	oo := observe.DefaultOptions()
	eo := config.DefaultEngineOptions()
	eo.Threads = 1
	srv, err := New(Options{
		Models:  []ModelSpec{tinySpec(t, "bad", tinyConfig, loader.Options{ChatTemplatePath: tmpl})},
		Observe: &oo,
		Engine:  eo,
	})
	if err == nil {
		srv.Close()
		t.Fatal("a model with a recursive chat template loaded")
	}
	want := tmpl + ": chat template: a render of a sample conversation fails: macro f: macro calls nested more than"
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("got %q, want it to contain %q", err, want)
	}

	// A huge constant range is refused when the template is compiled.
	tmpl = writeTemplate(t, `{% for i in range(1000000000) %}x{% endfor %}`)
	_, err = tinySpec(t, "bad", tinyConfig, loader.Options{ChatTemplatePath: tmpl}).Load()
	if err == nil || !strings.Contains(err.Error(), tmpl+": chat template: compile: line 1: range(1000000000): more than 100000 items") {
		t.Fatalf("got %v", err)
	}
}

// A template limit reached because of the request's content fails that request with a 500; the
// server keeps serving.
func TestChatTemplateLimitFailsRequest(t *testing.T) {
	tmpl := writeTemplate(t, `{%- for m in messages %}{% for i in range(m.content|int) %}{{ '.' }}{% endfor %}{% endfor -%}`+
		`{%- if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`)
	ts := startServer(t, func(o *Options) {
		o.Models = []ModelSpec{tinySpec(t, "tiny", tinyConfig, loader.Options{ChatTemplatePath: tmpl})}
	})
	ask := func(content string) (int, []byte) {
		resp, body := ts.post("/v1/chat/completions", map[string]any{"model": "tiny", "max_tokens": 1,
			"messages": []map[string]string{{"role": "user", "content": content}}})
		return resp.StatusCode, body
	}
	code, body := ask("100000000")
	var e apiError
	if code != 500 || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error.Message, "range: more than 100000 items") {
		t.Fatalf("huge range: %d %s", code, body)
	}
	if code, body := ask("3"); code != 200 {
		t.Fatalf("after the failed request: %d %s", code, body)
	}
}
