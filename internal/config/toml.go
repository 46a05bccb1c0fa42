package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"

	"mistralrs/internal/smallfile"
)

// Warning is a problem in a config file that does not stop the server: a key
// this server does not know or does not support. mistral.rs ignores unknown
// keys silently; we say so.
type Warning struct {
	Key     string // full dotted TOML path ("server.prot", "models.format.mmproj")
	Message string
}

func (w Warning) String() string { return w.Key + ": " + w.Message }

// errNotTOML is mistral.rs's exact message.
var errNotTOML = errors.New("mistralrs-cli config files must be .toml")

// LoadTOML reads a `mistralrs from-config` file. Unknown and unsupported
// keys come back as warnings; a bad value is an error naming its key, and
// nothing should be started then.
func LoadTOML(path string) (*Config, []Warning, error) {
	if !strings.EqualFold(filepath.Ext(path), ".toml") {
		return nil, nil, errNotTOML
	}
	data, err := smallfile.Read(path, smallfile.Config)
	if smallfile.Refused(err) {
		return nil, nil, fmt.Errorf("config file %w", err)
	}
	if err != nil {
		return nil, nil, err
	}
	return parseTOML(path, data)
}

// fileDoc is the file's shape. The sections point into a defaulted Config, so
// that absent keys keep the table's defaults.
type fileDoc struct {
	Command        *string          `toml:"command"`
	DefaultModelID *string          `toml:"default_model_id"`
	Global         fileGlobal       `toml:"global"`
	Server         *ServerConfig    `toml:"server"`
	Runtime        *RuntimeConfig   `toml:"runtime"`
	PagedAttn      *PagedAttnConfig `toml:"paged_attn"`
	Models         []ModelConfig    `toml:"models"`
}

// fileGlobal decodes the seed as a signed integer: the TOML decoder would wrap
// a negative value silently into a uint64.
type fileGlobal struct {
	Seed        *int64  `toml:"seed"`
	Log         *string `toml:"log"`
	TokenSource *string `toml:"token_source"`
}

func parseTOML(path string, data []byte) (*Config, []Warning, error) {
	c := Default()
	c.origin = originTOML
	doc := fileDoc{
		Command:        &c.Command,
		DefaultModelID: &c.DefaultModelID,
		Global:         fileGlobal{Log: &c.Global.Log, TokenSource: &c.Global.TokenSource},
		Server:         &c.Server,
		Runtime:        &c.Runtime,
		PagedAttn:      &c.PagedAttn,
	}
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %s", path, strings.TrimPrefix(err.Error(), "toml: "))
	}
	if doc.Global.Seed != nil {
		if *doc.Global.Seed < 0 {
			return nil, nil, fmt.Errorf("%s: %w", path, &ValueError{Key: "global.seed", Value: *doc.Global.Seed, Reason: "must not be negative"})
		}
		s := uint64(*doc.Global.Seed)
		c.Global.Seed = &s
	}
	c.Models = doc.Models
	def := DefaultModel()
	for i := range c.Models {
		// An array-of-tables entry starts zeroed; give it the per-model defaults.
		if c.Models[i].Kind == "" {
			c.Models[i].Kind = def.Kind
		}
		if c.Models[i].HFRevision == "" {
			c.Models[i].HFRevision = def.HFRevision
		}
		if q := &c.Models[i].Quantization; q.ISQ == "" {
			q.ISQ, q.InSituQuant = q.InSituQuant, ""
		}
		fillUnsetModelDefaults(&c.Models[i])
	}
	warns := undecodedWarnings(md)
	warns = append(warns, precedenceWarnings(c)...)
	if err := c.Validate(); err != nil {
		return nil, warns, fmt.Errorf("%s: %w", path, err)
	}
	return c, warns, nil
}

// fillUnsetModelDefaults gives the optional numbers an entry left out
// (nil) the table's default, where it has one: an explicit value, even 0,
// stays for Validate to judge.
func fillUnsetModelDefaults(m *ModelConfig) {
	for i := range Options {
		o := &Options[i]
		if o.modelField == nil || o.Default == nil {
			continue
		}
		switch p := o.modelField(m).(type) {
		case **int:
			if *p == nil {
				setValue(p, o.Default)
			}
		case **ByteSize:
			if *p == nil {
				setValue(p, o.Default)
			}
		}
	}
}

// precedenceWarnings says which paged-attention size is ignored when two are
// set (mistral.rs resolves them silently).
func precedenceWarnings(c *Config) []Warning {
	p := &c.PagedAttn
	var w []Warning
	switch {
	case p.MemoryMB != nil && p.ContextLen != nil && p.MemoryFraction != nil:
		// Validate rejects it.
	case p.MemoryFraction != nil && p.MemoryMB != nil:
		w = append(w, Warning{"paged_attn.memory_mb", "ignored: paged_attn.memory_fraction is set and wins"})
	case p.MemoryFraction != nil && p.ContextLen != nil:
		w = append(w, Warning{"paged_attn.context_len", "ignored: paged_attn.memory_fraction is set and wins"})
	case p.ContextLen != nil && p.MemoryMB != nil:
		w = append(w, Warning{"paged_attn.memory_mb", "ignored: paged_attn.context_len is set and wins"})
	}
	return w
}

// unsupportedKeys are keys of mistral.rs's schema that this server does not
// implement; they get a warning that says so rather than "unknown key". A
// key listed here covers everything under it.
var unsupportedKeys = map[string]string{
	"thinking":         "run-only",
	"enable_thinking":  "run-only",
	"reasoning_effort": "run-only",
	"adapter":          "run-only",

	"global.verbose": "use -v, -vv or RUST_LOG",

	"server.mcp_port":          "",
	"server.max_tool_rounds":   "",
	"server.tool_dispatch_url": "",

	"runtime.matformer_config_path":  "",
	"runtime.matformer_slice_name":   "",
	"runtime.mcp_config":             "",
	"runtime.agent":                  "",
	"runtime.enable_search":          "",
	"runtime.search_embedding_model": "",
	"runtime.enable_code_execution":  "",
	"runtime.enable_shell":           "",
	"runtime.code_exec_python":       "",
	"runtime.code_exec_timeout":      "",
	"runtime.code_exec_workdir":      "",
	"runtime.shell_path":             "",
	"runtime.shell_timeout":          "",
	"runtime.shell_workdir":          "",
	"runtime.skills_dir":             "",
	"runtime.agent_permission":       "",
	"runtime.code_exec_permission":   "",

	"sandbox": "",

	"models.tokenizer":                     "the tokenizer is read from the GGUF file",
	"models.arch":                          "the architecture is read from the GGUF file",
	"models.dtype":                         "",
	"models.matformer_config_path":         "",
	"models.matformer_slice_name":          "",
	"models.format.tok_model_id":           "",
	"models.format.gqa":                    "",
	"models.quantization.quant":            "",
	"models.quantization.from_uqff":        "",
	"models.quantization.isq_organization": "",
	"models.quantization.imatrix":          "",
	"models.quantization.calibration_file": "",
	"models.device.device_layers":          "",
	"models.device.topology":               "",
	"models.device.max_seq_len":            "",
	"models.device.max_batch_size":         "",
}

// undecodedWarnings turns the keys the decoder did not use into warnings,
// one per topmost key (a whole unknown table is one warning).
func undecodedWarnings(md toml.MetaData) []Warning {
	keys := md.Undecoded()
	unused := map[string]bool{}
	for _, k := range keys {
		unused[k.String()] = true
	}
	var w []Warning
	seen := map[string]bool{}
	for _, k := range keys {
		name := k.String()
		if seen[name] {
			continue // the same key in several [[models]] entries
		}
		seen[name] = true
		if len(k) > 1 && unused[toml.Key(k[:len(k)-1]).String()] {
			continue // reported with its table
		}
		w = append(w, keyWarning(k))
	}
	sort.SliceStable(w, func(i, j int) bool { return w[i].Key < w[j].Key })
	return w
}

func keyWarning(k toml.Key) Warning {
	name := k.String()
	for n := len(k); n > 0; n-- {
		if why, ok := unsupportedKeys[toml.Key(k[:n]).String()]; ok {
			msg := "not supported by this server; ignored"
			if why != "" {
				msg += " (" + why + ")"
			}
			return Warning{name, msg}
		}
	}
	msg := "unknown key; ignored"
	if s := suggest(k); s != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", s)
	}
	return Warning{name, msg}
}

// suggest names a known key of the same table that is one small typo away.
func suggest(k toml.Key) string {
	name := k.String()
	parent := ""
	if len(k) > 1 {
		parent = toml.Key(k[:len(k)-1]).String() + "."
	}
	best, bestD := "", 3
	for i := range Options {
		o := Options[i].Key
		if o == "" || !strings.HasPrefix(o, parent) || strings.Contains(o[len(parent):], ".") {
			continue
		}
		if d := editDistance(name, o); d < bestD {
			best, bestD = o, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
