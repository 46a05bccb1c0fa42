package k8stest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// copyTree copies deploy/kubernetes into a temporary folder, with one replacement in one file.
func copyTree(t *testing.T, src, file, old, new string) string {
	t.Helper()
	dst := t.TempDir()
	if !copyInto(t, src, dst, file, old, new) {
		t.Fatalf("copying %s: %s does not contain %q", src, file, old)
	}
	return dst
}

// copyInto copies the folder src to dst, replacing old by new in file (relative to src; "" for
// none), and reports whether it did.
func copyInto(t *testing.T, src, dst, file, old, new string) bool {
	t.Helper()
	replaced := false
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if filepath.ToSlash(rel) == file {
			if !strings.Contains(string(data), old) {
				t.Fatalf("%s does not contain %q", file, old)
			}
			data = []byte(strings.Replace(string(data), old, new, 1))
			replaced = true
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
	return replaced
}

// TestBrokenManifestFailsToDecode breaks a copy of the manifests in ways a YAML parser alone
// accepts, and checks that decoding into the API types refuses each, naming the file.
func TestBrokenManifestFailsToDecode(t *testing.T) {
	src := filepath.Join(repoRoot(t), manifestsDir)
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"misspelt field", "gateway/inferencepool.yaml", "targetPorts:", "targetPort:", `unknown field "targetPort"`},
		{"field of another kind", "gateway/hpa.yaml", "  minReplicas: 2", "  replicas: 2", `unknown field "replicas"`},
		{"wrong value type", "gateway/hpa.yaml", `averageValue: "2"`, `averageValue: two`, "quantities must match"},
		{"duplicate key", "service.yaml", "  type: ClusterIP", "  type: ClusterIP\n  type: NodePort", "already set in map"},
		{"unknown kind", "gateway/inferenceobjective.yaml", "kind: InferenceObjective", "kind: InferenceModel", "unknown apiVersion"},
		{"adapter rules typo", "gateway/prometheus-adapter-rules.yaml", "metricsQuery:", "metricQuery:", `unknown field "metricQuery"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadTree(copyTree(t, src, tc.file, tc.old, tc.new))
			if err == nil {
				t.Fatalf("%s with %q decodes", tc.file, tc.new)
			}
			if !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want the file %s and %q", err, tc.file, tc.want)
			}
		})
	}
}

// TestBrokenManifestFailsCrossChecks breaks a copy in ways that decode, and checks that the
// cross-checks report each (a problem the intact manifests do not have).
func TestBrokenManifestFailsCrossChecks(t *testing.T) {
	root := repoRoot(t)
	src := filepath.Join(root, manifestsDir)
	f := loadFacts(t, root)
	intact, err := loadTree(src)
	if err != nil {
		t.Fatal(err)
	}
	before := problems(intact, f)
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"queue metric not ours", "gateway/endpoint-picker.yaml", "=mistralrs_sequences_waiting", "=vllm:num_requests_waiting", "--total-queued-requests-metric=vllm:num_requests_waiting names no family"},
		{"flag not the picker's", "gateway/endpoint-picker.yaml", "--metrics-staleness-threshold=", "--metrics-stale-after=", "--metrics-stale-after is no flag"},
		{"plugin type unknown", "gateway/endpoint-picker.yaml", "- type: queue-scorer", "- type: queue-depth-scorer", `plugin type "queue-depth-scorer" is not registered`},
		{"pool port", "gateway/inferencepool.yaml", "- number: 1234", "- number: 8000", "targetPorts"},
		{"picker port", "gateway/inferencepool.yaml", "number: 9002", "number: 9000", "has no port 9000"},
		{"HPA metric not served", "gateway/hpa.yaml", "name: mistralrs_sequences_waiting", "name: mistralrs_sequences_running", "metric mistralrs_sequences_running is not served"},
		{"service selects nothing", "service.yaml", "app.kubernetes.io/instance: qwen3-0-6b\n  ports", "app.kubernetes.io/instance: qwen3\n  ports", "selects the pods of 0 Deployments"},
		{"probe route", "deployment.yaml", "path: /health\n              port: http\n            periodSeconds: 5", "path: /healthz\n              port: http\n            periodSeconds: 5", "startupProbe asks /healthz, which is no route"},
		{"kustomization", "gateway/kustomization.yaml", "  - hpa.yaml\n", "", "lists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := loadTree(copyTree(t, src, tc.file, tc.old, tc.new))
			if err != nil {
				t.Fatalf("decoding: %v", err)
			}
			var found []string
			for _, p := range problems(tr, f) {
				if strings.Contains(p, tc.want) && !slices.Contains(before, p) {
					found = append(found, p)
				}
			}
			if len(found) == 0 {
				t.Errorf("no new problem with %q; problems: %q", tc.want, problems(tr, f))
			}
		})
	}
}
