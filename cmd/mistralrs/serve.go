package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"mistralrs/internal/config"
	"mistralrs/internal/demo"
	"mistralrs/internal/observe"
	"mistralrs/internal/server"
	"mistralrs/internal/tracing"
)

func newServeCmd(g *config.GlobalConfig) *cobra.Command {
	cfg := config.Default()
	run := func(kind string) func(cmd *cobra.Command, args []string) error {
		return func(cmd *cobra.Command, args []string) error {
			cfg.Global.Verbose = g.Verbose
			cfg.Global.Log = g.Log
			cfg.Global.TokenSource = g.TokenSource
			if g.Seed != nil {
				seed := *g.Seed
				cfg.Global.Seed = &seed
			}
			if kind != "" {
				if cfg.DemoModel() {
					return fmt.Errorf("serve %s needs a model: -m MODEL_ID or -f FILE.gguf (only the bare `serve` runs the embedded demo model)", kind)
				}
				if err := refuseMultimodalFlags(cmd, kind); err != nil {
					return err
				}
				cfg.Models[0].Kind = kind
			}
			warns := cfg.ApplyEnv(nil)
			if err := cfg.Validate(); err != nil {
				return err
			}
			if cfg.DemoModel() && cfg.Models[0].Quantization.ISQ != "" {
				return fmt.Errorf("--isq needs a model (-m or -f); the embedded demo model is not quantized")
			}
			if cfg.DemoModel() && len(cfg.Models[0].Format.MMProj) > 0 {
				return fmt.Errorf("--mmproj needs a model (-m or -f); the embedded demo model takes no images")
			}
			if flag := cfg.AdapterFlagGiven(); cfg.DemoModel() && flag != "" {
				return fmt.Errorf("%s needs a model (-m or -f); the embedded demo model takes no LoRA adapters", flag)
			}
			return serveConfig(cmd, cfg, warns)
		}
	}
	cmd := &cobra.Command{
		Use:   "serve [-m MODEL_ID] [-f FILE.gguf] | serve [FLAGS] auto|text|multimodal|embedding -m MODEL_ID",
		Short: "Serve a model over an OpenAI-compatible HTTP API",
		Long: "Serve a model over an OpenAI-compatible HTTP API (chat and text completions,\n" +
			"streaming and not, and embeddings), with access logs, request ids and Prometheus metrics.\n" +
			"-m names a local directory holding a GGUF model or a Hugging Face id (org/name, downloaded\n" +
			"into the Hugging Face cache at startup when missing); -f names GGUF files. Without either, the embedded demo\n" +
			"model is served (stories260K: it writes short children's stories). --mtp-model (a draft model with the\n" +
			"same vocabulary) or --spec-ngram (prompt lookup) turns on speculative decoding.\n" +
			"The subcommands name the model's kind, as in mistral.rs: `serve auto` is the bare form, multimodal\n" +
			"when a vision projector is given (--mmproj) or found beside the model (or in its Hugging Face\n" +
			"repository), else text; `serve multimodal` needs the projector, `serve text` never loads one;\n" +
			"`serve embedding` serves the model for /v1/embeddings only. They need -m or -f; the flags may\n" +
			"come before or after the subcommand.",
		Args: serveArgs,
		RunE: run(""),
	}
	// Persistent: the kind subcommands take every serve flag.
	config.BindServeFlags(cmd.PersistentFlags(), cfg)
	for _, k := range []struct{ kind, short string }{
		{config.KindAuto, "Serve a model by its kind: multimodal when a vision projector is given or found, else text"},
		{config.KindText, "Serve a text model: chat, completions and embeddings"},
		{config.KindMultimodal, "Serve a model with its vision projector (--mmproj, or the one found beside it): text and images"},
		{config.KindEmbedding, "Serve a model for embeddings only (POST /v1/embeddings; chat and completions are refused)"},
	} {
		cmd.AddCommand(&cobra.Command{
			Use:   k.kind + " -m MODEL_ID [-f FILE.gguf]",
			Short: k.short,
			Args:  serveArgs,
			RunE:  run(k.kind),
		})
	}
	// Flag aliases (--lora-modules, --max-lora-rank) on serve and on each
	// subcommand, which parses the serve flags in its own set.
	cmd.SetGlobalNormalizationFunc(config.NormalizeFlagName)
	return cmd
}

// refuseMultimodalFlags: as in mistral.rs, `serve text` and `serve
// embedding` have no multimodal flag group.
func refuseMultimodalFlags(cmd *cobra.Command, kind string) error {
	if kind != config.KindText && kind != config.KindEmbedding {
		return nil
	}
	for _, name := range config.MultimodalFlags() {
		if cmd.Flags().Changed(name) {
			return fmt.Errorf("--%s cannot be used with `serve %s`: a %s model takes no images (use `serve multimodal` or `serve auto`)", name, kind, kind)
		}
	}
	return nil
}

// serveArgs refuses arguments, with a hint for `--spec-ngram 5`: the flag's
// value is optional, so a size must follow an "=".
func serveArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 && cmd.Flags().Changed("spec-ngram") {
		if _, err := strconv.Atoi(args[0]); err == nil {
			return fmt.Errorf("--spec-ngram takes its size after an equals sign: --spec-ngram=%s (alone it means 3)", args[0])
		}
	}
	return cobra.NoArgs(cmd, args)
}

// serveConfig is the one server path of `serve` and `from-config`: logging,
// models, listener, startup lines, then serving until SIGINT or SIGTERM.
func serveConfig(cmd *cobra.Command, cfg *config.Config, warns []config.Warning) error {
	rl, set := os.LookupEnv("RUST_LOG")
	filter, filterErr := observe.ChooseFilter(cfg.Global.Verbose, rl, set)
	slog.SetDefault(slog.New(observe.NewTracingHandler(cmd.OutOrStdout(), filter)))
	log := observe.Logger(observe.TargetCLI)
	if filterErr != nil {
		log.Warn(filterErr.Error())
	}
	for _, w := range warns {
		log.Warn("config: " + w.String())
	}

	// Hugging Face models not yet in the cache are downloaded here, at
	// startup; the server itself never reaches the network.
	if err := cfg.Fetch(cmd.Context(), config.FetchOptions{Progress: cmd.ErrOrStderr()}); err != nil {
		return err
	}
	opts, demoModel, err := server.OptionsFromConfig(cfg)
	if err != nil {
		return err
	}
	if demoModel {
		log.Warn(strings.TrimPrefix(demo.Warning, "warning: "))
	}
	if cfg.Global.Log != "" {
		pl, err := observe.OpenPayloadLog(cfg.Global.Log)
		if err != nil {
			return err
		}
		defer pl.Close()
		opts.PayloadLog = pl
		log.Info("Logging requests and responses to " + cfg.Global.Log)
	}
	tp, err := tracing.New(cmd.Context(), server.TracingConfig(cfg))
	if err != nil {
		return err
	}
	if tp != nil {
		// Normally flushed by Serve after the drain; this covers the
		// startup errors below.
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Server.ShutdownTimeoutSecs)*time.Second)
			defer cancel()
			_ = tp.Shutdown(ctx)
		}()
		opts.Tracing = tp
		log.Info("Sending OpenTelemetry traces to " + tp.Target())
	}
	srv, err := server.New(opts)
	if err != nil {
		return err
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Server.Host, strconv.Itoa(cfg.Server.Port)))
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	srvLog := observe.Logger(observe.TargetServer)
	for _, line := range srv.StartupLines(cfg.Server.Host, port, accessLogDescription(&cfg.Server)) {
		srvLog.Info(line)
	}
	srv.LogRoutes()

	ctx, stop := shutdownSignals(cmd.Context(), srvLog)
	defer stop()
	if err := srv.Serve(ctx, ln); err != nil {
		return err
	}
	srvLog.Info("Server stopped")
	return nil
}

// shutdownSignals returns a context that ends on the first SIGINT or
// SIGTERM, which starts the graceful shutdown. A second one exits the
// process at once (status 130) once its log line is written: the logs are
// unbuffered, so every line written before is out.
func shutdownSignals(parent context.Context, log *slog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	sigc := make(chan os.Signal, 2)
	signal.Notify(sigc, os.Interrupt, syscall.SIGTERM)
	quit := make(chan struct{})
	go func() {
		select {
		case <-sigc:
		case <-quit:
			return
		}
		log.Info("Send SIGINT or SIGTERM again to exit at once")
		cancel()
		select {
		case sig := <-sigc:
			log.Warn(fmt.Sprintf("Second %v: exiting without waiting for running requests", sig))
			os.Exit(130)
		case <-quit:
		}
	}()
	return ctx, func() {
		signal.Stop(sigc)
		close(quit)
		cancel()
	}
}

// accessLogDescription says which access log is in use, for the startup lines.
func accessLogDescription(s *config.ServerConfig) string {
	if s.DisableAccessLog {
		return "disabled (--disable-access-log)"
	}
	d := "text format (request started / request completed lines)"
	if s.AccessLogFormat == observe.FormatJSON {
		d = "json format (one JSON object per line)"
	}
	if s.AccessLogHealth {
		d += ", housekeeping requests included"
	}
	return d
}
