// Package model loads decoder-only transformers from GGUF files and runs
// their batched forward pass. Each architecture lives in its own package
// (llama, ...) built from the blocks of package nn; this package holds the
// registry by general.architecture and the Model that serialises forward
// passes over one step's scratch.
package model

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model/gemma3"
	"mistralrs/internal/model/llama"
	"mistralrs/internal/model/nn"
	"mistralrs/internal/model/phi3"
)

// Config holds the hyper-parameters of a model, read from GGUF metadata.
type Config = nn.Config

// Batch is one forward step over several sequences.
type Batch = nn.Batch

// SeqInput is the part of a batch that belongs to one sequence.
type SeqInput = nn.SeqInput

// Active is an adapter applied to a sequence (nn.Active).
type Active = nn.Active

// Embeds is a run of a sequence's positions whose rows come from outside
// the vocabulary (an image's embeddings).
type Embeds = nn.Embeds

// archs is the registry by general.architecture: each architecture
// package declares its entries.
var archs = registry(append(slices.Clone(llama.Archs), gemma3.Arch, phi3.Arch))

func registry(list []nn.Arch) map[string]nn.Arch {
	m := make(map[string]nn.Arch, len(list))
	for _, a := range list {
		if _, dup := m[a.Name]; dup {
			panic("model: architecture " + a.Name + " registered twice")
		}
		m[a.Name] = a
	}
	return m
}

// SupportedArchitectures lists the values of general.architecture that Load accepts.
func SupportedArchitectures() []string {
	names := make([]string, 0, len(archs))
	for n := range archs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Model is a loaded decoder-only transformer. Its matrices point into the
// GGUF mmap, so the gguf.File must stay open while the Model is used.
type Model struct {
	Config Config

	net nn.Network // the weights, immutable after Load

	weightsOnce sync.Once
	weights     map[string]*kernels.Matrix // the adaptable matrices by GGUF name (Weight)

	mu sync.Mutex // Forward uses the scratch below
	st nn.Step
}

// Load builds the model described by f's metadata over f's tensors.
func Load(f *gguf.File) (*Model, error) {
	name, ok := f.String("general.architecture")
	if !ok {
		return nil, fmt.Errorf("%s: missing metadata key general.architecture", f.Path)
	}
	a, ok := archs[name]
	if !ok {
		return nil, fmt.Errorf("%s: unsupported architecture %q (supported: %s)",
			f.Path, name, strings.Join(SupportedArchitectures(), ", "))
	}
	cfg, r, err := nn.ReadConfig(f, name, a.Neox)
	if err != nil {
		return nil, err
	}
	if n := r.Int("expert_count", 0); n > 0 && !a.MoE {
		return nil, fmt.Errorf("%s: %s: mixture-of-experts models (%sexpert_count = %d) are not supported for this architecture (supported: llama (mixtral), qwen2moe, qwen3moe)", f.Path, name, r.Prefix, n)
	}
	if a.Config != nil {
		if err := a.Config(r, &cfg); err != nil {
			return nil, err
		}
	}
	if r.Err != nil {
		return nil, r.Err
	}
	if err := cfg.Validate(f.Path); err != nil {
		return nil, err
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return nil, fmt.Errorf("%s: missing tensor token_embd.weight", f.Path)
	}
	if len(emb.Dims) < 2 || emb.Dims[1] == 0 || emb.Dims[1] > 1<<31 {
		return nil, fmt.Errorf("%s: tensor token_embd.weight has dims %v, expected [%d, vocab]", f.Path, emb.Dims, cfg.Embd)
	}
	cfg.Vocab = int(emb.Dims[1])
	m := &Model{Config: cfg}
	if m.net, err = a.New(f, &m.Config); err != nil {
		return nil, err
	}
	return m, nil
}

// Network is the architecture's weights (tests look at how they are
// wired).
func (m *Model) Network() nn.Network { return m.net }

// Weight returns the matrix of the weights that the GGUF tensor name
// held, when it is one the forward pass multiplies by (the products that
// take an adapter's low-rank terms, nn.Step.MatMul): token_embd.weight
// (an embedding lookup), vectors and the experts' 3-D tensors are not.
// The matrix is the key of an nn.Adapter's pair for that weight.
func (m *Model) Weight(name string) (*kernels.Matrix, bool) {
	m.weightsOnce.Do(func() {
		m.weights = nn.Matrices(m.net)
		if emb, ok := m.weights["token_embd.weight"]; ok {
			delete(m.weights, "token_embd.weight")
			for n, w := range m.weights {
				if w == emb { // a tied output is the embedding: not a weight of its own
					delete(m.weights, n)
				}
			}
		}
	})
	w, ok := m.weights[name]
	return w, ok
}

// LastStep tells how the last Forward laid out its batch: the tokens it
// ran and the most queries one attention group held.
func (m *Model) LastStep() (tokens, largestGroup int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.T, m.st.LargestGroup()
}

// Forward runs the model over the batch: it appends the new tokens' keys and
// values to each sequence's cache and writes the requested logits. Calls on
// one Model are serialised; p may be nil (single-threaded).
//
// An invalid batch is reported before any cache is touched; when a cache
// cannot grow (Extend fails), the batch's caches are left truncated to
// their Pos.
func (m *Model) Forward(p *kernels.Pool, b *Batch) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.st.Prepare(&m.Config, p, b); err != nil {
		return err
	}
	m.net.Forward(&m.st)
	m.st.Done() // do not keep the caller's batch alive
	return nil
}
