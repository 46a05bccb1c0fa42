package gen

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"mistralrs/internal/loader"
	"mistralrs/internal/testutil"
)

// TestPrompterMatchesMtmd builds the prompts of the vision fixtures' cases
// (Gemma 3: ../shared/testdata/vision; Pixtral: internal/vision/testdata)
// from their images as data URLs, through the projector, and compares them
// with the chunks llama.cpp's mtmd made: the same text ids around each
// image, and each image's positions where mtmd put them.
func TestPrompterMatchesMtmd(t *testing.T) {
	gemma := filepath.Dir(testutil.SharedFile(t, "testdata", "vision", "reference.json"))
	t.Run("gemma3", func(t *testing.T) { checkMtmdPrompts(t, gemma, "text-f32.gguf") })
	t.Run("pixtral", func(t *testing.T) {
		checkMtmdPrompts(t, filepath.Join("..", "..", "vision", "testdata", "pixtral"), "text-f32.gguf")
	})
}

func checkMtmdPrompts(t *testing.T, dir, text string) {
	m, err := loader.Load(filepath.Join(dir, text), loader.Options{MMProj: filepath.Join(dir, "mmproj-f32.gguf")})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	data, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Cases map[string]struct {
			Prompt string   `json:"prompt_string"`
			Images []string `json:"images"`
			Chunks []struct {
				Text   []int32 `json:"text"`
				Tokens int     `json:"image_tokens"`
			} `json:"prompt_chunks"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	b := &Base{}
	for name, c := range doc.Cases {
		if c.Chunks == nil {
			continue
		}
		var parts Images
		text := c.Prompt
		for _, file := range c.Images {
			img, err := os.ReadFile(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			mark := parts.Add(file, "data:image/png;base64,"+base64.StdEncoding.EncodeToString(img)).Text
			text = strings.Replace(text, "<__media__>", mark, 1)
		}
		set, err := b.prepareImages(context.Background(), &Loaded{Model: m}, parts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		pr := newPrompter(m, 2048, set)
		got, err := pr.Encode(text, true)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var want []int32
		var wantPos []int
		for _, ch := range c.Chunks {
			if ch.Tokens > 0 {
				wantPos = append(wantPos, len(want))
				want = append(want, make([]int32, ch.Tokens)...)
				continue
			}
			want = append(want, ch.Text...)
		}
		var pos []int
		for i, s := range pr.spans {
			pos = append(pos, s.pos)
			if c.Chunks[2*i+1].Tokens != s.img.tokens {
				t.Errorf("%s: image %d has %d positions, mtmd's %d", name, i, s.img.tokens, c.Chunks[2*i+1].Tokens)
			}
			if s.img != set.images[i] {
				t.Errorf("%s: span %d is not image %d", name, i, i)
			}
		}
		if !slices.Equal(got, want) || !slices.Equal(pos, wantPos) {
			t.Errorf("%s: prompt %v, images at %v\nwant %v, images at %v", name, got, pos, want, wantPos)
		}
	}
}

// TestPrompterMarkers: a marker of no image of the request stays text, a
// prompt whose images do not fit is refused, and a request without images
// tokenizes as before.
func TestPrompterMarkers(t *testing.T) {
	m, err := loader.Load(testutil.SharedFile(t, "testdata", "vision", "text-f32.gguf"), loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var parts Images
	mark := parts.Add("p", "").Text
	var other Images
	stray := other.Add("q", "").Text
	set := &imageSet{images: []*preparedImage{{part: parts[0], tokens: 16}}, before: "<start_of_image>", after: "<end_of_image>"}
	pr := newPrompter(m, 2048, set)
	got, err := pr.Encode(stray+"a"+mark+"b", false)
	if err != nil {
		t.Fatal(err)
	}
	plain := m.Tok.Encode(stray+"a<start_of_image>", false, true)
	if len(pr.spans) != 1 || pr.spans[0].pos != len(plain) || !slices.Equal(got[:len(plain)], plain) {
		t.Errorf("stray marker: %v, spans %+v; want the text %v first", got, pr.spans, plain)
	}
	if _, err := newPrompter(m, 19, set).Encode("a"+mark, false); err == nil || !strings.Contains(err.Error(), "context length of 19") {
		t.Errorf("image over the context: %v", err)
	}
	noImages := newPrompter(m, 2048, nil)
	got, err = noImages.Encode("Once upon a time", true)
	if want := m.Tok.Encode("Once upon a time", true, true); err != nil || !slices.Equal(got, want) {
		t.Errorf("no images: %v, %v; want %v", got, err, want)
	}
}
