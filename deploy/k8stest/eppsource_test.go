package k8stest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const eppModule = "sigs.k8s.io/gateway-api-inference-extension"

// flagDefiners are the functions of package flag that define a flag named by their first argument.
var flagDefiners = map[string]bool{"Bool": true, "Duration": true, "Float64": true, "Int": true,
	"Int64": true, "String": true, "Uint": true, "Uint64": true, "Func": true, "BoolFunc": true}

// eppSourceFacts reads, from the v1.0.0 source in the module cache, the flags the endpoint
// picker's command defines (cmd/epp/runner: flag.String("name", ...) and the like) and the
// plugin types it registers (plugins.Register(pkg.XType, ...), with XType's value from the
// plugin packages). Reading the source keeps the picker's command, with its Envoy and gRPC
// dependencies, out of this module's build.
func eppSourceFacts(t testing.TB) (flags, pluginTypes map[string]bool) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", eppModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v (run go mod download in deploy/k8stest)", eppModule, err)
	}
	dir := strings.TrimSpace(string(out))
	fset := token.NewFileSet()
	runner, err := parser.ParseFile(fset, filepath.Join(dir, "cmd/epp/runner/runner.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	flags = map[string]bool{}
	registered := map[string]bool{}
	ast.Inspect(runner, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		x, ok := sel.X.(*ast.Ident)
		if !ok {
			return true
		}
		switch {
		case x.Name == "flag" && flagDefiners[sel.Sel.Name]:
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if name, err := strconv.Unquote(lit.Value); err == nil {
					flags[name] = true
				}
			}
		case x.Name == "plugins" && sel.Sel.Name == "Register":
			if arg, ok := call.Args[0].(*ast.SelectorExpr); ok {
				registered[arg.Sel.Name] = true
			}
		}
		return true
	})
	consts := pluginTypeConsts(t, fset, filepath.Join(dir, "pkg/epp"))
	pluginTypes = map[string]bool{}
	for name := range registered {
		if v, ok := consts[name]; ok {
			pluginTypes[v] = true
		}
	}
	if len(flags) < 10 || len(pluginTypes) < 5 {
		t.Fatalf("read %d flags and %d plugin types from %s: the source's layout changed", len(flags), len(pluginTypes), dir)
	}
	return flags, pluginTypes
}

// pluginTypeConsts maps the string constants named *Type in the picker's packages to their values.
func pluginTypeConsts(t testing.TB, fset *token.FileSet, dir string) map[string]string {
	consts := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i >= len(vs.Values) || !strings.HasSuffix(name.Name, "Type") {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						consts[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return consts
}
