package modeltest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"mistralrs/internal/kernels"
)

// pathChildEnv marks a child process of ReferencesOnEveryPath.
const pathChildEnv = "MISTRALRS_MODEL_PATH_CHILD"

// ReferencesOnEveryPath runs a package's reference tests (tests, a -run
// pattern: those against llama.cpp's outputs and the real-model references
// of ../shared/testdata, which skip without it) again in a child process
// under MISTRALRS_CPU=<path> for every instruction-set path the CPU has
// (the default path runs them in the test's own process): every kernel
// path meets llama.cpp's outputs within the same tolerances. The package's
// TestPathChild calls PathChild.
func ReferencesOnEveryPath(t *testing.T, tests string) {
	if os.Getenv(pathChildEnv) != "" {
		t.Skip("in a child of TestReferencesOnEveryPath")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	for _, path := range kernels.Paths() {
		t.Run(path, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.count=1", "-test.v", "-test.run", "^(TestPathChild|"+tests+")$")
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

// PathChild, in a child of ReferencesOnEveryPath, checks that the kernels
// run the path asked for.
func PathChild(t *testing.T) {
	if os.Getenv(pathChildEnv) == "" {
		t.Skip("run by TestReferencesOnEveryPath in a child process")
	}
	if want := os.Getenv("MISTRALRS_CPU"); kernels.Path() != want {
		t.Fatalf("MISTRALRS_CPU=%s: kernels run path %s", want, kernels.Path())
	}
}
