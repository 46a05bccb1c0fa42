package model

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"mistralrs/internal/kernels"
)

// pathChildEnv marks a child process of TestReferencesOnEveryPath.
const pathChildEnv = "MISTRALRS_MODEL_PATH_CHILD"

// referenceTests are the tests against llama.cpp's outputs and the
// real-model references (../shared/testdata): they skip without it.
const referenceTests = "^(TestPathChild|TestReferenceModels|TestStories260K|TestLlamaKQuantReference|TestGemma3ReferenceArchs|TestPhi3Reference|TestQwen3MoEReferenceArchs)$"

// TestReferencesOnEveryPath runs the reference tests again in a child
// process under MISTRALRS_CPU=<path> for every instruction-set path the
// CPU has (the default path runs them in this process): every kernel path
// meets llama.cpp's outputs within the same tolerances.
func TestReferencesOnEveryPath(t *testing.T) {
	if os.Getenv(pathChildEnv) != "" {
		t.Skip("in a child of TestReferencesOnEveryPath")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	for _, path := range kernels.Paths() {
		t.Run(path, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.count=1", "-test.v", "-test.run", referenceTests)
			cmd.Env = append(os.Environ(), "MISTRALRS_CPU="+path, "MISTRALRS_NOASM=", pathChildEnv+"=1")
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("MISTRALRS_CPU=%s: %v\n%s", path, err, out)
			}
			if !strings.Contains(string(out), "--- PASS: TestPathChild") {
				t.Fatalf("MISTRALRS_CPU=%s: the child did not run on that path:\n%s", path, out)
			}
			passed := strings.Count(string(out), "--- PASS: Test") - 1
			skipped := strings.Count(string(out), "--- SKIP: Test")
			if passed == 0 && skipped == 0 {
				t.Fatalf("MISTRALRS_CPU=%s: no reference test ran:\n%s", path, out)
			}
			t.Logf("MISTRALRS_CPU=%s: %d reference tests passed, %d skipped (no ../shared data)", path, passed, skipped)
		})
	}
}

// TestPathChild, in a child of TestReferencesOnEveryPath, checks that the
// kernels run the path asked for.
func TestPathChild(t *testing.T) {
	if os.Getenv(pathChildEnv) == "" {
		t.Skip("run by TestReferencesOnEveryPath in a child process")
	}
	if want := os.Getenv("MISTRALRS_CPU"); kernels.Path() != want {
		t.Fatalf("MISTRALRS_CPU=%s: kernels run path %s", want, kernels.Path())
	}
}
