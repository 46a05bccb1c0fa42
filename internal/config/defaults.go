package config

import (
	"fmt"
	"time"
)

// Option is one setting: where it lives in the TOML file, which flag sets it,
// and its default. The table below is the only place a default is written;
// Default, DefaultModel, BindServeFlags, BindGlobalFlags, LoadTOML and
// ApplyEnv all read it.
type Option struct {
	Key     string // TOML key ("server.port"; "models.…" inside each [[models]] entry); "" when there is none
	Flag    string // long flag name ("port"); "" when TOML only
	Short   string // one-letter shorthand; "" when none
	Env     string // environment variable that sets it; "" when none
	Default any    // int, bool, string, float64, time.Duration, FileList, OriginList, LoRAList, ByteSize; nil for an unset optional value
	Usage   string

	global bool   // a global flag (BindGlobalFlags), not a serve flag
	count  bool   // a counted flag (-v, -vv)
	bare   string // the value of the flag given alone (pflag's NoOptDefVal); "" when it needs a value
	// field returns a pointer to the setting inside a Config; modelField
	// inside one model entry. Exactly one is set.
	field      func(*Config) any
	modelField func(*ModelConfig) any
}

// Options is the table of every setting. Keep it in this order: global,
// server, runtime, paged attention, models.
var Options = []Option{
	// Top level (TOML only).
	{Key: "command", Default: "serve", Usage: `from-config mode: "serve" or "run"`,
		field: func(c *Config) any { return &c.Command }},
	{Key: "default_model_id", Default: "", Usage: "model for requests that name none (default: the first model)",
		field: func(c *Config) any { return &c.DefaultModelID }},

	// [global]
	{Key: "global.seed", Flag: "seed", global: true, Default: nil, Usage: "random seed (sampling is reproducible with the same seed)",
		field: func(c *Config) any { return &c.Global.Seed }},
	{Key: "global.log", Flag: "log", Short: "l", global: true, Default: "", Usage: "append every request, response and error to this file",
		field: func(c *Config) any { return &c.Global.Log }},
	{Key: "global.token_source", Flag: "token-source", global: true, Default: "cache", Usage: "Hugging Face token source: cache ($HF_TOKEN, else the token file of huggingface-cli login), none, literal:TOKEN, env:VAR or path:FILE",
		field: func(c *Config) any { return &c.Global.TokenSource }},
	{Flag: "verbose", Short: "v", global: true, count: true, Default: 0, Usage: "log verbosity: -v debug, -vv trace",
		field: func(c *Config) any { return &c.Global.Verbose }},
	{Env: "RUST_LOG", Default: "", Usage: "log filter directives; a valid filter wins over -v",
		field: func(c *Config) any { return &c.Global.LogFilter }},

	// [server]
	{Key: "server.port", Flag: "port", Short: "p", Default: 1234, Usage: "HTTP port",
		field: func(c *Config) any { return &c.Server.Port }},
	{Key: "server.host", Flag: "host", Default: "0.0.0.0", Usage: "address to listen on",
		field: func(c *Config) any { return &c.Server.Host }},
	{Key: "server.no_ui", Flag: "no-ui", Default: false, Usage: "do not serve the web UI",
		field: func(c *Config) any { return &c.Server.NoUI }},
	{Key: "server.disable_access_log", Flag: "disable-access-log", Default: false, Usage: "do not write access-log lines",
		field: func(c *Config) any { return &c.Server.DisableAccessLog }},
	{Key: "server.access_log_format", Flag: "access-log-format", Default: "text", Usage: `access-log format: "text" or "json" (one JSON object per line)`,
		field: func(c *Config) any { return &c.Server.AccessLogFormat }},
	{Key: "server.access_log_health", Flag: "access-log-health", Default: false, Usage: "also log housekeeping requests (/health, /metrics, /docs, OPTIONS)",
		field: func(c *Config) any { return &c.Server.AccessLogHealth }},
	{Key: "server.disable_request_id_header", Flag: "disable-request-id-header", Default: false, Usage: "do not echo x-request-id on responses",
		field: func(c *Config) any { return &c.Server.DisableRequestIDHeader }},
	{Key: "server.disable_metrics", Flag: "disable-metrics", Default: false, Usage: "no Prometheus registry; GET /metrics answers 503",
		field: func(c *Config) any { return &c.Server.DisableMetrics }},
	{Key: "server.max_connections", Flag: "max-connections", Default: 1024, Usage: "most client connections open at once; more wait until one closes (0: no cap)",
		field: func(c *Config) any { return &c.Server.MaxConnections }},
	{Key: "server.idle_timeout_secs", Flag: "idle-timeout-secs", Default: 120, Usage: "close a keep-alive connection idle this many seconds (0: never)",
		field: func(c *Config) any { return &c.Server.IdleTimeoutSecs }},
	{Key: "server.body_timeout_secs", Flag: "body-timeout-secs", Default: 60, Usage: "seconds a client has to send a request body once its headers are in; responses and streams are never limited (0: no limit)",
		field: func(c *Config) any { return &c.Server.BodyTimeoutSecs }},
	{Key: "server.shutdown_timeout_secs", Flag: "shutdown-timeout-secs", Default: 30, Usage: "on SIGINT/SIGTERM, seconds running requests have to finish; streams still running then end with a canceled final chunk (a second signal exits at once)",
		field: func(c *Config) any { return &c.Server.ShutdownTimeoutSecs }},
	{Key: "server.shutdown_delay_secs", Flag: "shutdown-delay-secs", Default: 5, Usage: "on SIGINT/SIGTERM, seconds readiness (/health, /readyz) answers 503 while the server still serves new requests, so load balancers stop sending before it stops accepting (0: stop accepting at once)",
		field: func(c *Config) any { return &c.Server.ShutdownDelaySecs }},
	{Key: "server.allowed_origins", Flag: "allowed-origins", Default: OriginList{"*"}, Usage: `origins CORS answers, comma-separated and matched exactly ("https://app.example.com"); "*" allows any origin`,
		field: func(c *Config) any { return &c.Server.AllowedOrigins }},
	{Key: "server.allowed_hosts", Flag: "allowed-hosts", Default: OriginList(nil), Usage: `host names the Host header may name, comma-separated ("api.example.com", ".example.com" for a domain and its subdomains, "*" for any); empty: any host, or only localhost, 127.0.0.1 and [::1] when --host is a loopback address (DNS rebinding); others get 400`,
		field: func(c *Config) any { return &c.Server.AllowedHosts }},
	{Key: "server.api_key", Flag: "api-key", Env: "MISTRALRS_API_KEY", Default: "", Usage: "require this key (Authorization: Bearer <key> or x-api-key) on every API route; empty: no key",
		field: func(c *Config) any { return &c.Server.APIKey }},
	{Key: "server.api_key_metrics", Flag: "api-key-metrics", Default: false, Usage: "with an API key, also require it on GET /metrics",
		field: func(c *Config) any { return &c.Server.APIKeyMetrics }},
	{Key: "server.grammar_cache_mb", Flag: "grammar-cache-mb", Default: 256, Usage: "MiB of compiled grammars (response_format schemas, grammar, forced tool calls) kept for reuse with their mask caches, least recently used dropped first; a grammar that alone needs more is refused (400)",
		field: func(c *Config) any { return &c.Server.GrammarCacheMB }},
	{Key: "server.max_embedding_inputs", Flag: "max-embedding-inputs", Default: 2048, Usage: "most inputs one /v1/embeddings request may hold (OpenAI's limit); more get 422",
		field: func(c *Config) any { return &c.Server.MaxEmbeddingInputs }},
	{Key: "server.allow_remote_images", Flag: "allow-remote-images", Default: false, Usage: "fetch images given as http(s) URLs (OpenAI image_url, Anthropic url sources); off: only data URLs and base64 images are accepted",
		field: func(c *Config) any { return &c.Server.AllowRemoteImages }},
	{Key: "server.remote_image_max_mb", Flag: "remote-image-max-mb", Default: 20, Usage: "with --allow-remote-images, most MiB one fetched image may have; a larger one is refused (400)",
		field: func(c *Config) any { return &c.Server.RemoteImageMaxMB }},
	{Key: "server.remote_image_timeout_secs", Flag: "remote-image-timeout-secs", Default: 10, Usage: "with --allow-remote-images, seconds one image fetch may take, redirects included; a slower one is refused (400)",
		field: func(c *Config) any { return &c.Server.RemoteImageTimeoutSecs }},
	{Key: "server.allow_private_image_hosts", Flag: "allow-private-image-hosts", Default: false, Usage: "with --allow-remote-images, also fetch from loopback, private, link-local and other non-public addresses (refused by default: the server must not become a proxy into its own network)",
		field: func(c *Config) any { return &c.Server.AllowPrivateImageHosts }},
	{Key: "server.otlp_traces_endpoint", Flag: "otlp-traces-endpoint", Default: "", Usage: "send OpenTelemetry traces over OTLP to this URL (http://collector:4318/v1/traces; a URL without a path gets /v1/traces; with OTEL_EXPORTER_OTLP_PROTOCOL=grpc, http://collector:4317); empty: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT, else tracing is off",
		field: func(c *Config) any { return &c.Server.OTLPTracesEndpoint }},
	{Key: "server.otlp_capture_content", Flag: "otlp-capture-content", Env: "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", Default: false, Usage: "record prompts and completions on the generation spans (off: never), each cut to --otlp-capture-content-bytes",
		field: func(c *Config) any { return &c.Server.OTLPCaptureContent }},
	{Key: "server.otlp_capture_content_bytes", Flag: "otlp-capture-content-bytes", Default: 4096, Usage: "with --otlp-capture-content, most bytes of each prompt or completion recorded on a span",
		field: func(c *Config) any { return &c.Server.OTLPCaptureContentBytes }},
	{Env: "KEEP_ALIVE_INTERVAL", Default: 10 * time.Second, Usage: "SSE keep-alive comment interval, in milliseconds",
		field: func(c *Config) any { return &c.Server.KeepAliveInterval }},

	// [runtime]
	{Key: "runtime.max_seqs", Flag: "max-seqs", Default: 32, Usage: "maximum concurrently scheduled sequences",
		field: func(c *Config) any { return &c.Runtime.MaxSeqs }},
	{Key: "runtime.max_num_batched_tokens", Flag: "max-num-batched-tokens", Default: 4096, Usage: "maximum tokens in one engine step",
		field: func(c *Config) any { return &c.Runtime.MaxNumBatchedTokens }},
	{Key: "runtime.max_decode_steps_before_prefill", Flag: "max-decode-steps-before-prefill", Default: 8, Usage: "decode steps before waiting prompts are prefilled",
		field: func(c *Config) any { return &c.Runtime.MaxDecodeStepsBeforePrefill }},
	{Key: "runtime.embedding_step_tokens", Flag: "embedding-step-tokens", Default: 64, Usage: "most embedding tokens in one engine step, after the step's generation (a chat beside a large embeddings request waits for at most this much embedding work per token)",
		field: func(c *Config) any { return &c.Runtime.EmbeddingStepTokens }},
	{Key: "runtime.encoder_cache_mb", Flag: "encoder-cache-mb", Default: 256, Usage: "MiB of encoded images each multimodal model keeps for reuse (the encoder cache), least recently used dropped first (0: no cache)",
		field: func(c *Config) any { return &c.Runtime.EncoderCacheMB }},
	{Key: "runtime.no_kv_cache", Flag: "no-kv-cache", Default: false, Usage: "recompute every step without a KV cache (also disables the prefix cache)",
		field: func(c *Config) any { return &c.Runtime.NoKVCache }},
	{Key: "runtime.prefix_cache_n", Flag: "prefix-cache-n", Default: 16, Usage: "finished sequences kept for prefix reuse (0 disables the prefix cache)",
		field: func(c *Config) any { return &c.Runtime.PrefixCacheN }},
	{Key: "runtime.chat_template", Flag: "chat-template", Short: "c", Default: "", Usage: "chat template file (.jinja, or tokenizer_config .json)",
		field: func(c *Config) any { return &c.Runtime.ChatTemplate }},
	{Key: "runtime.jinja_explicit", Flag: "jinja-explicit", Short: "j", Default: "", Usage: "Jinja chat template file that overrides every other template",
		field: func(c *Config) any { return &c.Runtime.JinjaExplicit }},
	{Key: "runtime.threads", Flag: "threads", Default: 0, Usage: "threads for the forward pass (0: one per core)",
		field: func(c *Config) any { return &c.Runtime.Threads }},
	{Key: "runtime.mtp", Flag: "mtp", Default: false, Usage: "built-in MTP head: refused, no supported architecture carries MTP layers (use --mtp-model or --spec-ngram)",
		field: func(c *Config) any { return &c.Runtime.MTP }},
	{Key: "runtime.mtp_model", Flag: "mtp-model", Default: "", Usage: "draft model for speculative decoding: a .gguf file, a directory or a Hugging Face id (downloaded when missing), with the model's vocabulary",
		field: func(c *Config) any { return &c.Runtime.MTPModel }},
	{Key: "runtime.mtp_n_predict", Flag: "mtp-n-predict", Default: 4, Usage: "draft tokens proposed and verified per step (1-16)",
		field: func(c *Config) any { return &c.Runtime.MTPNPredict }},
	{Key: "runtime.spec_ngram", Flag: "spec-ngram", bare: "3", Default: 0, Usage: "prompt-lookup speculative decoding with n-grams of up to N tokens (0: off, at most 8; --spec-ngram alone: 3; give N as --spec-ngram=N)",
		field: func(c *Config) any { return &c.Runtime.SpecNgram }},

	// [paged_attn]
	{Key: "paged_attn.mode", Flag: "paged-attn", Default: "auto", Usage: `paged KV cache: "auto" (on in this engine), "on" or "off"`,
		field: func(c *Config) any { return &c.PagedAttn.Mode }},
	{Key: "paged_attn.block_size", Flag: "pa-block-size", Default: 32, Usage: "tokens per KV cache block",
		field: func(c *Config) any { return &c.PagedAttn.BlockSize }},
	{Key: "paged_attn.cache_type", Flag: "pa-cache-type", Default: "auto", Usage: `KV cache storage of keys and values: "auto" (f16), "f16" (halves: half of float32's memory), "f32" (as computed), "bf16" (as f16's memory, coarser), "q8_0" (llama.cpp's blocks: 27 %), "f8e4m3" (E4M3 with a scale per 32 values: 27 %) or "q4_0" (14 %)`,
		field: func(c *Config) any { return &c.PagedAttn.CacheType }},
	{Key: "paged_attn.cache_type_k", Flag: "cache-type-k", Default: "", Usage: "KV cache storage of the keys (as llama.cpp's -ctk; default: --pa-cache-type)",
		field: func(c *Config) any { return &c.PagedAttn.CacheTypeK }},
	{Key: "paged_attn.cache_type_v", Flag: "cache-type-v", Default: "", Usage: "KV cache storage of the values (as llama.cpp's -ctv; default: --pa-cache-type)",
		field: func(c *Config) any { return &c.PagedAttn.CacheTypeV }},
	{Key: "paged_attn.no_cache_rotation", Flag: "no-cache-rotation", Default: false, Usage: "store q8_0/q4_0 keys and values as computed, not rotated: by default, as llama.cpp (LLAMA_ATTN_ROT_DISABLE=1 turns its off), heads of a multiple of 64 values are multiplied by a Walsh-Hadamard matrix before a quantized cache, which spreads outlier channels before they share a block's scale; attention is otherwise the same",
		field: func(c *Config) any { return &c.PagedAttn.NoCacheRotation }},
	{Key: "paged_attn.memory_mb", Flag: "pa-memory-mb", Default: nil, Usage: "KV cache size in MB",
		field: func(c *Config) any { return &c.PagedAttn.MemoryMB }},
	{Key: "paged_attn.context_len", Flag: "pa-context-len", Default: nil, Usage: "KV cache size as a context length in tokens",
		field: func(c *Config) any { return &c.PagedAttn.ContextLen }},
	{Key: "paged_attn.memory_fraction", Flag: "pa-memory-fraction", Default: nil, Usage: "KV cache size as a fraction of physical memory, in (0, 1] (default 0.9)",
		field: func(c *Config) any { return &c.PagedAttn.MemoryFraction }},

	// [[models]]
	{Key: "models.kind", Default: "auto", Usage: `model kind: "auto" (multimodal when a vision projector is given or found, else text), "text" (chat, completions and embeddings), "multimodal" (text and images, with a vision projector) or "embedding" (embeddings only)`,
		modelField: func(m *ModelConfig) any { return &m.Kind }},
	{Key: "models.model_id", Flag: "model-id", Short: "m", Default: "", Usage: "local directory holding a GGUF model, or a Hugging Face id (org/name; downloaded into the Hugging Face cache when missing)",
		modelField: func(m *ModelConfig) any { return &m.ModelID }},
	{Key: "models.chat_template", Default: "", Usage: "chat template of this model (overrides runtime.chat_template)",
		modelField: func(m *ModelConfig) any { return &m.ChatTemplate }},
	{Key: "models.jinja_explicit", Default: "", Usage: "Jinja template of this model (overrides runtime.jinja_explicit)",
		modelField: func(m *ModelConfig) any { return &m.JinjaExplicit }},
	{Key: "models.mtp_model", Default: "", Usage: "draft model of this model (the first model falls back to runtime.mtp_model)",
		modelField: func(m *ModelConfig) any { return &m.MTPModel }},
	{Key: "models.mtp_n_predict", Default: nil, Usage: "draft tokens per step for this model (the first model falls back to runtime.mtp_n_predict)",
		modelField: func(m *ModelConfig) any { return &m.MTPNPredict }},
	{Key: "models.spec_ngram", Default: nil, Usage: "prompt-lookup n-gram size for this model, 0: off (the first model falls back to runtime.spec_ngram)",
		modelField: func(m *ModelConfig) any { return &m.SpecNgram }},
	{Key: "models.format.format", Flag: "format", Default: "", Usage: `model format: "gguf" (inferred from the -f suffix)`,
		modelField: func(m *ModelConfig) any { return &m.Format.Format }},
	{Key: "models.format.quantized_file", Flag: "quantized-file", Short: "f", Default: FileList(nil), Usage: "GGUF file(s) inside the model directory, semicolon-separated (shards of one model)",
		modelField: func(m *ModelConfig) any { return &m.Format.QuantizedFile }},
	{Key: "models.format.mmproj", Flag: "mmproj", Default: FileList(nil), Usage: "vision projector (llama.cpp mmproj GGUF) of the model: a path, relative to the model directory (-m) unless absolute, or a file of the Hugging Face repository; one per model. Without it, serve auto and multimodal look beside the model",
		modelField: func(m *ModelConfig) any { return &m.Format.MMProj }},
	{Key: "models.multimodal.max_edge", Flag: "max-edge", Default: 0, Usage: "cap on an image's longer side, in pixels, before the projector's own resizing (aspect ratio kept; 0: the projector's own size; Gemma 3 always resizes to its fixed size)",
		modelField: func(m *ModelConfig) any { return &m.Multimodal.MaxEdge }},
	{Key: "models.multimodal.max_num_images", Flag: "max-num-images", Default: 8, Usage: "most images one request may carry; more are refused (400)",
		modelField: func(m *ModelConfig) any { return &m.Multimodal.MaxNumImages }},
	{Key: "models.multimodal.max_image_length", Flag: "max-image-length", Default: 4096, Usage: "largest image accepted, as the side of a square: an image of more than N×N pixels is refused (400) from its header, before it is decoded",
		modelField: func(m *ModelConfig) any { return &m.Multimodal.MaxImageLength }},
	{Key: "models.adapter.enable_lora", Flag: "enable-lora", Default: false, Usage: `dynamic LoRA without a preloaded adapter: adapters chosen per request ("adapter", or the model id "<model>::<alias>"), loaded and unloaded at run time (--lora turns it on too)`,
		modelField: func(m *ModelConfig) any { return &m.Adapter.EnableLoRA }},
	{Key: "models.adapter.lora", Flag: "lora", Default: LoRAList(nil), Usage: `preload a LoRA adapter (alias --lora-modules): ALIAS=SOURCE, or vLLM's JSON {"name","path","revision"?,"base_model_name"?}; SOURCE a GGUF adapter file, a folder (one GGUF adapter, or PEFT: adapter_config.json + adapter_model.safetensors) or a Hugging Face repository ORG/NAME, downloaded at startup at its revision (default main). Repeatable; several values may follow one flag`,
		modelField: func(m *ModelConfig) any { return &m.Adapter.LoRA }},
	{Key: "models.adapter.lora_max_adapters", Flag: "lora-max-adapters", Default: 16, Usage: "with dynamic LoRA, most adapter aliases loaded at once (and, apart, most resident adapter generations)",
		modelField: func(m *ModelConfig) any { return &m.Adapter.MaxAdapters }},
	{Key: "models.adapter.lora_max_rank", Flag: "lora-max-rank", Default: 256, Usage: "with dynamic LoRA, the largest rank an adapter may have (alias --max-lora-rank)",
		modelField: func(m *ModelConfig) any { return &m.Adapter.MaxRank }},
	{Key: "models.adapter.lora_max_bytes", Flag: "lora-max-bytes", Default: ByteSize(8 << 30), Usage: "with dynamic LoRA, most bytes the loaded adapters' tensors may take, with an optional suffix: b, kb, mb, gb, kib, mib or gib (8gib)",
		modelField: func(m *ModelConfig) any { return &m.Adapter.MaxBytes }},
	{Key: "models.adapter.legacy_lora", Flag: "legacy-lora", Default: "", Usage: "mistral.rs's legacy LoRA (GGML or Phi3 GGUF): not supported by this server, refused (use --lora)",
		modelField: func(m *ModelConfig) any { return &m.Adapter.LegacyLoRA }},
	{Key: "models.adapter.legacy_lora_order", Flag: "legacy-lora-order", Default: "", Usage: "ordering file of --legacy-lora: not supported by this server, refused",
		modelField: func(m *ModelConfig) any { return &m.Adapter.LegacyLoRAOrder }},
	{Key: "models.adapter.xlora", Flag: "xlora", Default: "", Usage: "X-LoRA adapter model: not supported by this server, refused (use --lora)",
		modelField: func(m *ModelConfig) any { return &m.Adapter.XLoRA }},
	{Key: "models.adapter.xlora_order", Flag: "xlora-order", Default: "", Usage: "X-LoRA ordering file: not supported by this server, refused",
		modelField: func(m *ModelConfig) any { return &m.Adapter.XLoRAOrder }},
	{Key: "models.adapter.tgt_non_granular_index", Flag: "tgt-non-granular-index", Default: nil, Usage: "X-LoRA target non-granular index: not supported by this server, refused",
		modelField: func(m *ModelConfig) any { return &m.Adapter.TgtNonGranularIndex }},
	{Key: "models.quantization.isq", Flag: "isq", Default: "", Usage: "in-situ quantization: quantize the F32/F16/BF16 weights at load to q4_0, q4_1, q5_0, q5_1, q8_0, q4k, q5k or q6k (the file is not changed)",
		modelField: func(m *ModelConfig) any { return &m.Quantization.ISQ }},
	{Key: "models.device.cpu", Flag: "cpu", Default: false, Usage: "run on the CPU (always the case in this engine)",
		modelField: func(m *ModelConfig) any { return &m.Device.CPU }},
	{Key: "models.hf_revision", Flag: "hf-revision", Default: "main", Usage: "revision (branch, tag or commit) of a Hugging Face model id to download or find in the cache",
		modelField: func(m *ModelConfig) any { return &m.HFRevision }},
	{Key: "models.device.hf_cache", Flag: "hf-cache", Default: "", Usage: "Hugging Face hub cache directory (default $HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub)",
		modelField: func(m *ModelConfig) any { return &m.Device.HFCache }},
}

// OptionByKey returns the option with the TOML key, or nil.
func OptionByKey(key string) *Option {
	for i := range Options {
		if Options[i].Key == key && key != "" {
			return &Options[i]
		}
	}
	return nil
}

// setValue stores a table default through a field pointer. A mismatch between
// the table and the struct is a programming error that the tests catch.
func setValue(ptr, def any) {
	switch p := ptr.(type) {
	case *int:
		*p = def.(int)
	case *bool:
		*p = def.(bool)
	case *string:
		*p = def.(string)
	case *time.Duration:
		*p = def.(time.Duration)
	case *FileList:
		*p = append(FileList(nil), def.(FileList)...)
	case *OriginList:
		*p = append(OriginList(nil), def.(OriginList)...)
	case **int:
		*p = nil
		if def != nil {
			v := def.(int)
			*p = &v
		}
	case **uint64:
		*p = nil
		if def != nil {
			v := def.(uint64)
			*p = &v
		}
	case *LoRAList:
		*p = append(LoRAList(nil), def.(LoRAList)...)
	case **ByteSize:
		*p = nil
		if def != nil {
			v := def.(ByteSize)
			*p = &v
		}
	case **float64:
		*p = nil
		if def != nil {
			v := def.(float64)
			*p = &v
		}
	default:
		panic(fmt.Sprintf("config: no default setter for %T", ptr))
	}
}
