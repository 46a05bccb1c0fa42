package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"mistralrs/internal/config"
	"mistralrs/internal/loader"
	"mistralrs/internal/testutil"
)

// visionSpec serves the Gemma 3 vision fixture (../shared/testdata/vision:
// a random-weight text model and its mmproj) as "gemma-vision".
func visionSpec(t testing.TB) ModelSpec {
	text := testutil.SharedFile(t, "testdata", "vision", "text-f32.gguf")
	mmproj := testutil.SharedFile(t, "testdata", "vision", "mmproj-f32.gguf")
	lo := loader.Options{ID: "gemma-vision", MMProj: mmproj}
	return ModelSpec{ID: "gemma-vision", Load: func() (*loader.Model, error) { return loader.Load(text, lo) },
		Kind: KindMultimodal, MMProj: mmproj,
		Images: config.ImageLimits{MaxImages: 2, MaxPixels: 4096 * 4096}}
}

// visionImage is a fixture image as a data URL.
func visionImage(t testing.TB, name string) string {
	data, err := os.ReadFile(testutil.SharedFile(t, "testdata", "vision", name))
	if err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(data)
}

// encoderCounts reads the encoder cache's counters.
func (ts *testServer) encoderCounts() (hits, misses float64) {
	fams := ts.metrics()
	return value(fams, "mistralrs_encoder_cache_hits_total", nil), value(fams, "mistralrs_encoder_cache_misses_total", nil)
}

// TestVisionSDKs sends the fixture's images through the official OpenAI
// (chat, Responses) and Anthropic (Messages, count_tokens) Go SDKs: answers
// come back, a different image gives a different answer, the prompt counts
// the image's positions, and the encoder cache's counters move in /metrics
// (a miss on a new image, a hit on a repeated one).
func TestVisionSDKs(t *testing.T) {
	spec := visionSpec(t)
	ts := startServer(t, func(o *Options) {
		o.Models = []ModelSpec{spec}
		o.Engine.EncoderCacheBytes = 64 << 20
	})
	ctx := context.Background()
	square, wide := visionImage(t, "img-square-224.png"), visionImage(t, "img-wide-300x180.png")

	chat := func(text, image string) *openai.ChatCompletion {
		t.Helper()
		parts := []openai.ChatCompletionContentPartUnionParam{openai.TextContentPart(text)}
		if image != "" {
			parts = append(parts, openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: image}))
		}
		resp, err := ts.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "gemma-vision", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(parts)},
			MaxTokens: openai.Int(8), Temperature: openai.Float(0)}, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatalf("chat with an image: %v", err)
		}
		if len(resp.Choices) != 1 || resp.Choices[0].Message.Content == "" {
			t.Fatalf("chat with an image: no answer: %+v", resp)
		}
		return resp
	}

	h0, m0 := ts.encoderCounts()
	a := chat("Describe this picture", square)
	if h, m := ts.encoderCounts(); h != h0 || m != m0+1 {
		t.Errorf("a new image: encoder cache hits %v → %v, misses %v → %v; want one miss", h0, h, m0, m)
	}
	// The same image after other text: the prefix cache cannot cover it,
	// the encoder cache does.
	chat("What is in it?", square)
	if h, m := ts.encoderCounts(); h != h0+1 || m != m0+1 {
		t.Errorf("the same image again: encoder cache hits %v → %v, misses %v → %v; want one hit", h0, h, m0, m)
	}
	b := chat("Describe this picture", wide)
	if a.Choices[0].Message.Content == b.Choices[0].Message.Content {
		t.Errorf("two images, one answer: %q", a.Choices[0].Message.Content)
	}
	// The image takes its 16 positions between <start_of_image> and
	// <end_of_image>: the prompt is that of the same text with the two
	// marker tokens written out, plus 16.
	markers := chat("Describe this picture\n<start_of_image><end_of_image>", "")
	if got, want := a.Usage.PromptTokens, markers.Usage.PromptTokens+16; got != want {
		t.Errorf("prompt_tokens with an image %d, want %d (the text with its markers, plus 16)", got, want)
	}

	// Responses: input_image.
	resp, err := ts.client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gemma-vision", MaxOutputTokens: openai.Int(8), Temperature: openai.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{
				{OfInputText: &responses.ResponseInputTextParam{Text: "Describe this picture"}},
				{OfInputImage: &responses.ResponseInputImageParam{ImageURL: openai.String(square), Detail: responses.ResponseInputImageDetailAuto}},
			}, responses.EasyInputMessageRoleUser)}}}, option.WithJSONSet("ignore_eos", true))
	if err != nil || resp.OutputText() == "" {
		t.Fatalf("responses with an image: %v %+v", err, resp)
	}
	if resp.Usage.InputTokens != a.Usage.PromptTokens {
		t.Errorf("responses input_tokens %d, want chat's %d for the same conversation", resp.Usage.InputTokens, a.Usage.PromptTokens)
	}
	// Continuing it sends the stored image again.
	next, err := ts.client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "gemma-vision", MaxOutputTokens: openai.Int(4), PreviousResponseID: openai.String(resp.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and?")}}, option.WithJSONSet("ignore_eos", true))
	if err != nil || next.Usage.InputTokens <= resp.Usage.InputTokens+16 {
		t.Errorf("continued response: %v, input_tokens %d after %d", err, next.Usage.InputTokens, resp.Usage.InputTokens)
	}

	// Anthropic: a base64 image block, and count_tokens.
	ac := ts.anthropicClient()
	data := square[len("data:image/png;base64,"):]
	msgs := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Describe this picture"),
		anthropic.NewImageBlockBase64("image/png", data))}
	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "gemma-vision", MaxTokens: 8, Messages: msgs})
	if err != nil || len(msg.Content) == 0 || msg.Content[0].Text == "" {
		t.Fatalf("anthropic with an image: %v %+v", err, msg)
	}
	count, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "gemma-vision", Messages: msgs})
	if err != nil || count.InputTokens != msg.Usage.InputTokens {
		t.Errorf("count_tokens %v (%v), want the answer's input_tokens %d", count.InputTokens, err, msg.Usage.InputTokens)
	}
	textOnly := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Describe this picture"))}
	plain, err := ac.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "gemma-vision", Messages: textOnly})
	if err != nil || count.InputTokens < plain.InputTokens+18 {
		t.Errorf("count_tokens with an image %d, without %d (%v): want 18 more (16 positions and two markers) at least", count.InputTokens, plain.InputTokens, err)
	}
}

// pngHeader is a PNG signature and an IHDR chunk claiming w×h pixels, with
// a valid CRC, and nothing after.
func pngHeader(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(nil, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 2, 0, 0, 0) // 8-bit RGB
	chunk := append([]byte("IHDR"), ihdr...)
	b.Write(binary.BigEndian.AppendUint32(nil, uint32(len(ihdr))))
	b.Write(chunk)
	b.Write(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(chunk)))
	return b.Bytes()
}

// TestVisionBadImages: every bad image is a 400 in the route's envelope
// naming the part, and leaves no KV block behind.
func TestVisionBadImages(t *testing.T) {
	spec := visionSpec(t)
	// A loopback image host: refused as private even with remote images on.
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, testutil.SharedFile(t, "testdata", "vision", "img-square-224.png"))
	}))
	defer host.Close()
	ts := startServer(t, func(o *Options) {
		o.Models = []ModelSpec{spec}
		o.AllowRemoteImages = true
	})
	raw, err := os.ReadFile(testutil.SharedFile(t, "testdata", "vision", "img-square-224.png"))
	if err != nil {
		t.Fatal(err)
	}
	corrupt := append([]byte(nil), raw...)
	for i := 200; i < 400; i++ {
		corrupt[i] ^= 0x5a
	}
	b64 := func(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
	url := func(b []byte) string { return "data:image/png;base64," + b64(b) }
	good := url(raw)
	chat := func(urls ...string) string {
		parts := `{"type":"text","text":"see"}`
		for _, u := range urls {
			parts += `,{"type":"image_url","image_url":{"url":"` + u + `"}}`
		}
		return `{"model":"gemma-vision","max_tokens":2,"messages":[{"role":"user","content":[` + parts + `]}]}`
	}
	anth := func(data string) string {
		return `{"model":"gemma-vision","max_tokens":2,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + data + `"}}]}]}`
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(host.URL, "http://"))
	cases := []imageCase{
		{"truncated", "/v1/chat/completions", chat(url(raw[:len(raw)/2])), 400, "messages[0].content[1].image_url", "PNG"},
		{"corrupt", "/v1/chat/completions", chat(url(corrupt)), 400, "messages[0].content[1].image_url", "PNG"},
		{"not an image", "/v1/chat/completions", chat(url([]byte("BM this is a bitmap, not supported"))), 400, "messages[0].content[1].image_url", "format"},
		{"empty", "/v1/chat/completions", chat("data:image/png;base64,"), 400, "messages[0].content[1].image_url", "empty"},
		{"huge header", "/v1/chat/completions", chat(url(pngHeader(100000, 100000))), 400, "messages[0].content[1].image_url", "100000x100000"},
		{"bad base64", "/v1/chat/completions", chat("data:image/png;base64,@@@@"), 400, "messages[0].content[1].image_url", "base64"},
		{"too many images", "/v1/chat/completions", chat(good, good, good), 400, "messages[0].content[3].image_url", "at most 2"},
		{"private host", "/v1/chat/completions", chat(host.URL + "/a.png"), 400, "messages[0].content[1].image_url", "non-public address"},
		{"private host by name", "/v1/chat/completions", chat("http://localhost:" + port + "/a.png"), 400, "messages[0].content[1].image_url", "non-public address"},
		{"responses corrupt", "/v1/responses", `{"model":"gemma-vision","input":[{"role":"user","content":[{"type":"input_image","image_url":"` + url(corrupt) + `"}]}]}`, 400, "input[0].content[0].image_url", "PNG"},
		{"anthropic truncated", "/v1/messages", anth(b64(raw[:100])), 400, "messages[0].content[0].source", "PNG"},
		{"anthropic huge header", "/v1/messages/count_tokens", anth(b64(pngHeader(100000, 100000))), 400, "messages[0].content[0].source", "100000x100000"},
	}
	checkImageCases(t, ts, cases)
	fams := ts.metrics()
	if used := value(fams, "mistralrs_kv_cache_blocks_used", nil); used != 0 {
		t.Errorf("%v KV blocks used after the refused requests", used)
	}
	if h, m := ts.encoderCounts(); h != 0 || m != 0 {
		t.Errorf("refused images reached the encoder cache: %v hits, %v misses", h, m)
	}
}

// TestVisionRemoteImages: an http(s) image is fetched only when remote
// images are allowed (here from a loopback host, so private hosts too).
func TestVisionRemoteImages(t *testing.T) {
	spec := visionSpec(t)
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, testutil.SharedFile(t, "testdata", "vision", "img-square-224.png"))
	}))
	defer host.Close()
	body := `{"model":"gemma-vision","max_tokens":2,"messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"` + host.URL + `/a.png"}}]}]}`
	off := startServer(t, func(o *Options) { o.Models = []ModelSpec{spec} })
	checkImageCases(t, off, []imageCase{{"remote off", "/v1/chat/completions", body, 400, "messages[0].content[1].image_url", "not allowed"}})
	on := startServer(t, func(o *Options) {
		o.Models = []ModelSpec{spec}
		o.AllowRemoteImages, o.AllowPrivateImageHosts = true, true
	})
	resp, data := on.post("/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("remote image with private hosts allowed: %d %s", resp.StatusCode, data)
	}
	if _, m := on.encoderCounts(); m != 1 {
		t.Errorf("the fetched image was not encoded: %v misses", m)
	}
}
