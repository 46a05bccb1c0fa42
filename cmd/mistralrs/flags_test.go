package main

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"mistralrs/internal/config"
)

var updateHelp = flag.Bool("update-help", false, "rewrite testdata/help from the current --help output")

// subcommand finds the command at path below root.
func subcommand(t *testing.T, root *cobra.Command, path ...string) *cobra.Command {
	t.Helper()
	cmd, rest, err := root.Find(path)
	if err != nil || len(rest) != 0 {
		t.Fatalf("no command %q: %v (left %q)", path, err, rest)
	}
	return cmd
}

// flagNames lists the flags of fs but --help, which cobra adds.
func flagNames(fs *pflag.FlagSet) map[string]*pflag.Flag {
	out := map[string]*pflag.Flag{}
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name != "help" {
			out[f.Name] = f
		}
	})
	return out
}

// TestFlagsMatchOptionTable fails when a flag of config.Options is missing
// from the command line, or the root's or serve's flags hold one the table
// does not: the table is the one place a flag is declared.
func TestFlagsMatchOptionTable(t *testing.T) {
	root := newRootCmd()
	global := flagNames(root.PersistentFlags())
	serve := flagNames(subcommand(t, root, "serve").PersistentFlags())

	// Which table flags are global is the binders' business: ask them.
	wantGlobal := pflag.NewFlagSet("global", pflag.ContinueOnError)
	config.BindGlobalFlags(wantGlobal, config.Default())
	wantServe := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.BindServeFlags(wantServe, config.Default())

	table := map[string]bool{}
	for _, o := range config.Options {
		if o.Flag == "" {
			continue
		}
		table[o.Flag] = true
		var got *pflag.Flag
		switch {
		case wantGlobal.Lookup(o.Flag) != nil:
			got = global[o.Flag]
		case wantServe.Lookup(o.Flag) != nil:
			got = serve[o.Flag]
		default:
			t.Errorf("--%s: in the table but bound by neither BindGlobalFlags nor BindServeFlags", o.Flag)
			continue
		}
		if got == nil {
			t.Errorf("--%s: in the table but not on the command line", o.Flag)
			continue
		}
		if got.Shorthand != o.Short || got.Usage != o.Usage {
			t.Errorf("--%s: shorthand %q, usage %q; the table says %q, %q", o.Flag, got.Shorthand, got.Usage, o.Short, o.Usage)
		}
	}
	for _, set := range []struct {
		name string
		got  map[string]*pflag.Flag
		want *pflag.FlagSet
	}{{"the root's persistent flags", global, wantGlobal}, {"serve's flags", serve, wantServe}} {
		for name, f := range set.got {
			if !table[name] {
				t.Errorf("--%s: among %s but not in config.Options", name, set.name)
				continue
			}
			w := set.want.Lookup(name)
			if w == nil {
				t.Errorf("--%s: among %s, but its binder does not define it there", name, set.name)
				continue
			}
			if f.DefValue != w.DefValue || f.NoOptDefVal != w.NoOptDefVal || f.Value.Type() != w.Value.Type() || f.Hidden != w.Hidden {
				t.Errorf("--%s: default %q, bare %q, type %s, hidden %v; the table gives %q, %q, %s, %v", name,
					f.DefValue, f.NoOptDefVal, f.Value.Type(), f.Hidden, w.DefValue, w.NoOptDefVal, w.Value.Type(), w.Hidden)
			}
		}
	}
}

// TestHelpUnchanged pins every command's --help text (flags, defaults,
// shorthands, descriptions) to testdata/help, captured from the binary
// before the global flags were bound from the option table. After a
// deliberate change, rewrite them with go test -run TestHelpUnchanged -update-help.
func TestHelpUnchanged(t *testing.T) {
	for _, args := range [][]string{
		{}, {"serve"}, {"serve", "text"}, {"serve", "auto"}, {"serve", "multimodal"}, {"serve", "embedding"},
		{"run"}, {"from-config"}, {"bench"}, {"tokenize"}, {"gen-model"}, {"quantize"},
	} {
		name := "root"
		if len(args) > 0 {
			name = strings.Join(args, "_")
		}
		t.Run(name, func(t *testing.T) {
			out, errOut, err := execute(t, "", append(args, "--help")...)
			if err != nil || errOut != "" {
				t.Fatalf("--help: %v, stderr %q", err, errOut)
			}
			path := filepath.Join("testdata", "help", name+".txt")
			if *updateHelp {
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if out != string(want) {
				t.Errorf("%s --help changed:\n%s", strings.Join(args, " "), lineDiff(string(want), out))
			}
		})
	}
}

// lineDiff lists the lines of want and got that differ, by line number.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("line " + strconv.Itoa(i+1) + ":\n  want " + wl + "\n  got  " + gl + "\n")
		}
	}
	return b.String()
}
