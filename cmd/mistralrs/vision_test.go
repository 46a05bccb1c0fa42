package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"mistralrs/internal/testutil"
)

// TestMultimodalFlagErrors: the multimodal flag group is refused where
// mistral.rs has none (`serve text`, `serve embedding`), a projector needs a
// model, and multimodal needs a projector. All fail before a model loads.
func TestMultimodalFlagErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "txt.gguf")
	writeModel(t, path, 4)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "text", "-f", path, "--max-edge", "512"}, "--max-edge cannot be used with `serve text`: a text model takes no images (use `serve multimodal` or `serve auto`)"},
		{[]string{"serve", "--max-num-images", "3", "embedding", "-f", path}, "--max-num-images cannot be used with `serve embedding`"},
		{[]string{"serve", "text", "-f", path, "--mmproj", "p.gguf"}, "--mmproj cannot be used with `serve text`"},
		{[]string{"serve", "--mmproj", "p.gguf"}, "--mmproj needs a model (-m or -f); the embedded demo model takes no images"},
		{[]string{"serve", "multimodal"}, "serve multimodal needs a model: -m MODEL_ID or -f FILE.gguf"},
		{[]string{"serve", "multimodal", "-f", path}, "a multimodal model needs a vision projector, and no *mmproj*.gguf file is beside " + path},
		{[]string{"serve", "-f", path, "--mmproj", "a.gguf;b.gguf"}, `invalid value "a.gguf;b.gguf" for --mmproj: names 2 projectors; this server loads one vision projector per model`},
		{[]string{"serve", "-m", dir, "--mmproj", "mmproj-x.gguf"}, "vision projector mmproj-x.gguf not found in " + dir + " (no *mmproj*.gguf file there)"},
		{[]string{"run", "--mmproj", "p.gguf", "--prompt", "x"}, "--mmproj needs a model (-f or -m); the embedded demo model takes no images"},
		{[]string{"run", "-f", path, "--mmproj", "a.gguf;b.gguf", "--prompt", "x"}, `invalid value "a.gguf;b.gguf" for --mmproj: names 2 projectors`},
		{[]string{"run", "-f", path, "--mmproj", "proj.bin", "--prompt", "x"}, `invalid value "proj.bin" for --mmproj: must be a .gguf file`},
	} {
		if _, _, err := execute(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\nerror %v\nwant  %q", c.args, err, c.want)
		}
	}
}

// visionDir is a model directory holding the Gemma 3 fixture's text model
// and its projector (links to ../shared).
func visionDir(t *testing.T) (dir, text, proj string) {
	t.Helper()
	text = testutil.SharedFile(t, "testdata/vision/text-f32.gguf")
	proj = testutil.SharedFile(t, "testdata/vision/mmproj-f32.gguf")
	dir = t.TempDir()
	for _, p := range []string{text, proj} {
		if err := os.Symlink(p, filepath.Join(dir, filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	return dir, filepath.Join(dir, "text-f32.gguf"), filepath.Join(dir, "mmproj-f32.gguf")
}

// `serve -m DIR` with a projector beside the model serves it multimodal
// (auto); `serve text` does not load it.
func TestServeFindsProjector(t *testing.T) {
	dir, _, proj := visionDir(t)
	port := freePort(t)
	s := startCommand(t, port, "serve", "--host", "127.0.0.1", "-p", strconv.Itoa(port), "--threads", "1", "-m", dir)
	if code, body := s.post("/v1/completions", `{"prompt":"hi","max_tokens":2}`); code != 200 {
		t.Errorf("completions: %d %s", code, body)
	}
	out := s.stop(syscall.SIGINT)
	if want := "Model " + dir + " takes images: vision projector " + proj + ", up to 8 images per request"; !strings.Contains(out, want) {
		t.Errorf("no %q in:\n%s", want, out)
	}
	port = freePort(t)
	s = startCommand(t, port, "serve", "--host", "127.0.0.1", "-p", strconv.Itoa(port), "--threads", "1", "text", "-m", dir)
	if code, body := s.post("/v1/completions", `{"prompt":"hi","max_tokens":2}`); code != 200 {
		t.Errorf("completions: %d %s", code, body)
	}
	if out := s.stop(syscall.SIGINT); strings.Contains(out, "vision projector") {
		t.Errorf("serve text loaded the projector:\n%s", out)
	}
}

// A broken, missing or mismatched projector stops serve and run at
// startup: exit code 1 and one line naming the file(s).
func TestBrokenProjectorExitCode(t *testing.T) {
	_, text, proj := visionDir(t)
	dir := t.TempDir()
	data, err := os.ReadFile(proj)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "mmproj-cut.gguf")
	if err := os.WriteFile(cut, data[:len(data)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	tiny := filepath.Join(dir, "tiny.gguf")
	writeModel(t, tiny, 5)
	missing := filepath.Join(dir, "mmproj-absent.gguf")
	port := strconv.Itoa(freePort(t))
	for _, c := range []struct {
		args  []string
		names []string
	}{
		{[]string{"serve", "-p", port, "-f", text, "--mmproj", cut}, []string{cut}},
		{[]string{"serve", "-p", port, "multimodal", "-f", text, "--mmproj", missing}, []string{missing}},
		{[]string{"run", "-f", text, "--mmproj", cut, "--prompt", "x"}, []string{cut}},
		{[]string{"run", "-f", tiny, "--mmproj", proj, "--prompt", "x"}, []string{proj, tiny}},
		{[]string{"serve", "-p", port, "-f", tiny, "--mmproj", text}, []string{text}},
	} {
		cmd := exec.Command(os.Args[0], c.args...)
		cmd.Env = append(os.Environ(), "MISTRALRS_TEST_MAIN=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Errorf("%q: exit %v, want code 1; stderr %q", c.args, err, stderr.String())
			continue
		}
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "\n") || strings.Contains(msg, "panic") {
			t.Errorf("%q: want one line, got %q", c.args, msg)
		}
		for _, n := range c.names {
			if !strings.Contains(msg, n) {
				t.Errorf("%q: %q does not name %s", c.args, msg, n)
			}
		}
	}
}

// run loads the projector beside the model (auto), from-config the one its
// entry names; the text still generates.
func TestRunLoadsProjector(t *testing.T) {
	dir, text, proj := visionDir(t)
	out, errOut, err := execute(t, "", "run", "-f", text, "--raw", "--prompt", "hi", "--temperature", "0", "--max-tokens", "3")
	if err != nil || out == "" {
		t.Fatalf("run: %q %v", out, err)
	}
	if want := "vision projector " + proj + " (gemma3)"; !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q: %q", want, errOut)
	}
	conf := filepath.Join(dir, "run.toml")
	toml := "command = \"run\"\n[[models]]\nmodel_id = " + strconv.Quote(dir) + "\nkind = \"multimodal\"\n[models.format]\nmmproj = \"mmproj-f32.gguf\"\n"
	if err := os.WriteFile(conf, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, err = execute(t, "/exit\n", "from-config", "-f", conf)
	if err != nil || !strings.Contains(errOut, "vision projector "+proj) {
		t.Errorf("from-config run: %v, stderr %q", err, errOut)
	}
	toml = strings.Replace(toml, "multimodal", "text", 1)
	if err := os.WriteFile(conf, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := execute(t, "/exit\n", "from-config", "-f", conf); err == nil || !strings.Contains(err.Error(), `a text model takes no images (kind = "text")`) {
		t.Errorf("kind text with an mmproj: %v", err)
	}
}

// bench adds an image-encode row when the model has a projector: a
// generated image of the projector's size, or --image; JSON carries it too.
func TestBenchImageEncode(t *testing.T) {
	_, text, proj := visionDir(t)
	out, _, err := execute(t, "", "bench", "-f", text, "-p", "0", "-n", "0", "-r", "2", "-t", "1", "--no-warmup")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "| mmproj-f32.gguf (gemma3)") || !strings.Contains(out, "224x224 generated") || !strings.Contains(out, "|     16 |") {
		t.Errorf("no image row:\n%s", out)
	}
	img := testutil.SharedFile(t, "testdata/vision/img-wide-300x180.png")
	out, _, err = execute(t, "", "bench", "-f", text, "--mmproj", proj, "--image", img, "-p", "4", "-n", "0", "-r", "1", "-t", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []benchResult
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("%v: %s", err, out)
	}
	r := rows[1]
	if r.Image != "img-wide-300x180.png 300x180" || r.NImageTokens != 16 || r.MMProjType != "gemma3" || r.AvgNs <= 0 || r.AvgTs <= 0 || len(r.SamplesNs) != 1 {
		t.Errorf("image row %+v", r)
	}
	if rows[0].NPrompt != 4 || rows[0].Image != "" {
		t.Errorf("text row %+v", rows[0])
	}

	dir := t.TempDir()
	tiny := filepath.Join(dir, "tiny.gguf")
	writeModel(t, tiny, 6)
	bad := filepath.Join(dir, "bad.png")
	if err := os.WriteFile(bad, []byte("\x89PNG\r\n\x1a\nshort"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "-f", tiny, "--image", img, "-p", "0", "-n", "0"}, "--image needs a vision projector"},
		{[]string{"bench", "-f", text, "--image", bad, "-p", "0", "-n", "0"}, "--image " + bad + ": "},
		{[]string{"bench", "-f", text, "--image", filepath.Join(dir, "none.png"), "-p", "0", "-n", "0"}, "none.png"},
	} {
		if _, _, err := execute(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}

// `serve -m ORG/NAME` (auto) downloads the repository's projector next to
// the chosen GGUF and serves the model multimodal; `bench -m` then times
// an image with it from the cache.
func TestServeVisionModelFromHub(t *testing.T) {
	h, _, home := fakeHub(t)
	text, err := os.ReadFile(testutil.SharedFile(t, "testdata/vision/text-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	f32, err := os.ReadFile(testutil.SharedFile(t, "testdata/vision/mmproj-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	r := h.Add("org/Vision-GGUF", map[string][]byte{"vision-F32.gguf": text, "mmproj-vision-f32.gguf": f32, "mmproj-vision-bf16.gguf": []byte("not this one")})
	port := freePort(t)
	s := startCommand(t, port, "serve", "--host", "127.0.0.1", "-m", "org/Vision-GGUF", "-p", strconv.Itoa(port), "--threads", "1")
	if code, body := s.post("/v1/completions", `{"prompt":"hi","max_tokens":2}`); code != 200 {
		t.Errorf("completions: %d %s", code, body)
	}
	out := s.stop(syscall.SIGINT)
	proj := filepath.Join(home, "hub", "models--org--Vision-GGUF", "snapshots", r.Commit, "mmproj-vision-f32.gguf")
	for _, want := range []string{
		"org/Vision-GGUF: vision projector mmproj-vision-f32.gguf (the model's own type, else F16, else the first by name; name another with --mmproj)",
		"Model org/Vision-GGUF takes images: vision projector " + proj,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	h.Reset()
	bench, _, err := execute(t, "", "bench", "-m", "org/Vision-GGUF", "-p", "0", "-n", "0", "-r", "1", "-t", "1")
	if err != nil || !strings.Contains(bench, "mmproj-vision-f32.gguf (gemma3)") {
		t.Errorf("bench from the cache: %v\n%s", err, bench)
	}
	if n := h.Count(""); n != 0 {
		t.Errorf("%d requests with the model cached", n)
	}
}

// run --image answers as llama.cpp does (the fixture's greedy texts, raw
// prompt "<image>Once upon a time"); another image, another answer; errors
// name the --image.
func TestRunImage(t *testing.T) {
	_, text, proj := visionDir(t)
	var ref struct {
		Cases map[string]struct {
			Text string `json:"greedy_32_text"`
		} `json:"cases"`
	}
	data, err := os.ReadFile(testutil.SharedFile(t, "testdata/vision/reference.json"))
	if err != nil || json.Unmarshal(data, &ref) != nil {
		t.Fatalf("reference.json: %v", err)
	}
	for name, img := range map[string]string{"square": "img-square-224.png", "wide": "img-wide-300x180.png"} {
		out, errOut, err := execute(t, "", "run", "-f", text, "--image", testutil.SharedFile(t, "testdata/vision", img),
			"--raw", "--prompt", "Once upon a time", "--temperature", "0", "--max-tokens", "32", "-t", "2")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := ref.Cases[name].Text; out != want {
			t.Errorf("%s: %q\nllama.cpp: %q", name, out, want)
		}
		if !strings.Contains(errOut, "prompt: 23 tokens") {
			t.Errorf("%s: stderr %q", name, errOut)
		}
	}
	// Chat: the images go with the first turn only.
	square := testutil.SharedFile(t, "testdata/vision/img-square-224.png")
	_, errOut, err := execute(t, "hi\nand?\n/exit\n", "run", "-f", text, "--image", square, "--image", square, "--temperature", "0", "--max-tokens", "2")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(errOut, "prompt: "); n != 2 {
		t.Errorf("%d answers: %q", n, errOut)
	}

	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.png")
	if err := os.WriteFile(bad, []byte("\x89PNG\r\n\x1a\nshort"), 0o644); err != nil {
		t.Fatal(err)
	}
	tiny := filepath.Join(dir, "tiny.gguf")
	writeModel(t, tiny, 7)
	many := []string{"run", "-f", text, "--mmproj", proj, "--prompt", "x"}
	for range 9 {
		many = append(many, "--image", square)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-f", tiny, "--image", square, "--prompt", "x"}, "--image needs a vision projector"},
		{[]string{"run", "-f", text, "--image", bad, "--prompt", "x"}, "--image " + bad + ": "},
		{[]string{"run", "-f", text, "--image", filepath.Join(dir, "none.png"), "--prompt", "x"}, "--image: open " + filepath.Join(dir, "none.png") + ": no such file or directory"},
		{many, "too many images: at most 8 per request"},
	} {
		if _, _, err := execute(t, "", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args[len(c.args)-3:], err, c.want)
		}
	}
}
