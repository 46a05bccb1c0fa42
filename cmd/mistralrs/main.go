// Command mistralrs serves and runs GGUF language models with a pure-Go
// engine: `serve` and `from-config` (HTTP, OpenAI-compatible), `run`
// (terminal chat), `bench` (llama-bench style throughput) and `tokenize`.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"mistralrs/internal/config"
)

func main() {
	root := newRootCmd()
	// "--lora A B" (several values after one flag, as in mistral.rs):
	// pflag takes one value per flag.
	root.SetArgs(config.ExpandFlagValues(os.Args[1:]))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "mistralrs",
		Short:         "Serve and run GGUF language models with a pure-Go engine",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// The global flags (valid on every subcommand, as in mistral.rs) come
	// from the option table; only their [global] part of globals is used.
	globals := &config.Config{}
	config.BindGlobalFlags(root.PersistentFlags(), globals)
	g := &globals.Global
	root.AddCommand(newServeCmd(g), newFromConfigCmd(g), newRunCmd(g), newBenchCmd(g), newTokenizeCmd(), newGenModelCmd(), newQuantizeCmd())
	return root
}
