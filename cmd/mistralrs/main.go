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

// globalFlags are valid on every subcommand, as in mistral.rs.
type globalFlags struct {
	verbose int
	seed    uint64
	seedSet bool
	logPath string
	// tokenSource is --token-source: where a Hugging Face download's token comes from.
	tokenSource string
}

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:           "mistralrs",
		Short:         "Serve and run GGUF language models with a pure-Go engine",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, args []string) {
			g.seedSet = cmd.Flags().Changed("seed")
		},
	}
	pf := root.PersistentFlags()
	pf.CountVarP(&g.verbose, "verbose", "v", "log verbosity: -v debug, -vv trace")
	pf.Uint64Var(&g.seed, "seed", 0, "random seed (sampling is reproducible with the same seed)")
	pf.StringVarP(&g.logPath, "log", "l", "", "append every request, response and error to this file")
	pf.StringVar(&g.tokenSource, "token-source", "cache", config.OptionByKey("global.token_source").Usage)
	root.AddCommand(newServeCmd(g), newFromConfigCmd(g), newRunCmd(g), newBenchCmd(g), newTokenizeCmd(g), newGenModelCmd(), newQuantizeCmd())
	return root
}
