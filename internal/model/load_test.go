package model_test

import (
	"strings"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
	"mistralrs/internal/model/modeltest"
)

func TestLoadErrors(t *testing.T) {
	cfg := modeltest.FixtureConfigs()["llama"]
	cfg.Type = kernels.Q8_0
	f := modeltest.BuildFixture(t, cfg)
	if _, err := model.Load(f); err != nil {
		t.Fatal(err)
	}
	q2 := kernels.Q2_K
	cases := []struct {
		name string
		e    modeltest.Edit
		want []string // substrings of the error
	}{
		{"missing tensor", modeltest.Edit{Tensors: map[string]*gguf.TensorInfo{"blk.1.ffn_up.weight": nil}},
			[]string{"bad.gguf", "missing tensor blk.1.ffn_up.weight"}},
		{"missing embeddings", modeltest.Edit{Tensors: map[string]*gguf.TensorInfo{"token_embd.weight": nil}},
			[]string{"missing tensor token_embd.weight"}},
		{"wrong shape", modeltest.Edit{Tensors: map[string]*gguf.TensorInfo{"blk.0.attn_k.weight": {
			Name: "blk.0.attn_k.weight", Type: kernels.F32, Dims: []uint64{256, 128}, Data: make([]byte, 256*128*4)}}},
			[]string{"blk.0.attn_k.weight", "[256 128]", "[256 64]"}},
		{"wrong norm shape", modeltest.Edit{Tensors: map[string]*gguf.TensorInfo{"blk.1.ffn_norm.weight": {
			Name: "blk.1.ffn_norm.weight", Type: kernels.F32, Dims: []uint64{255}, Data: make([]byte, 255*4)}}},
			[]string{"blk.1.ffn_norm.weight", "[255]", "[256]"}},
		{"unsupported type", modeltest.Edit{Tensors: map[string]*gguf.TensorInfo{"blk.0.attn_q.weight": {
			Name: "blk.0.attn_q.weight", Type: q2, Dims: []uint64{256, 256}, Data: make([]byte, q2.RowSize(256)*256)}}},
			[]string{"blk.0.attn_q.weight", "Q2_K"}},
		{"unsupported arch", modeltest.Edit{KV: map[string]any{"general.architecture": "gpt2"}},
			[]string{"gpt2", "gemma3, llama, mistral3, phi3, qwen2, qwen2moe, qwen3, qwen3moe"}},
		{"no arch", modeltest.Edit{KV: map[string]any{"general.architecture": nil}},
			[]string{"general.architecture"}},
		{"missing key", modeltest.Edit{KV: map[string]any{"llama.embedding_length": nil}},
			[]string{"bad.gguf", "llama.embedding_length"}},
		{"missing eps", modeltest.Edit{KV: map[string]any{"llama.attention.layer_norm_rms_epsilon": nil}},
			[]string{"llama.attention.layer_norm_rms_epsilon"}},
		{"key type", modeltest.Edit{KV: map[string]any{"llama.block_count": "two"}},
			[]string{"llama.block_count"}},
		{"too many layers", modeltest.Edit{KV: map[string]any{"llama.block_count": uint32(1 << 30)}},
			[]string{"llama.block_count 1073741824 is more than 4096"}},
		{"gqa", modeltest.Edit{KV: map[string]any{"llama.attention.head_count_kv": uint32(3)}},
			[]string{"head_count_kv 3"}},
		{"embedding not a multiple of heads", modeltest.Edit{KV: map[string]any{"llama.embedding_length": uint32(65), "llama.attention.key_length": nil}},
			[]string{"embedding_length 65", "head_count"}},
		{"zero context", modeltest.Edit{KV: map[string]any{"llama.context_length": uint32(0)}},
			[]string{"bad.gguf", "context_length 0"}},
		{"pooling type", modeltest.Edit{KV: map[string]any{"llama.pooling_type": uint32(9)}},
			[]string{"pooling_type 9"}},
		{"moe without used count", modeltest.Edit{KV: map[string]any{"llama.expert_count": uint32(8)}},
			[]string{"missing metadata key llama.expert_used_count"}},
		{"moe without experts", modeltest.Edit{KV: map[string]any{"llama.expert_count": uint32(8), "llama.expert_used_count": uint32(2)}},
			[]string{"missing tensor blk.0.ffn_gate_inp.weight"}},
		{"moe used > count", modeltest.Edit{KV: map[string]any{"llama.expert_count": uint32(2), "llama.expert_used_count": uint32(3)}},
			[]string{"llama.expert_used_count 3 must be between 1 and expert_count 2"}},
		{"rope scaling", modeltest.Edit{KV: map[string]any{"llama.rope.scaling.type": "longrope"}},
			[]string{"longrope"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := model.Load(modeltest.Rewrite(t, f, c.e))
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range c.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			t.Log(err)
		})
	}

	// qwen2 requires the q/k/v biases that llama may leave out.
	cfg = modeltest.FixtureConfigs()["qwen2"]
	cfg.Type = kernels.F16
	f = modeltest.BuildFixture(t, cfg)
	_, err := model.Load(modeltest.Rewrite(t, f, modeltest.Edit{Tensors: map[string]*gguf.TensorInfo{"blk.0.attn_v.bias": nil}}))
	if err == nil || !strings.Contains(err.Error(), "blk.0.attn_v.bias") {
		t.Errorf("qwen2 without attn_v.bias: %v", err)
	}
}
