package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"mistralrs/internal/config"
	"mistralrs/internal/loader"
	"mistralrs/internal/server"
	"mistralrs/internal/testutil"
)

// startVisionServer serves the Gemma 3 vision fixture (a random-weight
// model with its mmproj) with the default settings and an encoder cache.
func startVisionServer(t *testing.T) string {
	t.Helper()
	text := testutil.SharedFile(t, "testdata", "vision", "text-f32.gguf")
	mmproj := testutil.SharedFile(t, "testdata", "vision", "mmproj-f32.gguf")
	lo := loader.Options{ID: "gemma-vision", MMProj: mmproj}
	opts, _, err := server.OptionsFromConfig(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	opts.Models = []server.ModelSpec{{ID: "gemma-vision", Kind: server.KindMultimodal, MMProj: mmproj,
		Load: func() (*loader.Model, error) { return loader.Load(text, lo) }}}
	opts.Engine = config.DefaultEngineOptions()
	opts.Engine.EncoderCacheBytes = 64 << 20
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Logger, opts.EngineLogger, opts.Observe.Logger = quiet, quiet, quiet
	srv, err := server.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		srv.Close()
	})
	return "http://" + ln.Addr().String()
}

// TestBrowserImage attaches images to messages the three ways the page
// offers (the file picker, a paste, a drop), checks their thumbnails in
// the composer and the conversation, that the model answers them, and that
// the metrics panel shows the encoder cache's hit rate.
func TestBrowserImage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	exe := chromium(t)
	square := testutil.SharedFile(t, "testdata", "vision", "img-square-224.png")
	wide := testutil.SharedFile(t, "testdata", "vision", "img-wide-300x180.png")
	base := startVisionServer(t)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	ctx, cancelCtx := chromedp.NewContext(alloc)
	defer cancelCtx()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	wait := func(what, cond string) {
		t.Helper()
		_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond,
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second)))
		if err != nil {
			t.Fatalf("waiting until %s (%s): %v", what, cond, err)
		}
	}
	eval := func(expr string, out any) {
		t.Helper()
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("evaluate %s: %v (%s)", expr, err, raw)
		}
	}
	const idle = `!document.getElementById('send').disabled && document.getElementById('stop').disabled &&
		document.querySelectorAll('#transcript article').length > 0 &&
		!Array.from(document.querySelectorAll('#transcript .meta')).some((m) => m.textContent === 'streaming…')`
	const attachedCount = `document.querySelectorAll('#attachments img.thumb').length`
	// dispatch sends a paste (on the prompt) or a drop (on the composer)
	// carrying the image file of data.
	dispatch := func(kind, target, file string) {
		t.Helper()
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		bytesJSON, _ := json.Marshal(data) // base64
		event := `new ClipboardEvent('paste', {clipboardData: dt, bubbles: true, cancelable: true})`
		if kind == "drop" {
			event = `new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true})`
		}
		do(kind, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
			const bin = atob(%s);
			const bytes = new Uint8Array(bin.length);
			for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
			const dt = new DataTransfer();
			dt.items.add(new File([bytes], 'image.png', {type: 'image/png'}));
			document.getElementById(%q).dispatchEvent(%s);
		})()`, bytesJSON, target, event)))
	}
	lastAnswer := func() (text, meta string) {
		var m struct{ Text, Meta string }
		eval(`(() => { const a = document.querySelector('#transcript article:last-of-type');
			return {text: a.querySelector('.msg-body').textContent, meta: a.querySelector('.meta').textContent}; })()`, &m)
		return m.Text, m.Meta
	}

	do("open /ui/", chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(chromedp.ID("prompt")))
	wait("the model list", `document.getElementById('model').value === 'gemma-vision'`)
	// A random model rarely ends an answer: keep them short, greedy.
	do("max tokens", chromedp.Evaluate[chromedp.Void](`(() => {
		for (const [id, v] of [['max-tokens', '8'], ['temperature', '0']]) {
			const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event('input'));
		}
	})()`))

	// The file picker: a thumbnail in the composer, removable.
	do("pick a file", chromedp.SetUploadFiles("#image-file", []string{square}))
	wait("the picked image's thumbnail", attachedCount+` === 1`)
	do("remove it", chromedp.Click(chromedp.CSS("#attachments button")))
	wait("no thumbnail", attachedCount+` === 0 && document.getElementById('attachments').hidden`)
	do("pick it again", chromedp.SetUploadFiles("#image-file", []string{square}))
	wait("the picked image's thumbnail", attachedCount+` === 1`)
	do("send with the image", chromedp.SendKeys(chromedp.ID("prompt"), "Describe this picture"), chromedp.Click(chromedp.ID("send")))
	wait("the answer", idle)
	first, meta := lastAnswer()
	if first == "" || strings.Contains(meta, "error") {
		t.Fatalf("answer to an image: %q (%s)", first, meta)
	}
	var shown struct {
		Thumbs   int    `json:"thumbs"`
		Src      string `json:"src"`
		Attached int    `json:"attached"`
	}
	eval(`(() => { const imgs = document.querySelectorAll('#transcript article.msg-user .msg-images img.thumb');
		return {thumbs: imgs.length, src: imgs.length ? imgs[0].src.slice(0, 22) : '', attached: `+attachedCount+`}; })()`, &shown)
	if shown.Thumbs != 1 || shown.Src != "data:image/png;base64," || shown.Attached != 0 {
		t.Errorf("after sending: %+v; want one data-URL thumbnail in the conversation and none left in the composer", shown)
	}

	// A paste of another image: a different answer.
	do("new chat", chromedp.Click(chromedp.ID("new-chat")))
	dispatch("paste", "prompt", wide)
	wait("the pasted image's thumbnail", attachedCount+` === 1`)
	do("send with the pasted image", chromedp.SendKeys(chromedp.ID("prompt"), "Describe this picture"), chromedp.Click(chromedp.ID("send")))
	wait("the answer", idle)
	if other, meta := lastAnswer(); other == "" || other == first || strings.Contains(meta, "error") {
		t.Errorf("answer to another image: %q (%s); first answer %q", other, meta, first)
	}

	// A drop of the first image again, alone (no text): the encoder cache
	// hits, and the panel shows its hit rate.
	do("new chat", chromedp.Click(chromedp.ID("new-chat")))
	dispatch("drop", "composer", square)
	wait("the dropped image's thumbnail", attachedCount+` === 1`)
	do("send the image alone", chromedp.Click(chromedp.ID("send")))
	wait("the answer", idle)
	if text, meta := lastAnswer(); text == "" || strings.Contains(meta, "error") {
		t.Errorf("answer to an image alone: %q (%s)", text, meta)
	}
	wait("the encoder cache's hit rate", `!document.getElementById('m-encoder').hidden &&
		/^[0-9.]+%$/.test(document.getElementById('m-encoder').textContent) &&
		document.getElementById('m-encoder').textContent !== '0.0%'`)
	// The conversation, images included, survives a reload.
	do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("prompt")))
	var thumbs int
	eval(`document.querySelectorAll('#transcript .msg-images img.thumb').length`, &thumbs)
	if thumbs != 1 {
		t.Errorf("%d thumbnails after a reload, want 1", thumbs)
	}
}
