package kernels

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

func TestCPUCapFrom(t *testing.T) {
	top := len(cpuPaths) - 1
	type tc struct {
		cpu, noasm string
		want       int
		bad        bool
	}
	cases := []tc{
		{"", "", top, false},
		{"generic", "", 0, false},
		{"", "1", 0, false},
		{"sse9", "", top, true},
	}
	// Every path of this architecture, by name, in any case and spacing,
	// and under MISTRALRS_NOASM.
	for i, name := range cpuPaths {
		cases = append(cases, tc{name, "", i, false}, tc{" " + strings.ToUpper(name) + " ", "", i, false}, tc{name, "1", 0, false})
	}
	// Another architecture's path is unknown here.
	for _, arch := range []string{"amd64", "arm64"} {
		for _, name := range cpuPathsOf(arch) {
			if pathIndex(name) < 0 {
				cases = append(cases, tc{name, "", top, true})
			}
		}
	}
	for _, c := range cases {
		env := map[string]string{"MISTRALRS_CPU": c.cpu, "MISTRALRS_NOASM": c.noasm}
		got, err := cpuCapFrom(func(k string) string { return env[k] })
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("MISTRALRS_CPU=%q MISTRALRS_NOASM=%q: cap %d (%v), want %d (error %v)", c.cpu, c.noasm, got, err, c.want, c.bad)
		}
	}
}

// TestCPUPathsOf pins the path lists (MISTRALRS_CPU's names and order,
// documented in docs/performance.md): the amd64 one must not change.
func TestCPUPathsOf(t *testing.T) {
	for arch, want := range map[string]string{
		"amd64":   "generic avx2 avxvnni avx512bw avx512",
		"arm64":   "generic neon dotprod i8mm",
		"riscv64": "generic",
	} {
		if got := strings.Join(cpuPathsOf(arch), " "); got != want {
			t.Errorf("%s: paths %q, want %q", arch, got, want)
		}
	}
	if got, want := strings.Join(cpuPaths, " "), strings.Join(cpuPathsOf(runtime.GOARCH), " "); got != want {
		t.Errorf("cpuPaths %q, want %s's %q", got, runtime.GOARCH, want)
	}
}

// TestCPUPaths forces each instruction-set path the CPU has in turn and
// runs oracle comparisons through the dispatch on it: dotTable's dot and
// dot4 against the float64 dot of the dequantized weights (testDots), and
// MatMul (which also picks dotRows and dot4Rows) on odd shapes. It logs the
// paths it exercised; a path the CPU or the build lacks is a skipped subtest
// with the reason.
func TestCPUPaths(t *testing.T) {
	var ran []string
	for i, name := range cpuPaths {
		t.Run(name, func(t *testing.T) {
			if why := pathMissing(name); why != "" {
				t.Skip(why)
			}
			if i > cpuCap {
				t.Skipf("MISTRALRS_CPU caps the dispatch at %s", cpuPaths[cpuCap])
			}
			prev, err := setPath(name)
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if _, err := setPath(prev); err != nil {
					t.Error(err)
				}
			}()
			if Path() != name || SIMD() != (name != "generic") {
				t.Fatalf("setPath(%s): Path() = %s, SIMD() = %v", name, Path(), SIMD())
			}
			testDots(t, dotTable)
			r := rand.New(rand.NewPCG(21, uint64(i)))
			p := NewPool(2)
			defer p.Close()
			for _, ty := range allTypes {
				for _, shape := range [][3]int{{1, 256, 1}, {37, 512, 5}, {130, 256, 9}} {
					rows, cols, n := shape[0], shape[1], shape[2]
					tm := newTestMatrix(t, r, ty, rows, cols, n)
					tm.reference(n)
					for _, pool := range []*Pool{nil, p} {
						out := make([]float32, n*rows)
						MatMul(pool, out, tm.m, tm.input, n)
						tm.check(t, out, n, "path "+name)
					}
				}
			}
			ran = append(ran, name)
		})
	}
	t.Logf("paths exercised: %s (of %s)", strings.Join(ran, ", "), strings.Join(cpuPaths, ", "))
	if len(ran) == 0 {
		t.Error("no path exercised, not even generic")
	}
}

// cpuChildEnv marks a child test process of TestCPUEnv.
const cpuChildEnv = "MISTRALRS_CPU_TEST_CHILD"

// TestCPUEnv runs this package's whole test suite again in a child process
// under MISTRALRS_CPU=<path> for each path the CPU has: the dispatch picks
// what the variable says from the start, and every kernel test (their
// oracle comparisons included) passes on it. TestCPUEnvChild checks in the
// child that the path in use is the one asked for.
func TestCPUEnv(t *testing.T) {
	if os.Getenv(cpuChildEnv) != "" {
		t.Skip("in a child of TestCPUEnv")
	}
	if testing.Short() {
		t.Skip("-short: each path's suite runs without it")
	}
	for _, name := range cpuPaths {
		t.Run(name, func(t *testing.T) {
			if why := pathMissing(name); why != "" {
				t.Skip(why)
			}
			cmd := testChild("-test.count=1", "-test.v")
			cmd.Env = append(cleanEnv("MISTRALRS_CPU", "MISTRALRS_NOASM", cpuChildEnv),
				"MISTRALRS_CPU="+name, cpuChildEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			if err != nil {
				t.Fatalf("MISTRALRS_CPU=%s: the test suite failed (%v):\n%s", name, err, tail(string(out), 60))
			}
			if !strings.Contains(string(out), "--- PASS: TestCPUEnvChild") {
				t.Fatalf("MISTRALRS_CPU=%s: TestCPUEnvChild did not pass:\n%s", name, tail(string(out), 60))
			}
			t.Logf("MISTRALRS_CPU=%s: %d tests and subtests passed on path %s", name, strings.Count(string(out), "--- PASS: Test"), name)
		})
	}
}

// TestCPUEnvChild, in a child of TestCPUEnv, checks that the dispatch
// installed the path MISTRALRS_CPU names.
func TestCPUEnvChild(t *testing.T) {
	want := os.Getenv(cpuChildEnv)
	if want == "" {
		t.Skip("run by TestCPUEnv in a child process")
	}
	if got := Path(); got != want {
		t.Fatalf("MISTRALRS_CPU=%s: path in use %s", os.Getenv("MISTRALRS_CPU"), got)
	}
	if SIMD() != (want != "generic") {
		t.Fatalf("path %s: SIMD() = %v", want, SIMD())
	}
	// SetSIMD(true) stays within the cap.
	was := SetSIMD(true)
	if got := Path(); got != want {
		t.Errorf("MISTRALRS_CPU=%s: SetSIMD(true) installed %s", want, got)
	}
	SetSIMD(was)
	t.Logf("path in use: %s", want)
}

// emulated reports whether the tests run under user-mode emulation:
// MISTRALRS_EMULATED is set (.ci/run sets it for the arm64 run under
// qemu-user). Its value is 1 or the emulator's command line.
func emulated() bool { return os.Getenv("MISTRALRS_EMULATED") != "" }

// testChild returns the command that runs this test binary again with
// args. Under emulation the emulator runs it: the kernel cannot execute
// the foreign binary itself (unless binfmt_misc is set up, which CI
// machines need not have). MISTRALRS_EMULATED=1 means qemu-<arch>-static
// (its CPU model from QEMU_CPU, or qemu's default); any other value is the
// emulator's command line.
func testChild(args ...string) *exec.Cmd {
	v := os.Getenv("MISTRALRS_EMULATED")
	if v == "" {
		return exec.Command(os.Args[0], args...)
	}
	emu := strings.Fields(v)
	if v == "1" {
		arch := runtime.GOARCH
		if arch == "arm64" {
			arch = "aarch64"
		}
		emu = []string{"qemu-" + arch + "-static"}
	}
	return exec.Command(emu[0], append(append(emu[1:], os.Args[0]), args...)...)
}

// cleanEnv returns the environment without the variables named.
func cleanEnv(drop ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, d := range drop {
			if strings.HasPrefix(kv, d+"=") {
				continue next
			}
		}
		env = append(env, kv)
	}
	return env
}

// tail returns the last n lines of s, without the lines that announce a
// test or say that it passed or was skipped.
func tail(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		// A passing test's lines would push the failure out of the tail.
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "=== RUN") || strings.HasPrefix(t, "--- PASS") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
