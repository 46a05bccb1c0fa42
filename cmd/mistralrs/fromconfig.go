package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"mistralrs/internal/config"
)

func newFromConfigCmd(g *globalFlags) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "from-config -f config.toml",
		Short: "Serve the models of a TOML configuration file",
		Long: "Serve the models of a TOML configuration file: command = \"serve\", default_model_id,\n" +
			"[global], [server], [runtime], [paged_attn] and one [[models]] entry per model (each\n" +
			"gets its own engine; the first is the default unless default_model_id names another).\n" +
			"Unknown keys are reported as warnings. -l, --seed and the other global flags come from\n" +
			"the file's [global] section; -v still sets the log verbosity.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, warns, err := config.LoadTOML(file)
			if err != nil {
				for _, w := range warns {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning: config:", w.String())
				}
				return err
			}
			if cfg.Command != "serve" {
				return fmt.Errorf("%s: command = %q is not served by from-config; use command = \"serve\" (chat in the terminal with `mistralrs run`)", file, cfg.Command)
			}
			cfg.Global.Verbose = g.verbose
			warns = append(warns, cfg.ApplyEnv(nil)...)
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			return serveConfig(cmd, cfg, warns)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "configuration file (.toml)")
	_ = cmd.MarkFlagRequired("file")
	return cmd
}
