package k8stest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// tracingDir is the tracing example: compose, the collector's configuration, and a kustomize
// overlay of deploy/kubernetes.
const tracingDir = "deploy/tracing"

// The example's files, relative to tracingDir.
const (
	composeFile     = "compose.yaml"
	collectorFile   = "otel-collector.yaml"
	overlayDir      = "kubernetes"
	overlayKustFile = "kubernetes/kustomization.yaml"
)

// The names the example gives the collector and Jaeger: compose services, Kubernetes
// Deployments, Services and the collector's ConfigMap.
const (
	collectorName = "otel-collector"
	jaegerName    = "jaeger"
	serverService = "mistralrs" // the server's compose service
)

// The ports Jaeger v2 receives OTLP on (its all-in-one configuration), by exporter type: the
// collector's otlp exporter speaks gRPC, otlphttp HTTP/protobuf.
var jaegerOTLPPorts = map[string]int{"otlp": 4317, "otlphttp": 4318}

// jaegerUIPort is Jaeger's query UI.
const jaegerUIPort = 16686

// otelEnv are the OpenTelemetry SDK environment variables (the specification's "Environment
// Variable Specification": general SDK, batch span processor, OTLP exporter) that the example
// may set on the server, and the GenAI conventions' content-capture switch, which the server
// reads itself. A name outside this list is a typo the SDK would silently ignore.
var otelEnv = setOf(`
	OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
	OTEL_SDK_DISABLED OTEL_SERVICE_NAME OTEL_RESOURCE_ATTRIBUTES OTEL_TRACES_SAMPLER
	OTEL_TRACES_SAMPLER_ARG OTEL_PROPAGATORS OTEL_TRACES_EXPORTER OTEL_BSP_SCHEDULE_DELAY
	OTEL_BSP_EXPORT_TIMEOUT OTEL_BSP_MAX_QUEUE_SIZE OTEL_BSP_MAX_EXPORT_BATCH_SIZE
	OTEL_EXPORTER_OTLP_ENDPOINT OTEL_EXPORTER_OTLP_TRACES_ENDPOINT OTEL_EXPORTER_OTLP_PROTOCOL
	OTEL_EXPORTER_OTLP_TRACES_PROTOCOL OTEL_EXPORTER_OTLP_HEADERS
	OTEL_EXPORTER_OTLP_TRACES_HEADERS OTEL_EXPORTER_OTLP_TIMEOUT
	OTEL_EXPORTER_OTLP_TRACES_TIMEOUT OTEL_EXPORTER_OTLP_COMPRESSION
	OTEL_EXPORTER_OTLP_TRACES_COMPRESSION OTEL_EXPORTER_OTLP_INSECURE
	OTEL_EXPORTER_OTLP_TRACES_INSECURE OTEL_EXPORTER_OTLP_CERTIFICATE
	OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE OTEL_EXPORTER_OTLP_CLIENT_KEY
	OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE
	OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE`)

// setOf makes a set of the space-separated words.
func setOf(words string) map[string]bool {
	set := map[string]bool{}
	for _, w := range strings.Fields(words) {
		set[w] = true
	}
	return set
}

// samplers are OTEL_TRACES_SAMPLER's values the SDK knows; the ratio ones read
// OTEL_TRACES_SAMPLER_ARG.
var samplers = map[string]bool{"always_on": false, "always_off": false, "traceidratio": true,
	"parentbased_always_on": false, "parentbased_always_off": false, "parentbased_traceidratio": true}

// composeProject is a compose file with the fields the example uses.
type composeProject struct {
	Name     string                    `json:"name"`
	Services map[string]composeService `json:"services"`
}

type composeService struct {
	Image string `json:"image"`
	Build *struct {
		Context    string `json:"context"`
		Dockerfile string `json:"dockerfile"`
	} `json:"build,omitempty"`
	Command     []string          `json:"command,omitempty"`
	Environment map[string]string `json:"environment,omitempty"`
	Ports       []string          `json:"ports,omitempty"`
	Expose      []string          `json:"expose,omitempty"`
	Volumes     []string          `json:"volumes,omitempty"`
	DependsOn   []string          `json:"depends_on,omitempty"`
}

// collectorConfig is the OpenTelemetry Collector's configuration with the components the example
// uses (core distribution).
type collectorConfig struct {
	Receivers struct {
		OTLP *struct {
			Protocols struct {
				HTTP *endpointSetting `json:"http,omitempty"`
				GRPC *endpointSetting `json:"grpc,omitempty"`
			} `json:"protocols"`
		} `json:"otlp,omitempty"`
	} `json:"receivers"`
	Processors struct {
		MemoryLimiter *struct {
			CheckInterval string `json:"check_interval"`
			LimitMiB      int    `json:"limit_mib"`
			SpikeLimitMiB int    `json:"spike_limit_mib,omitempty"`
		} `json:"memory_limiter,omitempty"`
		Batch *struct {
			Timeout       string `json:"timeout,omitempty"`
			SendBatchSize int    `json:"send_batch_size,omitempty"`
		} `json:"batch,omitempty"`
	} `json:"processors"`
	Exporters  map[string]otlpExporter `json:"exporters"`
	Extensions struct {
		HealthCheck *endpointSetting `json:"health_check,omitempty"`
	} `json:"extensions"`
	Service struct {
		Extensions []string `json:"extensions,omitempty"`
		Pipelines  map[string]struct {
			Receivers  []string `json:"receivers"`
			Processors []string `json:"processors,omitempty"`
			Exporters  []string `json:"exporters"`
		} `json:"pipelines"`
	} `json:"service"`
}

type endpointSetting struct {
	Endpoint string `json:"endpoint"`
}

type otlpExporter struct {
	Endpoint string `json:"endpoint"`
	TLS      *struct {
		Insecure bool `json:"insecure"`
	} `json:"tls,omitempty"`
}

// defined lists the components the configuration defines, by kind.
func (c *collectorConfig) defined() map[string][]string {
	d := map[string][]string{}
	if c.Receivers.OTLP != nil {
		d["receivers"] = append(d["receivers"], "otlp")
	}
	if c.Processors.MemoryLimiter != nil {
		d["processors"] = append(d["processors"], "memory_limiter")
	}
	if c.Processors.Batch != nil {
		d["processors"] = append(d["processors"], "batch")
	}
	for name := range c.Exporters {
		d["exporters"] = append(d["exporters"], name)
	}
	if c.Extensions.HealthCheck != nil {
		d["extensions"] = append(d["extensions"], "health_check")
	}
	return d
}

// tracingExample is deploy/tracing, decoded.
type tracingExample struct {
	Dir       string
	Compose   *composeProject
	Collector *collectorConfig
	Overlay   *tree // the overlay's own manifests (deploy/tracing/kubernetes)
	Built     *tree // what kubectl apply -k applies: the base's objects and the overlay's, patched
	README    string
}

// decodeStrict decodes a YAML file strictly into v, naming the file in the error.
func decodeStrict(dir, rel, what string, v any) error {
	data, err := os.ReadFile(filepath.Join(dir, rel))
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		return fmt.Errorf("%s: %s: %v", rel, what, err)
	}
	return nil
}

// loadTracing decodes the example strictly: the compose file and the collector's configuration
// into the structs above, the overlay's manifests into the API types, and builds the overlay.
func loadTracing(dir string) (*tracingExample, error) {
	ex := &tracingExample{Dir: dir, Compose: &composeProject{}, Collector: &collectorConfig{}}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		return nil, err
	}
	ex.README = string(readme)
	if err := decodeStrict(dir, composeFile, "compose file", ex.Compose); err != nil {
		return nil, err
	}
	if err := decodeStrict(dir, collectorFile, "collector configuration", ex.Collector); err != nil {
		return nil, err
	}
	overlay, err := loadTree(filepath.Join(dir, overlayDir))
	if err != nil {
		return nil, fmt.Errorf("%s/%v", overlayDir, err)
	}
	for i := range overlay.Objects {
		overlay.Objects[i].File = path.Join(overlayDir, overlay.Objects[i].File)
	}
	overlay.Dir = dir // the files are named from the example's folder now
	ex.Overlay = overlay
	ex.Built, err = buildKustomization(filepath.Join(dir, overlayDir), overlayDir)
	if err != nil {
		return nil, err
	}
	return ex, nil
}

// buildKustomization does what kustomize does with the fields these kustomizations use: the
// resources (files, and folders with a kustomization of their own), then the patches, which
// here are strategic merge patches of Deployments (kustomize's default for a patch that is an
// object). rel names the folder in errors.
func buildKustomization(dir, rel string) (*tree, error) {
	var k kustomization
	if err := decodeStrict(dir, "kustomization.yaml", "kustomization", &k); err != nil {
		return nil, fmt.Errorf("%s/%v", rel, err)
	}
	tr := &tree{Dir: dir}
	for _, r := range k.Resources {
		if strings.HasSuffix(r, ".yaml") {
			if err := tr.loadFile(filepath.Join(dir, r), path.Join(rel, r)); err != nil {
				return nil, err
			}
			continue
		}
		sub, err := buildKustomization(filepath.Join(dir, r), path.Join(rel, r))
		if err != nil {
			return nil, err
		}
		tr.Objects = append(tr.Objects, sub.Objects...)
	}
	for i, p := range k.Patches {
		if err := tr.patch(p.Target.Kind, p.Target.Name, p.Patch); err != nil {
			return nil, fmt.Errorf("%s/kustomization.yaml: patch %d: %v", rel, i, err)
		}
	}
	return tr, nil
}

// patch applies a strategic merge patch to the Deployment named name, decoding the patch and
// the result strictly.
func (tr *tree) patch(kind, name, patch string) error {
	if kind != "Deployment" {
		return fmt.Errorf("a patch of a %s: only Deployments are patched here", kind)
	}
	var asObject appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte(patch), &asObject); err != nil {
		return fmt.Errorf("not a strategic merge patch of a Deployment: %v", err)
	}
	for i, o := range tr.Objects {
		d, ok := o.Obj.(*appsv1.Deployment)
		if !ok || d.Name != name {
			continue
		}
		original, err := json.Marshal(d)
		if err != nil {
			return err
		}
		pj, err := yaml.YAMLToJSON([]byte(patch))
		if err != nil {
			return err
		}
		merged, err := strategicpatch.StrategicMergePatch(original, pj, appsv1.Deployment{})
		if err != nil {
			return err
		}
		var out appsv1.Deployment
		if err := yaml.UnmarshalStrict(merged, &out); err != nil {
			return err
		}
		tr.Objects[i].Obj = &out
		return nil
	}
	return fmt.Errorf("targets Deployment %q, which no resource defines", name)
}

// tracingFacts is what the example is checked against: the flags and names the server's
// documentation gives.
type tracingFacts struct {
	Flags map[string]bool // every -x and --flag docs/configuration.md mentions
	Docs  string          // docs/configuration.md and docs/observability.md
}

var docFlag = regexp.MustCompile("(?:^|[\\s`(,])(--?[a-zA-Z][a-zA-Z0-9-]*)")

func loadTracingFacts(t testing.TB, root string) *tracingFacts {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join(root, "docs/configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := os.ReadFile(filepath.Join(root, "docs/observability.md"))
	if err != nil {
		t.Fatal(err)
	}
	f := &tracingFacts{Flags: map[string]bool{}, Docs: string(conf) + string(obs)}
	for _, m := range docFlag.FindAllStringSubmatch(string(conf), -1) {
		f.Flags[m[1]] = true
	}
	return f
}

// tracingProblems runs the example's cross-checks and returns what is wrong, one line each.
func tracingProblems(ex *tracingExample, f *tracingFacts) []string {
	c := &checker{tr: ex.Built}
	col := ex.Collector
	c.collectorPipeline(col)
	c.composeExample(ex, f)
	for _, d := range all[*appsv1.Deployment](ex.Built) {
		c.deployment(d)
	}
	c.services()
	c.overlayExample(ex, f)
	c.readme(ex, f)
	return c.out
}

// readmeName finds the tracing flags and OpenTelemetry variables README.md names.
var readmeName = regexp.MustCompile(`--otlp-[a-z-]+|OTEL_[A-Z_]+[A-Z]`)

// readme: README.md's table lists every file of the example, and every tracing flag and OTEL_*
// variable it names is documented.
func (c *checker) readme(ex *tracingExample, f *tracingFacts) {
	err := filepath.WalkDir(ex.Dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "README.md" {
			return err
		}
		rel, _ := filepath.Rel(ex.Dir, p)
		if !strings.Contains(ex.README, "| `"+filepath.ToSlash(rel)+"`") {
			c.errorf("README.md: the file table does not list %s", filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		c.errorf("%v", err)
	}
	for _, name := range readmeName.FindAllString(ex.README, -1) {
		name = strings.TrimSuffix(name, "_") // OTEL_EXPORTER_OTLP_ and the like, cut before _TRACES_
		if !strings.Contains(f.Docs, name) {
			c.errorf("README.md names %s, which docs/configuration.md and docs/observability.md do not", name)
		}
	}
}

// collectorPipeline: a traces pipeline from the OTLP receiver through the batch processor (the
// memory limiter, if any, first) to exporters that are defined; receivers listen on every
// interface; every component defined is used.
func (c *checker) collectorPipeline(col *collectorConfig) {
	p, ok := col.Service.Pipelines["traces"]
	if !ok {
		c.errorf("%s: no traces pipeline", collectorFile)
		return
	}
	if col.Receivers.OTLP == nil || col.Receivers.OTLP.Protocols.HTTP == nil || col.Receivers.OTLP.Protocols.GRPC == nil {
		c.errorf("%s: the otlp receiver needs both protocols, http and grpc", collectorFile)
		return
	}
	for proto, e := range map[string]*endpointSetting{"http": col.Receivers.OTLP.Protocols.HTTP, "grpc": col.Receivers.OTLP.Protocols.GRPC} {
		if host, _, err := net.SplitHostPort(e.Endpoint); err != nil || (host != "0.0.0.0" && host != "" && host != "[::]") {
			c.errorf("%s: the otlp receiver's %s endpoint %q must listen on every interface (0.0.0.0:PORT): the server is another container", collectorFile, proto, e.Endpoint)
		}
	}
	if !slices.Contains(p.Receivers, "otlp") {
		c.errorf("%s: the traces pipeline does not receive from otlp", collectorFile)
	}
	if !slices.Contains(p.Processors, "batch") {
		c.errorf("%s: the traces pipeline has no batch processor", collectorFile)
	}
	if slices.Contains(p.Processors, "memory_limiter") && p.Processors[0] != "memory_limiter" {
		c.errorf("%s: memory_limiter must come first in the traces pipeline's processors %v", collectorFile, p.Processors)
	}
	used := map[string][]string{"receivers": p.Receivers, "processors": p.Processors, "exporters": p.Exporters, "extensions": col.Service.Extensions}
	defined := col.defined()
	for kind, names := range used {
		for _, n := range names {
			if !slices.Contains(defined[kind], n) {
				c.errorf("%s: the service uses %s %q, which is not defined", collectorFile, kind, n)
			}
		}
		for _, n := range defined[kind] {
			if !slices.Contains(names, n) {
				c.errorf("%s: %s %q is defined but not used by the service", collectorFile, kind, n)
			}
		}
	}
	if len(p.Exporters) == 0 {
		c.errorf("%s: the traces pipeline exports nowhere", collectorFile)
	}
}

// receiverPort is the port of the collector's OTLP receiver for a protocol ("http" or "grpc").
func receiverPort(col *collectorConfig, proto string) int {
	if col.Receivers.OTLP == nil {
		return 0
	}
	e := col.Receivers.OTLP.Protocols.HTTP
	if proto == "grpc" {
		e = col.Receivers.OTLP.Protocols.GRPC
	}
	if e == nil {
		return 0
	}
	_, port, err := net.SplitHostPort(e.Endpoint)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}

// exporterTarget reads an OTLP exporter's endpoint (host:port, or a URL for otlphttp) and the
// port Jaeger receives that exporter's protocol on.
func exporterTarget(name string, e otlpExporter) (host string, port, want int, err error) {
	typ, _, _ := strings.Cut(name, "/")
	want, ok := jaegerOTLPPorts[typ]
	if !ok {
		return "", 0, 0, fmt.Errorf("exporter %s: type %s is not an OTLP exporter", name, typ)
	}
	hostport := e.Endpoint
	if u, perr := url.Parse(e.Endpoint); perr == nil && u.Host != "" {
		hostport = u.Host
	}
	h, p, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", 0, 0, fmt.Errorf("exporter %s: endpoint %q: %v", name, e.Endpoint, err)
	}
	port, _ = strconv.Atoi(p)
	return h, port, want, nil
}

// serverEndpoint reads where the server's OTLP exporter sends, from its environment: the
// traces endpoint wins over the general one; the protocol is HTTP/protobuf unless set to grpc.
func serverEndpoint(env map[string]string) (host string, port int, proto string, err error) {
	raw := env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
	if raw == "" {
		raw = env["OTEL_EXPORTER_OTLP_ENDPOINT"]
	}
	if raw == "" {
		return "", 0, "", fmt.Errorf("sets neither OTEL_EXPORTER_OTLP_ENDPOINT nor OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	}
	proto = "http"
	for _, k := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		switch env[k] {
		case "grpc":
			proto = "grpc"
		case "", "http/protobuf":
		default:
			return "", 0, "", fmt.Errorf("%s=%s: want http/protobuf or grpc", k, env[k])
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" {
		return "", 0, "", fmt.Errorf("OTLP endpoint %q: want http://HOST:PORT", raw)
	}
	port, _ = strconv.Atoi(u.Port())
	return u.Hostname(), port, proto, nil
}

// serverEnv checks the OpenTelemetry variables set on the server: each is a variable of the
// SDK and one the server's docs name, the sampler
// is one the SDK knows, with a ratio in [0, 1] where it takes one.
func (c *checker) serverEnv(where string, env map[string]string, f *tracingFacts) {
	for k := range env {
		if !strings.HasPrefix(k, "OTEL_") {
			continue
		}
		if !otelEnv[k] {
			c.errorf("%s: %s is not an OpenTelemetry SDK variable", where, k)
		} else if !strings.Contains(f.Docs, k) {
			c.errorf("%s: %s is not documented in docs/configuration.md or docs/observability.md", where, k)
		}
	}
	if env["OTEL_SERVICE_NAME"] == "" {
		c.errorf("%s: no OTEL_SERVICE_NAME", where)
	}
	s, set := env["OTEL_TRACES_SAMPLER"]
	if !set {
		return
	}
	ratio, known := samplers[s]
	if !known {
		c.errorf("%s: OTEL_TRACES_SAMPLER=%s is no sampler of the SDK", where, s)
		return
	}
	if arg, ok := env["OTEL_TRACES_SAMPLER_ARG"]; ratio && ok {
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			c.errorf("%s: OTEL_TRACES_SAMPLER_ARG=%s is no ratio in [0, 1]", where, arg)
		}
	}
}

// composeExample: the server is the image the Kubernetes base runs, started with documented
// flags, exporting to the collector's receiver; the collector reads this folder's
// configuration; its exporter reaches Jaeger's OTLP port; Jaeger's UI is published.
func (c *checker) composeExample(ex *tracingExample, f *tracingFacts) {
	svcs := ex.Compose.Services
	srv, ok1 := svcs[serverService]
	col, ok2 := svcs[collectorName]
	jg, ok3 := svcs[jaegerName]
	if !ok1 || !ok2 || !ok3 {
		c.errorf("%s: want services %s, %s and %s", composeFile, serverService, collectorName, jaegerName)
		return
	}
	if base := one[*appsv1.Deployment](c.tr, serverName); base != nil && base.Spec.Template.Spec.Containers[0].Image != srv.Image {
		c.errorf("%s: service %s runs image %s; deploy/kubernetes runs %s", composeFile, serverService, srv.Image, base.Spec.Template.Spec.Containers[0].Image)
	}
	for _, a := range srv.Command {
		name, _, _ := strings.Cut(a, "=")
		if strings.HasPrefix(a, "-") && !f.Flags[name] {
			c.errorf("%s: service %s: flag %s is not in docs/configuration.md", composeFile, serverService, name)
		}
	}
	c.serverEnv(composeFile+": service "+serverService, srv.Environment, f)
	host, port, proto, err := serverEndpoint(srv.Environment)
	if err != nil {
		c.errorf("%s: service %s %v", composeFile, serverService, err)
	} else if host != collectorName || port != receiverPort(ex.Collector, proto) {
		c.errorf("%s: service %s exports to %s:%d; the collector's OTLP/%s receiver is %s:%d", composeFile, serverService, host, port, proto, collectorName, receiverPort(ex.Collector, proto))
	}
	c.composeCollector(col)
	for name, e := range ex.Collector.Exporters {
		h, p, want, err := exporterTarget(name, e)
		if err != nil {
			c.errorf("%s: %v", collectorFile, err)
			continue
		}
		if h != jaegerName || p != want || !slices.Contains(append(containerSides(jg.Ports), jg.Expose...), strconv.Itoa(p)) {
			c.errorf("%s: exporter %s sends to %s:%d; Jaeger is compose service %s receiving on %d (exposed: %v)", collectorFile, name, h, p, jaegerName, want, jg.Expose)
		}
	}
	if !slices.Contains(jg.Ports, fmt.Sprintf("%d:%d", jaegerUIPort, jaegerUIPort)) {
		c.errorf("%s: service %s does not publish the UI port %d", composeFile, jaegerName, jaegerUIPort)
	}
}

// containerSides returns the container ports of compose port mappings (HOST:CONTAINER).
func containerSides(ports []string) []string {
	var out []string
	for _, p := range ports {
		i := strings.LastIndex(p, ":")
		out = append(out, p[i+1:])
	}
	return out
}

// composeCollector: the collector's --config is a file mounted from this folder's
// otel-collector.yaml.
func (c *checker) composeCollector(col composeService) {
	config := ""
	for _, a := range col.Command {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			config = v
		}
	}
	for _, v := range col.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == config && path.Clean(parts[0]) == collectorFile {
			return
		}
	}
	c.errorf("%s: service %s reads --config=%s, which is no mount of ./%s", composeFile, collectorName, config, collectorFile)
}

// containerEnv reads a container's literal environment, checking that every $(VAR) in a value
// refers to a variable defined before it (Kubernetes expands only those).
func (c *checker) containerEnv(d *appsv1.Deployment, ct corev1.Container) map[string]string {
	env := map[string]string{}
	seen := map[string]bool{}
	for _, e := range ct.Env {
		for _, m := range envRef.FindAllStringSubmatch(e.Value, -1) {
			if !seen[m[1]] {
				c.errorf("Deployment %s container %s: %s refers to $(%s), which is not defined before it", d.Name, ct.Name, e.Name, m[1])
			}
		}
		seen[e.Name] = true
		env[e.Name] = e.Value
	}
	return env
}

var envRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// overlayExample: the patched server exports to the collector's Service at the port that
// reaches its receiver; the collector's ConfigMap holds ../otel-collector.yaml, mounted where
// its --config points; its exporter reaches Jaeger's Service at Jaeger's OTLP port; the health
// probes ask the health_check extension's port.
func (c *checker) overlayExample(ex *tracingExample, f *tracingFacts) {
	server := one[*appsv1.Deployment](c.tr, serverName)
	colDep := one[*appsv1.Deployment](c.tr, collectorName)
	jgDep := one[*appsv1.Deployment](c.tr, jaegerName)
	if server == nil || colDep == nil || jgDep == nil {
		c.errorf("%s: want Deployments %s (the base's), %s and %s", overlayDir, serverName, collectorName, jaegerName)
		return
	}
	srvCt := server.Spec.Template.Spec.Containers[0]
	env := c.containerEnv(server, srvCt)
	c.serverEnv("Deployment "+serverName, env, f)
	host, port, proto, err := serverEndpoint(env)
	if err != nil {
		c.errorf("Deployment %s %v (the overlay's patch)", serverName, err)
	} else if want := receiverPort(ex.Collector, proto); host != collectorName || c.servicePortTarget(collectorName, colDep, port) != int32(want) {
		c.errorf("Deployment %s exports to %s:%d, which does not reach the collector's OTLP/%s receiver (Service %s, container port %d)", serverName, host, port, proto, collectorName, want)
	}
	colCt := colDep.Spec.Template.Spec.Containers[0]
	c.overlayCollectorConfig(ex, colDep, colCt)
	for name, e := range ex.Collector.Exporters {
		h, p, want, err := exporterTarget(name, e)
		if err != nil {
			continue // reported by composeExample
		}
		if h != jaegerName || c.servicePortTarget(jaegerName, jgDep, p) != int32(want) {
			c.errorf("%s: exporter %s sends to %s:%d, which does not reach Jaeger's OTLP port %d through Service %s", collectorFile, name, h, p, want, jaegerName)
		}
	}
	if c.servicePortTarget(jaegerName, jgDep, jaegerUIPort) != jaegerUIPort {
		c.errorf("Service %s: no port %d to Jaeger's UI", jaegerName, jaegerUIPort)
	}
	if hc := ex.Collector.Extensions.HealthCheck; hc != nil {
		_, hp, _ := net.SplitHostPort(hc.Endpoint)
		for name, p := range map[string]*corev1.Probe{"readinessProbe": colCt.ReadinessProbe, "livenessProbe": colCt.LivenessProbe} {
			if p == nil || p.HTTPGet == nil || strconv.Itoa(int(containerPort(colCt, p.HTTPGet.Port.String()))) != hp {
				c.errorf("Deployment %s: %s does not ask the health_check extension's port %s", collectorName, name, hp)
			}
		}
	}
}

// servicePortTarget resolves Service name's port to the container port of Deployment d it
// reaches (0: none).
func (c *checker) servicePortTarget(name string, d *appsv1.Deployment, port int) int32 {
	svc := one[*corev1.Service](c.tr, name)
	if svc == nil {
		return 0
	}
	for _, p := range svc.Spec.Ports {
		if int(p.Port) == port {
			return containerPort(d.Spec.Template.Spec.Containers[0], p.TargetPort.String())
		}
	}
	return 0
}

// overlayCollectorConfig: --config names a key of a mounted ConfigMap, whose text decodes
// strictly to the same configuration as ../otel-collector.yaml.
func (c *checker) overlayCollectorConfig(ex *tracingExample, d *appsv1.Deployment, ct corev1.Container) {
	file := ""
	for _, a := range ct.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			file = v
		}
	}
	dir, key := path.Split(file)
	var cm *corev1.ConfigMap
	for _, m := range ct.VolumeMounts {
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil && path.Clean(m.MountPath) == path.Clean(dir) {
				cm = one[*corev1.ConfigMap](c.tr, v.ConfigMap.Name)
			}
		}
	}
	if cm == nil || cm.Data[key] == "" {
		c.errorf("Deployment %s: --config=%s is no key of a mounted ConfigMap", d.Name, file)
		return
	}
	var cfg collectorConfig
	if err := yaml.UnmarshalStrict([]byte(cm.Data[key]), &cfg); err != nil {
		c.errorf("ConfigMap %s %s: %v", cm.Name, key, err)
		return
	}
	if !reflect.DeepEqual(&cfg, ex.Collector) {
		c.errorf("ConfigMap %s %s differs from %s/%s (keep the two the same)", cm.Name, key, tracingDir, collectorFile)
	}
}

// TestTracingExampleDecodesStrictly decodes deploy/tracing: the compose file and the collector's
// configuration into the structs above, the Kubernetes overlay into the API types, built over
// deploy/kubernetes with its patch applied.
func TestTracingExampleDecodesStrictly(t *testing.T) {
	ex, err := loadTracing(filepath.Join(repoRoot(t), tracingDir))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range ex.Overlay.Objects {
		kinds[o.Kind]++
	}
	for kind, n := range map[string]int{"Deployment": 2, "Service": 2, "ConfigMap": 1, "Kustomization": 1} {
		if kinds[kind] != n {
			t.Errorf("%s: %d %s, want %d", overlayDir, kinds[kind], kind, n)
		}
	}
	if len(ex.Compose.Services) != 3 {
		t.Errorf("%s: %d services, want 3", composeFile, len(ex.Compose.Services))
	}
	t.Logf("compose: %d services; overlay: %d objects; built: %d objects", len(ex.Compose.Services), len(ex.Overlay.Objects), len(ex.Built.Objects))
}

// TestTracingExampleAgrees runs the cross-checks on deploy/tracing.
func TestTracingExampleAgrees(t *testing.T) {
	root := repoRoot(t)
	ex, err := loadTracing(filepath.Join(root, tracingDir))
	if err != nil {
		t.Fatal(err)
	}
	f := loadTracingFacts(t, root)
	for _, p := range tracingProblems(ex, f) {
		t.Error(p)
	}
	// The overlay lists its own files, like deploy/kubernetes' kustomizations.
	c := &checker{tr: ex.Overlay}
	c.kustomizations()
	for _, p := range c.out {
		if !strings.Contains(p, "a patch targets") { // the patched Deployment is the base's
			t.Error(p)
		}
	}
}

// TestTracingOverlayMatchesKustomize builds the overlay with kustomize itself (kubectl
// kustomize) and checks that it gives the objects buildKustomization gives, so the checks
// above look at what kubectl apply -k applies.
func TestTracingOverlayMatchesKustomize(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl is not installed: the overlay is not built with kustomize itself")
	}
	dir := filepath.Join(repoRoot(t), tracingDir)
	ex, err := loadTracing(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "kustomize", filepath.Join(dir, overlayDir)).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v", err)
	}
	built := filepath.Join(t.TempDir(), "built.yaml")
	if err := os.WriteFile(built, out, 0o644); err != nil {
		t.Fatal(err)
	}
	kz := &tree{}
	if err := kz.loadFile(built, "kubectl kustomize"); err != nil {
		t.Fatal(err)
	}
	key := func(o object) string { return o.Kind + "/" + o.Name }
	ours := map[string]string{}
	for _, o := range ex.Built.Objects {
		data, _ := json.Marshal(o.Obj)
		ours[key(o)] = string(data)
	}
	if len(kz.Objects) != len(ours) {
		t.Errorf("kustomize builds %d objects, buildKustomization %d", len(kz.Objects), len(ours))
	}
	for _, o := range kz.Objects {
		data, _ := json.Marshal(o.Obj)
		if mine, ok := ours[key(o)]; !ok {
			t.Errorf("kustomize builds %s, buildKustomization does not", key(o))
		} else if mine != string(data) {
			t.Errorf("%s differs:\nkustomize:          %s\nbuildKustomization: %s", key(o), data, mine)
		}
	}
}
