package nn

import "mistralrs/internal/gguf"

// Arch is an architecture's entry in the model registry (package model),
// keyed by Name, the value of general.architecture. Each architecture
// package declares its own; model lists them.
type Arch struct {
	Name string
	// Neox: rotary embeddings pair (x[i], x[i+d/2]).
	Neox bool
	// Config, if set, reads the architecture's own metadata keys.
	Config func(r *KeyReader, c *Config) error
	// MoE: the architecture has experts (expert_count is refused otherwise).
	MoE bool
	// New loads the weights.
	New func(f *gguf.File, c *Config) (Network, error)
	// Random writes a random-weight model of the architecture: its
	// metadata, then its weights by WriteRandom. cfg has its defaults and
	// its common sizes are checked.
	Random func(cfg RandomConfig, w *gguf.Writer) error
}
