package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"mistralrs/internal/hub"
)

// MaxLoRAAliasBytes is the longest LoRA adapter alias, in bytes of UTF-8
// (mistral.rs's MAX_LORA_ALIAS_BYTES, 256; the spec names it without its
// value).
const MaxLoRAAliasBytes = 256

// ModelAdapter is [models.adapter]: the model's LoRA adapters. Dynamic LoRA
// (mistral.rs's and vLLM's multi-LoRA: adapters chosen per request, loaded
// and unloaded at run time) is on when EnableLoRA is set or an adapter is
// preloaded; the limits bound its registry. mistral.rs's legacy LoRA and
// X-LoRA keys are read only to be refused.
type ModelAdapter struct {
	EnableLoRA  bool      `toml:"enable_lora"`
	LoRA        LoRAList  `toml:"lora"`
	MaxAdapters *int      `toml:"lora_max_adapters"` // nil in a decoded entry until LoadTOML gives it the default
	MaxRank     *int      `toml:"lora_max_rank"`
	MaxBytes    *ByteSize `toml:"lora_max_bytes"`

	LegacyLoRA          string `toml:"legacy_lora"`
	LegacyLoRAOrder     string `toml:"legacy_lora_order"`
	XLoRA               string `toml:"xlora"`
	XLoRAOrder          string `toml:"xlora_order"`
	TgtNonGranularIndex *int   `toml:"tgt_non_granular_index"`
}

// LoRAModule is one preloaded LoRA adapter of a served model. On the
// command line it is ALIAS=SOURCE or vLLM's --lora-modules JSON object
// ({"name", "path", "revision"?, "base_model_name"?, "is_3d_lora_weight"?});
// in TOML an entry of [models.adapter] lora.
type LoRAModule struct {
	Alias string `toml:"alias"`
	// Source is the adapter as given: a llama.cpp GGUF adapter file, a
	// folder holding one or a PEFT adapter (adapter_config.json +
	// adapter_model.safetensors), or a Hugging Face repository ORG/NAME.
	Source string `toml:"source"`
	// Revision is the Hugging Face revision (branch, tag or commit) of a
	// repository Source; "" means main. LoRAFor hands "main" then, and ""
	// for a local Source.
	Revision string `toml:"revision"`
	// BaseModelName is vLLM's lineage metadata: the model the adapter was
	// trained on. It may not name another served model (an adapter is
	// served on the model whose entry lists it).
	BaseModelName string `toml:"base_model_name"`
	// Path is the adapter on local disk: the .gguf file or the PEFT folder
	// (a Hub repository's snapshot folder, once Fetch has downloaded it).
	Path string `toml:"-"`
}

// LoRARuntime is one served model's dynamic LoRA, as LoRAFor resolves it:
// the adapters to load at startup, in order, with local paths, and the
// limits of its registry.
type LoRARuntime struct {
	Preload     []LoRAModule
	MaxAdapters int   // aliases loaded at once (and, apart, resident generations)
	MaxRank     int   // the largest rank an adapter may have
	MaxBytes    int64 // memory all loaded adapters' tensors may take
}

// LoRAList is the --lora flag (also --lora-modules): each value adds one
// adapter. Several values after one flag are split into one flag each
// before parsing (ExpandFlagValues).
type LoRAList []LoRAModule

// String lists the adapters as ALIAS=SOURCE, comma-separated.
func (l *LoRAList) String() string {
	if l == nil {
		return ""
	}
	parts := make([]string, len(*l))
	for i, m := range *l {
		parts[i] = m.Alias + "=" + m.Source
	}
	return strings.Join(parts, ",")
}

// Set parses one ALIAS=SOURCE or JSON value and appends it.
func (l *LoRAList) Set(s string) error {
	m, err := ParseLoRA(s)
	if err != nil {
		return err
	}
	*l = append(*l, m)
	return nil
}

// Type is the placeholder in the help text.
func (l *LoRAList) Type() string { return "alias=source|json" }

// ParseLoRA reads one --lora value: ALIAS=SOURCE (split at the first "=",
// both trimmed) or, when it starts with "{", vLLM's JSON object, whose
// unknown fields are refused (the one place mistral.rs denies unknown
// fields in its configuration). is_3d_lora_weight is accepted and ignored,
// as mistral.rs does.
func ParseLoRA(s string) (LoRAModule, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") {
		alias, source, ok := strings.Cut(s, "=")
		if !ok {
			return LoRAModule{}, errors.New(`expected ALIAS=SOURCE or a JSON object with "name" and "path"`)
		}
		return LoRAModule{Alias: strings.TrimSpace(alias), Source: strings.TrimSpace(source)}, nil
	}
	var obj struct {
		Name          *string `json:"name"`
		Path          *string `json:"path"`
		Revision      *string `json:"revision"`
		BaseModelName *string `json:"base_model_name"`
		Is3D          *bool   `json:"is_3d_lora_weight"`
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&obj); err != nil {
		return LoRAModule{}, fmt.Errorf("invalid LoRA module JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return LoRAModule{}, errors.New("invalid LoRA module JSON: text after the object")
	}
	switch {
	case obj.Name == nil:
		return LoRAModule{}, errors.New(`invalid LoRA module JSON: missing field "name"`)
	case obj.Path == nil:
		return LoRAModule{}, errors.New(`invalid LoRA module JSON: missing field "path"`)
	case obj.Revision != nil && strings.TrimSpace(*obj.Revision) == "":
		return LoRAModule{}, errors.New(`invalid LoRA module JSON: "revision" must not be empty (leave it out for main)`)
	case obj.BaseModelName != nil && strings.TrimSpace(*obj.BaseModelName) == "":
		return LoRAModule{}, errors.New(`invalid LoRA module JSON: "base_model_name" must not be empty`)
	}
	m := LoRAModule{Alias: strings.TrimSpace(*obj.Name), Source: strings.TrimSpace(*obj.Path)}
	if obj.Revision != nil {
		m.Revision = strings.TrimSpace(*obj.Revision)
	}
	if obj.BaseModelName != nil {
		m.BaseModelName = strings.TrimSpace(*obj.BaseModelName)
	}
	return m, nil
}

// ExpandFlagValues turns "--lora A B C" (mistral.rs's several values after
// one flag, clap's num_args = 1..) into "--lora A --lora B --lora C", which
// pflag parses. A following argument counts as a value when it looks like
// one (ALIAS=SOURCE or a JSON object): a subcommand name, a flag or a "--"
// ends the run. "--lora=A" takes one value, as in clap.
func ExpandFlagValues(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		out = append(out, a)
		if a == "--" {
			return append(out, args[i+1:]...)
		}
		name, ok := strings.CutPrefix(a, "--")
		if !ok || string(NormalizeFlagName(nil, name)) != "lora" || i+1 >= len(args) {
			continue
		}
		out = append(out, args[i+1]) // the flag's own value, whatever it looks like
		i++
		for i+1 < len(args) && looksLikeLoRAValue(args[i+1]) {
			out = append(out, a, args[i+1])
			i++
		}
	}
	return out
}

func looksLikeLoRAValue(s string) bool {
	s = strings.TrimSpace(s)
	return !strings.HasPrefix(s, "-") && (strings.HasPrefix(s, "{") || strings.Contains(s, "="))
}

// ByteSize is a number of bytes: an integer, optionally followed by one of
// the suffixes b, kb, mb, gb (powers of 1000), kib, mib, gib (powers of
// 1024), in any case (--lora-max-bytes, lora_max_bytes).
type ByteSize int64

var byteSuffixes = map[string]int64{"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30}

// ParseByteSize reads "8589934592", "8GiB", "512 mb".
func ParseByteSize(s string) (ByteSize, error) {
	s = strings.TrimSpace(s)
	n := strings.IndexFunc(s, func(r rune) bool { return r < '0' || r > '9' })
	if n < 0 {
		n = len(s)
	}
	if n == 0 {
		return 0, fmt.Errorf("expected a byte count such as 8589934592 or 8gib")
	}
	mul, ok := byteSuffixes[strings.ToLower(strings.TrimSpace(s[n:]))]
	if !ok {
		return 0, fmt.Errorf("unknown suffix %q (b, kb, mb, gb, kib, mib or gib)", strings.TrimSpace(s[n:]))
	}
	v, err := strconv.ParseInt(s[:n], 10, 64)
	if err != nil || v > math.MaxInt64/mul {
		return 0, fmt.Errorf("too large")
	}
	return ByteSize(v * mul), nil
}

// UnmarshalTOML accepts an integer or a string with a suffix.
func (b *ByteSize) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		*b = ByteSize(x)
		return nil
	case string:
		n, err := ParseByteSize(x)
		if err != nil {
			return fmt.Errorf("%q: %v", x, err)
		}
		*b = n
		return nil
	}
	return fmt.Errorf("expected a byte count (an integer, or a string such as \"8gib\"), found %s", tomlType(v))
}

// optByteSize is the flag of an optional byte count.
type optByteSize struct{ p **ByteSize }

func (o optByteSize) String() string {
	if o.p == nil || *o.p == nil {
		return ""
	}
	return strconv.FormatInt(int64(**o.p), 10)
}
func (o optByteSize) Set(s string) error {
	v, err := ParseByteSize(s)
	if err != nil {
		return err
	}
	*o.p = &v
	return nil
}
func (o optByteSize) Type() string { return "bytes" }

// DynamicLoRA reports whether the model gets a dynamic LoRA runtime:
// enable_lora, or an adapter to preload (as in mistral.rs).
func (a *ModelAdapter) DynamicLoRA() bool { return a.EnableLoRA || len(a.LoRA) > 0 }

// limits are the runtime limits, the table's defaults where unset.
func (a *ModelAdapter) limits() (adapters, rank int, bytes int64) {
	adapters, rank = optionInt("models.adapter.lora_max_adapters"), optionInt("models.adapter.lora_max_rank")
	bytes = int64(OptionByKey("models.adapter.lora_max_bytes").Default.(ByteSize))
	if a.MaxAdapters != nil {
		adapters = *a.MaxAdapters
	}
	if a.MaxRank != nil {
		rank = *a.MaxRank
	}
	if a.MaxBytes != nil {
		bytes = int64(*a.MaxBytes)
	}
	return adapters, rank, bytes
}

func optionInt(key string) int { return OptionByKey(key).Default.(int) }

// unsupported is the first of mistral.rs's legacy LoRA and X-LoRA settings
// that a sets (its key under [models.adapter], its value, which feature it
// belongs to); "" when none is. Validate refuses it.
func (a *ModelAdapter) unsupported() (key string, value any, what string) {
	for _, u := range []struct {
		key   string
		value string
		what  string
	}{
		{"legacy_lora", a.LegacyLoRA, "legacy LoRA"},
		{"legacy_lora_order", a.LegacyLoRAOrder, "legacy LoRA"},
		{"xlora", a.XLoRA, "X-LoRA"},
		{"xlora_order", a.XLoRAOrder, "X-LoRA"},
	} {
		if u.value != "" {
			return u.key, u.value, u.what
		}
	}
	if a.TgtNonGranularIndex != nil {
		return "tgt_non_granular_index", *a.TgtNonGranularIndex, "X-LoRA"
	}
	return "", nil, ""
}

// checkAdapter is validateModel's check of [models.adapter] (the flags
// --enable-lora, --lora, --lora-max-*): legacy LoRA and X-LoRA refused,
// the limits positive and changed only with dynamic LoRA on, the preloaded
// adapters' aliases non-empty, short and unique, their sources given, and
// no adapter setting on an embedding model.
func (c *Config) checkAdapter(i int) error {
	m := &c.Models[i]
	a := &m.Adapter
	k := func(name string) string { return fmt.Sprintf("models[%d].adapter.%s", i, name) }
	if key, v, what := a.unsupported(); key != "" {
		return c.bad(k(key), v, "%s is not supported by this server; dynamic LoRA is (%s, %s)",
			what, c.settingName("models.adapter.lora"), c.settingName("models.adapter.enable_lora"))
	}
	if err := c.checkAdapterEmbedding(i); err != nil {
		return err
	}
	adapters, rank, bytes := a.limits()
	for _, l := range []struct {
		key string
		v   int64
	}{{"lora_max_adapters", int64(adapters)}, {"lora_max_rank", int64(rank)}, {"lora_max_bytes", bytes}} {
		if l.v <= 0 {
			return c.bad(k(l.key), l.v, "must be greater than 0")
		}
	}
	if !a.DynamicLoRA() {
		if key := a.changedLimit(); key != "" {
			if c.origin == originFlags {
				return c.bad(k(key), nil, "a LoRA runtime limit needs dynamic LoRA: --enable-lora or at least one --lora adapter")
			}
			return c.bad(k(key), nil, "a LoRA runtime limit needs dynamic LoRA: enable_lora = true or at least one lora entry")
		}
		return nil
	}
	if len(a.LoRA) > adapters {
		return c.bad(k("lora"), nil, "%d adapters to preload, more than %s = %d", len(a.LoRA), c.settingName("models.adapter.lora_max_adapters"), adapters)
	}
	seen := map[string]bool{}
	for _, l := range a.LoRA {
		if err := c.checkLoRAModule(k("lora"), l, seen); err != nil {
			return err
		}
	}
	return nil
}

// changedLimit is the key of the first runtime limit that differs from its
// default ("" when none does): mistral.rs compares with the defaults, so
// giving a default explicitly is no change.
func (a *ModelAdapter) changedLimit() string {
	var d ModelAdapter
	da, dr, db := d.limits()
	ga, gr, gb := a.limits()
	switch {
	case ga != da:
		return "lora_max_adapters"
	case gr != dr:
		return "lora_max_rank"
	case gb != db:
		return "lora_max_bytes"
	}
	return ""
}

// checkLoRAModule checks one preloaded adapter; seen holds the aliases
// before it.
func (c *Config) checkLoRAModule(key string, l LoRAModule, seen map[string]bool) error {
	alias := strings.TrimSpace(l.Alias)
	switch {
	case alias == "":
		return c.bad(key, l.Alias+"="+l.Source, "the adapter alias must not be empty")
	case len(alias) > MaxLoRAAliasBytes:
		return c.bad(key, alias, "the adapter alias must not exceed %d bytes", MaxLoRAAliasBytes)
	case strings.IndexFunc(alias, unicode.IsControl) >= 0:
		return c.bad(key, alias, "the adapter alias must not hold control characters")
	case seen[alias]:
		return c.bad(key, alias, "the adapter alias is given more than once; aliases must be unique")
	case strings.TrimSpace(l.Source) == "":
		return c.bad(key, alias, "the adapter has no source (a .gguf file, a folder or a Hugging Face repository ORG/NAME)")
	case l.Revision != "" && strings.TrimSpace(l.Revision) == "":
		return c.bad(key, alias, "the adapter's revision must not be blank (leave it out for main)")
	case l.BaseModelName != "" && strings.TrimSpace(l.BaseModelName) == "":
		return c.bad(key, alias, "the adapter's base_model_name must not be blank")
	}
	seen[alias] = true
	return nil
}

// checkAdapterEmbedding refuses any adapter setting on an embedding model,
// as mistral.rs's `serve embedding` has no adapter options.
func (c *Config) checkAdapterEmbedding(i int) error {
	m := &c.Models[i]
	if m.Kind != KindEmbedding {
		return nil
	}
	a := &m.Adapter
	key := ""
	switch {
	case a.EnableLoRA:
		key = "enable_lora"
	case len(a.LoRA) > 0:
		key = "lora"
	default:
		key = a.changedLimit()
	}
	if key == "" {
		return nil
	}
	if c.origin == originFlags {
		return fmt.Errorf("%s cannot be used with `serve embedding`: an embedding model takes no LoRA adapters", c.settingName("models.adapter."+key))
	}
	return fmt.Errorf("models[%d].kind = %q: adapter.%s does not apply, an embedding model takes no LoRA adapters", i, KindEmbedding, key)
}

// checkLoRABaseModels refuses a preloaded adapter whose base_model_name
// names another served model (ids: each model id with its entry's index):
// the adapter would be served on a model it says it was not made for.
func (c *Config) checkLoRABaseModels(ids map[string]int) error {
	for i := range c.Models {
		for _, l := range c.Models[i].Adapter.LoRA {
			b := strings.TrimSpace(l.BaseModelName)
			if j, ok := ids[b]; ok && j != i {
				return c.bad(fmt.Sprintf("models[%d].adapter.lora", i), strings.TrimSpace(l.Alias),
					"base_model_name %q names another served model (models[%d]); list the adapter under that model's [models.adapter]", b, j)
			}
		}
	}
	return nil
}

// LoRAFor returns model i's dynamic LoRA: nil when it has none (no
// enable_lora and nothing to preload), else its limits and its preloaded
// adapters, each found on local disk now: a .gguf file; a folder holding a
// PEFT adapter (adapter_config.json + adapter_model.safetensors), which is
// the Path, or exactly one .gguf file, which is; or a Hugging Face
// repository in the model's hub cache (Fetch downloads it at startup).
// It never reaches the network. An error names the adapter and its source.
func (c *Config) LoRAFor(i int, getenv func(string) string) (*LoRARuntime, error) {
	m := &c.Models[i]
	a := &m.Adapter
	if !a.DynamicLoRA() {
		return nil, nil
	}
	rt := &LoRARuntime{}
	rt.MaxAdapters, rt.MaxRank, rt.MaxBytes = a.limits()
	for _, l := range a.LoRA {
		mod := LoRAModule{Alias: strings.TrimSpace(l.Alias), Source: strings.TrimSpace(l.Source),
			Revision: strings.TrimSpace(l.Revision), BaseModelName: strings.TrimSpace(l.BaseModelName), Path: l.Path}
		if err := resolveLoRA(&mod, m.Device.HFCache, getenv); err != nil {
			return nil, fmt.Errorf("%s: %w", c.loraName(i, mod), err)
		}
		rt.Preload = append(rt.Preload, mod)
	}
	return rt, nil
}

// loraName is how an error names a preloaded adapter.
func (c *Config) loraName(i int, m LoRAModule) string {
	if c.origin == originFlags {
		return fmt.Sprintf("--lora %s=%s", m.Alias, m.Source)
	}
	return fmt.Sprintf("models[%d].adapter.lora %q (source %q)", i, m.Alias, m.Source)
}

// resolveLoRA sets m.Path (unless Fetch has) and m.Revision: "main" for a
// Hugging Face repository given none, "" for a local source.
func resolveLoRA(m *LoRAModule, hfCache string, getenv func(string) string) error {
	if st, err := os.Stat(m.Source); err == nil {
		m.Revision = ""
		if !st.IsDir() {
			if !isGGUF(m.Source) {
				return fmt.Errorf("LoRA adapter %s is a file but not a .gguf adapter (a PEFT adapter is a folder: adapter_config.json + adapter_model.safetensors)", m.Source)
			}
			m.Path = m.Source
			return nil
		}
		p, err := adapterInFolder(m.Source)
		m.Path = p
		return err
	}
	if !isLoRAHubID(m.Source) {
		if looksLikePath(m.Source) {
			return fmt.Errorf("LoRA adapter %s: no such file or folder", m.Source)
		}
		return fmt.Errorf("LoRA adapter %q is neither a local .gguf file or folder nor a Hugging Face repository (ORG/NAME)", m.Source)
	}
	if m.Revision == "" {
		m.Revision = "main"
	}
	if m.Path != "" { // downloaded by Fetch
		if _, err := os.Stat(m.Path); err != nil {
			return fmt.Errorf("LoRA adapter %s: %v", m.Path, unwrapPathError(err))
		}
		return nil
	}
	cl := &hub.Client{CacheDir: HFHubDir(hfCache, getenv), Offline: true} // the cache only
	snap, err := cl.GetAdapter(context.Background(), m.Source, m.Revision)
	if err != nil {
		return fmt.Errorf("LoRA adapter %s at revision %s is not in the Hugging Face cache %s; it is downloaded at startup unless HF_HUB_OFFLINE is set",
			m.Source, m.Revision, cl.CacheDir)
	}
	m.Path = snapAdapterPath(snap)
	return nil
}

// snapAdapterPath is the adapter of a fetched snapshot: its one GGUF file,
// or the folder of a PEFT pair.
func snapAdapterPath(snap *hub.Snapshot) string {
	if len(snap.Files) == 1 {
		return snap.Paths()[0]
	}
	return filepath.Dir(snap.Paths()[0])
}

// adapterInFolder is the adapter a local folder holds: the folder itself
// for a PEFT adapter, else its one .gguf file (vision projectors aside).
// A folder holding both, several .gguf files or neither is an error: which
// adapter to take is not ours to guess.
func adapterInFolder(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("LoRA adapter folder %s: %v", dir, unwrapPathError(err))
	}
	var names, gguf []string
	for _, e := range ents {
		names = append(names, e.Name())
		if !e.IsDir() && isGGUF(e.Name()) && !strings.Contains(strings.ToLower(e.Name()), "mmproj") {
			gguf = append(gguf, e.Name())
		}
	}
	sort.Strings(gguf)
	files, err := hub.ChooseAdapter(names)
	switch {
	case err != nil:
		return "", fmt.Errorf("LoRA adapter folder %s %v", dir, err)
	case len(files) == 2 && len(gguf) > 0:
		return "", fmt.Errorf("LoRA adapter folder %s holds both a PEFT adapter and %s; give the .gguf file's path, or a folder with one adapter", dir, strings.Join(gguf, ", "))
	case len(files) == 2:
		return dir, nil
	}
	return filepath.Join(dir, files[0]), nil
}

// isLoRAHubID: an adapter source that names a Hugging Face repository:
// ORG/NAME (with the slash), not on local disk.
func isLoRAHubID(s string) bool {
	return strings.Count(s, "/") == 1 && !looksLikePath(s) && validHFID(s)
}

// fetchLoRA downloads model i's preloaded adapters that name a Hugging
// Face repository (ORG/NAME at their revision; the PEFT pair or the one
// GGUF, as hub.ChooseAdapter picks) and sets each one's Path.
func (c *Config) fetchLoRA(ctx context.Context, i int, o FetchOptions) error {
	m := &c.Models[i]
	for j := range m.Adapter.LoRA {
		l := &m.Adapter.LoRA[j]
		src := strings.TrimSpace(l.Source)
		if _, err := os.Stat(src); err == nil || !isLoRAHubID(src) {
			continue // local, or an error LoRAFor reports
		}
		cl, err := newHubClient(m.Device.HFCache, c.Global.TokenSource, o)
		if err != nil {
			return err
		}
		rev := strings.TrimSpace(l.Revision)
		snap, err := cl.GetAdapter(ctx, src, rev)
		if err != nil {
			return fmt.Errorf("LoRA adapter %q: %w", strings.TrimSpace(l.Alias), err)
		}
		l.Path = snapAdapterPath(snap)
		if o.Progress != nil && snap.Fetched {
			fmt.Fprintf(o.Progress, "LoRA adapter %s: %s at %s (%s)\n", strings.TrimSpace(l.Alias), src, snap.Commit, strings.Join(snap.Files, " + "))
		}
	}
	return nil
}

// adapterGiven reports whether the model has any adapter setting: for the
// demo model, which takes none.
func (a *ModelAdapter) adapterGiven() bool {
	k, _, _ := a.unsupported()
	return a.DynamicLoRA() || a.changedLimit() != "" || k != ""
}

// AdapterFlagGiven names the adapter flag set on the command line for a
// model that takes none (the embedded demo model); "" when none is.
func (c *Config) AdapterFlagGiven() string {
	if len(c.Models) == 0 || !c.Models[0].Adapter.adapterGiven() {
		return ""
	}
	a := &c.Models[0].Adapter
	switch {
	case a.EnableLoRA:
		return "--enable-lora"
	case len(a.LoRA) > 0:
		return "--lora"
	}
	if k := a.changedLimit(); k != "" {
		return c.settingName("models.adapter." + k)
	}
	k, _, _ := a.unsupported()
	return c.settingName("models.adapter." + k)
}
