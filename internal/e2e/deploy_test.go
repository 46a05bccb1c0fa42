package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"mistralrs/internal/config"
)

const k8sDir = "deploy/kubernetes"

// k8sObject is one parsed manifest document.
type k8sObject struct {
	File string
	Doc  map[string]any
}

func (o k8sObject) Kind() string { return str(o.Doc, "kind") }
func (o k8sObject) Name() string { return str(o.Doc, "metadata", "name") }

// dig walks maps by key and lists by index ("0", "1", ...).
func dig(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := dig(v, path...).(string)
	return s
}

func list(v any, path ...string) []any {
	l, _ := dig(v, path...).([]any)
	return l
}

func stringMap(v any, path ...string) map[string]string {
	m, _ := dig(v, path...).(map[string]any)
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// subset reports whether every key of sel is in labels with the same value (a label selector match).
func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false // an empty selector selects everything: never what a manifest here means
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// loadManifests parses every document of every YAML file under deploy/kubernetes.
func loadManifests(t *testing.T, root string) []k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, k8sDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s (%v)", k8sDir, err)
	}
	var objs []k8sObject
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for i := 0; ; i++ {
			var doc map[string]any
			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s document %d: %v", filepath.Base(f), i, err)
			}
			if doc == nil {
				continue
			}
			objs = append(objs, k8sObject{File: filepath.Base(f), Doc: doc})
		}
	}
	return objs
}

// TestKubernetesManifests validates deploy/kubernetes: kinds and API versions, probes, that the
// Service selects the Deployment's pods and the ServiceMonitor the Service's port, that the
// config.toml of the ConfigMap loads without warnings and agrees with the ports and the probe's
// model id, and that the PrometheusRule carries exactly deploy/prometheus's rules.
func TestKubernetesManifests(t *testing.T) {
	root := repoRoot(t)
	objs := loadManifests(t, root)
	apiVersions := map[string]string{
		"ConfigMap":           "v1",
		"Deployment":          "apps/v1",
		"PodDisruptionBudget": "policy/v1",
		"Service":             "v1",
		"ServiceMonitor":      "monitoring.coreos.com/v1",
		"PrometheusRule":      "monitoring.coreos.com/v1",
		"Kustomization":       "kustomize.config.k8s.io/v1beta1",
	}
	byKind := map[string][]k8sObject{}
	for _, o := range objs {
		want, ok := apiVersions[o.Kind()]
		if !ok {
			t.Errorf("%s: unexpected kind %q", o.File, o.Kind())
			continue
		}
		if got := str(o.Doc, "apiVersion"); got != want {
			t.Errorf("%s: %s apiVersion %q, want %q", o.File, o.Kind(), got, want)
		}
		if o.Kind() != "Kustomization" && o.Name() == "" {
			t.Errorf("%s: %s without metadata.name", o.File, o.Kind())
		}
		byKind[o.Kind()] = append(byKind[o.Kind()], o)
	}
	for kind := range apiVersions {
		if len(byKind[kind]) != 1 {
			t.Fatalf("want exactly one %s, have %d", kind, len(byKind[kind]))
		}
	}
	dep := byKind["Deployment"][0].Doc
	svc := byKind["Service"][0].Doc
	sm := byKind["ServiceMonitor"][0].Doc
	cm := byKind["ConfigMap"][0].Doc
	pdb := byKind["PodDisruptionBudget"][0].Doc

	// kustomization.yaml lists every other manifest file.
	var files, listed []string
	for _, o := range objs {
		if o.Kind() != "Kustomization" && (len(files) == 0 || files[len(files)-1] != o.File) {
			files = append(files, o.File)
		}
	}
	for _, r := range list(byKind["Kustomization"][0].Doc, "resources") {
		listed = append(listed, fmt.Sprint(r))
	}
	sort.Strings(files)
	sort.Strings(listed)
	if !reflect.DeepEqual(files, listed) {
		t.Errorf("kustomization resources %v, manifest files %v", listed, files)
	}

	// The Deployment selects its own pods; one container serves on a port named http.
	podLabels := stringMap(dep, "spec", "template", "metadata", "labels")
	if !subset(stringMap(dep, "spec", "selector", "matchLabels"), podLabels) {
		t.Errorf("Deployment selector does not match its pod labels %v", podLabels)
	}
	containers := list(dep, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("Deployment has %d containers, want 1", len(containers))
	}
	c := containers[0]
	var port int
	for _, p := range list(c, "ports") {
		if str(p, "name") == "http" {
			port, _ = dig(p, "containerPort").(int)
		}
	}
	if port == 0 {
		t.Fatal("container has no port named http")
	}
	// Liveness on /livez: /health turns 503 while the server drains (deploy/kubernetes/README.md).
	for probe, want := range map[string]string{"startupProbe": "/health", "livenessProbe": "/livez"} {
		if p := str(c, probe, "httpGet", "path"); p != want {
			t.Errorf("%s path %q, want %s", probe, p, want)
		}
		if p := fmt.Sprint(dig(c, probe, "httpGet", "port")); p != "http" {
			t.Errorf("%s port %s, want http", probe, p)
		}
	}
	probe := readinessCommand(t, root)
	if !strings.Contains(probe, fmt.Sprintf("http://127.0.0.1:%d/v1/models", port)) || !strings.Contains(probe, `\"status\":\"loaded\"`) {
		t.Errorf("readiness probe does not check the model's status on GET /v1/models of port %d: %s", port, probe)
	}
	env := map[string]string{}
	for _, e := range list(c, "env") {
		env[str(e, "name")] = str(e, "value")
	}

	// The ConfigMap's config.toml is what the container runs, and it is a valid configuration.
	args := fmt.Sprint(dig(c, "args"))
	var cfgMount string
	for _, m := range list(c, "volumeMounts") {
		if str(m, "name") == "config" {
			cfgMount = str(m, "mountPath")
		}
	}
	if args != fmt.Sprintf("[from-config -f %s/config.toml]", cfgMount) {
		t.Errorf("container args %s do not run from-config on the mounted config.toml (mount %q)", args, cfgMount)
	}
	for _, v := range list(dep, "spec", "template", "spec", "volumes") {
		if str(v, "name") == "config" && str(v, "configMap", "name") != str(cm, "metadata", "name") {
			t.Errorf("config volume names ConfigMap %q, the ConfigMap is %q", str(v, "configMap", "name"), str(cm, "metadata", "name"))
		}
	}
	tomlPath := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(tomlPath, []byte(str(cm, "data", "config.toml")), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, warns, err := config.LoadTOML(tomlPath)
	if err != nil {
		t.Fatalf("ConfigMap config.toml: %v", err)
	}
	for _, w := range warns {
		t.Errorf("ConfigMap config.toml: warning %s", w.String())
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("ConfigMap config.toml: %v", err)
	}
	if cfg.Command != "serve" || cfg.Server.Port != port || cfg.Server.Host != "0.0.0.0" {
		t.Errorf("config.toml: command %q, listens on %s:%d; the container port is %d", cfg.Command, cfg.Server.Host, cfg.Server.Port, port)
	}
	if len(cfg.Models) != 1 || cfg.Models[0].ModelID != env["MODEL_ID"] {
		t.Errorf("the readiness probe waits for MODEL_ID %q; config.toml serves %+v", env["MODEL_ID"], cfg.Models)
	}
	if cfg.PagedAttn.MemoryMB == nil {
		t.Error("config.toml leaves the KV pool at a fraction of the node's memory; size it (memory_mb)")
	}

	// The Service selects the pods and forwards to the container's http port.
	if !subset(stringMap(svc, "spec", "selector"), podLabels) {
		t.Errorf("Service selector %v does not select pods labelled %v", stringMap(svc, "spec", "selector"), podLabels)
	}
	if !subset(stringMap(pdb, "spec", "selector", "matchLabels"), podLabels) {
		t.Error("PodDisruptionBudget does not select the Deployment's pods")
	}
	svcPorts := list(svc, "spec", "ports")
	if len(svcPorts) != 1 || str(svcPorts[0], "name") != "http" || fmt.Sprint(dig(svcPorts[0], "targetPort")) != "http" ||
		dig(svcPorts[0], "port") != port {
		t.Errorf("Service ports %v: want one port named http, port %d, targetPort http", svcPorts, port)
	}

	// The ServiceMonitor selects the Service and scrapes /metrics on its port.
	if !subset(stringMap(sm, "spec", "selector", "matchLabels"), stringMap(svc, "metadata", "labels")) {
		t.Errorf("ServiceMonitor selector does not match the Service labels %v", stringMap(svc, "metadata", "labels"))
	}
	eps := list(sm, "spec", "endpoints")
	if len(eps) != 1 || str(eps[0], "port") != str(svcPorts[0], "name") || str(eps[0], "path") != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %v: want port %q path /metrics", eps, str(svcPorts[0], "name"))
	}

	// The PrometheusRule's groups are the rule file's, unchanged.
	var rules map[string]any
	data, err := os.ReadFile(filepath.Join(root, rulesPath))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dig(byKind["PrometheusRule"][0].Doc, "spec", "groups"), rules["groups"]) {
		t.Errorf("%s/prometheusrule.yaml spec.groups differ from %s: copy the groups over", k8sDir, rulesPath)
	}
}

// readinessCommand returns the Deployment's readiness probe shell command.
func readinessCommand(t *testing.T, root string) string {
	t.Helper()
	for _, o := range loadManifests(t, root) {
		if o.Kind() != "Deployment" {
			continue
		}
		cmd := list(o.Doc, "spec", "template", "spec", "containers", "0", "readinessProbe", "exec", "command")
		if len(cmd) != 3 || cmd[0] != "sh" || cmd[1] != "-c" {
			t.Fatalf("readiness probe command %v: want [sh -c SCRIPT]", cmd)
		}
		return fmt.Sprint(cmd[2])
	}
	t.Fatal("no Deployment")
	return ""
}

// checkReadinessProbe runs the Deployment's readiness probe against the live server (port and
// model id substituted): ready while the demo model is loaded, not ready once it is unloaded,
// ready again after a reload.
func checkReadinessProbe(t *testing.T, root, addr string) {
	for _, tool := range []string{"sh", "wget", "grep"} {
		needTool(t, tool)
	}
	script := readinessCommand(t, root)
	script = regexp.MustCompile(`127\.0\.0\.1:\d+`).ReplaceAllString(script, addr)
	probe := func() error {
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(os.Environ(), "MODEL_ID=demo")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v %s", err, out)
		}
		return nil
	}
	post := func(path string) {
		resp, err := http.Post("http://"+addr+path, "application/json", strings.NewReader(`{"model_id":"demo"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Logf("POST %s: %d %s", path, resp.StatusCode, body)
	}
	if err := probe(); err != nil {
		t.Fatalf("readiness probe fails on a loaded model: %v\n%s", err, script)
	}
	post("/v1/models/unload")
	if err := probe(); err == nil {
		t.Errorf("readiness probe passes while the model is unloaded:\n%s", script)
	}
	post("/v1/models/reload")
	if err := probe(); err != nil {
		t.Errorf("readiness probe fails after the reload: %v", err)
	}
	// A model id the server does not serve is never ready.
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), "MODEL_ID=other")
	if cmd.Run() == nil {
		t.Error("readiness probe passes for a model the server does not serve")
	}
}

// TestPromtoolRules runs promtool over deploy/prometheus: the rules are valid, their unit tests
// pass, and the example prometheus.yml (with its rule file) is valid.
func TestPromtoolRules(t *testing.T) {
	promtool := needTool(t, "promtool")
	dir := filepath.Join(repoRoot(t), "deploy", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "mistralrs.rules.yml"},
		{"test", "rules", "mistralrs.rules.test.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestGrafanaDashboard checks the dashboard's structure; the integration test runs its queries.
func TestGrafanaDashboard(t *testing.T) {
	root := repoRoot(t)
	d := loadDashboard(t, root)
	if d.UID == "" || d.Title == "" {
		t.Error("dashboard needs a uid and a title")
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type == "query" && (!v.IncludeAll || v.AllValue != ".*") {
			t.Errorf("variable %s: the test substitutes .* for it; give it includeAll with allValue .*", v.Name)
		}
	}
	for _, v := range []string{"datasource", "job", "instance", "model"} {
		if !vars[v] {
			t.Errorf("dashboard lacks the %s variable", v)
		}
	}
	ids := map[int]bool{}
	titles := map[string]bool{}
	queries := 0
	varRef := regexp.MustCompile(`\$\{?([a-zA-Z_]+)`)
	for _, p := range allPanels(d.Panels) {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if titles[p.Title] {
			t.Errorf("panel title %q used twice (the integration test keys expectations by title)", p.Title)
		}
		titles[p.Title] = true
		if str(p.Datasource, "uid") != "${datasource}" {
			t.Errorf("panel %q: datasource %v, want the ${datasource} variable", p.Title, p.Datasource)
		}
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: grid position %+v", p.Title, p.GridPos)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			if strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %s: empty expr", p.Title, tg.RefID)
			}
			for _, m := range varRef.FindAllStringSubmatch(tg.Expr, -1) {
				if !vars[m[1]] && m[1] != "__rate_interval" {
					t.Errorf("panel %q: unknown variable $%s", p.Title, m[1])
				}
			}
			if p.Type == "heatmap" && tg.Format != "heatmap" {
				t.Errorf("heatmap %q: target format %q", p.Title, tg.Format)
			}
		}
	}
	for title := range panelWant {
		if !titles[title] {
			t.Errorf("panelWant names %q, which is not a panel", title)
		}
	}
	// The panels: traffic, errors, latency, TTFT/ITL heatmaps, KV cache, prefix cache
	// hit ratio, queue, speculative acceptance.
	for _, want := range []string{"Requests per second", "Server error ratio (5xx)", "Request duration",
		"Time to first token heatmap", "Inter-token latency heatmap", "KV cache pressure",
		"Prefix cache hit ratio", "Sequences and queue", "Draft acceptance rate"} {
		if !titles[want] {
			t.Errorf("dashboard lacks the %q panel", want)
		}
	}
	t.Logf("%d panels, %d queries", len(titles), queries)
}
