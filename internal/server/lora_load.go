package server

import (
	"mistralrs/internal/loader"
	"mistralrs/internal/lora"
)

// loadLoRAFile reads an adapter file or folder (internal/lora: llama.cpp
// GGUF or PEFT) against the loaded model's weights.
func loadLoRAFile(path string, m *loader.Model, maxRank int, maxBytes int64) (*loraWeights, error) {
	a, err := lora.Load(path, m.Net, lora.Limits{MaxRank: maxRank, MaxBytes: maxBytes})
	if err != nil {
		return nil, err
	}
	return &loraWeights{Net: a.Net, Format: a.Format, Rank: a.Rank, Bytes: a.Bytes}, nil
}
