package server

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"mistralrs/internal/config"
)

// TestOptionsFromConfigLoRA: each model's [models.adapter] reaches its
// ModelSpec.LoRA, the preloaded adapters with local paths; a model without
// dynamic LoRA gets nil, and a source that is nothing is a startup error
// naming it.
func TestOptionsFromConfigLoRA(t *testing.T) {
	dir := t.TempDir()
	a := writeTiny(t, dir, "a.gguf", tinyConfig)
	b := writeTiny(t, filepath.Join(dir), "b.gguf", tinyConfig)
	adapters := filepath.Join(dir, "adapters")
	if err := os.MkdirAll(filepath.Join(adapters, "peft"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"code.gguf", "peft/adapter_config.json", "peft/adapter_model.safetensors"} {
		if err := os.WriteFile(filepath.Join(adapters, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := loadTOML(t, `[[models]]
model_id = "`+a+`"
[models.adapter]
lora_max_rank = 8
lora = [{alias = "code", source = "`+filepath.Join(adapters, "code.gguf")+`"},
        {alias = "peft", source = "`+filepath.Join(adapters, "peft")+`", base_model_name = "org/base"}]
[[models]]
model_id = "`+b+`"
`)
	opts, _, err := OptionsFromConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := &config.LoRARuntime{MaxAdapters: 16, MaxRank: 8, MaxBytes: 8 << 30, Preload: []config.LoRAModule{
		{Alias: "code", Source: filepath.Join(adapters, "code.gguf"), Path: filepath.Join(adapters, "code.gguf")},
		{Alias: "peft", Source: filepath.Join(adapters, "peft"), Path: filepath.Join(adapters, "peft"), BaseModelName: "org/base"},
	}}
	if !reflect.DeepEqual(opts.Models[0].LoRA, want) {
		t.Errorf("model 0: %+v\nwant %+v", opts.Models[0].LoRA, want)
	}
	if opts.Models[1].LoRA != nil {
		t.Errorf("model 1 has a LoRA runtime: %+v", opts.Models[1].LoRA)
	}

	cfg = loadTOML(t, "[[models]]\nmodel_id = \""+a+"\"\n[models.adapter]\nlora = [{alias = \"x\", source = \"./missing.gguf\"}]\n")
	if _, _, err := OptionsFromConfig(cfg); err == nil || !strings.Contains(err.Error(), `models[0].adapter.lora "x" (source "./missing.gguf"): LoRA adapter ./missing.gguf: no such file or folder`) {
		t.Errorf("missing source: %v", err)
	}
}
