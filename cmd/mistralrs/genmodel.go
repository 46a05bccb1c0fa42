package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"mistralrs/internal/demo"
	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
)

// newGenModelCmd writes random-weight models for benchmarks and tests, such
// as the 134M-parameter llama the speed targets are measured on.
func newGenModelCmd() *cobra.Command {
	cfg := model.RandomConfig{}
	var out, typ string
	cmd := &cobra.Command{
		Use:   "gen-model -o FILE",
		Short: "Write a random-weight model (for benchmarks; it generates meaningless text)",
		Long: "Writes a GGUF model with deterministic random weights and a byte-level vocabulary.\n" +
			"The defaults make the 12-layer, 768-wide llama (about 134M parameters) used for the\n" +
			"speed targets: mistralrs gen-model -o llama-134m-q8_0.gguf --type Q8_0",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			t, ok := kernels.ParseType(typ)
			if typ == "Q4_K_M" {
				t, ok = kernels.Q4_K, true
				cfg.Mix = typ
			}
			if !ok || !t.Supported() {
				return fmt.Errorf("unsupported weight type %q", typ)
			}
			cfg.Type = t
			switch {
			case cfg.Arch == "qwen3moe" || cfg.Arch == "qwen2moe":
				if cfg.Experts == 0 {
					cfg.Experts = 8
				}
				if cfg.ExpertFF == 0 && cfg.ExpertUsed > 0 {
					cfg.ExpertFF = cfg.FF / cfg.ExpertUsed
				}
			case cfg.Arch == "llama" && cfg.Experts > 0: // mixtral
			default:
				cfg.Experts, cfg.ExpertUsed = 0, 0
			}
			w, err := demo.RandomModel(cfg)
			if err != nil {
				return err
			}
			w.AddKV("general.name", fmt.Sprintf("random %s %dx%d %s", cfg.Arch, cfg.Layers, cfg.Embd, typ))
			if err := w.WriteFile(out); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", out)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&out, "output", "o", "", "output GGUF file")
	fl.StringVar(&typ, "type", "Q8_0", "weight type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, or Q4_K_M (mixed)")
	fl.StringVar(&cfg.Arch, "arch", "llama", "architecture: "+strings.Join(model.SupportedArchitectures(), ", "))
	fl.IntVar(&cfg.Layers, "layers", 12, "number of layers")
	fl.IntVar(&cfg.Embd, "embd", 768, "embedding width")
	fl.IntVar(&cfg.FF, "ff", 2048, "feed-forward width")
	fl.IntVar(&cfg.Heads, "heads", 12, "attention heads")
	fl.IntVar(&cfg.KVHeads, "kv-heads", 12, "key/value heads (fewer than --heads: GQA)")
	fl.IntVar(&cfg.Vocab, "vocab", 32000, "vocabulary size")
	fl.IntVar(&cfg.ContextLen, "ctx", 2048, "context length")
	fl.IntVar(&cfg.SlidingWindow, "sliding-window", 0, "gemma3: positions seen by the sliding-window layers (0: 8)")
	fl.IntVar(&cfg.Experts, "experts", 0, "experts per layer: qwen3moe and qwen2moe (0: 8), or llama with experts (mixtral)")
	fl.IntVar(&cfg.ExpertUsed, "experts-used", 2, "experts used per token")
	fl.IntVar(&cfg.ExpertFF, "expert-ff", 0, "qwen3moe/qwen2moe: width of an expert's MLP (0: --ff divided by --experts-used; mixtral's experts have width --ff, qwen2moe's shared expert too)")
	fl.Uint64Var(&cfg.Seed, "weight-seed", 1, "seed of the random weights")
	cmd.MarkFlagRequired("output")
	return cmd
}
