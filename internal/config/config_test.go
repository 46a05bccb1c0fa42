package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// writeFile writes data to dir/name and returns the path.
func writeFile(t testing.TB, dir, name, data string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadString loads TOML text through a real .toml file.
func loadString(t testing.TB, text string) (*Config, []Warning, error) {
	t.Helper()
	return LoadTOML(writeFile(t, t.TempDir(), "config.toml", text))
}

const minimalTOML = "command = \"serve\"\n[[models]]\nmodel_id = \"m\"\n"

// modelsTOML can follow a table: it has no top-level keys.
const modelsTOML = "[[models]]\nmodel_id = \"m\"\n"

// parseFlags binds the serve and global flags on a fresh Default() and parses args.
func parseFlags(t testing.TB, args ...string) (*Config, error) {
	t.Helper()
	c := Default()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	BindGlobalFlags(fs, c)
	BindServeFlags(fs, c)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	return c, c.Validate()
}

func TestOptionTableIsConsistent(t *testing.T) {
	keys, flags, shorts, envs := map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, o := range Options {
		name := o.Key + o.Flag + o.Env
		if (o.field == nil) == (o.modelField == nil) {
			t.Errorf("%s: exactly one of field and modelField must be set", name)
		}
		if o.modelField != nil && !strings.HasPrefix(o.Key, "models.") {
			t.Errorf("%s: a model option's key must start with models.", name)
		}
		if o.Usage == "" {
			t.Errorf("%s: no usage text", name)
		}
		for _, p := range []struct {
			set map[string]bool
			v   string
		}{{keys, o.Key}, {flags, o.Flag}, {shorts, o.Short}, {envs, o.Env}} {
			if p.v == "" {
				continue
			}
			if p.set[p.v] {
				t.Errorf("%q appears twice in the table", p.v)
			}
			p.set[p.v] = true
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: default %#v does not fit the field: %v", name, o.Default, r)
				}
			}()
			Default()
			DefaultModel()
		}()
	}
}

// TestDefaults is the table of defaults as a newcomer reads it: each value is
// checked in Default(), in the flags and in a loaded TOML file.
func TestDefaults(t *testing.T) {
	want := map[string]any{
		"command":                                 "serve",
		"default_model_id":                        "",
		"global.seed":                             (*uint64)(nil),
		"global.log":                              "",
		"global.token_source":                     "cache",
		"server.port":                             1234,
		"server.host":                             "0.0.0.0",
		"server.no_ui":                            false,
		"server.disable_access_log":               false,
		"server.access_log_format":                "text",
		"server.access_log_health":                false,
		"server.disable_request_id_header":        false,
		"server.disable_metrics":                  false,
		"server.max_connections":                  1024,
		"server.grammar_cache_mb":                 256,
		"server.idle_timeout_secs":                120,
		"server.body_timeout_secs":                60,
		"server.shutdown_timeout_secs":            30,
		"server.shutdown_delay_secs":              5,
		"server.allowed_origins":                  OriginList{"*"},
		"server.allowed_hosts":                    OriginList(nil),
		"server.api_key":                          "",
		"server.api_key_metrics":                  false,
		"runtime.max_seqs":                        32,
		"runtime.max_num_batched_tokens":          4096,
		"runtime.max_decode_steps_before_prefill": 8,
		"runtime.no_kv_cache":                     false,
		"runtime.prefix_cache_n":                  16,
		"runtime.chat_template":                   "",
		"runtime.jinja_explicit":                  "",
		"runtime.threads":                         0,
		"runtime.mtp":                             false,
		"runtime.mtp_model":                       "",
		"runtime.mtp_n_predict":                   4,
		"runtime.spec_ngram":                      0,
		"paged_attn.mode":                         "auto",
		"paged_attn.block_size":                   32,
		"paged_attn.cache_type":                   "auto",
		"paged_attn.cache_type_k":                 "",
		"paged_attn.cache_type_v":                 "",
		"paged_attn.no_cache_rotation":            false,
		"paged_attn.memory_mb":                    (*int)(nil),
		"paged_attn.context_len":                  (*int)(nil),
		"paged_attn.memory_fraction":              (*float64)(nil),
		"models.kind":                             "auto",
		"models.model_id":                         "",
		"models.chat_template":                    "",
		"models.jinja_explicit":                   "",
		"models.mtp_model":                        "",
		"models.mtp_n_predict":                    (*int)(nil),
		"models.spec_ngram":                       (*int)(nil),
		"models.format.format":                    "",
		"models.format.quantized_file":            FileList(nil),
		"models.device.cpu":                       false,
		"models.device.hf_cache":                  "",
		"models.hf_revision":                      "main",
		"models.quantization.isq":                 "",
		"env:KEEP_ALIVE_INTERVAL":                 10 * time.Second,
		"env:RUST_LOG":                            "",
		"flag:verbose":                            0,

		"server.max_embedding_inputs":   2048,
		"runtime.embedding_step_tokens": 64,

		"server.allow_remote_images":         false,
		"server.remote_image_max_mb":         20,
		"server.remote_image_timeout_secs":   10,
		"server.allow_private_image_hosts":   false,
		"server.otlp_traces_endpoint":        "",
		"server.otlp_capture_content":        false,
		"server.otlp_capture_content_bytes":  4096,
		"runtime.encoder_cache_mb":           256,
		"models.format.mmproj":               FileList(nil),
		"models.multimodal.max_edge":         0,
		"models.multimodal.max_num_images":   intPtr(8),
		"models.multimodal.max_image_length": intPtr(4096),

		"models.adapter.enable_lora":            false,
		"models.adapter.lora":                   LoRAList(nil),
		"models.adapter.lora_max_adapters":      intPtr(16),
		"models.adapter.lora_max_rank":          intPtr(256),
		"models.adapter.lora_max_bytes":         func() *ByteSize { b := ByteSize(8589934592); return &b }(),
		"models.adapter.legacy_lora":            "",
		"models.adapter.legacy_lora_order":      "",
		"models.adapter.xlora":                  "",
		"models.adapter.xlora_order":            "",
		"models.adapter.tgt_non_granular_index": (*int)(nil),
	}
	name := func(o *Option) string {
		switch {
		case o.Key != "":
			return o.Key
		case o.Env != "":
			return "env:" + o.Env
		}
		return "flag:" + o.Flag
	}
	def := Default()
	defModel := DefaultModel()
	fromFlags, err := parseFlags(t)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadString(t, "command = \"serve\"\n[[models]]\nmodel_id = \"\"\n"); err == nil {
		t.Fatal("a model without model_id loaded")
	}
	fromTOML, _, err := loadString(t, "[[models]]\nmodel_id = \"x\"\n")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range Options {
		o := &Options[i]
		n := name(o)
		seen[n] = true
		w, ok := want[n]
		if !ok {
			t.Errorf("%s: no expected default in this test; add it", n)
			continue
		}
		get := func(c *Config, m *ModelConfig) any {
			if o.field != nil {
				return reflect.ValueOf(o.field(c)).Elem().Interface()
			}
			return reflect.ValueOf(o.modelField(m)).Elem().Interface()
		}
		check := func(where string, got any) {
			if !reflect.DeepEqual(got, w) && !(isEmptyList(got) && isEmptyList(w)) {
				t.Errorf("%s: %s default is %#v, want %#v", n, where, got, w)
			}
		}
		check("Default()", get(def, &defModel))
		check("flags", get(fromFlags, &fromFlags.Models[0]))
		if o.Key != "" && n != "models.model_id" {
			check("TOML", get(fromTOML, &fromTOML.Models[0]))
		}
	}
	for n := range want {
		if !seen[n] {
			t.Errorf("%s: in the expected table but not in Options", n)
		}
	}
}

func intPtr(v int) *int { return &v }

func isEmptyList(v any) bool {
	l, ok := v.(FileList)
	return ok && len(l) == 0
}

// TestFlagHelpDefaults checks the defaults the help text shows.
func TestFlagHelpDefaults(t *testing.T) {
	c := Default()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	BindServeFlags(fs, c)
	BindGlobalFlags(fs, c)
	for flag, want := range map[string]string{
		"port": "1234", "host": "0.0.0.0", "max-seqs": "32", "max-num-batched-tokens": "4096",
		"max-decode-steps-before-prefill": "8", "prefix-cache-n": "16", "paged-attn": "auto",
		"pa-block-size": "32", "access-log-format": "text", "threads": "0", "pa-memory-mb": "",
		"pa-context-len": "", "pa-memory-fraction": "", "quantized-file": "", "seed": "", "verbose": "0",
		"no-ui": "false", "disable-metrics": "false", "mtp": "false", "mtp-model": "", "mtp-n-predict": "4",
		"spec-ngram": "0",
	} {
		f := fs.Lookup(flag)
		if f == nil {
			t.Errorf("--%s is not defined", flag)
			continue
		}
		if f.DefValue != want {
			t.Errorf("--%s help default %q, want %q", flag, f.DefValue, want)
		}
	}
}

// TestFlagNamesAndShorthands pins mistral.rs's flag names and shorthands.
func TestFlagNamesAndShorthands(t *testing.T) {
	c := Default()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	BindServeFlags(fs, c)
	gs := pflag.NewFlagSet("global", pflag.ContinueOnError)
	BindGlobalFlags(gs, c)
	serve := map[string]string{
		"model-id": "m", "quantized-file": "f", "format": "", "chat-template": "c", "jinja-explicit": "j",
		"max-seqs": "", "port": "p", "host": "", "no-ui": "", "disable-access-log": "",
		"access-log-format": "", "access-log-health": "", "disable-request-id-header": "",
		"disable-metrics": "", "max-num-batched-tokens": "", "max-decode-steps-before-prefill": "",
		"no-kv-cache": "", "prefix-cache-n": "", "paged-attn": "", "pa-block-size": "", "pa-cache-type": "", "pa-memory-mb": "",
		"pa-context-len": "", "pa-memory-fraction": "", "threads": "", "cpu": "", "hf-cache": "",
		"mtp": "", "mtp-model": "", "mtp-n-predict": "", "spec-ngram": "",
		"max-connections": "", "idle-timeout-secs": "", "body-timeout-secs": "", "shutdown-timeout-secs": "",
		"allowed-origins": "", "allowed-hosts": "", "api-key": "", "api-key-metrics": "", "shutdown-delay-secs": "",
		"isq": "",
	}
	serve["grammar-cache-mb"] = ""
	serve["otlp-traces-endpoint"], serve["otlp-capture-content"], serve["otlp-capture-content-bytes"] = "", "", ""
	serve["cache-type-k"], serve["cache-type-v"], serve["no-cache-rotation"] = "", "", ""
	serve["hf-revision"] = ""
	serve["max-embedding-inputs"], serve["embedding-step-tokens"] = "", ""
	for _, f := range []string{"allow-remote-images", "remote-image-max-mb", "remote-image-timeout-secs", "allow-private-image-hosts",
		"encoder-cache-mb", "mmproj", "max-edge", "max-num-images", "max-image-length"} {
		serve[f] = ""
	}
	for _, f := range []string{"enable-lora", "lora", "lora-max-adapters", "lora-max-rank", "lora-max-bytes",
		"legacy-lora", "legacy-lora-order", "xlora", "xlora-order", "tgt-non-granular-index"} {
		serve[f] = ""
	}
	global := map[string]string{"seed": "", "log": "l", "verbose": "v", "token-source": ""}
	for _, set := range []struct {
		fs   *pflag.FlagSet
		want map[string]string
	}{{fs, serve}, {gs, global}} {
		n := 0
		set.fs.VisitAll(func(f *pflag.Flag) {
			n++
			short, ok := set.want[f.Name]
			if !ok {
				t.Errorf("unexpected flag --%s", f.Name)
			} else if f.Shorthand != short {
				t.Errorf("--%s shorthand %q, want %q", f.Name, f.Shorthand, short)
			}
		})
		if n != len(set.want) {
			t.Errorf("%d flags defined, want %d", n, len(set.want))
		}
	}
}

// sampleValues gives a non-default, valid value for every TOML key: TOML
// text and the flag argument that must produce the same field value.
func sampleValues(t *testing.T) map[string][2]string {
	dir := t.TempDir()
	tmpl := writeFile(t, dir, "t.jinja", "{{ messages }}")
	json := writeFile(t, dir, "tokenizer_config.json", "{}")
	return map[string][2]string{
		"command":                                 {`"run"`, ""},
		"default_model_id":                        {`"m"`, ""},
		"global.seed":                             {`42`, "42"},
		"global.log":                              {`"/tmp/x.log"`, "/tmp/x.log"},
		"server.port":                             {`8080`, "8080"},
		"server.host":                             {`"127.0.0.1"`, "127.0.0.1"},
		"server.no_ui":                            {`true`, "true"},
		"server.disable_access_log":               {`true`, "true"},
		"server.access_log_format":                {`"json"`, "json"},
		"server.access_log_health":                {`true`, "true"},
		"server.disable_request_id_header":        {`true`, "true"},
		"server.disable_metrics":                  {`true`, "true"},
		"server.max_connections":                  {`0`, "0"},
		"server.grammar_cache_mb":                 {`64`, "64"},
		"server.idle_timeout_secs":                {`5`, "5"},
		"server.body_timeout_secs":                {`0`, "0"},
		"server.shutdown_timeout_secs":            {`5`, "5"},
		"server.shutdown_delay_secs":              {`0`, "0"},
		"server.allowed_origins":                  {`["https://a.example", "https://b.example"]`, "https://a.example,https://b.example"},
		"server.allowed_hosts":                    {`["api.example", ".example.org"]`, "api.example,.example.org"},
		"server.api_key":                          {`"sk-test"`, "sk-test"},
		"server.api_key_metrics":                  {`true`, "true"},
		"runtime.max_seqs":                        {`5`, "5"},
		"runtime.max_num_batched_tokens":          {`512`, "512"},
		"runtime.max_decode_steps_before_prefill": {`3`, "3"},
		"runtime.no_kv_cache":                     {`true`, "true"},
		"runtime.prefix_cache_n":                  {`0`, "0"},
		"runtime.chat_template":                   {fmt.Sprintf("%q", json), json},
		"runtime.jinja_explicit":                  {fmt.Sprintf("%q", tmpl), tmpl},
		"runtime.threads":                         {`2`, "2"},
		"runtime.mtp":                             {`true`, "true"}, // refused: see refusedSamples
		"runtime.mtp_model":                       {`"draft.gguf"`, "draft.gguf"},
		"runtime.mtp_n_predict":                   {`8`, "8"},
		"runtime.spec_ngram":                      {`2`, "2"},
		"paged_attn.mode":                         {`"off"`, "off"},
		"paged_attn.block_size":                   {`16`, "16"},
		"paged_attn.cache_type":                   {`"f16"`, "f16"},
		"paged_attn.cache_type_k":                 {`"q8_0"`, "q8_0"},
		"paged_attn.cache_type_v":                 {`"bf16"`, "bf16"},
		"paged_attn.no_cache_rotation":            {`true`, "true"},
		"paged_attn.memory_mb":                    {`512`, "512"},
		"paged_attn.context_len":                  {`8192`, "8192"},
		"paged_attn.memory_fraction":              {`0.5`, "0.5"},
		"models.kind":                             {`"text"`, ""},
		"models.model_id":                         {`"m"`, "m"},
		"models.chat_template":                    {fmt.Sprintf("%q", tmpl), ""},
		"models.jinja_explicit":                   {fmt.Sprintf("%q", tmpl), ""},
		"models.mtp_model":                        {`"draft.gguf"`, ""},
		"models.mtp_n_predict":                    {`6`, ""},
		"models.spec_ngram":                       {`5`, ""},
		"models.format.format":                    {`"gguf"`, "gguf"},
		"models.format.quantized_file":            {`"a.gguf;b.gguf"`, "a.gguf;b.gguf"},
		"models.device.cpu":                       {`true`, "true"},
		"models.device.hf_cache":                  {`"/tmp/hub"`, "/tmp/hub"},
		"models.hf_revision":                      {`"v2"`, "v2"},
		"global.token_source":                     {`"none"`, "none"},
		"models.quantization.isq":                 {`"q4k"`, "q4k"},

		"server.max_embedding_inputs":   {`16`, "16"},
		"runtime.embedding_step_tokens": {`8`, "8"},

		"server.allow_remote_images":         {`true`, "true"},
		"server.remote_image_max_mb":         {`5`, "5"},
		"server.remote_image_timeout_secs":   {`3`, "3"},
		"server.allow_private_image_hosts":   {`true`, "true"},
		"server.otlp_traces_endpoint":        {`"http://collector:4318/v1/traces"`, "http://collector:4318/v1/traces"},
		"server.otlp_capture_content":        {`true`, "true"},
		"server.otlp_capture_content_bytes":  {`1024`, "1024"},
		"runtime.encoder_cache_mb":           {`0`, "0"},
		"models.format.mmproj":               {`"mmproj-f16.gguf"`, "mmproj-f16.gguf"},
		"models.multimodal.max_edge":         {`1024`, "1024"},
		"models.multimodal.max_num_images":   {`2`, "2"},
		"models.multimodal.max_image_length": {`2048`, "2048"},

		"models.adapter.enable_lora":            {`true`, "true"},
		"models.adapter.lora":                   {`[{alias = "a", source = "x.gguf"}]`, "a=x.gguf"},
		"models.adapter.lora_max_adapters":      {`4`, "4"},         // refused alone: see refusedSamples
		"models.adapter.lora_max_rank":          {`64`, "64"},       // refused alone
		"models.adapter.lora_max_bytes":         {`"1gib"`, "1gib"}, // refused alone
		"models.adapter.legacy_lora":            {`"a.ggml"`, "a.ggml"},
		"models.adapter.legacy_lora_order":      {`"o.json"`, "o.json"},
		"models.adapter.xlora":                  {`"org/x"`, "org/x"},
		"models.adapter.xlora_order":            {`"o.json"`, "o.json"},
		"models.adapter.tgt_non_granular_index": {`1`, "1"},
	}
}

// refusedSamples are settings whose only other value is refused by Validate
// (their errors are checked in TestSpeculativeErrors): both ways of setting
// them must fail the same way.
var refusedSamples = map[string]string{
	"runtime.mtp": "the built-in MTP head is not supported",

	// Their errors are checked in TestAdapterFlags and TestAdapterTOML.
	"models.adapter.lora_max_adapters":      "a LoRA runtime limit needs dynamic LoRA",
	"models.adapter.lora_max_rank":          "a LoRA runtime limit needs dynamic LoRA",
	"models.adapter.lora_max_bytes":         "a LoRA runtime limit needs dynamic LoRA",
	"models.adapter.legacy_lora":            "legacy LoRA is not supported by this server",
	"models.adapter.legacy_lora_order":      "legacy LoRA is not supported by this server",
	"models.adapter.xlora":                  "X-LoRA is not supported by this server",
	"models.adapter.xlora_order":            "X-LoRA is not supported by this server",
	"models.adapter.tgt_non_granular_index": "X-LoRA is not supported by this server",
}

// tomlFor writes key = value in its table; model keys go into one [[models]] entry.
func tomlFor(key, value string) string {
	var b strings.Builder
	model := map[string]string{"": `model_id = "m"`}
	switch {
	case strings.HasPrefix(key, "models."):
		rest := strings.TrimPrefix(key, "models.")
		if i := strings.LastIndexByte(rest, '.'); i >= 0 {
			model[rest[:i]] = rest[i+1:] + " = " + value
		} else if rest == "model_id" {
			model[""] = "model_id = " + value
		} else {
			model[""] += "\n" + rest + " = " + value
		}
	case strings.Contains(key, "."):
		i := strings.IndexByte(key, '.')
		fmt.Fprintf(&b, "[%s]\n%s = %s\n", key[:i], key[i+1:], value)
	default:
		fmt.Fprintf(&b, "%s = %s\n", key, value)
	}
	fmt.Fprintf(&b, "[[models]]\n%s\n", model[""])
	for sub, line := range model {
		if sub != "" {
			fmt.Fprintf(&b, "[models.%s]\n%s\n", sub, line)
		}
	}
	return b.String()
}

// TestEveryKeyAndFlagSetsTheSameField sets each key in TOML and its flag on
// the command line and checks both change the table's field to the same value.
func TestEveryKeyAndFlagSetsTheSameField(t *testing.T) {
	samples := sampleValues(t)
	for i := range Options {
		o := &Options[i]
		if o.Key == "" {
			continue
		}
		s, ok := samples[o.Key]
		if !ok {
			t.Errorf("%s: no sample value in this test; add one", o.Key)
			continue
		}
		t.Run(o.Key, func(t *testing.T) {
			c, warns, err := loadString(t, tomlFor(o.Key, s[0]))
			if why, ok := refusedSamples[o.Key]; ok {
				_, ferr := parseFlags(t, "--"+o.Flag+"="+s[1])
				if err == nil || ferr == nil || !strings.Contains(err.Error(), why) || !strings.Contains(ferr.Error(), why) {
					t.Errorf("TOML: %v; flag: %v; want both to fail with %q", err, ferr, why)
				}
				return
			}
			if err != nil {
				t.Fatalf("TOML %s = %s: %v", o.Key, s[0], err)
			}
			if len(warns) > 0 {
				t.Errorf("warnings: %v", warns)
			}
			get := func(c *Config) any {
				if o.field != nil {
					return reflect.ValueOf(o.field(c)).Elem().Interface()
				}
				return reflect.ValueOf(o.modelField(&c.Models[0])).Elem().Interface()
			}
			d := Default()
			dm := DefaultModel()
			d.Models = []ModelConfig{dm}
			got := get(c)
			if reflect.DeepEqual(got, get(d)) {
				t.Errorf("TOML %s = %s left the default %#v", o.Key, s[0], got)
			}
			if o.Flag == "" {
				return
			}
			args := []string{"--" + o.Flag + "=" + s[1]}
			fc, err := parseFlags(t, args...)
			if err != nil {
				t.Fatalf("%v: %v", args, err)
			}
			if fg := get(fc); !reflect.DeepEqual(fg, got) {
				t.Errorf("flag %v gives %#v, TOML gives %#v", args, deref(fg), deref(got))
			}
		})
	}
}

func deref(v any) any {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		return rv.Elem().Interface()
	}
	return v
}

func TestFlagsParse(t *testing.T) {
	c, err := parseFlags(t, "-m", "org/name", "-f", "a-00001-of-00002.gguf;a-00002-of-00002.gguf", "-p", "9000",
		"-vv", "--seed", "7", "-l", "req.log", "--pa-context-len", "2048", "--no-kv-cache")
	if err != nil {
		t.Fatal(err)
	}
	if c.Models[0].ModelID != "org/name" || c.Server.Port != 9000 || c.Global.Verbose != 2 || *c.Global.Seed != 7 ||
		c.Global.Log != "req.log" || *c.PagedAttn.ContextLen != 2048 || !c.Runtime.NoKVCache {
		t.Errorf("parsed %+v", c)
	}
	if got := []string(c.Models[0].Format.QuantizedFile); !reflect.DeepEqual(got, []string{"a-00001-of-00002.gguf", "a-00002-of-00002.gguf"}) {
		t.Errorf("quantized files %q", got)
	}
	if c.DemoModel() {
		t.Error("DemoModel with -m given")
	}
	if b := c.PagedAttn.Budget(); b != (KVBudget{ContextLen: 2048}) {
		t.Errorf("budget %+v", b)
	}
	// -f twice appends.
	c, err = parseFlags(t, "-f", "a.gguf", "-f", " ;b.gguf; ")
	if err != nil {
		t.Fatal(err)
	}
	if got := []string(c.Models[0].Format.QuantizedFile); !reflect.DeepEqual(got, []string{"a.gguf", "b.gguf"}) {
		t.Errorf("quantized files %q", got)
	}
	// No model: the demo model, not an error.
	c, err = parseFlags(t)
	if err != nil || !c.DemoModel() {
		t.Errorf("no model: DemoModel %v, err %v", c.DemoModel(), err)
	}
}

// TestSeedFlagBasePrefixes: --seed reads Go's base prefixes, as the pflag
// Uint64 flag it replaced did, so a seed written 017 or 0x10 keeps its value.
func TestSeedFlagBasePrefixes(t *testing.T) {
	for arg, want := range map[string]uint64{"42": 42, "017": 15, "0o17": 15, "0x10": 16, "0b101": 5, "1_000": 1000, "18446744073709551615": 1<<64 - 1} {
		c, err := parseFlags(t, "--seed", arg)
		if err != nil || c.Global.Seed == nil || *c.Global.Seed != want {
			t.Errorf("--seed %s: seed %v, err %v; want %d", arg, c.Global.Seed, err, want)
		}
	}
}

func TestFlagErrors(t *testing.T) {
	dir := t.TempDir()
	txt := writeFile(t, dir, "t.txt", "x")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-p", "0"}, "invalid value 0 for --port: must be between 1 and 65535"},
		{[]string{"--port", "70000"}, "invalid value 70000 for --port: must be between 1 and 65535"},
		{[]string{"--port", "x"}, `invalid argument "x" for "-p, --port"`},
		{[]string{"--host", ""}, `invalid value "" for --host: must be a host name or IP address`},
		{[]string{"--access-log-format", "xml"}, `invalid value "xml" for --access-log-format: must be "text" or "json"`},
		{[]string{"--max-seqs", "0"}, "invalid value 0 for --max-seqs: must be at least 1"},
		{[]string{"--max-num-batched-tokens", "0"}, "invalid value 0 for --max-num-batched-tokens: must be at least 1"},
		{[]string{"--max-decode-steps-before-prefill", "0"}, "invalid value 0 for --max-decode-steps-before-prefill: must be at least 1"},
		{[]string{"--prefix-cache-n", "-1"}, "invalid value -1 for --prefix-cache-n: must not be negative"},
		{[]string{"--threads", "-2"}, "invalid value -2 for --threads: must not be negative"},
		{[]string{"--max-connections", "-1"}, "invalid value -1 for --max-connections: must not be negative"},
		{[]string{"--body-timeout-secs", "-1"}, "invalid value -1 for --body-timeout-secs: must not be negative"},
		{[]string{"--grammar-cache-mb", "0"}, "invalid value 0 for --grammar-cache-mb: must be between 1 and 1048576"},
		{[]string{"--shutdown-timeout-secs", "0"}, "invalid value 0 for --shutdown-timeout-secs: must be between 1 and 1073741824"},
		{[]string{"--shutdown-delay-secs", "-1"}, "invalid value -1 for --shutdown-delay-secs: must be between 0 and 1073741824"},
		{[]string{"--threads", "5000"}, "invalid value 5000 for --threads: must be at most 4096"},
		{[]string{"--paged-attn", "maybe"}, `invalid value "maybe" for --paged-attn: must be "auto", "on" or "off"`},
		{[]string{"--pa-block-size", "0"}, "invalid value 0 for --pa-block-size: must be between 1 and 1024"},
		{[]string{"--pa-memory-mb", "-5"}, "invalid value -5 for --pa-memory-mb: must be positive"},
		{[]string{"--pa-memory-mb", "x"}, `invalid argument "x" for "--pa-memory-mb" flag: not an integer`},
		{[]string{"--pa-context-len", "0"}, "invalid value 0 for --pa-context-len: must be positive"},
		{[]string{"--pa-memory-fraction", "0"}, "invalid value 0 for --pa-memory-fraction: must be in (0, 1]"},
		{[]string{"--pa-memory-fraction", "1.5"}, "invalid value 1.5 for --pa-memory-fraction: must be in (0, 1]"},
		{[]string{"--pa-memory-fraction", "NaN"}, "invalid value NaN for --pa-memory-fraction: must be in (0, 1]"},
		{[]string{"--pa-memory-mb", "100", "--pa-context-len", "10"}, "the argument '--pa-memory-mb' cannot be used with '--pa-context-len'"},
		{[]string{"--pa-memory-mb", "100", "--pa-memory-fraction", "0.5"}, "the argument '--pa-memory-mb' cannot be used with '--pa-memory-fraction'"},
		{[]string{"--pa-context-len", "100", "--pa-memory-fraction", "0.5"}, "the argument '--pa-context-len' cannot be used with '--pa-memory-fraction'"},
		{[]string{"--seed", "-1"}, `invalid argument "-1" for "--seed" flag: not a non-negative integer`},
		{[]string{"-f", ";"}, `invalid argument ";" for "-f, --quantized-file" flag: no file named`},
		{[]string{"--format", "plain", "-m", "x"}, `invalid value "plain" for --format: not supported by this engine (GGUF files only)`},
		{[]string{"--format", "ggml", "-m", "x"}, `invalid value "ggml" for --format: not supported by this engine (GGUF files only)`},
		{[]string{"--format", "onnx", "-m", "x"}, `invalid value "onnx" for --format: must be "gguf", "plain" or "ggml"`},
		{[]string{"-f", "a.gguf;b.ggml"}, `invalid value "a.gguf;b.ggml" for --quantized-file: mixes .gguf and .ggml files`},
		{[]string{"-f", "a.ggml"}, `invalid value "ggml" for --format: not supported by this engine (GGUF files only)`},
		{[]string{"-c", txt}, fmt.Sprintf("invalid value %q for --chat-template: must be a .jinja file or a tokenizer_config .json file", txt)},
		{[]string{"-c", filepath.Join(dir, "none.jinja")}, fmt.Sprintf("invalid value %q for --chat-template: cannot read the file: no such file or directory", filepath.Join(dir, "none.jinja"))},
		{[]string{"-j", filepath.Join(dir, "x.json")}, fmt.Sprintf("invalid value %q for --jinja-explicit: must be a .jinja file", filepath.Join(dir, "x.json"))},
	} {
		_, err := parseFlags(t, tc.args...)
		if err == nil {
			t.Errorf("%q: no error, want %q", tc.args, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %q, want %q", tc.args, err, tc.want)
		}
	}
}

func TestLoadTOMLExtension(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"c.yaml", "c.toml.bak", "c", "toml"} {
		p := writeFile(t, dir, name, minimalTOML)
		_, _, err := LoadTOML(p)
		if err == nil || err.Error() != "mistralrs-cli config files must be .toml" {
			t.Errorf("%s: error %v, want mistral.rs's message", name, err)
		}
	}
	if _, _, err := LoadTOML(writeFile(t, dir, "C.TOML", minimalTOML)); err != nil {
		t.Errorf(".TOML (upper case): %v", err)
	}
	if _, _, err := LoadTOML(filepath.Join(dir, "missing.toml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestLoadTOMLFull(t *testing.T) {
	dir := t.TempDir()
	tmpl := writeFile(t, dir, "t.jinja", "x")
	text := fmt.Sprintf(`
command = "serve"
default_model_id = "b"

[global]
seed = 5
log = "req.log"

[server]
host = "127.0.0.1"
port = 8080
access_log_format = "json"
disable_metrics = true

[runtime]
max_seqs = 4
chat_template = %[1]q

[paged_attn]
mode = "on"
block_size = 16
memory_fraction = 0.25

[[models]]
model_id = "a"
[models.format]
quantized_file = ["x-00001-of-00002.gguf", "x-00002-of-00002.gguf"]

[[models]]
model_id = "b"
kind = "text"
jinja_explicit = %[1]q
[models.format]
format = "gguf"
quantized_file = "y.gguf"
[models.device]
hf_cache = "/cache"
`, tmpl)
	c, warns, err := loadString(t, text)
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("warnings %v", warns)
	}
	if *c.Global.Seed != 5 || c.Global.Log != "req.log" || c.Server.Host != "127.0.0.1" || c.Server.Port != 8080 ||
		c.Server.AccessLogFormat != "json" || !c.Server.DisableMetrics || c.Runtime.MaxSeqs != 4 ||
		c.PagedAttn.Mode != "on" || c.PagedAttn.BlockSize != 16 || *c.PagedAttn.MemoryFraction != 0.25 {
		t.Errorf("loaded %+v", c)
	}
	if len(c.Models) != 2 || c.Models[0].Kind != "auto" || c.Models[1].Kind != "text" ||
		len(c.Models[0].Format.QuantizedFile) != 2 || c.Models[1].Format.QuantizedFile[0] != "y.gguf" ||
		c.Models[1].Device.HFCache != "/cache" {
		t.Errorf("models %+v", c.Models)
	}
	if c.DefaultModelIndex() != 1 {
		t.Errorf("default model index %d", c.DefaultModelIndex())
	}
	if c.ChatTemplateFor(0) != tmpl || c.ChatTemplateFor(1) != tmpl {
		t.Errorf("templates %q %q", c.ChatTemplateFor(0), c.ChatTemplateFor(1))
	}
	// No default_model_id: the first model.
	c, _, err = loadString(t, "[[models]]\nmodel_id = \"a\"\n[[models]]\nmodel_id = \"b\"\n")
	if err != nil || c.DefaultModelIndex() != 0 || c.Command != "serve" {
		t.Errorf("first model default: %v %v", err, c)
	}
}

func TestChatTemplatePrecedence(t *testing.T) {
	c := Default()
	c.Models = []ModelConfig{DefaultModel()}
	m := &c.Models[0]
	if c.ChatTemplateFor(0) != "" {
		t.Error("template without any setting")
	}
	steps := []struct {
		set  func()
		want string
	}{
		{func() { c.Runtime.ChatTemplate = "rt.json" }, "rt.json"},
		{func() { m.ChatTemplate = "m.jinja" }, "m.jinja"},
		{func() { c.Runtime.JinjaExplicit = "rj.jinja" }, "rj.jinja"},
		{func() { m.JinjaExplicit = "mj.jinja" }, "mj.jinja"},
	}
	for _, s := range steps {
		s.set()
		if got := c.ChatTemplateFor(0); got != s.want {
			t.Errorf("template %q, want %q", got, s.want)
		}
	}
}

func TestPagedAttnPrecedence(t *testing.T) {
	for _, tc := range []struct {
		toml   string
		budget KVBudget
		warn   string
	}{
		{"", KVBudget{Fraction: 0.9}, ""},
		{"memory_mb = 100", KVBudget{MemoryMB: 100}, ""},
		{"context_len = 200", KVBudget{ContextLen: 200}, ""},
		{"memory_fraction = 0.3", KVBudget{Fraction: 0.3}, ""},
		{"memory_mb = 100\nmemory_fraction = 0.3", KVBudget{Fraction: 0.3}, "paged_attn.memory_mb: ignored: paged_attn.memory_fraction is set and wins"},
		{"memory_mb = 100\ncontext_len = 200", KVBudget{ContextLen: 200}, "paged_attn.memory_mb: ignored: paged_attn.context_len is set and wins"},
		{"context_len = 200\nmemory_fraction = 0.3", KVBudget{Fraction: 0.3}, "paged_attn.context_len: ignored: paged_attn.memory_fraction is set and wins"},
	} {
		c, warns, err := loadString(t, "[paged_attn]\n"+tc.toml+"\n"+modelsTOML)
		if err != nil {
			t.Errorf("%q: %v", tc.toml, err)
			continue
		}
		if b := c.PagedAttn.Budget(); b != tc.budget {
			t.Errorf("%q: budget %+v, want %+v", tc.toml, b, tc.budget)
		}
		got := ""
		if len(warns) > 0 {
			got = warns[0].String()
		}
		if got != tc.warn || len(warns) > 1 {
			t.Errorf("%q: warnings %v, want %q", tc.toml, warns, tc.warn)
		}
	}
	_, _, err := loadString(t, "[paged_attn]\nmemory_mb = 1\ncontext_len = 2\nmemory_fraction = 0.5\n"+modelsTOML)
	if err == nil || !strings.Contains(err.Error(), "paged_attn: memory_mb, context_len and memory_fraction are all set; set at most one") {
		t.Errorf("all three: %v", err)
	}
	// Paged attention is on unless turned off, auto included.
	for mode, on := range map[string]bool{"auto": true, "on": true, "off": false} {
		if (PagedAttnConfig{Mode: mode}).Enabled() != on {
			t.Errorf("mode %s: Enabled %v", mode, !on)
		}
	}
}

func TestTOMLErrors(t *testing.T) {
	dir := t.TempDir()
	tmpl := writeFile(t, dir, "t.jinja", "x")
	m := modelsTOML
	for _, tc := range []struct {
		toml string
		want string
	}{
		{"", "Config must define at least one model in [[models]]"},
		{"command = \"serve\"\n", "Config must define at least one model in [[models]]"},
		{"command = \"chat\"\n" + m, `command = "chat": must be "serve" or "run"`},
		{"command = 1\n[[models]]\nmodel_id = \"m\"\n", `line 1 (last key "command"): incompatible types: TOML value has type int64; destination has type string`},
		{"[server]\nport = 0\n" + m, "server.port = 0: must be between 1 and 65535"},
		{"[server]\nport = 70000\n" + m, "server.port = 70000: must be between 1 and 65535"},
		{"[server]\nport = \"80\"\n" + m, `(last key "server.port"): incompatible types`},
		{"[server]\nport = 1.5\n" + m, `(last key "server.port"): incompatible types`},
		{"[server]\nport = 99999999999999999999\n" + m, `(last key "server.port"): 99999999999999999999 is out of range`},
		{"[server]\nhost = \"\"\n" + m, `server.host = "": must be a host name or IP address`},
		{"[server]\naccess_log_format = \"xml\"\n" + m, `server.access_log_format = "xml": must be "text" or "json"`},
		{"[server]\nno_ui = \"yes\"\n" + m, `(last key "server.no_ui"): incompatible types`},
		{"server = 1\n" + m, `(last key "server"): type mismatch`},
		{"[global]\nseed = -1\n" + m, "global.seed = -1: must not be negative"},
		{"[global]\nseed = \"x\"\n" + m, `(last key "global.seed"): incompatible types`},
		{"[runtime]\nmax_seqs = 0\n" + m, "runtime.max_seqs = 0: must be at least 1"},
		{"[runtime]\nmax_seqs = -3\n" + m, "runtime.max_seqs = -3: must be at least 1"},
		{"[runtime]\nmax_num_batched_tokens = 0\n" + m, "runtime.max_num_batched_tokens = 0: must be at least 1"},
		{"[runtime]\nmax_decode_steps_before_prefill = 0\n" + m, "runtime.max_decode_steps_before_prefill = 0: must be at least 1"},
		{"[runtime]\nprefix_cache_n = -1\n" + m, "runtime.prefix_cache_n = -1: must not be negative"},
		{"[runtime]\nthreads = -1\n" + m, "runtime.threads = -1: must not be negative"},
		{"[server]\nidle_timeout_secs = -1\n" + m, "server.idle_timeout_secs = -1: must not be negative"},
		{"[server]\nmax_connections = -5\n" + m, "server.max_connections = -5: must not be negative"},
		{"[server]\ngrammar_cache_mb = 2000000\n" + m, "server.grammar_cache_mb = 2000000: must be between 1 and 1048576"},
		{"[runtime]\nchat_template = \"x.txt\"\n" + m, `runtime.chat_template = "x.txt": must be a .jinja file or a tokenizer_config .json file`},
		{"[runtime]\nchat_template = \"/nonexistent/x.jinja\"\n" + m, `runtime.chat_template = "/nonexistent/x.jinja": cannot read the file: no such file or directory`},
		{fmt.Sprintf("[runtime]\nchat_template = %q\n", dir+"/d.jinja") + m, "cannot read the file"},
		{"[paged_attn]\nmode = \"yes\"\n" + m, `paged_attn.mode = "yes": must be "auto", "on" or "off"`},
		{"[paged_attn]\nmode = true\n" + m, `(last key "paged_attn.mode"): incompatible types`},
		{"[paged_attn]\nblock_size = 0\n" + m, "paged_attn.block_size = 0: must be between 1 and 1024"},
		{"[paged_attn]\nblock_size = 4096\n" + m, "paged_attn.block_size = 4096: must be between 1 and 1024"},
		{"[paged_attn]\ncache_type = \"q5_k\"\n" + m, `paged_attn.cache_type = "q5_k": must be one of auto (f16), f32, f16, bf16, q8_0, q4_0, f8e4m3`},
		{"[paged_attn]\ncache_type_v = \"int8\"\n" + m, `paged_attn.cache_type_v = "int8": must be one of auto (f16), f32, f16, bf16, q8_0, q4_0, f8e4m3`},
		{"[paged_attn]\ncache_type = \"\"\n" + m, `paged_attn.cache_type = "": must be one of`},
		{"[paged_attn]\nmemory_mb = -1\n" + m, "paged_attn.memory_mb = -1: must be positive"},
		{"[paged_attn]\ncontext_len = 0\n" + m, "paged_attn.context_len = 0: must be positive"},
		{"[paged_attn]\nmemory_fraction = 0.0\n" + m, "paged_attn.memory_fraction = 0: must be in (0, 1]"},
		{"[paged_attn]\nmemory_fraction = 1.01\n" + m, "paged_attn.memory_fraction = 1.01: must be in (0, 1]"},
		{"[paged_attn]\nmemory_fraction = nan\n" + m, "paged_attn.memory_fraction = NaN: must be in (0, 1]"},
		{"[paged_attn]\nmemory_fraction = -inf\n" + m, "paged_attn.memory_fraction = -Inf: must be in (0, 1]"},
		{"[[models]]\n", "models[0].model_id: missing; every [[models]] entry needs a model_id"},
		{"[[models]]\nmodel_id = \"a\"\n[[models]]\nmodel_id = \"a\"\n", `models[1].model_id = "a": already used by models[0]; model ids must be unique`},
		{"[[models]]\nmodel_id = 3\n", `(last key "models.model_id"): incompatible types`},
		{"models = 3\n", `(last key "models"): incompatible types`},
		{"[[models]]\nmodel_id = \"a\"\nkind = \"speech\"\n", `models[0].kind = "speech": not supported by this engine (text, multimodal and embedding models only)`},
		{"[[models]]\nmodel_id = \"a\"\nkind = \"robot\"\n", `models[0].kind = "robot": must be "auto", "text", "multimodal" or "embedding"`},
		{"[runtime]\nmtp_model = \"d.gguf\"\n[[models]]\nmodel_id = \"a\"\nkind = \"embedding\"\n",
			`models[0].kind = "embedding": runtime.mtp_model does not apply, an embedding model generates no tokens to speculate on`},
		{"[[models]]\nmodel_id = \"a\"\n[[models]]\nmodel_id = \"b\"\nkind = \"embedding\"\nspec_ngram = 3\n",
			`models[1].kind = "embedding": models[1].spec_ngram does not apply, an embedding model generates no tokens to speculate on`},
		{"[[models]]\nmodel_id = \"a\"\n[models.format]\nformat = \"plain\"\n", `models[0].format.format = "plain": not supported by this engine (GGUF files only)`},
		{"[[models]]\nmodel_id = \"a\"\n[models.format]\nformat = \"x\"\n", `models[0].format.format = "x": must be "gguf", "plain" or "ggml"`},
		{"[[models]]\nmodel_id = \"a\"\n[models.format]\nquantized_file = [\"a.gguf\", \"b.ggml\"]\n", `models[0].format.quantized_file = "a.gguf;b.ggml": mixes .gguf and .ggml files`},
		{"[[models]]\nmodel_id = \"a\"\n[models.format]\nquantized_file = 3\n", `(last key "models.format.quantized_file"): expected a string or an array of strings, found an integer`},
		{"[[models]]\nmodel_id = \"a\"\n[models.format]\nquantized_file = [3]\n", `expected a string or an array of strings, found an array holding an integer`},
		{"[[models]]\nmodel_id = \"a\"\nchat_template = \"t.txt\"\n", `models[0].chat_template = "t.txt": must be a .jinja file`},
		{"[[models]]\nmodel_id = \"a\"\njinja_explicit = \"t.json\"\n", `models[0].jinja_explicit = "t.json": must be a .jinja file`},
		{"[[models]]\nmodel_id = \"a\"\n[models.device]\ncpu = true\n[[models]]\nmodel_id = \"b\"\n", "cpu must be consistent across all models (found both true and false)"},
		{"default_model_id = \"z\"\n[[models]]\nmodel_id = \"a\"\n[[models]]\nmodel_id = \"b\"\n", `default_model_id = "z": matches no model_id (models: "a", "b")`},
		{"[server\n" + m, "expected '.' or ']' to end table name"},
		{"a = 1\na = 2\n" + m, "has already been defined"},
	} {
		_, _, err := loadString(t, tc.toml)
		if err == nil {
			t.Errorf("%q: no error, want %q", tc.toml, tc.want)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\nerror %q\nwant  %q", tc.toml, err, tc.want)
		}
		if !strings.Contains(err.Error(), "config.toml: ") {
			t.Errorf("%q: error %q does not name the file", tc.toml, err)
		}
	}
	// A good template path passes.
	if _, _, err := loadString(t, fmt.Sprintf("[runtime]\nchat_template = %q\n", tmpl)+m); err != nil {
		t.Error(err)
	}
}

func TestUnknownKeyWarnings(t *testing.T) {
	c, warns, err := loadString(t, `
command = "serve"
thinking = true
colour = "blue"
[global]
token_source = "cache"
[server]
prot = 80
mcp_port = 4321
[runtime]
max_seq = 3
matformer_slice_name = "s"
[paged_attn]
cache_type = "f8e4m3"
[sandbox]
mode = "on"
max_procs = 3
[extra]
a = 1
[[models]]
model_id = "a"
dtype = "bf16"
weird = 1
[models.format]
quantized_fille = "x.gguf"
[models.adapter]
enable_lora = true
lora_max_rankk = 8
[models.quantization]
isq = "q4k"
imatrix = "i.dat"
[[models]]
model_id = "b"
weird = 2
[models.device]
max_seq_len = 4096
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Models) != 2 {
		t.Fatalf("%d models", len(c.Models))
	}
	if c.PagedAttn.CacheType != "f8e4m3" { // mistral.rs's own type loads as it is now
		t.Errorf("paged_attn.cache_type %q, want f8e4m3", c.PagedAttn.CacheType)
	}
	var got []string
	for _, w := range warns {
		got = append(got, w.String())
	}
	want := []string{
		"colour: unknown key; ignored",
		"extra: unknown key; ignored",
		"models.adapter.lora_max_rankk: unknown key; ignored (did you mean models.adapter.lora_max_rank?)",
		"models.device.max_seq_len: not supported by this server; ignored",
		"models.dtype: not supported by this server; ignored",
		"models.format.quantized_fille: unknown key; ignored (did you mean models.format.quantized_file?)",
		"models.quantization.imatrix: not supported by this server; ignored",
		"models.weird: unknown key; ignored",
		"runtime.matformer_slice_name: not supported by this server; ignored",
		"runtime.max_seq: unknown key; ignored (did you mean runtime.max_seqs?)",
		"sandbox: not supported by this server; ignored",
		"server.mcp_port: not supported by this server; ignored",
		"server.prot: unknown key; ignored (did you mean server.port?)",
		"thinking: not supported by this server; ignored (run-only)",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestApplyEnv(t *testing.T) {
	c := Default()
	w := c.ApplyEnv(func(k string) string {
		return map[string]string{"KEEP_ALIVE_INTERVAL": "250", "RUST_LOG": "mistralrs=debug"}[k]
	})
	if len(w) != 0 || c.Server.KeepAliveInterval != 250*time.Millisecond || c.Global.LogFilter != "mistralrs=debug" {
		t.Errorf("env: %v %v %q", w, c.Server.KeepAliveInterval, c.Global.LogFilter)
	}
	for _, bad := range []string{"x", "-5", "0", "1.5"} {
		c := Default()
		w := c.ApplyEnv(func(k string) string {
			if k == "KEEP_ALIVE_INTERVAL" {
				return bad
			}
			return ""
		})
		want := fmt.Sprintf("KEEP_ALIVE_INTERVAL: invalid value %q (want a positive number of milliseconds); using 10s", bad)
		if len(w) != 1 || w[0].String() != want || c.Server.KeepAliveInterval != 10*time.Second {
			t.Errorf("%q: %v, interval %v", bad, w, c.Server.KeepAliveInterval)
		}
	}
	c = Default()
	if w := c.ApplyEnv(func(string) string { return "" }); len(w) != 0 || c.Server.KeepAliveInterval != 10*time.Second {
		t.Errorf("empty env: %v %v", w, c.Server.KeepAliveInterval)
	}
}

// MISTRALRS_API_KEY fills server.api_key unless a flag or the TOML file set it.
func TestAPIKeyEnv(t *testing.T) {
	env := func(k string) string { return map[string]string{"MISTRALRS_API_KEY": "from-env"}[k] }
	c := Default()
	if w := c.ApplyEnv(env); len(w) != 0 || c.Server.APIKey != "from-env" {
		t.Errorf("env only: %v %q", w, c.Server.APIKey)
	}
	c = Default()
	c.Server.APIKey = "from-flag"
	if c.ApplyEnv(env); c.Server.APIKey != "from-flag" {
		t.Errorf("flag and env: %q, want the flag's", c.Server.APIKey)
	}
}

// The GenAI content-capture variable turns capture on; an invalid value
// warns and leaves it off. A bad traces endpoint is refused by Validate.
func TestOTLPSettings(t *testing.T) {
	const env = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
	for v, want := range map[string]bool{"true": true, "1": true, "false": false, "": false} {
		c := Default()
		if w := c.ApplyEnv(func(k string) string { return map[string]string{env: v}[k] }); len(w) != 0 || c.Server.OTLPCaptureContent != want {
			t.Errorf("%s=%q: %v, capture %v", env, v, w, c.Server.OTLPCaptureContent)
		}
	}
	c := Default()
	w := c.ApplyEnv(func(k string) string { return map[string]string{env: "yes please"}[k] })
	if len(w) != 1 || !strings.Contains(w[0].String(), "want true or false") || c.Server.OTLPCaptureContent {
		t.Errorf("invalid value: %v, capture %v", w, c.Server.OTLPCaptureContent)
	}
	for _, bad := range []string{"collector:4318", "grpc://collector:4317", "http://"} {
		_, _, err := loadString(t, "[server]\notlp_traces_endpoint = \""+bad+"\"\n[[models]]\nmodel_id = \"m\"\n")
		if err == nil || !strings.Contains(err.Error(), "server.otlp_traces_endpoint") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// --allowed-origins replaces the default "*", splits on commas and appends when repeated.
func TestAllowedOriginsFlag(t *testing.T) {
	c := Default()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	BindServeFlags(fs, c)
	if !c.Server.AllowedOrigins.Any() {
		t.Fatalf("default %q does not allow any origin", c.Server.AllowedOrigins)
	}
	if err := fs.Parse([]string{"--allowed-origins", "https://a.example/, https://b.example", "--allowed-origins=http://localhost:3000"}); err != nil {
		t.Fatal(err)
	}
	want := OriginList{"https://a.example", "https://b.example", "http://localhost:3000"}
	if !reflect.DeepEqual(c.Server.AllowedOrigins, want) || c.Server.AllowedOrigins.Any() {
		t.Errorf("origins %q, want %q", c.Server.AllowedOrigins, want)
	}
	cfg, _, err := loadString(t, "[server]\nallowed_origins = \"https://x.example,https://y.example\"\n[[models]]\nmodel_id = \"m\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Server.AllowedOrigins; len(got) != 2 || got[1] != "https://y.example" {
		t.Errorf("TOML string: %q", got)
	}
	if _, _, err := loadString(t, "[server]\nallowed_origins = [1]\n[[models]]\nmodel_id = \"m\"\n"); err == nil {
		t.Error("allowed_origins = [1] loaded")
	}
}

func TestValueErrorNaming(t *testing.T) {
	// A Config built in code names the TOML key.
	c := Default()
	c.Models = []ModelConfig{{Kind: "auto", ModelID: "x"}}
	c.Server.Port = -1
	if err := c.Validate(); err == nil || err.Error() != "server.port = -1: must be between 1 and 65535" {
		t.Errorf("%v", err)
	}
	c.Server.Port = 1
	c.Server.KeepAliveInterval = 0
	if err := c.Validate(); err == nil || err.Error() != "KEEP_ALIVE_INTERVAL = 0s: must be positive" {
		t.Errorf("%v", err)
	}
	c.Server.KeepAliveInterval = time.Second
	c.Command = ""
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "command: missing") {
		t.Errorf("%v", err)
	}
	var ve *ValueError
	c.Command = "serve"
	c.Runtime.MaxSeqs = 0
	err := c.Validate()
	if !asValueError(err, &ve) || ve.Key != "runtime.max_seqs" || ve.Flag != "--max-seqs" || ve.Value != 0 {
		t.Errorf("ValueError %+v", ve)
	}
}

func asValueError(err error, ve **ValueError) bool {
	v, ok := err.(*ValueError)
	*ve = v
	return ok
}

func TestFileListTOMLForms(t *testing.T) {
	for text, want := range map[string][]string{
		`"a.gguf"`:                    {"a.gguf"},
		`"a.gguf; b.gguf;"`:           {"a.gguf", "b.gguf"},
		`["a.gguf", "b.gguf;c.gguf"]`: {"a.gguf", "b.gguf", "c.gguf"},
		`[]`:                          {},
	} {
		c, _, err := loadString(t, "[[models]]\nmodel_id = \"m\"\n[models.format]\nquantized_file = "+text+"\n")
		if err != nil {
			t.Errorf("%s: %v", text, err)
			continue
		}
		if got := []string(c.Models[0].Format.QuantizedFile); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
			t.Errorf("%s: %q, want %q", text, got, want)
		}
	}
}

// FuzzLoadTOML: arbitrary file contents never panic; an accepted file is a
// valid config.
func FuzzLoadTOML(f *testing.F) {
	f.Add([]byte(minimalTOML))
	f.Add([]byte("[server]\nport = 70000\n[[models]]\nmodel_id = \"a\"\n[models.format]\nquantized_file = [\"a\", 1]\n"))
	f.Add([]byte("[paged_attn]\nmemory_mb = 1\ncontext_len = 2\nmemory_fraction = 0.5\n[[models]]\nmodel_id = \"a\"\n"))
	f.Add([]byte("[global]\nseed = -9\n[sandbox]\nx = [1, {a = 2}]\n[[models]]\nmodel_id = \"a\"\n[models.adapter.lora]\n"))
	f.Add([]byte("models = [{model_id = \"a\", format = {quantized_file = \"x.gguf\"}}]\nserver = {port = 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, _, err := parseTOML("fuzz.toml", data)
		if err != nil {
			if c != nil {
				t.Fatal("config returned with an error")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config fails Validate: %v", err)
		}
		_ = c.PagedAttn.Budget()
		_ = c.ChatTemplateFor(c.DefaultModelIndex())
	})
}

// TestDocsListEveryOption keeps docs/configuration.md true to the table.
func TestDocsListEveryOption(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Skipf("docs not found: %v", err)
	}
	doc := string(data)
	for _, o := range Options {
		if o.Key != "" && !strings.Contains(doc, "`"+o.Key+"`") {
			t.Errorf("docs/configuration.md does not list `%s`", o.Key)
		}
		if o.Flag != "" && !strings.Contains(doc, "--"+o.Flag+"`") {
			t.Errorf("docs/configuration.md does not list --%s", o.Flag)
		}
		if o.Env != "" && o.Env != "RUST_LOG" && !strings.Contains(doc, o.Env) {
			t.Errorf("docs/configuration.md does not mention %s", o.Env)
		}
	}
}

func TestBindServeFlagsOnZeroConfig(t *testing.T) {
	c := &Config{}
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	BindServeFlags(fs, c)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Command != "serve" || c.Server.KeepAliveInterval != 10*time.Second || c.Server.Port != 1234 {
		t.Errorf("%+v", c)
	}
}

// TestEmbeddingKind: kind = "embedding" loads (TOML, and `serve embedding`
// on the command line), and a proposer on such a model is refused.
func TestEmbeddingKind(t *testing.T) {
	c, _, err := loadString(t, "[runtime]\nspec_ngram = 3\n[[models]]\nmodel_id = \"a\"\n[[models]]\nmodel_id = \"e\"\nkind = \"embedding\"\n")
	if err != nil || c.Models[0].Kind != KindAuto || c.Models[1].Kind != KindEmbedding {
		t.Fatalf("%v %+v", err, c)
	}
	// [runtime]'s proposer is the first model's only: a later embedding
	// model without its own keys has none.
	if s := c.SpeculativeFor(1); s.DraftModel != "" || s.Ngram != 0 {
		t.Errorf("speculative settings of the embedding model: %+v", s)
	}

	c, err = parseFlags(t, "-m", "x.gguf")
	if err != nil {
		t.Fatal(err)
	}
	c.Models[0].Kind = KindEmbedding // what `serve embedding` sets
	if err := c.Validate(); err != nil {
		t.Errorf("serve embedding: %v", err)
	}
	c, _ = parseFlags(t, "-m", "x.gguf", "--spec-ngram")
	c.Models[0].Kind = KindEmbedding
	want := "--spec-ngram cannot be used with `serve embedding`: an embedding model generates no tokens to speculate on"
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Errorf("serve embedding --spec-ngram: %v", err)
	}
}

// --allowed-hosts / server.allowed_hosts: empty by default, a list of host
// names (no scheme, path or port), checked by Validate.
func TestAllowedHosts(t *testing.T) {
	c := Default()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	BindServeFlags(fs, c)
	if len(c.Server.AllowedHosts) != 0 {
		t.Fatalf("default %q", c.Server.AllowedHosts)
	}
	if err := fs.Parse([]string{"--allowed-hosts", "api.example, [::1]", "--allowed-hosts=.corp.example"}); err != nil {
		t.Fatal(err)
	}
	if want := (OriginList{"api.example", "[::1]", ".corp.example"}); !reflect.DeepEqual(c.Server.AllowedHosts, want) {
		t.Errorf("hosts %q, want %q", c.Server.AllowedHosts, want)
	}
	if f := fs.Lookup("allowed-hosts"); f == nil || f.Value.Type() != "hosts" {
		t.Errorf("flag %+v", f)
	}
	for _, bad := range []string{"http://api.example", "api.example:8080", "api.example/v1", "a b"} {
		text := fmt.Sprintf("[server]\nallowed_hosts = [%q]\n[[models]]\nmodel_id = \"m\"\n", bad)
		if _, _, err := loadString(t, text); err == nil || !strings.Contains(err.Error(), "server.allowed_hosts") {
			t.Errorf("allowed_hosts = [%q]: %v", bad, err)
		}
	}
	for _, good := range []string{"localhost", "127.0.0.1", "::1", "[::1]", ".example.com", "*"} {
		text := fmt.Sprintf("[server]\nallowed_hosts = [%q]\n[[models]]\nmodel_id = \"m\"\n", good)
		if _, _, err := loadString(t, text); err != nil {
			t.Errorf("allowed_hosts = [%q]: %v", good, err)
		}
	}
}

// isq (and mistral.rs's alias in_situ_quant) in [models.quantization], and
// --isq, set the model's in-situ quantization; an unknown type is an error
// naming the key or the flag.
func TestISQKey(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.toml")
	load := func(body string) (*Config, error) {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		c, _, err := LoadTOML(path)
		return c, err
	}
	c, err := load("command = \"serve\"\n[[models]]\nmodel_id = \"a\"\n[models.quantization]\nisq = \"Q4K\"\n" +
		"[[models]]\nmodel_id = \"b\"\n[models.quantization]\nin_situ_quant = \"q8_0\"\n[[models]]\nmodel_id = \"c\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{c.Models[0].Quantization.ISQ, c.Models[1].Quantization.ISQ, c.Models[2].Quantization.ISQ}; !reflect.DeepEqual(got, []string{"Q4K", "q8_0", ""}) {
		t.Errorf("isq %q", got)
	}
	_, err = load("command = \"serve\"\n[[models]]\nmodel_id = \"a\"\n[models.quantization]\nisq = \"q3k\"\n")
	if err == nil || !strings.Contains(err.Error(), `models[0].quantization.isq = "q3k": not a supported ISQ type`) {
		t.Errorf("q3k: %v", err)
	}
	fc := Default()
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	BindServeFlags(fs, fc)
	if err := fs.Parse([]string{"-f", "m.gguf", "--isq", "hqq4"}); err != nil {
		t.Fatal(err)
	}
	if err := fc.Validate(); err == nil || err.Error() != `invalid value "hqq4" for --isq: not a supported ISQ type (q4_0, q4_1, q5_0, q5_1, q8_0, q4k, q5k, q6k)` {
		t.Errorf("--isq hqq4: %v", err)
	}
}
