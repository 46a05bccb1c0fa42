package server

import (
	"reflect"
	"strings"
	"testing"

	"mistralrs/internal/config"
	"mistralrs/internal/engine"
)

// kvBudget is the paged KV pool size as the engine options carry it: at most
// one of the three is set, so a budget setting is checked as the triple.
type kvBudget struct {
	MemoryMB   int
	ContextLen int
	Fraction   float64
}

func budgetOf(o engine.Options) any { return kvBudget{o.MemoryMB, o.ContextLen, o.MemoryFraction} }

// engineSettings is every [runtime] and [paged_attn] setting that reaches the
// engine: set changes it in a default configuration to a value that differs
// from its default and from every other setting's test value (so a setting
// mapped to the wrong field fails too), and get reads it back from the
// engine options.
var engineSettings = []struct {
	key  string
	set  func(*config.Config)
	want any
	get  func(engine.Options) any
}{
	{"runtime.max_seqs", func(c *config.Config) { c.Runtime.MaxSeqs = 7 }, 7,
		func(o engine.Options) any { return o.MaxSeqs }},
	{"runtime.max_num_batched_tokens", func(c *config.Config) { c.Runtime.MaxNumBatchedTokens = 300 }, 300,
		func(o engine.Options) any { return o.MaxNumBatchedTokens }},
	{"runtime.max_decode_steps_before_prefill", func(c *config.Config) { c.Runtime.MaxDecodeStepsBeforePrefill = 2 }, 2,
		func(o engine.Options) any { return o.MaxDecodeStepsBeforePrefill }},
	{"runtime.embedding_step_tokens", func(c *config.Config) { c.Runtime.EmbeddingStepTokens = 5 }, 5,
		func(o engine.Options) any { return o.EmbeddingStepTokens }},
	{"runtime.encoder_cache_mb", func(c *config.Config) { c.Runtime.EncoderCacheMB = 3 }, int64(3 << 20),
		func(o engine.Options) any { return o.EncoderCacheBytes }},
	{"runtime.no_kv_cache", func(c *config.Config) { c.Runtime.NoKVCache = true }, true,
		func(o engine.Options) any { return o.NoKVCache }},
	{"runtime.prefix_cache_n", func(c *config.Config) { c.Runtime.PrefixCacheN = 5 }, 5,
		func(o engine.Options) any { return o.PrefixCacheN }},
	{"runtime.threads", func(c *config.Config) { c.Runtime.Threads = 3 }, 3,
		func(o engine.Options) any { return o.Threads }},
	{"runtime.mtp_n_predict", func(c *config.Config) { c.Runtime.MTPNPredict = 9 }, 9,
		func(o engine.Options) any { return o.SpecTokens }},
	{"runtime.spec_ngram", func(c *config.Config) { c.Runtime.SpecNgram = 6 }, 6,
		func(o engine.Options) any { return o.SpecNgram }},
	{"paged_attn.mode", func(c *config.Config) { c.PagedAttn.Mode = "off" }, "off",
		func(o engine.Options) any { return o.PagedAttn }},
	{"paged_attn.block_size", func(c *config.Config) { c.PagedAttn.BlockSize = 16 }, 16,
		func(o engine.Options) any { return o.BlockSize }},
	{"paged_attn.cache_type", func(c *config.Config) { c.PagedAttn.CacheType = "f16" }, "f16",
		func(o engine.Options) any { return o.CacheType }},
	{"paged_attn.cache_type_k", func(c *config.Config) { c.PagedAttn.CacheTypeK = "q8_0" }, "q8_0",
		func(o engine.Options) any { return o.CacheTypeK }},
	{"paged_attn.cache_type_v", func(c *config.Config) { c.PagedAttn.CacheTypeV = "bf16" }, "bf16",
		func(o engine.Options) any { return o.CacheTypeV }},
	{"paged_attn.no_cache_rotation", func(c *config.Config) { c.PagedAttn.NoCacheRotation = true }, true,
		func(o engine.Options) any { return o.NoCacheRotation }},
	{"paged_attn.memory_mb", func(c *config.Config) { c.PagedAttn.MemoryMB = ptr(123) }, kvBudget{MemoryMB: 123}, budgetOf},
	{"paged_attn.context_len", func(c *config.Config) { c.PagedAttn.ContextLen = ptr(4567) }, kvBudget{ContextLen: 4567}, budgetOf},
	{"paged_attn.memory_fraction", func(c *config.Config) { c.PagedAttn.MemoryFraction = ptr(0.25) }, kvBudget{Fraction: 0.25}, budgetOf},
}

// perModelSettings are the [runtime] settings that do not reach the engine
// options: each model's chat template defaults, which
// config.ChatTemplateFor resolves into the model's load options; the draft
// model, which OptionsFromConfig resolves into the first model's LoadDraft
// (TestOptionsFromConfigSpeculative); and the built-in MTP head, which
// Validate refuses.
var perModelSettings = map[string]bool{"runtime.chat_template": true, "runtime.jinja_explicit": true,
	"runtime.mtp_model": true, "runtime.mtp": true}

// Every [runtime] and [paged_attn] setting of the configuration table is
// either checked by TestEngineOptions or known not to be an engine option: a
// new setting must be added to one of the two lists.
func TestEngineOptionsListComplete(t *testing.T) {
	listed := map[string]bool{}
	for _, s := range engineSettings {
		listed[s.key] = true
	}
	n := 0
	for _, o := range config.Options {
		if !strings.HasPrefix(o.Key, "runtime.") && !strings.HasPrefix(o.Key, "paged_attn.") {
			continue
		}
		n++
		if !listed[o.Key] && !perModelSettings[o.Key] {
			t.Errorf("setting %s is not checked by TestEngineOptions (add it to engineSettings or perModelSettings)", o.Key)
		}
		delete(listed, o.Key)
	}
	for k := range listed {
		t.Errorf("engineSettings lists %s, which is no [runtime] or [paged_attn] setting", k)
	}
	if n != len(engineSettings)+len(perModelSettings) {
		t.Errorf("%d [runtime] and [paged_attn] settings, %d listed", n, len(engineSettings)+len(perModelSettings))
	}
}

// Config.EngineOptions carries every [runtime] and [paged_attn] setting the
// engine has, each to its own field, and OptionsFromConfig hands the result
// to the server's engines.
func TestEngineOptions(t *testing.T) {
	base := config.Default().EngineOptions()
	if got, want := budgetOf(base), (kvBudget{Fraction: config.DefaultMemoryFraction}); got != want {
		t.Errorf("no KV budget set: engine gets %+v, want %+v", got, want)
	}
	for _, s := range engineSettings {
		t.Run(s.key, func(t *testing.T) {
			if s.get(base) == s.want {
				t.Fatalf("test value %v is the default", s.want)
			}
			cfg := config.Default()
			s.set(cfg)
			if got := s.get(cfg.EngineOptions()); got != s.want {
				t.Errorf("Config.EngineOptions: got %+v, want %+v", got, s.want)
			}
			opts, demoModel, err := OptionsFromConfig(cfg)
			if err != nil || !demoModel {
				t.Fatalf("OptionsFromConfig: demo %v, %v", demoModel, err)
			}
			if got := s.get(opts.Engine); got != s.want {
				t.Errorf("OptionsFromConfig: engine options got %+v, want %+v", got, s.want)
			}
			if !reflect.DeepEqual(opts.Engine, cfg.EngineOptions()) {
				t.Errorf("OptionsFromConfig: engine options %+v, want Config.EngineOptions' %+v", opts.Engine, cfg.EngineOptions())
			}
		})
	}
}
