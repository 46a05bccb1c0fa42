package k8stest

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	eppconfig "sigs.k8s.io/gateway-api-inference-extension/apix/config/v1alpha1"
	infv1alpha2 "sigs.k8s.io/gateway-api-inference-extension/apix/v1alpha2"
)

// The objects the checks are about, by name.
const (
	serverName = "mistralrs-qwen3-0-6b"     // the model server's Deployment, Service, PDB, pool, HPA
	eppName    = "mistralrs-qwen3-0-6b-epp" // the endpoint picker's Deployment, Service, ConfigMap
)

// The server's drain settings (docs/configuration.md), read from the ConfigMap's config.toml.
const (
	shutdownKey = "shutdown_timeout_secs"
	preStopKey  = "shutdown_delay_secs"
)

// exitSeconds is the margin the grace period keeps after the drain for the process to exit.
const exitSeconds = 5

// readinessRoutes answer 503 while the server drains (docs/http-api.md).
var readinessRoutes = []string{"/health", "/readyz", "/"}

// The EPP flags that name the model server's metric families.
var eppMetricFlags = []string{"total-queued-requests-metric", "kv-cache-usage-percentage-metric", "lora-info-metric"}

// facts is what the checks compare the manifests with, read from the repository and from the
// inference extension's v1.0.0 source.
type facts struct {
	Routes      map[string]bool // paths of internal/server/openapi.json
	Observ      string          // docs/observability.md
	EPPFlags    map[string]bool // flags the v1.0.0 endpoint picker defines
	PluginTypes map[string]bool // plugin types it registers
}

func loadFacts(t testing.TB, root string) *facts {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "internal/server/openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	f := &facts{Routes: map[string]bool{}}
	for p := range doc.Paths {
		f.Routes[p] = true
	}
	obs, err := os.ReadFile(filepath.Join(root, "docs/observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	f.Observ = string(obs)
	f.EPPFlags, f.PluginTypes = eppSourceFacts(t)
	return f
}

// documents reports whether docs/observability.md defines the family as a gauge: a row of a
// metrics table whose first cell names it and whose second says gauge, or the family written with
// its labels (`name{label,...}`). A name that only appears elsewhere (vLLM's, in the picker's
// flag table) does not count.
func (f *facts) documents(family string) bool {
	name := regexp.QuoteMeta(family)
	row := regexp.MustCompile("(?m)^\\| [^|]*`" + name + "`[^|]*\\| gauge \\|")
	return row.MatchString(f.Observ) || strings.Contains(f.Observ, "`"+family+"{")
}

// problems runs every cross-check and returns what is wrong, one line each.
func problems(tr *tree, f *facts) []string {
	c := &checker{tr: tr, f: f}
	c.kustomizations()
	server := one[*appsv1.Deployment](tr, serverName)
	epp := one[*appsv1.Deployment](tr, eppName)
	if server == nil || epp == nil {
		c.errorf("want Deployments %s and %s", serverName, eppName)
		return c.out
	}
	for _, d := range all[*appsv1.Deployment](tr) {
		c.deployment(d)
	}
	c.services()
	c.serverProbes(server)
	c.drainTimings(server)
	pool := one[*infv1.InferencePool](tr, serverName)
	if pool == nil {
		c.errorf("no InferencePool %s", serverName)
		return c.out
	}
	c.pool(pool, server)
	c.picker(epp, pool)
	c.objectives(pool)
	c.autoscaler(server)
	c.rbac(epp)
	return c.out
}

type checker struct {
	tr  *tree
	f   *facts
	out []string
}

func (c *checker) errorf(format string, args ...any) {
	c.out = append(c.out, fmt.Sprintf(format, args...))
}

// selects reports whether the selector selects the labels; an empty selector never counts.
func selects(sel *metav1.LabelSelector, lbls map[string]string) bool {
	if sel == nil || (len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0) {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(lbls))
}

// kustomizations: each kustomization.yaml lists the files of its folder that hold objects, and
// its other resources are folders with a kustomization of their own.
func (c *checker) kustomizations() {
	files := map[string][]string{} // folder → object files
	for _, o := range c.tr.Objects {
		dir, file := path.Split(o.File)
		if o.Kind != "Kustomization" && !slices.Contains(files[dir], file) {
			files[dir] = append(files[dir], file)
		}
	}
	for _, o := range c.tr.Objects {
		k, ok := o.Obj.(*kustomization)
		if !ok {
			continue
		}
		dir := path.Dir(o.File)
		var listed []string
		for _, r := range k.Resources {
			if strings.HasSuffix(r, ".yaml") {
				listed = append(listed, r)
				continue
			}
			base := path.Clean(path.Join(dir, r))
			if _, err := os.Stat(filepath.Join(c.tr.Dir, base, "kustomization.yaml")); err != nil {
				c.errorf("%s: resource %q is neither a file of the folder nor a folder with a kustomization.yaml", o.File, r)
			}
		}
		want := files[strings.TrimPrefix(dir+"/", "./")]
		slices.Sort(listed)
		slices.Sort(want)
		if !slices.Equal(listed, want) {
			c.errorf("%s lists %v; the folder's manifest files are %v", o.File, listed, want)
		}
		for _, p := range k.Patches {
			if p.Target.Kind == "Deployment" && one[*appsv1.Deployment](c.tr, p.Target.Name) == nil {
				c.errorf("%s: a patch targets Deployment %q, which no manifest defines", o.File, p.Target.Name)
			}
		}
	}
}

// deployment: the selector selects the pod template; topology spread, if any, selects it too;
// every probe names a port of its container; every ConfigMap volume names a ConfigMap here.
func (c *checker) deployment(d *appsv1.Deployment) {
	podLabels := d.Spec.Template.Labels
	if !selects(d.Spec.Selector, podLabels) {
		c.errorf("Deployment %s: selector does not select its pod labels %v", d.Name, podLabels)
	}
	for _, tsc := range d.Spec.Template.Spec.TopologySpreadConstraints {
		if !selects(tsc.LabelSelector, podLabels) {
			c.errorf("Deployment %s: topology spread over %s does not select its own pods", d.Name, tsc.TopologyKey)
		}
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap != nil && one[*corev1.ConfigMap](c.tr, v.ConfigMap.Name) == nil {
			c.errorf("Deployment %s: volume %s names ConfigMap %q, which no manifest defines", d.Name, v.Name, v.ConfigMap.Name)
		}
	}
	for _, ct := range d.Spec.Template.Spec.Containers {
		for name, p := range map[string]*corev1.Probe{"startupProbe": ct.StartupProbe, "livenessProbe": ct.LivenessProbe, "readinessProbe": ct.ReadinessProbe} {
			if p == nil {
				continue
			}
			if p.HTTPGet != nil && containerPort(ct, p.HTTPGet.Port.String()) == 0 {
				c.errorf("Deployment %s container %s: %s on port %s, which the container does not expose", d.Name, ct.Name, name, p.HTTPGet.Port.String())
			}
			if p.GRPC != nil && containerPort(ct, strconv.Itoa(int(p.GRPC.Port))) == 0 {
				c.errorf("Deployment %s container %s: %s on port %d, which the container does not expose", d.Name, ct.Name, name, p.GRPC.Port)
			}
		}
	}
}

// containerPort resolves a port name or number against the container's ports (0: none).
func containerPort(ct corev1.Container, port string) int32 {
	for _, p := range ct.Ports {
		if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
			return p.ContainerPort
		}
	}
	return 0
}

// services: each Service selects the pods of exactly one Deployment and targets its ports.
func (c *checker) services() {
	for _, s := range all[*corev1.Service](c.tr) {
		var matched []*appsv1.Deployment
		for _, d := range all[*appsv1.Deployment](c.tr) {
			if selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}, d.Spec.Template.Labels) {
				matched = append(matched, d)
			}
		}
		if len(matched) != 1 {
			c.errorf("Service %s selects the pods of %d Deployments, want 1", s.Name, len(matched))
			continue
		}
		ct := matched[0].Spec.Template.Spec.Containers[0]
		for _, p := range s.Spec.Ports {
			if containerPort(ct, p.TargetPort.String()) == 0 {
				c.errorf("Service %s port %s: targetPort %s is no port of Deployment %s", s.Name, p.Name, p.TargetPort.String(), matched[0].Name)
			}
		}
	}
	for _, pdb := range all[*policyv1.PodDisruptionBudget](c.tr) {
		d := one[*appsv1.Deployment](c.tr, pdb.Name)
		if d == nil || !selects(pdb.Spec.Selector, d.Spec.Template.Labels) {
			c.errorf("PodDisruptionBudget %s does not select the pods of Deployment %s", pdb.Name, pdb.Name)
		}
	}
}

// probeURL finds the http://127.0.0.1:PORT/PATH URLs in an exec probe's script.
var probeURL = regexp.MustCompile(`http://127\.0\.0\.1:(\d+)(/[A-Za-z0-9_./-]*)`)

// serverProbes: every path a probe of the model server asks for is a route of the server (its
// OpenAPI document), on the container's port; readiness asks /health (which a drain turns to
// 503); liveness does not (it must stay 200 through the drain).
func (c *checker) serverProbes(d *appsv1.Deployment) {
	ct := d.Spec.Template.Spec.Containers[0]
	paths := map[string][]string{}
	for name, p := range map[string]*corev1.Probe{"startupProbe": ct.StartupProbe, "livenessProbe": ct.LivenessProbe, "readinessProbe": ct.ReadinessProbe} {
		if p == nil {
			c.errorf("Deployment %s: no %s", d.Name, name)
			continue
		}
		if p.HTTPGet != nil {
			paths[name] = append(paths[name], p.HTTPGet.Path)
		}
		if p.Exec != nil {
			for _, m := range probeURL.FindAllStringSubmatch(strings.Join(p.Exec.Command, " "), -1) {
				if strconv.Itoa(int(containerPort(ct, "http"))) != m[1] {
					c.errorf("Deployment %s: %s asks port %s; the container serves on %d", d.Name, name, m[1], containerPort(ct, "http"))
				}
				paths[name] = append(paths[name], m[2])
			}
		}
		if len(paths[name]) == 0 {
			c.errorf("Deployment %s: %s asks no HTTP path", d.Name, name)
		}
		for _, p := range paths[name] {
			if !c.f.Routes[p] {
				c.errorf("Deployment %s: %s asks %s, which is no route of the server (internal/server/openapi.json)", d.Name, name, p)
			}
		}
	}
	for _, r := range readinessRoutes {
		if slices.Contains(paths["livenessProbe"], r) {
			c.errorf("Deployment %s: the liveness probe asks %s, which answers 503 while the server drains: the kubelet would kill a draining pod", d.Name, r)
		}
	}
	if !slices.ContainsFunc(paths["readinessProbe"], func(p string) bool { return slices.Contains(readinessRoutes, p) }) {
		c.errorf("Deployment %s: the readiness probe asks none of %v, so a drain does not make the pod unready", d.Name, readinessRoutes)
	}
}

// serverConfig reads the config.toml of the ConfigMap the server's Deployment mounts.
func (c *checker) serverConfig(d *appsv1.Deployment) map[string]any {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.ConfigMap == nil {
			continue
		}
		cm := one[*corev1.ConfigMap](c.tr, v.ConfigMap.Name)
		if cm == nil || cm.Data["config.toml"] == "" {
			continue
		}
		var cfg map[string]any
		if _, err := toml.Decode(cm.Data["config.toml"], &cfg); err != nil {
			c.errorf("ConfigMap %s config.toml: %v", cm.Name, err)
			return nil
		}
		return cfg
	}
	c.errorf("Deployment %s mounts no ConfigMap with a config.toml", d.Name)
	return nil
}

// drainTimings: after SIGTERM the server stays up for the pre-stop delay with readiness failing,
// then drains for up to the shutdown timeout. The readiness probe must notice within the delay
// (so the picker and the Service stop sending before the listener closes), and the grace period
// must cover delay + timeout (or the kubelet's SIGKILL cuts the drain short).
func (c *checker) drainTimings(d *appsv1.Deployment) {
	cfg := c.serverConfig(d)
	if cfg == nil {
		return
	}
	srv, _ := cfg["server"].(map[string]any)
	delay, ok1 := srv[preStopKey].(int64)
	timeout, ok2 := srv[shutdownKey].(int64)
	if !ok1 || !ok2 {
		c.errorf("config.toml: set [server] %s and %s explicitly (the timings below are checked against them)", preStopKey, shutdownKey)
		return
	}
	spec := d.Spec.Template.Spec
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g < delay+timeout+exitSeconds {
		c.errorf("Deployment %s: terminationGracePeriodSeconds %v < %s %d + %s %d + %d s to exit", d.Name, g, preStopKey, delay, shutdownKey, timeout, exitSeconds)
	}
	ct := spec.Containers[0]
	if r := ct.ReadinessProbe; r != nil {
		notice := int64(r.PeriodSeconds)*int64(r.FailureThreshold) + int64(r.TimeoutSeconds)
		if notice >= delay {
			c.errorf("Deployment %s: readiness notices a drain after up to %d s (period × failureThreshold + timeout), not within %s %d", d.Name, notice, preStopKey, delay)
		}
	}
	if ct.Lifecycle != nil && ct.Lifecycle.PreStop != nil {
		c.errorf("Deployment %s: a preStop hook delays SIGTERM, during which readiness stays true; the server's own pre-stop delay does the waiting (README.md)", d.Name)
	}
}

// pool: the InferencePool selects the server's pods (and only them), targets its http port and
// names the picker's Service and gRPC port.
func (c *checker) pool(pool *infv1.InferencePool, server *appsv1.Deployment) {
	sel := map[string]string{}
	for k, v := range pool.Spec.Selector.MatchLabels {
		sel[string(k)] = string(v)
	}
	for _, d := range all[*appsv1.Deployment](c.tr) {
		if got := selects(&metav1.LabelSelector{MatchLabels: sel}, d.Spec.Template.Labels); got != (d == server) {
			c.errorf("InferencePool %s: selects the pods of Deployment %s: %v", pool.Name, d.Name, got)
		}
	}
	ct := server.Spec.Template.Spec.Containers[0]
	if len(pool.Spec.TargetPorts) != 1 || int32(pool.Spec.TargetPorts[0].Number) != containerPort(ct, "http") {
		c.errorf("InferencePool %s: targetPorts %v, want the server's http port %d (the picker scrapes the first)", pool.Name, pool.Spec.TargetPorts, containerPort(ct, "http"))
	}
	ref := pool.Spec.EndpointPickerRef
	if ref.Kind != "Service" || string(ref.Name) != eppName || ref.Port == nil {
		c.errorf("InferencePool %s: endpointPickerRef %+v, want Service %s with a port", pool.Name, ref, eppName)
		return
	}
	if m := ref.FailureMode; m != infv1.EndpointPickerFailClose && m != infv1.EndpointPickerFailOpen {
		c.errorf("InferencePool %s: failureMode %q", pool.Name, m)
	}
	svc := one[*corev1.Service](c.tr, eppName)
	if svc == nil || !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == int32(ref.Port.Number) }) {
		c.errorf("InferencePool %s: the picker's Service %s has no port %d", pool.Name, eppName, ref.Port.Number)
	}
}

// eppArgs reads the picker's --flag=value arguments.
func eppArgs(d *appsv1.Deployment) (map[string]string, error) {
	args := map[string]string{}
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		name, value, ok := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !ok {
			return nil, fmt.Errorf("Deployment %s: argument %q: write flags as --name=value", d.Name, a)
		}
		args[name] = value
	}
	return args, nil
}

// picker: its flags are the v1.0.0 picker's; it serves the pool; its metric flags name families
// the server documents; its ports match the Service, the pool and its probes; its plugins file
// is mounted, decodes strictly and uses registered plugin types.
func (c *checker) picker(d *appsv1.Deployment, pool *infv1.InferencePool) {
	args, err := eppArgs(d)
	if err != nil {
		c.errorf("%v", err)
		return
	}
	for name := range args {
		if !c.f.EPPFlags[name] {
			c.errorf("Deployment %s: --%s is no flag of the v1.0.0 endpoint picker", d.Name, name)
		}
	}
	if args["pool-name"] != pool.Name || args["pool-group"] != infv1.GroupVersion.Group {
		c.errorf("Deployment %s: --pool-name=%s --pool-group=%s, want the InferencePool %s of %s", d.Name, args["pool-name"], args["pool-group"], pool.Name, infv1.GroupVersion.Group)
	}
	ct := d.Spec.Template.Spec.Containers[0]
	if ns := args["pool-namespace"]; ns != "$(POD_NAMESPACE)" || !slices.ContainsFunc(ct.Env, func(e corev1.EnvVar) bool {
		return e.Name == "POD_NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
	}) {
		c.errorf("Deployment %s: --pool-namespace=%s, want $(POD_NAMESPACE) from metadata.namespace", d.Name, ns)
	}
	for _, flag := range eppMetricFlags {
		family, _, _ := strings.Cut(args[flag], "{")
		if family == "" || !c.f.documents(family) {
			c.errorf("Deployment %s: --%s=%s names no family of docs/observability.md", d.Name, flag, args[flag])
		}
	}
	if p := args["model-server-metrics-path"]; p != "" && !c.f.Routes[p] {
		c.errorf("Deployment %s: --model-server-metrics-path=%s is no route of the server", d.Name, p)
	}
	for flag, port := range map[string]string{"grpc-port": "grpc", "grpc-health-port": "grpc-health", "metrics-port": "metrics"} {
		if n := containerPort(ct, port); args[flag] != strconv.Itoa(int(n)) {
			c.errorf("Deployment %s: --%s=%s, the container's %s port is %d", d.Name, flag, args[flag], port, n)
		}
	}
	if ref := pool.Spec.EndpointPickerRef.Port; ref != nil && args["grpc-port"] != strconv.Itoa(int(ref.Number)) {
		c.errorf("Deployment %s: --grpc-port=%s, the pool's endpointPickerRef port is %d", d.Name, args["grpc-port"], ref.Number)
	}
	for _, p := range []*corev1.Probe{ct.LivenessProbe, ct.ReadinessProbe} {
		if p == nil || p.GRPC == nil || strconv.Itoa(int(p.GRPC.Port)) != args["grpc-health-port"] {
			c.errorf("Deployment %s: probes must be gRPC on --grpc-health-port=%s", d.Name, args["grpc-health-port"])
		}
	}
	c.pickerPlugins(d, ct, args["config-file"])
}

func (c *checker) pickerPlugins(d *appsv1.Deployment, ct corev1.Container, file string) {
	dir, key := path.Split(file)
	var cm *corev1.ConfigMap
	for _, m := range ct.VolumeMounts {
		if path.Clean(m.MountPath) != path.Clean(dir) {
			continue
		}
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				cm = one[*corev1.ConfigMap](c.tr, v.ConfigMap.Name)
			}
		}
	}
	if cm == nil || cm.Data[key] == "" {
		c.errorf("Deployment %s: --config-file=%s is no key of a mounted ConfigMap", d.Name, file)
		return
	}
	var cfg eppconfig.EndpointPickerConfig
	if err := yaml.UnmarshalStrict([]byte(cm.Data[key]), &cfg); err != nil {
		c.errorf("ConfigMap %s %s: %v", cm.Name, key, err)
		return
	}
	if cfg.APIVersion != eppconfig.GroupVersion.String() || cfg.Kind != "EndpointPickerConfig" {
		c.errorf("ConfigMap %s %s: %s %s, want %s EndpointPickerConfig", cm.Name, key, cfg.APIVersion, cfg.Kind, eppconfig.GroupVersion)
	}
	names := map[string]bool{}
	for _, p := range cfg.Plugins {
		if !c.f.PluginTypes[p.Type] {
			c.errorf("ConfigMap %s %s: plugin type %q is not registered by the v1.0.0 picker", cm.Name, key, p.Type)
		}
		name := p.Name
		if name == "" {
			name = p.Type // the loader names a plugin by its type when the name is left out
		}
		names[name] = true
	}
	for _, prof := range cfg.SchedulingProfiles {
		for _, p := range prof.Plugins {
			if !names[p.PluginRef] {
				c.errorf("ConfigMap %s %s: profile %s refers to plugin %q, which is not listed", cm.Name, key, prof.Name, p.PluginRef)
			}
		}
	}
}

// objectives name the pool.
func (c *checker) objectives(pool *infv1.InferencePool) {
	for _, o := range all[*infv1alpha2.InferenceObjective](c.tr) {
		ref := o.Spec.PoolRef
		if string(ref.Name) != pool.Name || string(ref.Group) != infv1.GroupVersion.Group || (ref.Kind != "" && ref.Kind != "InferencePool") {
			c.errorf("InferenceObjective %s: poolRef %+v, want InferencePool %s of %s", o.Name, ref, pool.Name, infv1.GroupVersion.Group)
		}
		if o.Spec.Priority == nil {
			c.errorf("InferenceObjective %s: no priority", o.Name)
		}
	}
}

// autoscaler: the HPA scales the server's Deployment on a per-pod metric that
// prometheus-adapter's rules serve, from a family the server documents; its floor keeps the
// PodDisruptionBudget satisfiable.
func (c *checker) autoscaler(server *appsv1.Deployment) {
	hpas := all[*autoscalingv2.HorizontalPodAutoscaler](c.tr)
	if len(hpas) != 1 {
		c.errorf("want one HorizontalPodAutoscaler, have %d", len(hpas))
		return
	}
	h := hpas[0]
	if ref := h.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.APIVersion != "apps/v1" || ref.Name != server.Name {
		c.errorf("HorizontalPodAutoscaler %s: scaleTargetRef %+v, want Deployment %s", h.Name, ref, server.Name)
	}
	served := c.adapterMetrics()
	for _, m := range h.Spec.Metrics {
		if m.Type != autoscalingv2.PodsMetricSourceType || m.Pods == nil {
			c.errorf("HorizontalPodAutoscaler %s: metric of type %s, want Pods (per replica)", h.Name, m.Type)
			continue
		}
		if !served[m.Pods.Metric.Name] {
			c.errorf("HorizontalPodAutoscaler %s: metric %s is not served by %s (it serves %v)", h.Name, m.Pods.Metric.Name, adapterRulesFile, served)
		}
		if m.Pods.Target.Type != autoscalingv2.AverageValueMetricType || m.Pods.Target.AverageValue == nil || m.Pods.Target.AverageValue.Sign() <= 0 {
			c.errorf("HorizontalPodAutoscaler %s: metric %s needs a positive AverageValue target", h.Name, m.Pods.Metric.Name)
		}
	}
	pdb := one[*policyv1.PodDisruptionBudget](c.tr, server.Name)
	if h.Spec.MinReplicas == nil || pdb == nil || pdb.Spec.MinAvailable == nil || int(*h.Spec.MinReplicas) <= pdb.Spec.MinAvailable.IntValue() {
		c.errorf("HorizontalPodAutoscaler %s: minReplicas must exceed the PodDisruptionBudget's minAvailable, so a node drain can evict a replica", h.Name)
	}
}

// seriesName is the metric name a prometheus-adapter seriesQuery selects.
var seriesName = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)

// adapterMetrics returns the custom metric names the adapter's rules serve for pods, checking
// each rule on the way.
func (c *checker) adapterMetrics() map[string]bool {
	served := map[string]bool{}
	if c.tr.Adapter == nil {
		c.errorf("%s missing", adapterRulesFile)
		return served
	}
	for i, r := range c.tr.Adapter.Rules {
		m := seriesName.FindStringSubmatch(r.SeriesQuery)
		if m == nil {
			c.errorf("%s rule %d: seriesQuery %q names no metric", adapterRulesFile, i, r.SeriesQuery)
			continue
		}
		if !c.f.documents(m[1]) {
			c.errorf("%s rule %d: %s is no family of docs/observability.md", adapterRulesFile, i, m[1])
		}
		if r.Resources.Overrides["pod"].Resource != "pod" || r.Resources.Overrides["namespace"].Resource != "namespace" {
			c.errorf("%s rule %d: map the pod and namespace labels onto their resources", adapterRulesFile, i)
		}
		if !strings.Contains(r.MetricsQuery, "<<.Series>>") || !strings.Contains(r.MetricsQuery, "<<.LabelMatchers>>") || !strings.Contains(r.MetricsQuery, "<<.GroupBy>>") {
			c.errorf("%s rule %d: metricsQuery %q must use <<.Series>>, <<.LabelMatchers>> and <<.GroupBy>>", adapterRulesFile, i, r.MetricsQuery)
		}
		re, err := regexp.Compile(r.Name.Matches)
		if err != nil || !re.MatchString(m[1]) {
			c.errorf("%s rule %d: name.matches %q does not match %s", adapterRulesFile, i, r.Name.Matches, m[1])
			continue
		}
		as := r.Name.As
		if as == "" {
			as = "$1" // the adapter's default: the first group, else the whole name
			if re.NumSubexp() == 0 {
				as = "$0"
			}
		}
		served[re.ReplaceAllString(m[1], as)] = true
	}
	return served
}

// rbac: the picker's ServiceAccount is the one its bindings name, and its Role lets it watch
// the pool, the objectives and the pods.
func (c *checker) rbac(epp *appsv1.Deployment) {
	sa := epp.Spec.Template.Spec.ServiceAccountName
	if one[*corev1.ServiceAccount](c.tr, sa) == nil {
		c.errorf("Deployment %s: serviceAccountName %q, which no manifest defines", epp.Name, sa)
	}
	var rules []rbacv1.PolicyRule
	for _, b := range all[*rbacv1.RoleBinding](c.tr) {
		if slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Kind == "ServiceAccount" && s.Name == sa }) {
			if r := one[*rbacv1.Role](c.tr, b.RoleRef.Name); r != nil && b.RoleRef.Kind == "Role" {
				rules = append(rules, r.Rules...)
			} else {
				c.errorf("RoleBinding %s: roleRef %s %s, which no manifest defines", b.Name, b.RoleRef.Kind, b.RoleRef.Name)
			}
		}
	}
	for _, need := range []struct{ group, resource string }{
		{infv1.GroupVersion.Group, "inferencepools"}, {infv1alpha2.GroupVersion.Group, "inferenceobjectives"}, {"", "pods"},
	} {
		ok := slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, need.group) && slices.Contains(r.Resources, need.resource) &&
				slices.Contains(r.Verbs, "get") && slices.Contains(r.Verbs, "list") && slices.Contains(r.Verbs, "watch")
		})
		if !ok {
			c.errorf("ServiceAccount %s may not get, list and watch %s %q", sa, need.resource, need.group)
		}
	}
	for _, b := range all[*rbacv1.ClusterRoleBinding](c.tr) {
		if one[*rbacv1.ClusterRole](c.tr, b.RoleRef.Name) == nil {
			c.errorf("ClusterRoleBinding %s: roleRef %s, which no manifest defines", b.Name, b.RoleRef.Name)
		}
	}
}

// TestManifestsAgree runs the cross-checks on deploy/kubernetes.
func TestManifestsAgree(t *testing.T) {
	root := repoRoot(t)
	tr, err := loadTree(filepath.Join(root, manifestsDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems(tr, loadFacts(t, root)) {
		t.Error(p)
	}
}
