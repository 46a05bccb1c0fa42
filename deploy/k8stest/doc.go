// Package k8stest checks deploy/kubernetes against the Kubernetes and Gateway API Inference
// Extension Go types, and runs the extension's own metrics scraper against a live
// `mistralrs serve`. It is a module of its own (deploy/k8stest/go.mod) so that k8s.io/api,
// sigs.k8s.io/yaml and sigs.k8s.io/gateway-api-inference-extension stay out of the server's
// module and binary; it imports nothing of the server's module (it builds the server as a
// program). Everything is in its tests: `cd deploy/k8stest && go test ./...`.
package k8stest
