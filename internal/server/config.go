package server

import (
	"os"
	"strings"
	"time"

	"mistralrs/internal/config"
	"mistralrs/internal/demo"
	"mistralrs/internal/httpguard"
	"mistralrs/internal/loader"
	"mistralrs/internal/observe"
	"mistralrs/internal/tracing"
)

// TracingConfig is what the configuration says about OpenTelemetry traces;
// the OTEL_* environment does the rest (tracing.New).
func TracingConfig(cfg *config.Config) tracing.Config {
	return tracing.Config{
		Endpoint:       cfg.Server.OTLPTracesEndpoint,
		CaptureContent: cfg.Server.OTLPCaptureContent,
		CaptureBytes:   cfg.Server.OTLPCaptureContentBytes,
		Logger:         observe.Logger(observe.TargetServer),
	}
}

// OptionsFromConfig turns a validated configuration (from the serve flags or
// a from-config TOML file: both arrive here) into server options: the model
// files, and the draft models of speculative decoding, are found on disk now
// and loaded by New. Each model gets its own speculative settings
// (config.SpeculativeFor: [runtime]'s are the first model's) and its dynamic
// LoRA (config.LoRAFor: preloaded adapters found on disk now). With no model
// named, the embedded demo model is served and demoModel is true.
func OptionsFromConfig(cfg *config.Config) (opts Options, demoModel bool, err error) {
	oo := observe.DefaultOptions()
	oo.AccessLog = !cfg.Server.DisableAccessLog
	oo.AccessLogFormat = cfg.Server.AccessLogFormat
	oo.AccessLogHealth = cfg.Server.AccessLogHealth
	oo.RequestIDHeader = !cfg.Server.DisableRequestIDHeader
	oo.Metrics = !cfg.Server.DisableMetrics
	if !cfg.Server.AllowedOrigins.Any() {
		oo.AllowedOrigins = append([]string(nil), cfg.Server.AllowedOrigins...)
	}
	opts = Options{
		Observe:   &oo,
		KeepAlive: cfg.Server.KeepAliveInterval,
		Seed:      cfg.Global.Seed,
		Engine:    cfg.EngineOptions(),
		// The configuration's 0 means no limit; the options' 0 the default.
		MaxConnections:  orNone(cfg.Server.MaxConnections),
		IdleTimeout:     time.Duration(orNone(cfg.Server.IdleTimeoutSecs)) * time.Second,
		BodyTimeout:     time.Duration(orNone(cfg.Server.BodyTimeoutSecs)) * time.Second,
		ShutdownTimeout: time.Duration(cfg.Server.ShutdownTimeoutSecs) * time.Second,
		AllowedHosts:    allowedHosts(cfg.Server.AllowedHosts, cfg.Server.Host),
		APIKey:          cfg.Server.APIKey,
		APIKeyMetrics:   cfg.Server.APIKeyMetrics,
		NoUI:            cfg.Server.NoUI,

		GrammarCacheBytes: int64(cfg.Server.GrammarCacheMB) << 20,
	}
	opts.ShutdownDelay = time.Duration(cfg.Server.ShutdownDelaySecs) * time.Second
	opts.MaxEmbeddingInputs = cfg.Server.MaxEmbeddingInputs
	opts.AllowRemoteImages = cfg.Server.AllowRemoteImages
	opts.RemoteImageMaxBytes = int64(cfg.Server.RemoteImageMaxMB) << 20
	opts.RemoteImageTimeout = time.Duration(cfg.Server.RemoteImageTimeoutSecs) * time.Second
	opts.AllowPrivateImageHosts = cfg.Server.AllowPrivateImageHosts
	if cfg.DemoModel() {
		spec := ModelSpec{ID: demo.ID, Load: demo.Load}
		if err := addSpeculative(&spec, cfg, 0); err != nil {
			return Options{}, false, err
		}
		opts.Models = []ModelSpec{spec}
		return opts, true, nil
	}
	for i, mc := range cfg.Models {
		src, err := config.ResolveModel(mc, nil)
		if err != nil {
			return Options{}, false, err
		}
		// Served under model_id as written (so default_model_id and requests
		// name it as the file does), else under the file's name.
		id := src.ID
		lo := loader.Options{ID: id, ChatTemplatePath: cfg.ChatTemplateFor(i), ISQ: mc.Quantization.ISQ, MMProj: src.MMProj}
		if lo.ISQ != "" {
			lo.ISQStatus = os.Stderr // progress and the summary line
		}
		path := src.Files[0]
		spec := ModelSpec{
			ID:     id,
			Path:   strings.Join(src.Files, ";"),
			Load:   func() (*loader.Model, error) { return loader.Load(path, lo) },
			Kind:   KindText,
			MMProj: src.MMProj,
		}
		switch {
		case mc.Kind == config.KindEmbedding:
			spec.Kind = KindEmbedding
		case src.MMProj != "":
			// auto with a projector found, or multimodal (which has one).
			spec.Kind = KindMultimodal
			spec.Images = mc.ImageLimits()
		}
		if err := addSpeculative(&spec, cfg, i); err != nil {
			return Options{}, false, err
		}
		if spec.LoRA, err = cfg.LoRAFor(i, nil); err != nil {
			return Options{}, false, err
		}
		opts.Models = append(opts.Models, spec)
	}
	opts.DefaultModel = opts.Models[cfg.DefaultModelIndex()].ID
	return opts, false, nil
}

// allowedHosts is the Host check of a configuration: the list as given, or
// with none given and a loopback listen address (--host 127.0.0.1,
// localhost, ::1), only the loopback names (with any port), since no other
// name can reach such a server but through DNS rebinding. With none given
// and any other address, every host is accepted, as mistral.rs does: a
// server on 0.0.0.0 is reached under names it cannot know.
func allowedHosts(list config.OriginList, listen string) []string {
	if len(list) > 0 {
		return append([]string(nil), list...)
	}
	if httpguard.IsLoopback(listen) {
		return append([]string(nil), httpguard.LoopbackHosts...)
	}
	return nil
}

// orNone maps a configuration's 0 (no limit) to the options' -1.
func orNone(v int) int {
	if v == 0 {
		return -1
	}
	return v
}

// addSpeculative gives model i its speculative settings and, when it has a
// draft model, finds the draft's files and how to load them.
func addSpeculative(spec *ModelSpec, cfg *config.Config, i int) error {
	sp := cfg.SpeculativeFor(i)
	spec.Spec = &SpecOptions{Tokens: sp.Tokens, Ngram: sp.Ngram}
	src, err := cfg.ResolveDraft(i)
	if err != nil || src == nil {
		return err
	}
	path := src.Files[0]
	lo := loader.Options{ID: src.ID}
	spec.DraftPath = strings.Join(src.Files, ";")
	spec.LoadDraft = func() (*loader.Model, error) { return loader.Load(path, lo) }
	return nil
}
