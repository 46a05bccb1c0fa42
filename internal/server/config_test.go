package server

import (
	"testing"

	"mistralrs/internal/config"
)

// EngineOptions carries every [runtime] and [paged_attn] setting the engine
// has, the KV cache type among them.
func TestEngineOptions(t *testing.T) {
	cfg := config.Default()
	cfg.PagedAttn.CacheType = "f16"
	cfg.PagedAttn.BlockSize = 16
	cfg.PagedAttn.Mode = "off"
	cfg.Runtime.MaxSeqs = 7
	o := EngineOptions(cfg)
	if o.CacheType != "f16" || o.BlockSize != 16 || o.PagedAttn != "off" || o.MaxSeqs != 7 {
		t.Errorf("engine options %+v", o)
	}
}
