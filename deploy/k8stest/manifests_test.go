package k8stest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	infv1 "sigs.k8s.io/gateway-api-inference-extension/api/v1"
	infv1alpha2 "sigs.k8s.io/gateway-api-inference-extension/apix/v1alpha2"
)

// manifestsDir is deploy/kubernetes, relative to the repository root.
const manifestsDir = "deploy/kubernetes"

// adapterRulesFile is prometheus-adapter's configuration: YAML, but no Kubernetes object.
const adapterRulesFile = "gateway/prometheus-adapter-rules.yaml"

// newObject gives the Go type a document of this apiVersion and kind decodes into. The
// Kubernetes and inference extension kinds are their own API types; the Prometheus Operator's
// and kustomize's are the strict structs below (their modules would pull other k8s.io releases).
func newObject(apiVersion, kind string) (any, bool) {
	switch apiVersion + "/" + kind {
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1/Service":
		return &corev1.Service{}, true
	case "v1/ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, true
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "autoscaling/v2/HorizontalPodAutoscaler":
		return &autoscalingv2.HorizontalPodAutoscaler{}, true
	case "rbac.authorization.k8s.io/v1/Role":
		return &rbacv1.Role{}, true
	case "rbac.authorization.k8s.io/v1/RoleBinding":
		return &rbacv1.RoleBinding{}, true
	case "rbac.authorization.k8s.io/v1/ClusterRole":
		return &rbacv1.ClusterRole{}, true
	case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}, true
	case infv1.GroupVersion.String() + "/InferencePool":
		return &infv1.InferencePool{}, true
	case infv1alpha2.GroupVersion.String() + "/InferenceObjective":
		return &infv1alpha2.InferenceObjective{}, true
	case "monitoring.coreos.com/v1/ServiceMonitor":
		return &serviceMonitor{}, true
	case "monitoring.coreos.com/v1/PrometheusRule":
		return &prometheusRule{}, true
	case "kustomize.config.k8s.io/v1beta1/Kustomization":
		return &kustomization{}, true
	}
	return nil, false
}

// The Prometheus Operator's kinds, with the fields these manifests may use.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval,omitempty"`
			ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
		} `json:"endpoints"`
	} `json:"spec"`
}

type prometheusRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Record      string            `json:"record,omitempty"`
				Alert       string            `json:"alert,omitempty"`
				Expr        string            `json:"expr"`
				For         string            `json:"for,omitempty"`
				Labels      map[string]string `json:"labels,omitempty"`
				Annotations map[string]string `json:"annotations,omitempty"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// kustomization is kustomize's file with the fields used here.
type kustomization struct {
	metav1.TypeMeta `json:",inline"`
	Resources       []string `json:"resources"`
	Patches         []struct {
		Target struct {
			Group   string `json:"group,omitempty"`
			Version string `json:"version,omitempty"`
			Kind    string `json:"kind"`
			Name    string `json:"name"`
		} `json:"target"`
		Patch string `json:"patch"`
	} `json:"patches,omitempty"`
}

// adapterConfig is prometheus-adapter's configuration file (its --config), the fields of its
// discovery rules.
type adapterConfig struct {
	Rules []adapterRule `json:"rules"`
}

type adapterRule struct {
	SeriesQuery string `json:"seriesQuery"`
	Resources   struct {
		Template  string `json:"template,omitempty"`
		Overrides map[string]struct {
			Group    string `json:"group,omitempty"`
			Resource string `json:"resource"`
		} `json:"overrides,omitempty"`
	} `json:"resources"`
	Name struct {
		Matches string `json:"matches"`
		As      string `json:"as,omitempty"`
	} `json:"name"`
	MetricsQuery string `json:"metricsQuery"`
}

// object is one decoded manifest document.
type object struct {
	File string // relative to deploy/kubernetes
	Doc  int    // its index in the file
	Kind string
	Name string
	Obj  any // a pointer to the type newObject gave
}

func (o object) String() string {
	return fmt.Sprintf("%s (document %d, %s %s)", o.File, o.Doc, o.Kind, o.Name)
}

// tree is deploy/kubernetes, decoded.
type tree struct {
	Dir     string // its absolute path
	Objects []object
	Adapter *adapterConfig
}

// repoRoot is the server's repository root: two levels up, where go.mod names module mistralrs.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(data, []byte("module mistralrs\n")) {
		t.Fatalf("%s is not the mistralrs repository root (go.mod: %v)", root, err)
	}
	return root
}

// loadTree decodes every YAML document under dir strictly: an unknown or misspelt field, a value
// of the wrong type, a duplicate key or an unknown kind is an error naming the file.
func loadTree(dir string) (*tree, error) {
	tr := &tree{Dir: dir}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		return tr.loadFile(path, filepath.ToSlash(rel))
	})
	if err != nil {
		return nil, err
	}
	if len(tr.Objects) == 0 {
		return nil, fmt.Errorf("no manifests under %s", dir)
	}
	return tr, nil
}

func (tr *tree) loadFile(path, rel string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	reader := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: document %d: %v", rel, i, err)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		if err := tr.decode(rel, i, doc); err != nil {
			return err
		}
	}
}

// stripComments drops the comment lines, to tell an empty document from one with content.
func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(append(out, line...), '\n')
		}
	}
	return out
}

func (tr *tree) decode(rel string, i int, doc []byte) error {
	if rel == adapterRulesFile {
		var cfg adapterConfig
		if err := yaml.UnmarshalStrict(doc, &cfg); err != nil {
			return fmt.Errorf("%s: prometheus-adapter configuration: %v", rel, err)
		}
		tr.Adapter = &cfg
		return nil
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return fmt.Errorf("%s: document %d: %v", rel, i, err)
	}
	obj, ok := newObject(tm.APIVersion, tm.Kind)
	if !ok {
		return fmt.Errorf("%s: document %d: unknown apiVersion %q kind %q", rel, i, tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return fmt.Errorf("%s: document %d (%s): %v", rel, i, tm.Kind, err)
	}
	name := ""
	if m, ok := obj.(metav1.Object); ok {
		name = m.GetName()
		if name == "" {
			return fmt.Errorf("%s: document %d: %s without metadata.name", rel, i, tm.Kind)
		}
	}
	tr.Objects = append(tr.Objects, object{File: rel, Doc: i, Kind: tm.Kind, Name: name, Obj: obj})
	return nil
}

// all returns the objects of type T, in file order.
func all[T any](tr *tree) []T {
	var out []T
	for _, o := range tr.Objects {
		if v, ok := o.Obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// one returns the object of type T named name, or nil.
func one[T metav1.Object](tr *tree, name string) T {
	var zero T
	for _, v := range all[T](tr) {
		if v.GetName() == name {
			return v
		}
	}
	return zero
}

// TestManifestsDecodeStrictly decodes every document under deploy/kubernetes into its Go API
// type and lists what it found.
func TestManifestsDecodeStrictly(t *testing.T) {
	tr, err := loadTree(filepath.Join(repoRoot(t), manifestsDir))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, o := range tr.Objects {
		kinds[o.Kind]++
	}
	for _, want := range []string{"Deployment", "Service", "PodDisruptionBudget", "InferencePool",
		"InferenceObjective", "HorizontalPodAutoscaler", "ServiceAccount", "Role", "RoleBinding"} {
		if kinds[want] == 0 {
			t.Errorf("no %s under %s", want, manifestsDir)
		}
	}
	if tr.Adapter == nil {
		t.Errorf("%s missing", adapterRulesFile)
	}
	names := make([]string, 0, len(kinds))
	for k, n := range kinds {
		names = append(names, fmt.Sprintf("%s×%d", k, n))
	}
	sort.Strings(names)
	t.Logf("%d objects: %s", len(tr.Objects), strings.Join(names, " "))
}
