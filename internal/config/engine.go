package config

import "mistralrs/internal/engine"

// EngineOptions are the engine's scheduler and KV cache settings: the
// [runtime] and [paged_attn] sections, shared by every model. This is the
// only way engine options get their values, so that the table above is the
// one place a default is written (TestEngineOptionsMapped checks that
// every field of engine.Options is set from a setting).
func (c *Config) EngineOptions() engine.Options {
	r, p := &c.Runtime, &c.PagedAttn
	o := engine.Options{
		Threads:                     r.Threads,
		MaxSeqs:                     r.MaxSeqs,
		MaxNumBatchedTokens:         r.MaxNumBatchedTokens,
		MaxDecodeStepsBeforePrefill: r.MaxDecodeStepsBeforePrefill,
		PrefixCacheN:                r.PrefixCacheN,
		NoKVCache:                   r.NoKVCache,
		PagedAttn:                   p.Mode,
		BlockSize:                   p.BlockSize,
		CacheType:                   p.CacheType,
		CacheTypeK:                  p.CacheTypeK,
		CacheTypeV:                  p.CacheTypeV,
		NoCacheRotation:             p.NoCacheRotation,
		// The first model's proposer settings; the server gives each model
		// its own (Config.SpeculativeFor) and loads its draft model.
		SpecTokens: r.MTPNPredict,
		SpecNgram:  r.SpecNgram,
	}
	o.EmbeddingStepTokens = r.EmbeddingStepTokens
	o.EncoderCacheBytes = int64(r.EncoderCacheMB) << 20
	b := p.Budget()
	o.MemoryMB, o.ContextLen, o.MemoryFraction = b.MemoryMB, b.ContextLen, b.Fraction
	return o
}

// DefaultEngineOptions are the engine options of the default configuration
// (mistral.rs's defaults), for callers without a configuration: the run and
// bench commands, tests.
func DefaultEngineOptions() engine.Options { return Default().EngineOptions() }
