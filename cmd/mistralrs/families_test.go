package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"mistralrs/internal/demo"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
)

// Each architecture runs from the command line (gen-model, then run) and
// is served, with the chat template its GGUF carries: the prompt the
// server counts is that template's rendering (a byte vocabulary: one token
// per byte).
func TestFamiliesRunAndServe(t *testing.T) {
	dir := t.TempDir()
	families := []struct {
		arch, template, want string
		extra                []string
		cfg                  model.RandomConfig
	}{
		{"gemma3",
			`{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}` + "\n" +
				`{{ m.content | trim }}<end_of_turn>` + "\n" + `{% endfor %}{% if add_generation_prompt %}<start_of_turn>model` + "\n" + `{% endif %}`,
			"<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n", []string{"--sliding-window", "4"},
			model.RandomConfig{SlidingWindow: 4}},
		{"phi3",
			`{% for m in messages %}<|{{ m.role }}|>` + "\n" + `{{ m.content }}<|end|>` + "\n" + `{% endfor %}{% if add_generation_prompt %}<|assistant|>` + "\n" + `{% endif %}`,
			"<|user|>\nhi<|end|>\n<|assistant|>\n", nil, model.RandomConfig{}},
		{"qwen3moe",
			`{% for m in messages %}<|im_start|>{{ m.role }}` + "\n" + `{{ m.content }}<|im_end|>` + "\n" + `{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant` + "\n" + `{% endif %}`,
			"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", []string{"--experts", "4", "--experts-used", "2"},
			model.RandomConfig{Experts: 4, ExpertUsed: 2, ExpertFF: 64}},
		{"llama",
			`{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}`,
			"[INST] hi [/INST]", []string{"--experts", "4", "--experts-used", "2"},
			model.RandomConfig{Experts: 4, ExpertUsed: 2}}, // mixtral
		{"qwen2moe",
			`{% for m in messages %}<|im_start|>{{ m.role }}` + "\n" + `{{ m.content }}<|im_end|>` + "\n" + `{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant` + "\n" + `{% endif %}`,
			"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", []string{"--experts", "4", "--experts-used", "2"},
			model.RandomConfig{Experts: 4, ExpertUsed: 2, ExpertFF: 64}},
	}
	var toml strings.Builder
	port := freePort(t)
	fmt.Fprintf(&toml, "command = \"serve\"\n\n[server]\nhost = \"127.0.0.1\"\nport = %d\nshutdown_delay_secs = 0\n\n[runtime]\nthreads = 1\n", port)
	for _, f := range families {
		// gen-model writes each architecture, and run runs it.
		gen := filepath.Join(dir, f.arch+"-gen.gguf")
		args := append([]string{"gen-model", "-o", gen, "--arch", f.arch, "--type", "Q8_0", "--layers", "2", "--embd", "64",
			"--ff", "128", "--heads", "4", "--kv-heads", "2", "--vocab", "300"}, f.extra...)
		if _, _, err := execute(t, "", args...); err != nil {
			t.Fatalf("%s: gen-model: %v", f.arch, err)
		}
		if out, _, err := execute(t, "", "run", "-f", gen, "--raw", "--prompt", "abc", "--temperature", "0", "--max-tokens", "4"); err != nil || out == "" {
			t.Errorf("%s: run: %q %v", f.arch, out, err)
		}
		// The served one carries its family's chat template.
		cfg := f.cfg
		cfg.Arch, cfg.Layers, cfg.Embd, cfg.FF, cfg.Heads, cfg.KVHeads = f.arch, 2, 64, 128, 4, 2
		cfg.Vocab, cfg.ContextLen, cfg.Type, cfg.Seed = 300, 512, kernels.Q8_0, 3
		w, err := demo.RandomModel(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.AddKV("tokenizer.chat_template", f.template)
		path := filepath.Join(dir, f.arch+".gguf")
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&toml, "\n[[models]]\nmodel_id = %q\n", path)
	}
	conf := filepath.Join(dir, "families.toml")
	if err := os.WriteFile(conf, []byte(toml.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startCommand(t, port, "from-config", "-f", conf)
	for _, f := range families {
		id := filepath.Join(dir, f.arch+".gguf")
		code, body := s.post("/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"max_tokens":3}`, id))
		var resp struct {
			Choices []struct{ Message struct{ Content string } } `json:"choices"`
			Usage   struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &resp) != nil || len(resp.Choices) != 1 {
			t.Errorf("%s: %d %s", f.arch, code, body)
			continue
		}
		// One token per byte, but the vocabulary's ChatML specials are one each.
		want := len(f.want) - 2*(len("<|im_start|>")-1) - (len("<|im_end|>") - 1)
		if !strings.Contains(f.want, "<|im_start|>") {
			want = len(f.want)
		}
		if resp.Usage.PromptTokens != want {
			t.Errorf("%s: %d prompt tokens, want %d (the rendering of its template: %q)", f.arch, resp.Usage.PromptTokens, want, f.want)
		}
	}
	s.stop(syscall.SIGTERM)
}
