package model

import (
	"fmt"

	"mistralrs/internal/gguf"
	"mistralrs/internal/model/nn"
)

// RandomConfig describes a random-weight model for BuildRandom.
type RandomConfig = nn.RandomConfig

// BuildRandom adds the metadata and tensors of a deterministic random model
// to w (tokenizer metadata is the caller's), by its architecture's Random.
// Weights are scaled so that activations and logits stay of order one,
// like a trained model's.
func BuildRandom(cfg RandomConfig, w *gguf.Writer) error {
	a, ok := archs[cfg.Arch]
	if !ok {
		return fmt.Errorf("random model: unsupported architecture %q", cfg.Arch)
	}
	cfg, err := cfg.Prepare()
	if err != nil {
		return err
	}
	return a.Random(cfg, w)
}
