package k8stest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// copyExample copies deploy/tracing and deploy/kubernetes (the overlay's base, at the same
// relative path) into a temporary folder, with one replacement in one file of the example, and
// returns the copy of deploy/tracing.
func copyExample(t *testing.T, root, file, old, new string) string {
	t.Helper()
	dst := t.TempDir()
	ex := filepath.Join(dst, tracingDir)
	if err := os.MkdirAll(filepath.Join(dst, manifestsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	copyInto(t, filepath.Join(root, manifestsDir), filepath.Join(dst, manifestsDir), "", "", "")
	if !copyInto(t, filepath.Join(root, tracingDir), ex, file, old, new) {
		t.Fatalf("%s does not contain %q", file, old)
	}
	return ex
}

// TestBrokenTracingExampleFailsToDecode breaks a copy of the example in ways a YAML parser
// alone accepts, and checks that the strict decoding refuses each, naming the file.
func TestBrokenTracingExampleFailsToDecode(t *testing.T) {
	root := repoRoot(t)
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"compose typo", composeFile, "    environment:", "    enviroment:", `unknown field "enviroment"`},
		{"compose field of another tool", composeFile, "    depends_on:\n      - otel-collector", "    depends-on:\n      - otel-collector", `unknown field "depends-on"`},
		{"compose wrong value type", composeFile, `command: ["serve", "--host", "0.0.0.0", "--port", "1234"]`, "command:\n      serve: true", "cannot unmarshal"},
		{"collector typo", collectorFile, "send_batch_size:", "send_batch_sise:", `unknown field "send_batch_sise"`},
		{"collector section typo", collectorFile, "exporters:\n  # Jaeger", "exporter:\n  # Jaeger", `unknown field "exporter"`},
		{"collector duplicate key", collectorFile, "    timeout: 2s\n", "    timeout: 2s\n    timeout: 5s\n", "already set in map"},
		{"manifest typo", "kubernetes/jaeger.yaml", "readinessProbe:", "readynessProbe:", `unknown field "readynessProbe"`},
		{"patch typo", overlayKustFile, "valueFrom:\n                      fieldRef:\n                        fieldPath: metadata.name", "valuesFrom:\n                      fieldRef:\n                        fieldPath: metadata.name", `unknown field "valuesFrom"`},
		{"patch of a missing Deployment", overlayKustFile, "      name: mistralrs-qwen3-0-6b\n    patch:", "      name: mistralrs\n    patch:", `targets Deployment "mistralrs"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadTracing(copyExample(t, root, tc.file, tc.old, tc.new))
			if err == nil {
				t.Fatalf("%s with %q decodes", tc.file, tc.new)
			}
			if !strings.Contains(err.Error(), tc.file) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want the file %s and %q", err, tc.file, tc.want)
			}
		})
	}
}

// TestBrokenTracingExampleFailsCrossChecks breaks a copy in ways that decode, and checks that
// the cross-checks report each (a problem the intact example does not have).
func TestBrokenTracingExampleFailsCrossChecks(t *testing.T) {
	root := repoRoot(t)
	f := loadTracingFacts(t, root)
	intact, err := loadTracing(filepath.Join(root, tracingDir))
	if err != nil {
		t.Fatal(err)
	}
	before := tracingProblems(intact, f)
	for _, tc := range []struct {
		name, file, old, new, want string
	}{
		{"compose: server at the wrong port", composeFile, "http://otel-collector:4318", "http://otel-collector:4319", "exports to otel-collector:4319"},
		{"compose: server at the gRPC port over HTTP", composeFile, "http://otel-collector:4318", "http://otel-collector:4317", "OTLP/http receiver is otel-collector:4318"},
		{"compose: server at another host", composeFile, "http://otel-collector:4318", "http://collector:4318", "exports to collector:4318"},
		{"compose: env var typo", composeFile, "OTEL_SERVICE_NAME: mistralrs", "OTEL_SERVICENAME: mistralrs", "OTEL_SERVICENAME is not an OpenTelemetry SDK variable"},
		{"compose: flag not documented", composeFile, `"--port", "1234"`, `"--listen-port", "1234"`, "flag --listen-port is not in docs/configuration.md"},
		{"compose: another image", composeFile, "image: mistralrs:0.1.0", "image: mistralrs:latest", "runs image mistralrs:latest"},
		{"compose: config not mounted", composeFile, "./otel-collector.yaml:/etc/otelcol/otel-collector.yaml:ro", "./otel-collector.yaml:/etc/otelcol/config.yaml:ro", "which is no mount"},
		{"compose: Jaeger UI not published", composeFile, `"16686:16686"`, `"16687:16686"`, "does not publish the UI port"},
		{"receiver on localhost", collectorFile, "endpoint: 0.0.0.0:4318", "endpoint: localhost:4318", "must listen on every interface"},
		{"no batch processor", collectorFile, "processors: [memory_limiter, batch]", "processors: [memory_limiter]", "no batch processor"},
		{"memory limiter last", collectorFile, "processors: [memory_limiter, batch]", "processors: [batch, memory_limiter]", "memory_limiter must come first"},
		{"exporter not defined", collectorFile, "exporters: [otlp/jaeger]", "exporters: [otlp/tempo]", `exporters "otlp/tempo", which is not defined`},
		{"exporter to Jaeger's legacy port", collectorFile, "endpoint: jaeger:4317", "endpoint: jaeger:14250", "exporter otlp/jaeger sends to jaeger:14250"},
		{"ConfigMap differs", "kubernetes/otel-collector.yaml", "limit_mib: 400", "limit_mib: 300", "differs from deploy/tracing/otel-collector.yaml"},
		{"patch: server at the gRPC port", overlayKustFile, "value: http://otel-collector:4318", "value: http://otel-collector:4317", "does not reach the collector's OTLP/http receiver"},
		{"patch: sampler typo", overlayKustFile, "value: parentbased_traceidratio", "value: parentbased_traceid_ratio", "OTEL_TRACES_SAMPLER=parentbased_traceid_ratio is no sampler"},
		{"patch: ratio out of range", overlayKustFile, `value: "0.1"`, `value: "10"`, "OTEL_TRACES_SAMPLER_ARG=10 is no ratio"},
		{"patch: undefined reference", overlayKustFile, "k8s.pod.name=$(POD_NAME)", "k8s.pod.name=$(POD)", "refers to $(POD)"},
		{"Jaeger Service port", "kubernetes/jaeger.yaml", "    - name: otlp-grpc\n      port: 4317", "    - name: otlp-grpc\n      port: 4316", "does not reach Jaeger's OTLP port 4317"},
		{"collector Service port", "kubernetes/otel-collector.yaml", "      port: 4318\n      targetPort: otlp-http", "      port: 4318\n      targetPort: otlp-grpc", "does not reach the collector's OTLP/http receiver"},
		{"collector probe port", "kubernetes/otel-collector.yaml", "              port: health\n            periodSeconds: 5", "              port: otlp-http\n            periodSeconds: 5", "readinessProbe does not ask the health_check extension's port"},
		{"protocol value", composeFile, "      OTEL_SERVICE_NAME: mistralrs\n", "      OTEL_SERVICE_NAME: mistralrs\n      OTEL_EXPORTER_OTLP_PROTOCOL: http/json\n", "want http/protobuf or grpc"},
		{"gRPC protocol at the HTTP port", composeFile, "      OTEL_SERVICE_NAME: mistralrs\n", "      OTEL_SERVICE_NAME: mistralrs\n      OTEL_EXPORTER_OTLP_PROTOCOL: grpc\n", "OTLP/grpc receiver is otel-collector:4317"},
		{"README misses a file", "README.md", "| `kubernetes/jaeger.yaml` |", "| `kubernetes/jaeger.yml` |", "does not list kubernetes/jaeger.yaml"},
		{"Jaeger Service selects nothing", "kubernetes/jaeger.yaml", "  selector:\n    app.kubernetes.io/name: jaeger", "  selector:\n    app.kubernetes.io/name: jaeger-query", "Service jaeger selects the pods of 0 Deployments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, err := loadTracing(copyExample(t, root, tc.file, tc.old, tc.new))
			if err != nil {
				t.Fatalf("decoding: %v", err)
			}
			var found []string
			for _, p := range tracingProblems(ex, f) {
				if strings.Contains(p, tc.want) && !slices.Contains(before, p) {
					found = append(found, p)
				}
			}
			if len(found) == 0 {
				t.Errorf("no new problem with %q; problems: %q", tc.want, tracingProblems(ex, f))
			}
		})
	}
}

// TestTracingNamesMustBeDocumented: an OTEL_* variable or tracing flag the example uses and the
// docs do not name is reported.
func TestTracingNamesMustBeDocumented(t *testing.T) {
	root := repoRoot(t)
	ex, err := loadTracing(filepath.Join(root, tracingDir))
	if err != nil {
		t.Fatal(err)
	}
	f := *loadTracingFacts(t, root)
	f.Docs = "docs that name no tracing setting"
	problems := tracingProblems(ex, &f)
	for _, want := range []string{
		"compose.yaml: service mistralrs: OTEL_SERVICE_NAME is not documented",
		"Deployment mistralrs-qwen3-0-6b: OTEL_TRACES_SAMPLER_ARG is not documented",
		"README.md names --otlp-traces-endpoint",
	} {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("no problem %q; problems: %q", want, problems)
		}
	}
}
