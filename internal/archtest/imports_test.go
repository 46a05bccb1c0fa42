package archtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is the import path of this module's root.
const module = "mistralrs"

// archDoc is the page whose package table is checked.
var archDoc = filepath.Join("..", "..", "docs", "architecture.md")

// A rule is one row's "must not import" cell.
type rule struct {
	row       int      // the row's line in archDoc
	packages  []string // the row's packages, import paths
	anyModule bool     // "any `mistralrs` package", but the exceptions
	except    []string // names as the table writes them (resolve)
	forbidden []string // names; a "/..." suffix forbids the tree
}

// TestMustNotImport checks the "must not import" column of the package
// table in docs/architecture.md: no package imports directly, in its
// non-test files on amd64 or arm64, what its row forbids. It also fails on a
// row that names a package that does not exist, or forbids one that is not
// in the build (a typo would forbid nothing).
func TestMustNotImport(t *testing.T) {
	rules := parseTable(t)
	type violation struct {
		pkg, imp string
		row      int
	}
	var found []violation
	arches := map[violation][]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		imports, known := importGraph(t, arch)
		for _, r := range rules {
			r = r.resolve(known)
			if arch == "amd64" {
				checkNames(t, r, known)
			}
			for _, p := range r.packages {
				for _, imp := range imports[p] {
					if !r.forbids(p, imp) {
						continue
					}
					v := violation{p, imp, r.row}
					if arches[v] == nil {
						found = append(found, v)
					}
					arches[v] = append(arches[v], arch)
				}
			}
		}
	}
	for _, v := range found {
		t.Errorf("%s imports %s (GOARCH=%s), which its row of the package table in docs/architecture.md (line %d, \"must not import\") forbids",
			v.pkg, v.imp, strings.Join(arches[v], ","), v.row)
	}
}

// forbids reports whether the rule forbids package p to import imp.
func (r rule) forbids(p, imp string) bool {
	if r.anyModule && (imp == module || strings.HasPrefix(imp, module+"/")) && imp != p && !slices.Contains(r.except, imp) {
		return true
	}
	for _, f := range r.forbidden {
		if tree, ok := strings.CutSuffix(f, "/..."); ok {
			if imp == tree || strings.HasPrefix(imp, tree+"/") {
				return true
			}
		} else if imp == f {
			return true
		}
	}
	return false
}

// checkNames fails on a row's package that does not exist and on a
// forbidden or excepted name that is no package of the build.
func checkNames(t *testing.T, r rule, known map[string]bool) {
	t.Helper()
	for _, p := range r.packages {
		if !known[p] {
			t.Errorf("docs/architecture.md line %d: package %s does not exist", r.row, p)
		}
	}
	for _, n := range append(slices.Clone(r.forbidden), r.except...) {
		tree, isTree := strings.CutSuffix(n, "/...")
		found := known[n]
		for k := range known {
			if isTree && (k == tree || strings.HasPrefix(k, tree+"/")) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("docs/architecture.md line %d: %s is no package of the build: a misspelt name forbids nothing", r.row, n)
		}
	}
}

var (
	backticked    = regexp.MustCompile("`([^`]+)`")
	parenthetical = regexp.MustCompile(`\([^()]*\)`)
	braces        = regexp.MustCompile(`^(.*)\{([^{}]+)\}(.*)$`)
)

// parseTable reads the rules of the package table: its rows are the lines
// of the "## Packages" section that start with "| `"; the last cell is the
// rule. Parenthesised text in a rule is commentary.
func parseTable(t *testing.T) []rule {
	t.Helper()
	data, err := os.ReadFile(archDoc)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var rules []rule
	in, header := false, false
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, "## "):
			in = line == "## Packages"
			continue
		case !in || !strings.HasPrefix(line, "|"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		last := strings.TrimSpace(cells[len(cells)-1])
		if !strings.HasPrefix(line, "| `") {
			header = header || last == "must not import"
			continue
		}
		if !header {
			t.Fatalf("docs/architecture.md: the package table's last column is no longer \"must not import\"")
		}
		rules = append(rules, parseRule(t, i+1, strings.TrimSpace(cells[0]), last))
	}
	if len(rules) == 0 {
		t.Fatalf("docs/architecture.md: no package table under \"## Packages\"")
	}
	return rules
}

// parseRule reads one row: its packages ("`internal/model/{llama,phi3}`")
// and its rule: "any `mistralrs` package but `a`, `b`", or a list of
// names (see resolve).
func parseRule(t *testing.T, row int, pkgCell, ruleCell string) rule {
	r := rule{row: row}
	for _, m := range backticked.FindAllStringSubmatch(pkgCell, -1) {
		for _, p := range expandBraces(m[1]) {
			r.packages = append(r.packages, module+"/"+p)
		}
	}
	if len(r.packages) == 0 {
		t.Fatalf("docs/architecture.md line %d: no package in %q", row, pkgCell)
	}
	for prev := ""; prev != ruleCell; {
		prev, ruleCell = ruleCell, parenthetical.ReplaceAllString(ruleCell, "")
	}
	if strings.Contains(ruleCell, "any `"+module+"` package") {
		r.anyModule = true
		_, but, _ := strings.Cut(ruleCell, " but ")
		for _, m := range backticked.FindAllStringSubmatch(but, -1) {
			r.except = append(r.except, m[1])
		}
		return r
	}
	for _, m := range backticked.FindAllStringSubmatch(ruleCell, -1) {
		r.forbidden = append(r.forbidden, m[1])
	}
	return r
}

// resolve turns the rule's names into import paths: "engine" is this
// module's internal/engine, "cmd/mistralrs" its cmd/mistralrs, any other
// name ("net/http", "github.com/prometheus/...") is itself.
func (r rule) resolve(known map[string]bool) rule {
	paths := func(names []string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			switch {
			case known[module+"/internal/"+n]:
				out[i] = module + "/internal/" + n
			case known[module+"/"+n]:
				out[i] = module + "/" + n
			default:
				out[i] = n
			}
		}
		return out
	}
	r.except, r.forbidden = paths(r.except), paths(r.forbidden)
	return r
}

func expandBraces(s string) []string {
	m := braces.FindStringSubmatch(s)
	if m == nil {
		return []string{s}
	}
	var out []string
	for _, alt := range strings.Split(m[2], ",") {
		out = append(out, expandBraces(m[1]+strings.TrimSpace(alt)+m[3])...)
	}
	return out
}

// importGraph lists, for GOARCH arch, the direct imports of the module's
// packages (non-test files) and every package of the build.
func importGraph(t *testing.T, arch string) (imports map[string][]string, known map[string]bool) {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "GOARCH="+arch, "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		msg := err.Error()
		if ee, ok := err.(*exec.ExitError); ok {
			msg += ": " + string(ee.Stderr)
		}
		t.Fatalf("go list (GOARCH=%s): %s", arch, msg)
	}
	imports, known = map[string][]string{}, map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		known[f[0]] = true
		if f[0] == module || strings.HasPrefix(f[0], module+"/") {
			imports[f[0]] = f[1:]
		}
	}
	if len(imports) == 0 {
		t.Fatalf("go list (GOARCH=%s) listed no package of %s", arch, module)
	}
	return imports, known
}
