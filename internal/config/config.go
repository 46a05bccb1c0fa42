// Package config holds the one configuration of a serve run. The cobra flags
// of `mistralrs serve` (BindServeFlags, BindGlobalFlags) and the TOML file of
// `mistralrs from-config` (LoadTOML) both fill the same Config from the same
// table of defaults (defaults.go), and both are checked by the same Validate.
package config

import (
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"mistralrs/internal/kvcache"
	"mistralrs/internal/smallfile"
	"mistralrs/internal/tracing"
)

// Config is everything a serve run needs to know before it starts.
type Config struct {
	// Command is the from-config mode: "serve" or "run". Flags leave it "serve".
	Command string
	// DefaultModelID names the model that requests without a model (or with
	// "default") go to; empty means the first model.
	DefaultModelID string

	Global    GlobalConfig
	Server    ServerConfig
	Runtime   RuntimeConfig
	PagedAttn PagedAttnConfig
	Models    []ModelConfig

	origin origin
}

// origin decides how Validate names a bad value: by its flag or its TOML key.
type origin int

const (
	originNone origin = iota
	originFlags
	originTOML
)

// GlobalConfig holds the options valid on every subcommand.
type GlobalConfig struct {
	Seed      *uint64 `toml:"-"` // nil: unset (TOML's seed is decoded through an int64 to reject negatives)
	Log       string  `toml:"log"`
	Verbose   int     `toml:"-"` // -v count; TOML has no equivalent (mistral.rs fixes it at 0 there)
	LogFilter string  `toml:"-"` // RUST_LOG as given; the logging package decides whether it parses
	// TokenSource is the Hugging Face token's source (--token-source,
	// global.token_source): cache, none, literal:TOKEN, env:VAR, path:FILE.
	TokenSource string `toml:"-"`
}

// ServerConfig is the HTTP listener and its observability switches.
type ServerConfig struct {
	Host                   string        `toml:"host"`
	Port                   int           `toml:"port"`
	NoUI                   bool          `toml:"no_ui"`
	DisableAccessLog       bool          `toml:"disable_access_log"`
	AccessLogFormat        string        `toml:"access_log_format"` // "text" or "json"
	AccessLogHealth        bool          `toml:"access_log_health"`
	DisableRequestIDHeader bool          `toml:"disable_request_id_header"`
	DisableMetrics         bool          `toml:"disable_metrics"`
	MaxConnections         int           `toml:"max_connections"`       // 0: no cap
	IdleTimeoutSecs        int           `toml:"idle_timeout_secs"`     // keep-alive idle timeout; 0: never
	BodyTimeoutSecs        int           `toml:"body_timeout_secs"`     // request body read deadline; 0: none
	ShutdownTimeoutSecs    int           `toml:"shutdown_timeout_secs"` // drain time on SIGINT/SIGTERM; at least 1
	ShutdownDelaySecs      int           `toml:"shutdown_delay_secs"`   // readiness 503 while still serving, before the drain; 0: none
	AllowedOrigins         OriginList    `toml:"allowed_origins"`       // CORS origins; ["*"]: any
	AllowedHosts           OriginList    `toml:"allowed_hosts"`         // Host header names; empty: any (loopback names on a loopback --host)
	APIKey                 string        `toml:"api_key"`               // required key; "": none. Never printed.
	APIKeyMetrics          bool          `toml:"api_key_metrics"`       // the key also guards /metrics
	MaxEmbeddingInputs     int           `toml:"max_embedding_inputs"`  // inputs of one /v1/embeddings request; at least 1
	KeepAliveInterval      time.Duration `toml:"-"`                     // KEEP_ALIVE_INTERVAL (ms) only, as in mistral.rs
	GrammarCacheMB         int           `toml:"grammar_cache_mb"`      // compiled grammars kept, in MiB; at least 1

	// Images given by URL (ours; mistral.rs fetches any URL): fetched only
	// when AllowRemoteImages, within a size and a time limit, and never from
	// a non-public address unless AllowPrivateImageHosts.
	AllowRemoteImages      bool `toml:"allow_remote_images"`
	RemoteImageMaxMB       int  `toml:"remote_image_max_mb"`       // at least 1
	RemoteImageTimeoutSecs int  `toml:"remote_image_timeout_secs"` // at least 1
	AllowPrivateImageHosts bool `toml:"allow_private_image_hosts"`

	// OpenTelemetry traces (internal/tracing): off unless an endpoint is
	// set here or in the OTEL_* environment.
	OTLPTracesEndpoint      string `toml:"otlp_traces_endpoint"`
	OTLPCaptureContent      bool   `toml:"otlp_capture_content"`
	OTLPCaptureContentBytes int    `toml:"otlp_capture_content_bytes"` // at least 1
}

// RuntimeConfig is the scheduler and prompt handling shared by all models.
type RuntimeConfig struct {
	MaxSeqs                     int    `toml:"max_seqs"`
	MaxNumBatchedTokens         int    `toml:"max_num_batched_tokens"`
	MaxDecodeStepsBeforePrefill int    `toml:"max_decode_steps_before_prefill"`
	NoKVCache                   bool   `toml:"no_kv_cache"`
	PrefixCacheN                int    `toml:"prefix_cache_n"`
	ChatTemplate                string `toml:"chat_template"`
	JinjaExplicit               string `toml:"jinja_explicit"`
	Threads                     int    `toml:"threads"` // ours; 0: one per core
	// ours: the most embedding tokens in one engine step
	EmbeddingStepTokens int `toml:"embedding_step_tokens"`
	// ours: each multimodal model's encoder cache, in MiB; 0: none
	EncoderCacheMB int `toml:"encoder_cache_mb"`

	// Speculative decoding of the first model (SpeculativeFor); a [[models]]
	// entry's own keys override them for that entry.
	MTP         bool   `toml:"mtp"`           // built-in MTP head: refused by Validate (no supported architecture has one)
	MTPModel    string `toml:"mtp_model"`     // draft model: a .gguf file, a directory or an HF id, resolved like model_id
	MTPNPredict int    `toml:"mtp_n_predict"` // draft tokens per step, 1..engine.MaxSpecTokens
	SpecNgram   int    `toml:"spec_ngram"`    // ours: prompt-lookup n-gram size, 0..MaxSpecNgram; 0: off
}

// PagedAttnConfig is the paged KV cache, global for all models.
type PagedAttnConfig struct {
	Mode      string `toml:"mode"` // "auto", "on" or "off"; auto is on in this engine
	BlockSize int    `toml:"block_size"`
	CacheType string `toml:"cache_type"` // "auto" (f16), "f32", "f16", "bf16", "q8_0", "q4_0" or "f8e4m3"; applies to every KV cache
	// keys' and values' types apart (llama.cpp's -ctk/-ctv); "" follows CacheType
	CacheTypeK string `toml:"cache_type_k"`
	CacheTypeV string `toml:"cache_type_v"`
	// store q8_0/q4_0 rows unrotated (kvcache.Pool.SetRotation)
	NoCacheRotation bool `toml:"no_cache_rotation"`
	// At most one of the three budgets applies; see Budget.
	MemoryMB       *int     `toml:"memory_mb"`
	ContextLen     *int     `toml:"context_len"`
	MemoryFraction *float64 `toml:"memory_fraction"`
}

// ModelConfig is one [[models]] entry (or the model of `serve -m/-f`).
type ModelConfig struct {
	Kind          string          `toml:"kind"` // KindAuto, KindText or KindEmbedding
	ModelID       string          `toml:"model_id"`
	ChatTemplate  string          `toml:"chat_template"`  // overrides runtime.chat_template
	JinjaExplicit string          `toml:"jinja_explicit"` // overrides runtime.jinja_explicit
	Format        ModelFormat     `toml:"format"`
	Device        ModelDevice     `toml:"device"`
	HFRevision    string          `toml:"hf_revision"` // Hugging Face revision (branch, tag or commit) of an HF model_id; "" means main
	Quantization  ModelQuant      `toml:"quantization"`
	Multimodal    ModelMultimodal `toml:"multimodal"`
	Adapter       ModelAdapter    `toml:"adapter"` // LoRA adapters (lora.go)

	// Speculative decoding of this model (ours: mistral.rs gives only the
	// first model a proposer, from [runtime]). Unset (""/nil): the first
	// model takes the [runtime] value, a later one the table's default.
	MTPModel    string `toml:"mtp_model"`
	MTPNPredict *int   `toml:"mtp_n_predict"`
	SpecNgram   *int   `toml:"spec_ngram"`
}

// Model kinds (models.kind; `serve auto|text|multimodal|embedding`). A
// text model serves chat, completions and embeddings; a multimodal one also
// takes images, through its vision projector (mmproj); an embedding model
// serves embeddings only. Auto is multimodal when a projector is given or
// found (ResolveModel), else text.
const (
	KindAuto       = "auto"
	KindText       = "text"
	KindMultimodal = "multimodal"
	KindEmbedding  = "embedding"
)

// ModelFormat is [models.format].
type ModelFormat struct {
	Format        string   `toml:"format"` // "", "gguf" ("plain" and "ggml" are refused)
	QuantizedFile FileList `toml:"quantized_file"`
	// MMProj is the vision projector: mistral.rs's semicolon-separated
	// list, of which this server takes one (Validate refuses more).
	MMProj FileList `toml:"mmproj"`
}

// ModelMultimodal is [models.multimodal]: what a multimodal model's
// requests may carry. mistral.rs sizes its device map by them; here they
// bound each request (the server refuses what exceeds them).
type ModelMultimodal struct {
	MaxEdge        int  `toml:"max_edge"`         // cap of an image's longer side before the projector's sizing; 0: the projector's own
	MaxNumImages   *int `toml:"max_num_images"`   // images in one request; nil in a decoded entry until LoadTOML gives it the default
	MaxImageLength *int `toml:"max_image_length"` // an image has at most this many pixels squared
}

// ModelQuant is [models.quantization]: in-situ quantization at load.
type ModelQuant struct {
	ISQ         string `toml:"isq"`           // ISQ type ("q4k", "q8_0", ...); "": none
	InSituQuant string `toml:"in_situ_quant"` // mistral.rs's alias of isq (LoadTOML moves it to ISQ)
}

// isqNames are the ISQ types the loader computes with (loader.ParseISQ,
// which config cannot import; a test in cmd/mistralrs keeps the two equal):
// mistral.rs's names, case-insensitive, also as GGML types, and its CPU
// levels.
var isqNames = map[string]bool{
	"q4_0": true, "q4_1": true, "q5_0": true, "q5_1": true, "q8_0": true, "q4k": true, "q5k": true, "q6k": true,
	"q4_k": true, "q5_k": true, "q6_k": true, "4": true, "5": true, "6": true, "8": true,
}

// ValidISQ reports whether name is an ISQ type this server supports.
func ValidISQ(name string) bool { return isqNames[strings.ToLower(strings.TrimSpace(name))] }

// ModelDevice is [models.device].
type ModelDevice struct {
	CPU     bool   `toml:"cpu"`      // accepted for compatibility: this engine always runs on the CPU
	HFCache string `toml:"hf_cache"` // Hugging Face hub cache directory to look in
}

// DefaultMemoryFraction is the KV budget when no size is given, as mistral.rs's
// Utilization(0.9); here it is a fraction of physical memory.
const DefaultMemoryFraction = 0.9

// Default returns the configuration with every default of the table applied
// and no models.
func Default() *Config {
	c := &Config{}
	for i := range Options {
		o := &Options[i]
		if o.field != nil {
			setValue(o.field(c), o.Default)
		}
	}
	return c
}

// DefaultModel returns a model entry with the table's per-model defaults.
func DefaultModel() ModelConfig {
	var m ModelConfig
	for i := range Options {
		o := &Options[i]
		if o.modelField != nil {
			setValue(o.modelField(&m), o.Default)
		}
	}
	return m
}

// DemoModel reports whether no model was named (serve without -m and -f):
// the embedded demo model is served then.
func (c *Config) DemoModel() bool {
	if len(c.Models) == 0 {
		return true
	}
	m := c.Models[0]
	return len(c.Models) == 1 && m.ModelID == "" && len(m.Format.QuantizedFile) == 0
}

// DefaultModelIndex returns the index of the default model: the one named by
// DefaultModelID, else the first. Validate guarantees the name matches.
func (c *Config) DefaultModelIndex() int {
	for i, m := range c.Models {
		if c.DefaultModelID != "" && m.ModelID == c.DefaultModelID {
			return i
		}
	}
	return 0
}

// ChatTemplateFor returns the template file for model i, empty for the one in
// the GGUF. A jinja_explicit file wins over a chat_template, and a model's
// own value wins over the [runtime] one.
func (c *Config) ChatTemplateFor(i int) string {
	m := c.Models[i]
	for _, s := range []string{m.JinjaExplicit, c.Runtime.JinjaExplicit, m.ChatTemplate, c.Runtime.ChatTemplate} {
		if s != "" {
			return s
		}
	}
	return ""
}

// Enabled reports whether the paged KV cache is used: auto means on here,
// since this engine's CPU path supports it (mistral.rs turns it off on CPU).
func (p PagedAttnConfig) Enabled() bool { return p.Mode != "off" }

// KVBudget is how big the paged KV pool is: exactly one field is non-zero.
type KVBudget struct {
	MemoryMB   int
	ContextLen int     // tokens of context for one sequence of max length
	Fraction   float64 // of physical memory
}

// Budget resolves the pool size with mistral.rs's TOML precedence: fraction
// over context length over memory; none given → DefaultMemoryFraction.
// (All three at once is an error in Validate, not a silent switch-off.)
func (p PagedAttnConfig) Budget() KVBudget {
	switch {
	case p.MemoryFraction != nil:
		return KVBudget{Fraction: *p.MemoryFraction}
	case p.ContextLen != nil:
		return KVBudget{ContextLen: *p.ContextLen}
	case p.MemoryMB != nil:
		return KVBudget{MemoryMB: *p.MemoryMB}
	}
	return KVBudget{Fraction: DefaultMemoryFraction}
}

// ValueError is a bad setting. It names the TOML key or the flag, whichever
// the value came from.
type ValueError struct {
	Key    string // TOML key, "models[1].model_id" inside [[models]]
	Flag   string // "--port"; empty when the setting has no flag
	Value  any    // nil when the problem is a missing value
	Reason string

	flags bool
}

func (e *ValueError) Error() string {
	val := func() string {
		if s, ok := e.Value.(string); ok {
			return fmt.Sprintf("%q", s)
		}
		if p, ok := e.Value.(FileList); ok {
			return fmt.Sprintf("%q", p.String())
		}
		if p, ok := e.Value.(OriginList); ok {
			return fmt.Sprintf("%q", p.String())
		}
		return fmt.Sprint(e.Value)
	}
	name := e.Key
	if e.flags && e.Flag != "" {
		if e.Value == nil {
			return fmt.Sprintf("%s: %s", e.Flag, e.Reason)
		}
		return fmt.Sprintf("invalid value %s for %s: %s", val(), e.Flag, e.Reason)
	}
	if e.Value == nil {
		return fmt.Sprintf("%s: %s", name, e.Reason)
	}
	return fmt.Sprintf("%s = %s: %s", name, val(), e.Reason)
}

// Validate checks every value; the first problem is returned. Both the flags
// and the TOML path call it, so a value is judged the same either way. The
// sections are checked in the order of the file (top level, [global],
// [server], [runtime], [paged_attn], [[models]]), which decides which of
// several problems is reported.
func (c *Config) Validate() error {
	for _, check := range []func() error{
		c.validateCommand, c.validateGlobal, c.validateServer, c.validateRuntime, c.validatePagedAttn, c.validateModels,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// bad is the ValueError for key, naming its flag when the value came from
// the command line; key may be an entry's "models[i].…".
func (c *Config) bad(key string, value any, format string, args ...any) error {
	e := &ValueError{Key: key, Value: value, Reason: fmt.Sprintf(format, args...), flags: c.origin == originFlags}
	base := key
	if strings.HasPrefix(base, "models[") {
		base = "models" + base[strings.IndexByte(base, ']')+1:]
	}
	if o := OptionByKey(base); o != nil && o.Flag != "" {
		e.Flag = "--" + o.Flag
	}
	return e
}

func (c *Config) validateCommand() error {
	switch c.Command {
	case "serve", "run":
		return nil
	case "":
		return c.bad("command", nil, `missing; from-config files start with command = "serve"`)
	default:
		return c.bad("command", c.Command, `must be "serve" or "run"`)
	}
}

func (c *Config) validateGlobal() error {
	if c.Global.Verbose < 0 {
		return c.bad("global.verbose", c.Global.Verbose, "must not be negative")
	}
	if shown, err := checkTokenSource(c.Global.TokenSource); err != nil {
		return c.bad("global.token_source", shown, "%v", err)
	}
	return nil
}

func (c *Config) validateServer() error {
	s := &c.Server
	if strings.TrimSpace(s.Host) == "" || strings.ContainsAny(s.Host, " \t\r\n/") {
		return c.bad("server.host", s.Host, "must be a host name or IP address")
	}
	if s.Port < 1 || s.Port > 65535 {
		return c.bad("server.port", s.Port, "must be between 1 and 65535")
	}
	if s.AccessLogFormat != "text" && s.AccessLogFormat != "json" {
		return c.bad("server.access_log_format", s.AccessLogFormat, `must be "text" or "json"`)
	}
	if s.OTLPTracesEndpoint != "" {
		if tracing.ValidateEndpoint(s.OTLPTracesEndpoint) != nil {
			return c.bad("server.otlp_traces_endpoint", s.OTLPTracesEndpoint, "must be an http:// or https:// URL with a host")
		}
	}
	if s.OTLPCaptureContentBytes < 1 || s.OTLPCaptureContentBytes > 1<<30 {
		return c.bad("server.otlp_capture_content_bytes", s.OTLPCaptureContentBytes, "must be between 1 and %d", 1<<30)
	}
	if s.ShutdownTimeoutSecs < 1 || s.ShutdownTimeoutSecs > 1<<30 {
		return c.bad("server.shutdown_timeout_secs", s.ShutdownTimeoutSecs, "must be between 1 and %d", 1<<30)
	}
	if s.ShutdownDelaySecs < 0 || s.ShutdownDelaySecs > 1<<30 {
		return c.bad("server.shutdown_delay_secs", s.ShutdownDelaySecs, "must be between 0 and %d", 1<<30)
	}
	if s.MaxEmbeddingInputs < 1 || s.MaxEmbeddingInputs > 1<<30 {
		return c.bad("server.max_embedding_inputs", s.MaxEmbeddingInputs, "must be between 1 and %d", 1<<30)
	}
	if s.KeepAliveInterval <= 0 {
		return c.bad("KEEP_ALIVE_INTERVAL", s.KeepAliveInterval, "must be positive")
	}
	for _, h := range s.AllowedHosts {
		if reason := badHost(h); reason != "" {
			return c.bad("server.allowed_hosts", h, "%s", reason)
		}
	}
	if s.GrammarCacheMB < 1 || s.GrammarCacheMB > 1<<20 {
		return c.bad("server.grammar_cache_mb", s.GrammarCacheMB, "must be between 1 and %d", 1<<20)
	}
	if err := c.validateRemoteImages(); err != nil {
		return err
	}
	return c.validateServerLimits()
}

// validateServerLimits checks the connection limits, where 0 is no limit.
func (c *Config) validateServerLimits() error {
	s := &c.Server
	for _, p := range []struct {
		key string
		v   int
	}{
		{"server.max_connections", s.MaxConnections},
		{"server.idle_timeout_secs", s.IdleTimeoutSecs},
		{"server.body_timeout_secs", s.BodyTimeoutSecs},
	} {
		if p.v < 0 {
			return c.bad(p.key, p.v, "must not be negative (0: no limit)")
		}
		if p.v > 1<<30 {
			return c.bad(p.key, p.v, "must be at most %d", 1<<30)
		}
	}
	return nil
}

func (c *Config) validateRuntime() error {
	r := &c.Runtime
	for _, p := range []struct {
		key string
		v   int
		min int
	}{
		{"runtime.max_seqs", r.MaxSeqs, 1},
		{"runtime.max_num_batched_tokens", r.MaxNumBatchedTokens, 1},
		{"runtime.max_decode_steps_before_prefill", r.MaxDecodeStepsBeforePrefill, 1},
		{"runtime.embedding_step_tokens", r.EmbeddingStepTokens, 1},
		{"runtime.prefix_cache_n", r.PrefixCacheN, 0},
		{"runtime.threads", r.Threads, 0},
		{"runtime.encoder_cache_mb", r.EncoderCacheMB, 0},
	} {
		if p.v < p.min {
			if p.min == 0 {
				return c.bad(p.key, p.v, "must not be negative")
			}
			return c.bad(p.key, p.v, "must be at least %d", p.min)
		}
	}
	if r.Threads > 4096 {
		return c.bad("runtime.threads", r.Threads, "must be at most 4096")
	}
	if r.EncoderCacheMB > 1<<20 {
		return c.bad("runtime.encoder_cache_mb", r.EncoderCacheMB, "must be at most %d", 1<<20)
	}
	if err := checkTemplate(c.bad, "runtime.chat_template", r.ChatTemplate, true); err != nil {
		return err
	}
	if err := checkTemplate(c.bad, "runtime.jinja_explicit", r.JinjaExplicit, false); err != nil {
		return err
	}
	return c.checkSpeculative(c.bad)
}

func (c *Config) validatePagedAttn() error {
	p := &c.PagedAttn
	switch p.Mode {
	case "auto", "on", "off":
	default:
		return c.bad("paged_attn.mode", p.Mode, `must be "auto", "on" or "off"`)
	}
	if p.BlockSize < 1 || p.BlockSize > 1024 {
		return c.bad("paged_attn.block_size", p.BlockSize, "must be between 1 and 1024")
	}
	for _, t := range []struct{ key, val string }{{"paged_attn.cache_type", p.CacheType}, {"paged_attn.cache_type_k", p.CacheTypeK}, {"paged_attn.cache_type_v", p.CacheTypeV}} {
		// "" is for the keys' and values' own types only: it follows cache_type
		if _, err := kvcache.ParseType(t.val); err != nil || (t.val == "" && t.key == "paged_attn.cache_type") {
			return c.bad(t.key, t.val, "must be one of %s", kvcache.TypeNames())
		}
	}
	if p.MemoryMB != nil && *p.MemoryMB <= 0 {
		return c.bad("paged_attn.memory_mb", *p.MemoryMB, "must be positive")
	}
	if p.ContextLen != nil && *p.ContextLen <= 0 {
		return c.bad("paged_attn.context_len", *p.ContextLen, "must be positive")
	}
	if f := p.MemoryFraction; f != nil && (math.IsNaN(*f) || *f <= 0 || *f > 1) {
		return c.bad("paged_attn.memory_fraction", *f, "must be in (0, 1]")
	}
	return c.checkBudgetConflicts()
}

// validateModels checks each [[models]] entry, then what holds across them:
// one cpu setting, and a default_model_id that names one of them.
func (c *Config) validateModels() error {
	if len(c.Models) == 0 {
		if c.origin == originFlags {
			return nil // serve with no model: the demo model
		}
		return fmt.Errorf("Config must define at least one model in [[models]]")
	}
	seen := map[string]int{} // model id -> index of its entry
	cpu := map[bool]bool{}
	for i := range c.Models {
		if err := c.validateModel(i, seen); err != nil {
			return err
		}
		cpu[c.Models[i].Device.CPU] = true
	}
	if len(cpu) > 1 {
		return fmt.Errorf("cpu must be consistent across all models (found both true and false)")
	}
	if err := c.checkLoRABaseModels(seen); err != nil {
		return err
	}
	return c.validateDefaultModelID(seen)
}

// validateModel checks models[i], adding its id to seen, the ids of the
// entries before it.
func (c *Config) validateModel(i int, seen map[string]int) error {
	m := &c.Models[i]
	k := func(name string) string { return fmt.Sprintf("models[%d].%s", i, name) }
	switch m.Kind {
	case KindAuto, KindText, KindMultimodal, KindEmbedding:
	case "diffusion", "speech":
		return c.bad(k("kind"), m.Kind, "not supported by this engine (text, multimodal and embedding models only)")
	default:
		return c.bad(k("kind"), m.Kind, `must be "auto", "text", "multimodal" or "embedding"`)
	}
	if m.ModelID == "" && !(c.origin == originFlags && i == 0) {
		return c.bad(k("model_id"), nil, "missing; every [[models]] entry needs a model_id")
	}
	if m.ModelID != "" {
		if j, dup := seen[m.ModelID]; dup {
			return c.bad(k("model_id"), m.ModelID, "already used by models[%d]; model ids must be unique", j)
		}
		seen[m.ModelID] = i
	}
	if err := checkTemplate(c.bad, k("chat_template"), m.ChatTemplate, true); err != nil {
		return err
	}
	if err := checkTemplate(c.bad, k("jinja_explicit"), m.JinjaExplicit, false); err != nil {
		return err
	}
	if err := c.checkModelSpeculative(c.bad, i); err != nil {
		return err
	}
	if q := m.Quantization.ISQ; q != "" && !ValidISQ(q) {
		return c.bad(k("quantization.isq"), q, "not a supported ISQ type (q4_0, q4_1, q5_0, q5_1, q8_0, q4k, q5k, q6k)")
	}
	if err := c.checkEmbeddingModel(i); err != nil {
		return err
	}
	if err := c.checkMultimodal(i); err != nil {
		return err
	}
	if err := c.checkAdapter(i); err != nil {
		return err
	}
	if _, err := m.format(); err != nil {
		if ve, ok := err.(*ValueError); ok {
			return c.bad(k(ve.Key), ve.Value, "%s", ve.Reason)
		}
		return err
	}
	return nil
}

// validateDefaultModelID checks that default_model_id, when set, is one of
// the ids in seen.
func (c *Config) validateDefaultModelID(seen map[string]int) error {
	if c.DefaultModelID == "" {
		return nil
	}
	if _, ok := seen[c.DefaultModelID]; ok {
		return nil
	}
	ids := make([]string, 0, len(c.Models))
	for _, m := range c.Models {
		ids = append(ids, fmt.Sprintf("%q", m.ModelID))
	}
	return c.bad("default_model_id", c.DefaultModelID, "matches no model_id (models: %s)", strings.Join(ids, ", "))
}

// checkBudgetConflicts: on the command line the three size flags exclude each
// other (clap's conflicts); in TOML two resolve by precedence (LoadTOML warns)
// and all three are an error, where mistral.rs silently turns paging off.
func (c *Config) checkBudgetConflicts() error {
	p := &c.PagedAttn
	set := []string{}
	if p.MemoryMB != nil {
		set = append(set, "memory_mb")
	}
	if p.ContextLen != nil {
		set = append(set, "context_len")
	}
	if p.MemoryFraction != nil {
		set = append(set, "memory_fraction")
	}
	if c.origin == originFlags && len(set) >= 2 {
		flag := map[string]string{"memory_mb": "--pa-memory-mb", "context_len": "--pa-context-len", "memory_fraction": "--pa-memory-fraction"}
		return fmt.Errorf("the argument '%s' cannot be used with '%s'", flag[set[0]], flag[set[1]])
	}
	if len(set) == 3 {
		return fmt.Errorf("paged_attn: memory_mb, context_len and memory_fraction are all set; set at most one " +
			"(memory_fraction wins over context_len, which wins over memory_mb)")
	}
	return nil
}

type badFunc func(key string, value any, format string, args ...any) error

// checkTemplate fails early on a template file that cannot be read, so that a
// bad config never starts loading models.
func checkTemplate(bad badFunc, key, path string, jsonOK bool) error {
	if path == "" {
		return nil
	}
	ext := strings.ToLower(filepath.Ext(path))
	if ext != ".jinja" && !(jsonOK && ext == ".json") {
		if jsonOK {
			return bad(key, path, "must be a .jinja file or a tokenizer_config .json file")
		}
		return bad(key, path, "must be a .jinja file")
	}
	st, err := os.Stat(path)
	if err != nil {
		return bad(key, path, "cannot read the file: %v", unwrapPathError(err))
	}
	if st.IsDir() {
		return bad(key, path, "is a directory, not a file")
	}
	// The loader reads the file whole: refuse now what it would refuse then.
	if p := smallfile.Problem(smallfile.Check(path, smallfile.ChatTemplateLimit(path))); p != "" {
		return bad(key, path, "%s", p)
	}
	return nil
}

// unwrapPathError drops the path from an *os.PathError, which the caller
// already prints.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// format returns the model's file format: "gguf", from --format or from the
// -f suffixes. Errors carry the key relative to the model entry.
func (m *ModelConfig) format() (string, error) {
	exts := map[string]bool{}
	for _, f := range m.Format.QuantizedFile {
		switch e := strings.ToLower(filepath.Ext(f)); e {
		case ".gguf", ".ggml":
			exts[e] = true
		}
	}
	if len(exts) > 1 {
		return "", &ValueError{Key: "format.quantized_file", Value: m.Format.QuantizedFile, Reason: "mixes .gguf and .ggml files"}
	}
	f := m.Format.Format
	if f == "" {
		switch {
		case exts[".ggml"]:
			f = "ggml"
		default:
			// A directory, an HF id or .gguf files: only GGUF is loadable here.
			f = "gguf"
		}
	}
	switch f {
	case "gguf":
		return f, nil
	case "plain", "ggml":
		return "", &ValueError{Key: "format.format", Value: f, Reason: "not supported by this engine (GGUF files only)"}
	}
	return "", &ValueError{Key: "format.format", Value: f, Reason: `must be "gguf", "plain" or "ggml"`}
}

// badHost says what is wrong with an allowed_hosts entry, "" when nothing:
// an entry is a host name or IP address without scheme, path or port,
// ".domain" for a domain and its subdomains, or "*".
func badHost(h string) string {
	switch {
	case h == "*":
		return ""
	case strings.Contains(h, "/"):
		return "must be a host name, not a URL (no scheme or path)"
	case strings.ContainsAny(h, " \t\"@,?#"):
		return "must be a host name or IP address"
	}
	if _, _, err := net.SplitHostPort(h); err == nil {
		return "must not have a port (any port is accepted)"
	}
	return ""
}
