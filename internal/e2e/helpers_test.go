// Package e2e holds the operations kit's tests: the real-Prometheus integration test (the seed's
// PromQL, the recording and alerting rules and every Grafana query against a live `mistralrs
// serve`), promtool checks of the rules, and validation of the Kubernetes manifests and the
// Grafana dashboard under deploy/, and replicas behind HAProxy (deploy/haproxy) through a rolling
// restart and a crash.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// repoRoot walks up from the package directory to the module root (the directory with go.mod).
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// inCI reports whether the test runs under .ci/run (CI=true): there, missing tools are failures,
// not skips, so a green CI proves the integration test really ran.
func inCI() bool { return os.Getenv("CI") == "true" }

// needTool returns the path of an executable, or skips (fails in CI) when it is not installed.
func needTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if inCI() {
			t.Fatalf("%s is not on PATH; .ci/run installs it (apt-get install prometheus wget)", name)
		}
		t.Skipf("%s is not on PATH (Debian: apt-get install prometheus)", name)
	}
	return p
}

// freePort asks the kernel for a free loopback port.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// lockedBuffer collects a child process's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// buildBinary builds cmd/mistralrs into dir.
func buildBinary(t testing.TB, root, dir string) string {
	t.Helper()
	trackSources(t, root)
	// go test puts the go command that runs it first on PATH.
	bin := filepath.Join(dir, "mistralrs")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/mistralrs")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/mistralrs: %v\n%s", err, out)
	}
	return bin
}

// trackSources stats every Go source file of the module and go.mod/go.sum, so `go test`'s result
// cache (which records the files a test touches) reruns this test when the server's code changes;
// the binary is built by a child process, which the cache does not see.
func trackSources(t testing.TB, root string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(path, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum") {
			_, err = os.Stat(path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// waitHTTP polls url until it answers 200 or the deadline passes.
func waitHTTP(t testing.TB, url string, d time.Duration, logs fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within %v (last error %v)\noutput:\n%s", url, d, err, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopProcess sends SIGTERM (what Kubernetes sends) and waits; it returns the exit error.
func stopProcess(cmd *exec.Cmd, done <-chan error, d time.Duration) error {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("did not exit within %v of SIGTERM", d)
	}
}

// startProcess starts cmd with output into buf and returns a channel that receives Wait's error.
// The process is killed at the end of the test if it is still running.
func startProcess(t testing.TB, cmd *exec.Cmd, buf *lockedBuffer) <-chan error {
	t.Helper()
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	return done
}

// ---- Prometheus HTTP API ----

type promSample struct {
	Metric map[string]string
	Value  float64
}

type promClient struct {
	base string
}

// query runs an instant query and returns its vector (a scalar result is one sample).
func (p promClient) query(ctx context.Context, expr string) ([]promSample, error) {
	var res struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/query?query="+urlEscape(expr), &res); err != nil {
		return nil, err
	}
	if res.Status != "success" {
		return nil, fmt.Errorf("query %q: %s: %s", expr, res.ErrorType, res.Error)
	}
	switch res.Data.ResultType {
	case "vector":
		var v []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		}
		if err := json.Unmarshal(res.Data.Result, &v); err != nil {
			return nil, err
		}
		out := make([]promSample, 0, len(v))
		for _, s := range v {
			f, err := parsePromValue(s.Value[1])
			if err != nil {
				return nil, err
			}
			out = append(out, promSample{Metric: s.Metric, Value: f})
		}
		return out, nil
	case "scalar":
		var v [2]any
		if err := json.Unmarshal(res.Data.Result, &v); err != nil {
			return nil, err
		}
		f, err := parsePromValue(v[1])
		if err != nil {
			return nil, err
		}
		return []promSample{{Metric: map[string]string{}, Value: f}}, nil
	}
	return nil, fmt.Errorf("query %q: result type %s", expr, res.Data.ResultType)
}

func parsePromValue(v any) (float64, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("sample value %v is not a string", v)
	}
	return strconv.ParseFloat(s, 64) // accepts NaN, +Inf, -Inf
}

func (p promClient) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return nil
}

func urlEscape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.~", c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// ---- the queries under deploy/ ----

// namedQuery is one PromQL expression with where it comes from.
type namedQuery struct {
	Source string // "rule <name>", "dashboard <panel> <refId>", "seed <n>"
	Name   string // recording rule name, alert name or panel title
	Expr   string
}

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

const rulesPath = "deploy/prometheus/mistralrs.rules.yml"

func loadRules(t testing.TB, root string) ruleFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, rulesPath))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	if err := yaml.Unmarshal(data, &rf); err != nil {
		t.Fatalf("%s: %v", rulesPath, err)
	}
	return rf
}

// ruleQueries returns every rule's expression.
func ruleQueries(t testing.TB, root string) []namedQuery {
	var qs []namedQuery
	for _, g := range loadRules(t, root).Groups {
		for _, r := range g.Rules {
			name := r.Record
			if name == "" {
				name = r.Alert
			}
			qs = append(qs, namedQuery{Source: "rule " + name, Name: name, Expr: r.Expr})
		}
	}
	return qs
}

const dashboardPath = "deploy/grafana/mistralrs-dashboard.json"

type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Type       string `json:"type"`
			Query      any    `json:"query"`
			Definition string `json:"definition"`
			AllValue   string `json:"allValue"`
			IncludeAll bool   `json:"includeAll"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashPanel `json:"panels"`
}

type dashPanel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource map[string]any `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Format     string         `json:"format"`
		Datasource map[string]any `json:"datasource"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

func loadDashboard(t testing.TB, root string) dashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, dashboardPath))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	return d
}

// allPanels flattens rows (collapsed rows nest their panels).
func allPanels(ps []dashPanel) []dashPanel {
	var out []dashPanel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// dashboardVars are the values the integration test gives the dashboard's variables: every job,
// instance and model (as the "All" option with allValue ".*" does), and a rate window that holds
// several of the test's 1 s scrapes.
var dashboardVars = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$job", ".*",
	"$instance", ".*",
	"$model", ".*",
)

// dashboardQueries returns every panel target's expression with the variables substituted.
func dashboardQueries(t testing.TB, root string) []namedQuery {
	var qs []namedQuery
	for _, p := range allPanels(loadDashboard(t, root).Panels) {
		for _, tg := range p.Targets {
			qs = append(qs, namedQuery{
				Source: fmt.Sprintf("dashboard panel %q target %s", p.Title, tg.RefID),
				Name:   p.Title,
				Expr:   dashboardVars.Replace(tg.Expr),
			})
		}
	}
	return qs
}

// dashboardVariableQueries returns the label_values() variable queries as (label, match selector).
func dashboardVariableQueries(t testing.TB, root string) [][2]string {
	re := regexp.MustCompile(`^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	var out [][2]string
	for _, v := range loadDashboard(t, root).Templating.List {
		if v.Type != "query" {
			continue
		}
		m := re.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Fatalf("dashboard variable %s: query %q is not label_values(selector, label)", v.Name, v.Definition)
		}
		out = append(out, [2]string{m[2], dashboardVars.Replace(m[1])})
	}
	return out
}
