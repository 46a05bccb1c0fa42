package config

import (
	"fmt"
	"strings"
)

// OriginList is the CORS origins the server answers (server.allowed_origins,
// --allowed-origins): on the command line one comma-separated value
// (repeating the flag appends), in TOML a comma-separated string or an
// array of strings. ["*"] (the default) allows any origin.
type OriginList []string

// String joins the origins with commas.
func (l OriginList) String() string { return strings.Join(l, ",") }

// Any reports whether every origin is allowed (the list holds "*" or is empty).
func (l OriginList) Any() bool {
	if len(l) == 0 {
		return true
	}
	for _, o := range l {
		if o == "*" {
			return true
		}
	}
	return false
}

// UnmarshalTOML accepts "https://a.example,https://b.example" or an array.
func (l *OriginList) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case string:
		*l = splitOrigins(x)
		return nil
	case []any:
		out := OriginList{}
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("expected a string or an array of strings, found an array holding %s", tomlType(e))
			}
			out = append(out, splitOrigins(s)...)
		}
		*l = out
		return nil
	}
	return fmt.Errorf("expected a string or an array of strings, found %s", tomlType(v))
}

func splitOrigins(s string) OriginList {
	out := OriginList{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, strings.TrimRight(p, "/"))
		}
	}
	return out
}

// originFlag is the pflag.Value of --allowed-origins and --allowed-hosts:
// the first use replaces the default, later ones append.
type originFlag struct {
	list *OriginList
	set  bool
	typ  string // "origins", "hosts"
}

func (f *originFlag) String() string {
	if f.list == nil {
		return ""
	}
	return f.list.String()
}

func (f *originFlag) Set(s string) error {
	parts := splitOrigins(s)
	if len(parts) == 0 {
		return fmt.Errorf("no %s named", strings.TrimSuffix(f.Type(), "s"))
	}
	if !f.set {
		*f.list = nil
		f.set = true
	}
	*f.list = append(*f.list, parts...)
	return nil
}

func (f *originFlag) Type() string {
	if f.typ == "" {
		return "origins"
	}
	return f.typ
}
