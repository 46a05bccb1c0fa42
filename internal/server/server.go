// Package server is the OpenAI-compatible HTTP server of `mistralrs serve`
// and `mistralrs from-config`: the routes of mistral.rs's router (chat and
// text completions, streaming and not; model listing and management; health,
// metrics, Swagger UI and the OpenAPI document) over one engine per model,
// wrapped in the observability layer of package observe.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"mistralrs/internal/config"
	"mistralrs/internal/engine"
	"mistralrs/internal/loader"
	"mistralrs/internal/observe"
	"mistralrs/internal/server/anthropic"
	"mistralrs/internal/server/gen"
	"mistralrs/internal/server/openai"
	"mistralrs/internal/server/responses"
	"mistralrs/internal/tracing"
	"mistralrs/internal/ui"
)

// Defaults of the server's timings.
const (
	DefaultKeepAlive          = 10 * time.Second // KEEP_ALIVE_INTERVAL
	DefaultThroughputInterval = 5 * time.Second  // the engine's periodic log line
)

// Options configure a Server.
type Options struct {
	// Models are served in this order; each gets its own engine.
	Models []ModelSpec
	// DefaultModel is the id requests without a model (or with "default")
	// go to; empty: the first model.
	DefaultModel string
	// Observe configures the observability layer; its Models resolver and
	// Routes are set by the server. The zero value means
	// observe.DefaultOptions().
	Observe *observe.Options
	// KeepAlive is the SSE keep-alive interval (0: DefaultKeepAlive).
	KeepAlive time.Duration
	// Seed seeds sampling for requests that carry no seed (--seed).
	Seed *uint64
	// Engine configures each model's engine (scheduler, KV cache, threads,
	// speculative decoding unless a ModelSpec's Spec replaces it); the zero
	// value means config.DefaultEngineOptions(). Its Draft is ignored: each
	// model's draft comes from its ModelSpec.LoadDraft.
	Engine engine.Options
	// Tracing, when set, is the OpenTelemetry provider (tracing.New): the
	// HTTP layer starts a server span per API request, and Serve flushes
	// the spans after the drain. Nil: tracing off.
	Tracing *tracing.Provider
	// PayloadLog, when set, records every request, response and error (-l).
	PayloadLog *observe.PayloadLog
	// Logger receives the server's own lines (startup, model loading); nil
	// means observe.Logger(observe.TargetServer). EngineLogger receives the
	// periodic throughput line; nil means observe.Logger(observe.TargetEngine).
	Logger       *slog.Logger
	EngineLogger *slog.Logger
	// ThroughputInterval is the period of the throughput line (0: DefaultThroughputInterval).
	ThroughputInterval time.Duration
	// ShutdownTimeout bounds how long Serve waits for running requests once
	// its context ends (0: the default of config's table). Shortly before it
	// ends, generations still running are canceled so their streams can end
	// with a final chunk.
	ShutdownTimeout time.Duration
	// ShutdownDelay is the pre-stop delay: once Serve's context ends,
	// readiness answers 503 while every route still serves for this long,
	// so that load balancers take the server out before it stops accepting
	// (0: none; config's table holds the command line's default).
	ShutdownDelay time.Duration
	// ResponsesMaxStored and ResponsesMaxBytes bound the stored Responses
	// API objects, least recently used evicted first (0:
	// DefaultResponsesMaxStored, DefaultResponsesMaxBytes).
	ResponsesMaxStored int
	ResponsesMaxBytes  int64
	// MaxEmbeddingInputs is the most inputs one embeddings request may
	// hold; more are refused with a 422 (0: the default of config's table).
	MaxEmbeddingInputs int
	// MaxConnections caps the connections open at once; more clients wait
	// until one closes (0: the default of config's table; negative: no cap).
	MaxConnections int
	// IdleTimeout closes a keep-alive connection idle this long, and
	// BodyTimeout bounds the time to read a request body once its headers
	// are in (it never limits a response). 0: the defaults of config's table;
	// negative: none.
	IdleTimeout time.Duration
	BodyTimeout time.Duration
	// AllowedHosts, when not empty, are the host names the Host header may
	// name (httpguard.Hosts: exact names, ".domain" suffixes, "*" for any);
	// other requests get 400. Empty: any host.
	AllowedHosts []string
	// APIKey, when not empty, is required on every route but the
	// housekeeping ones (see guard.go); APIKeyMetrics requires it on
	// /metrics too. Never logged.
	APIKey        string
	APIKeyMetrics bool
	// Images given by URL: fetched only when AllowRemoteImages (else only
	// data URLs and inline base64 images are taken), each at most
	// RemoteImageMaxBytes and within RemoteImageTimeout (0: config's defaults), and never from a
	// loopback, private, link-local or other non-public address unless
	// AllowPrivateImageHosts (config's server.allow_remote_images, …).
	AllowRemoteImages      bool
	RemoteImageMaxBytes    int64
	RemoteImageTimeout     time.Duration
	AllowPrivateImageHosts bool
	// GrammarCacheBytes bounds the compiled grammars kept for reuse, with
	// their matchers' caches (0: gen.DefaultGrammarBudget).
	GrammarCacheBytes int64
	// NoUI leaves out the web UI (package ui) at /ui and under it (--no-ui):
	// those paths answer 404.
	NoUI bool
	// LoRAAPI configures the LoRA adapter routes; nil: from the environment
	// (LoRAAPIFromEnv), as mistral.rs reads it.
	LoRAAPI *LoRAAPI

	// loraLoad, when set, replaces how adapter files are read (tests).
	loraLoad loraLoadFunc
}

// Server serves the models over HTTP.
type Server struct {
	base      *gen.Base // what the dialects share: models, settings, grammar cache
	openai    *openai.API
	anthropic *anthropic.API
	opts      Options
	obs       *observe.HTTPLayer
	models    *models
	mux       *http.ServeMux
	handler   http.Handler
	routes    []route    // the route table (the UI's rows are not in it)
	index     routeIndex // every row by path, for the guard
	log       *slog.Logger
	engineLog *slog.Logger
	created   int64 // unix seconds, the `created` of /v1/models
	metricsOn bool
	responses *responses.API // with its stored and background responses
	lora      *loraRoutes
	// drain ends when the shutdown's drain time is over: generations still
	// running are canceled then (see genContext).
	drain     context.Context
	stopDrain context.CancelFunc
	// draining is set by the first shutdown signal: readiness answers 503
	// from then on (ready.go).
	draining atomic.Bool
}

// New loads every model and builds the handler.
func New(opts Options) (*Server, error) {
	opts = withDefaults(opts)
	s := &Server{opts: opts, log: opts.Logger, engineLog: opts.EngineLogger, created: time.Now().Unix()}
	s.drain, s.stopDrain = context.WithCancel(context.Background())
	if s.log == nil {
		s.log = observe.Logger(observe.TargetServer)
	}
	if s.engineLog == nil {
		s.engineLog = observe.Logger(observe.TargetEngine)
	}
	oo := observe.DefaultOptions()
	if opts.Observe != nil {
		oo = *opts.Observe
	}
	s.metricsOn = oo.Metrics
	if err := oo.Validate(); err != nil {
		return nil, err // before the models load
	}
	// The registry is made first, so the engines report to it from the
	// start; the HTTP layer, which needs the served models, comes after them.
	metrics := metricsRegistry(&oo)
	if metrics != nil {
		// Present with tracing off too (0), so dashboards see the family.
		_ = metrics.Registry().Register(opts.Tracing.Collector())
	}
	if tp := opts.Tracing.TracerProvider(); tp != nil {
		oo.Tracer = tp
	}
	loraLoad := opts.loraLoad
	if loraLoad == nil {
		loraLoad = loadLoRAFile
	}
	reg, err := newModelsWith(opts.Models, opts.DefaultModel, s.log, engineFactory(opts.Engine, metrics), loraLoad)
	if err != nil {
		return nil, err
	}
	if err := s.mount(reg, oo, metrics); err != nil {
		reg.close()
		return nil, err
	}
	return s, nil
}

// withDefaults fills the options left at zero: the server's own timings,
// and config's table for the connection limits and the drain time.
func withDefaults(opts Options) Options {
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.ThroughputInterval <= 0 {
		opts.ThroughputInterval = DefaultThroughputInterval
	}
	def := config.Default().Server
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = time.Duration(def.ShutdownTimeoutSecs) * time.Second
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = def.MaxConnections
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = time.Duration(def.IdleTimeoutSecs) * time.Second
	}
	if opts.BodyTimeout == 0 {
		opts.BodyTimeout = time.Duration(def.BodyTimeoutSecs) * time.Second
	}
	if opts.MaxEmbeddingInputs <= 0 {
		opts.MaxEmbeddingInputs = def.MaxEmbeddingInputs
	}
	if opts.RemoteImageMaxBytes <= 0 {
		opts.RemoteImageMaxBytes = int64(def.RemoteImageMaxMB) << 20
	}
	if opts.RemoteImageTimeout <= 0 {
		opts.RemoteImageTimeout = time.Duration(def.RemoteImageTimeoutSecs) * time.Second
	}
	return opts
}

// metricsRegistry is oo's registry (made when oo asks for metrics without
// one), or nil when metrics are off.
func metricsRegistry(oo *observe.Options) *observe.Metrics {
	if !oo.Metrics {
		return nil
	}
	if oo.Registry == nil {
		oo.Registry = observe.NewMetrics()
	}
	return oo.Registry
}

// engineFactory builds each served model's engine with engOpts (config's
// defaults when zero) and the model's own speculative settings, reporting
// its stats to metrics (nil: recorders that do nothing) and the throughput
// line.
func engineFactory(engOpts engine.Options, metrics *observe.Metrics) newEngineFunc {
	if engOpts == (engine.Options{}) {
		engOpts = config.DefaultEngineOptions()
	}
	return func(spec *ModelSpec, m, draft *loader.Model) (*engine.Engine, *engineStats, error) {
		eo := engOpts
		if spec.Spec != nil {
			eo.SpecTokens, eo.SpecNgram = spec.Spec.Tokens, spec.Spec.Ngram
		}
		eo.Draft = draft
		eng, err := engine.New(m, eo)
		if err != nil {
			return nil, nil, err
		}
		stats := newEngineStats(metrics.Engine(), m.Vision != nil)
		if spec.LoRA != nil {
			stats.withLoRAInfo(metrics.Engine(), spec.ID, spec.LoRA.MaxAdapters)
		}
		eng.SetStatsSink(stats.record)
		return eng, stats, nil
	}
}

// mount makes the dialects over the generation seam and the route rows,
// which say everything about the routes: the mux, the guard and the
// observability layer all read them.
func (s *Server) mount(reg *models, oo observe.Options, metrics *observe.Metrics) error {
	opts := &s.opts
	s.base = &gen.Base{Models: reg, PayloadLog: opts.PayloadLog, KeepAlive: opts.KeepAlive, Seed: opts.Seed,
		Log: s.log, Canceled: s.canceledMessage,
		RemoteImages: gen.RemoteImages{Allow: opts.AllowRemoteImages, MaxBytes: opts.RemoteImageMaxBytes,
			Timeout: opts.RemoteImageTimeout, AllowPrivate: opts.AllowPrivateImageHosts}}
	s.base.SetGrammarBudget(opts.GrammarCacheBytes)
	s.openai = openai.New(s.base, opts.MaxEmbeddingInputs)
	s.anthropic = anthropic.New(s.base)
	s.responses = responses.New(s.base, opts.ResponsesMaxStored, opts.ResponsesMaxBytes)
	s.models = reg
	api := LoRAAPIFromEnv(os.Getenv)
	if opts.LoRAAPI != nil {
		api = *opts.LoRAAPI
	}
	var err error
	if s.lora, err = newLoRARoutes(s, api); err != nil {
		return err
	}
	s.routes = s.routeTable(metrics.Handler())
	rows := append(append([]route(nil), s.routes...), uiRoutes(opts.NoUI)...)
	if s.index, err = newRouteIndex(rows); err != nil {
		return err
	}
	oo.Models = reg
	oo.Routes = observeFacts(rows)
	oo.Guard = s.guard(oo.Guard)
	if s.obs, err = observe.New(oo); err != nil {
		return err
	}
	s.mux = http.NewServeMux()
	for _, rt := range rows {
		if rt.handler != nil {
			s.mux.Handle(rt.method+" "+rt.pattern, rt.handler)
		}
	}
	s.handler = s.obs.Handler(s.mux)
	return nil
}

// Handler is the whole server: routes inside the observability layer.
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPLayer returns the HTTP observability layer (metrics registry, engine metrics).
func (s *Server) HTTPLayer() *observe.HTTPLayer { return s.obs }

// DefaultModel returns the default model's id.
func (s *Server) DefaultModel() string { return s.models.DefaultModel() }

// Close frees every model. Call it after Serve returned.
func (s *Server) Close() {
	s.responses.Close() // background responses end first: they hold their models
	s.models.close()
}

// Serve answers requests on ln until ctx ends, then shuts down gracefully:
// readiness answers 503 at once while it keeps serving for ShutdownDelay
// (preStop), then it stops accepting, lets running requests and streams
// finish for up to ShutdownTimeout. A moment before that time is over (drainGrace) it cancels
// the generations still running, so each stream ends with a final chunk
// (finish reason canceled, or its dialect's equivalent) and each access line
// is written; what is still open at the deadline is closed.
// It returns nil after a shutdown, or the error that stopped serving.
// Connections are capped at MaxConnections, closed after IdleTimeout idle,
// and a request body must arrive within BodyTimeout; there is no overall
// read or write timeout, which would cut long streams.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	h := bodyDeadline(s.opts.BodyTimeout, s.handler)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.closeWhileDraining(w)
			h.ServeHTTP(w, r.WithContext(gen.WithDrain(r.Context(), s.drain)))
		}),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       max(s.opts.IdleTimeout, 0),
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	ln = newConnListener(ln, max(s.opts.MaxConnections, 0), s.log)
	tctx, stopThroughput := context.WithCancel(context.Background())
	defer stopThroughput()
	go s.logThroughput(tctx, s.opts.ThroughputInterval)

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	if err := s.preStop(errc); err != nil {
		return err
	}
	s.log.Info("Shutting down: no new connections; waiting for running requests to finish")
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	endGenerations := time.AfterFunc(s.opts.ShutdownTimeout-drainGrace(s.opts.ShutdownTimeout), func() {
		s.log.Warn("Drain time is over: canceling the generations still running")
		s.stopDrain()
	})
	defer endGenerations.Stop()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Warn(fmt.Sprintf("Requests still running after %v; closing them", s.opts.ShutdownTimeout))
		_ = srv.Close()
	}
	// The spans of the requests the drain finished, within what is left of
	// the drain time.
	if err := s.opts.Tracing.Shutdown(sctx); err != nil {
		s.log.Warn(err.Error())
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// drainGrace is how long before the end of the drain time the generations
// still running are canceled: the time their handlers have to write the
// final chunk, [DONE] and the access line before connections are closed.
func drainGrace(timeout time.Duration) time.Duration {
	return min(timeout/2, 2*time.Second)
}

// canceledMessage says why a generation whose client is still connected
// was canceled, for the dialects that end such a stream with an error.
func (s *Server) canceledMessage() string {
	if s.drain.Err() != nil {
		return "the server is shutting down: generation canceled"
	}
	return "generation canceled"
}

// RootURL is the URL clients use to reach a server listening on host:port:
// the unspecified addresses are shown as localhost, as mistral.rs does.
func RootURL(host string, port int) string {
	switch host {
	case "0.0.0.0", "":
		host = "localhost"
	case "::", "[::]":
		host = "[::1]"
	default:
		if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
			host = "[" + host + "]"
		}
	}
	return "http://" + host + ":" + strconv.Itoa(port)
}

// StartupLines are the info lines printed once the server listens.
func (s *Server) StartupLines(host string, port int, accessLog string) []string {
	root := RootURL(host, port)
	hostPort := net.JoinHostPort(host, strconv.Itoa(port))
	lines := []string{
		"Server listening on http://" + hostPort,
		"OpenAI-compatible API: " + root + "/v1",
		"Anthropic-compatible API: " + root,
		"Swagger UI docs: " + root + "/docs",
	}
	if s.opts.NoUI {
		lines = append(lines, "Web UI: disabled (--no-ui)")
	} else {
		lines = append(lines, "Web UI: "+root+ui.Prefix+"/")
	}
	if s.metricsOn {
		lines = append(lines, "Prometheus metrics: "+root+"/metrics")
	} else {
		lines = append(lines, "Prometheus metrics: disabled (GET /metrics answers 503)")
	}
	lines = append(lines, "Access log: "+accessLog)
	switch {
	case s.opts.APIKey == "":
		lines = append(lines, "API key: none (--api-key or MISTRALRS_API_KEY requires one)")
	case s.opts.APIKeyMetrics:
		lines = append(lines, "API key: required on every route but /health, / and the docs (Authorization: Bearer or x-api-key)")
	default:
		lines = append(lines, "API key: required on every route but /health, /, /metrics and the docs (Authorization: Bearer or x-api-key)")
	}
	if len(s.opts.AllowedHosts) == 0 {
		lines = append(lines, "Allowed hosts: any (--allowed-hosts restricts them)")
	} else {
		lines = append(lines, "Allowed hosts: "+strings.Join(s.opts.AllowedHosts, ", "))
	}
	if o := s.obs.AllowedOrigins(); o == nil {
		lines = append(lines, "CORS: any origin (--allowed-origins restricts it)")
	} else {
		lines = append(lines, "CORS: "+strings.Join(o, ", "))
	}
	lines = append(lines, fmt.Sprintf("Default model: %s (GET %s/v1/models lists every model and its status)", s.DefaultModel(), root))
	return lines
}

// LogRoutes prints every route at debug level, as mistral.rs does.
func (s *Server) LogRoutes() {
	for _, rt := range s.routes {
		s.log.Debug(fmt.Sprintf("  Route: %s, Methods: %s", rt.docPath(), rt.method))
	}
}
