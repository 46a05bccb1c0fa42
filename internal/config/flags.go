package config

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// BindServeFlags defines the `mistralrs serve` flags on fs, bound to c, with
// the defaults of the table. c gets one model entry for -m/-f; when neither is
// given, c.DemoModel() reports it. Call c.Validate() after parsing: it also
// turns mistral.rs's (clap's) flag conflicts into errors. c usually comes from Default();
// settings without a flag that are still zero get their defaults here.
func BindServeFlags(fs *pflag.FlagSet, c *Config) {
	c.origin = originFlags
	for i := range Options {
		o := &Options[i]
		if o.Flag == "" && o.field != nil && reflect.ValueOf(o.field(c)).Elem().IsZero() {
			setValue(o.field(c), o.Default)
		}
	}
	if len(c.Models) == 0 {
		c.Models = []ModelConfig{DefaultModel()}
	}
	for i := range Options {
		o := &Options[i]
		if o.Flag == "" || o.global {
			continue
		}
		var ptr any
		if o.modelField != nil {
			ptr = o.modelField(&c.Models[0])
		} else {
			ptr = o.field(c)
		}
		bindFlag(fs, o, ptr)
		if o.bare != "" {
			fs.Lookup(o.Flag).NoOptDefVal = o.bare
		}
	}
	fs.SetNormalizeFunc(NormalizeFlagName)
}

// flagAliases are other names of serve flags: mistral.rs's visible aliases
// (vLLM's names). A command whose subcommands share the flags sets
// NormalizeFlagName on them all (cobra's SetGlobalNormalizationFunc).
var flagAliases = map[string]string{
	"lora-modules":  "lora",
	"max-lora-rank": "lora-max-rank",
}

// NormalizeFlagName maps a flag's alias to its name (pflag's NormalizeFunc).
func NormalizeFlagName(_ *pflag.FlagSet, name string) pflag.NormalizedName {
	if n, ok := flagAliases[name]; ok {
		return pflag.NormalizedName(n)
	}
	return pflag.NormalizedName(name)
}

// BindGlobalFlags defines the options valid on every subcommand (--seed,
// -l/--log, -v/--verbose, --token-source), bound to c.Global; mistralrs
// binds them on the root command's persistent flags.
func BindGlobalFlags(fs *pflag.FlagSet, c *Config) {
	for i := range Options {
		o := &Options[i]
		if o.Flag != "" && o.global {
			bindFlag(fs, o, o.field(c))
		}
	}
}

func bindFlag(fs *pflag.FlagSet, o *Option, ptr any) {
	switch p := ptr.(type) {
	case *int:
		if o.count {
			fs.CountVarP(p, o.Flag, o.Short, o.Usage)
			return
		}
		fs.IntVarP(p, o.Flag, o.Short, o.Default.(int), o.Usage)
	case *bool:
		fs.BoolVarP(p, o.Flag, o.Short, o.Default.(bool), o.Usage)
	case *string:
		fs.StringVarP(p, o.Flag, o.Short, o.Default.(string), o.Usage)
	case *FileList:
		setValue(p, o.Default)
		fs.VarP(p, o.Flag, o.Short, o.Usage)
	case *OriginList:
		setValue(p, o.Default)
		fs.VarP(&originFlag{list: p, typ: strings.TrimPrefix(o.Flag, "allowed-")}, o.Flag, o.Short, o.Usage)
	case **int:
		setValue(p, o.Default)
		fs.VarP(optInt{p}, o.Flag, o.Short, o.Usage)
	case **uint64:
		setValue(p, o.Default)
		fs.VarP(optUint64{p}, o.Flag, o.Short, o.Usage)
	case **float64:
		setValue(p, o.Default)
		fs.VarP(optFloat64{p}, o.Flag, o.Short, o.Usage)
	case *LoRAList:
		setValue(p, o.Default)
		fs.VarP(p, o.Flag, o.Short, o.Usage)
	case **ByteSize:
		setValue(p, o.Default)
		fs.VarP(optByteSize{p}, o.Flag, o.Short, o.Usage)
	default:
		panic(fmt.Sprintf("config: no flag binding for %T (%s)", ptr, o.Flag))
	}
}

// FileList is a list of model files. On the command line it is one
// semicolon-separated value (as in mistral.rs; repeating the flag appends);
// in TOML a semicolon-separated string or an array of strings.
type FileList []string

// String joins the files with semicolons.
func (f *FileList) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(*f, ";")
}

// Set appends the semicolon-separated files of s.
func (f *FileList) Set(s string) error {
	parts := splitFiles(s)
	if len(parts) == 0 {
		return fmt.Errorf("no file named")
	}
	*f = append(*f, parts...)
	return nil
}

// Type is the placeholder in the help text.
func (f *FileList) Type() string { return "files" }

// UnmarshalTOML accepts "a.gguf;b.gguf" or ["a.gguf", "b.gguf"].
func (f *FileList) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case string:
		*f = splitFiles(x)
		return nil
	case []any:
		out := FileList{}
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("expected a string or an array of strings, found an array holding %s", tomlType(e))
			}
			out = append(out, splitFiles(s)...)
		}
		*f = out
		return nil
	}
	return fmt.Errorf("expected a string or an array of strings, found %s", tomlType(v))
}

func splitFiles(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ";") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

// Optional numeric flags: unset (nil) until given, so that Validate can tell
// "not given" from any value and apply mistral.rs's (clap's) conflicts.
type optInt struct{ p **int }

func (o optInt) String() string {
	if o.p == nil || *o.p == nil {
		return ""
	}
	return strconv.Itoa(**o.p)
}
func (o optInt) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("not an integer")
	}
	*o.p = &v
	return nil
}
func (o optInt) Type() string { return "int" }

type optUint64 struct{ p **uint64 }

func (o optUint64) String() string {
	if o.p == nil || *o.p == nil {
		return ""
	}
	return strconv.FormatUint(**o.p, 10)
}

// Set reads s with Go's base prefixes (0x10, 0o17, 017, 0b1), as pflag's
// Uint64 flag that --seed used to be: a seed given so before still picks
// the same sequence.
func (o optUint64) Set(s string) error {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return fmt.Errorf("not a non-negative integer")
	}
	*o.p = &v
	return nil
}
func (o optUint64) Type() string { return "uint" }

type optFloat64 struct{ p **float64 }

func (o optFloat64) String() string {
	if o.p == nil || *o.p == nil {
		return ""
	}
	return strconv.FormatFloat(**o.p, 'g', -1, 64)
}
func (o optFloat64) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("not a number")
	}
	*o.p = &v
	return nil
}
func (o optFloat64) Type() string { return "float" }
