package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"mistralrs/internal/config"
)

func newFromConfigCmd(g *config.GlobalConfig) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "from-config -f config.toml",
		Short: "Serve the models of a TOML configuration file (or chat with one: command = \"run\")",
		Long: "Serve the models of a TOML configuration file: command = \"serve\", default_model_id,\n" +
			"[global], [server], [runtime], [paged_attn] and one [[models]] entry per model (each\n" +
			"gets its own engine; the first is the default unless default_model_id names another).\n" +
			"Unknown keys are reported as warnings. -l, --seed and the other global flags come from\n" +
			"the file's [global] section; -v still sets the log verbosity.\n" +
			"command = \"run\" chats in the terminal with the default model instead, as `mistralrs run`.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, warns, err := config.LoadTOML(file)
			if err != nil {
				for _, w := range warns {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning: config:", w.String())
				}
				return err
			}
			cfg.Global.Verbose = g.Verbose
			warns = append(warns, cfg.ApplyEnv(nil)...)
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			if cfg.Command == "run" {
				return runConfig(cmd, cfg, warns)
			}
			return serveConfig(cmd, cfg, warns)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "configuration file (.toml)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}

// runConfig is command = "run": an interactive chat in the terminal with the
// default model of the file, its chat template, threads and [global] seed.
func runConfig(cmd *cobra.Command, cfg *config.Config, warns []config.Warning) error {
	for _, w := range warns {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning: config:", w.String())
	}
	f := defaultRunFlags()
	f.threads = cfg.Runtime.Threads
	if !cfg.DemoModel() {
		i := cfg.DefaultModelIndex()
		if cfg.Models[i].Kind == config.KindEmbedding {
			return fmt.Errorf("command = \"run\" chats with the default model, and %s is an embedding model (kind = \"embedding\")", cfg.Models[i].ModelID)
		}
		if err := config.FetchModel(cmd.Context(), &cfg.Models[i], cfg.Global.TokenSource, config.FetchOptions{Progress: cmd.ErrOrStderr()}); err != nil {
			return err
		}
		src, err := config.ResolveModel(cfg.Models[i], nil)
		if err != nil {
			return err
		}
		f.file, f.mmproj, f.hub.kind = src.Files[0], src.MMProj, cfg.Models[i].Kind
		f.chatTemplate = cfg.ChatTemplateFor(i)
		f.isq = cfg.Models[i].Quantization.ISQ
	}
	return runRun(cmd, &cfg.Global, &f)
}
