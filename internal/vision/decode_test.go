package vision

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"runtime"
	"strings"
	"testing"
)

// testImage is a small image with a different colour per pixel.
func testImage(w, h int) *image.NRGBA {
	m := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			m.SetNRGBA(x, y, color.NRGBA{uint8(40 * x), uint8(60 * y), uint8(x + y), 255})
		}
	}
	return m
}

func encodePNG(t testing.TB, img image.Image) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// pngHeader is a PNG signature and IHDR chunk claiming w × h RGB pixels,
// with no image data after it.
func pngHeader(w, h uint32) []byte {
	ihdr := binary.BigEndian.AppendUint32([]byte("IHDR"), w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 2, 0, 0, 0) // 8-bit RGB, deflate, no filter, no interlace
	b := []byte("\x89PNG\r\n\x1a\n")
	b = binary.BigEndian.AppendUint32(b, 13)
	b = append(b, ihdr...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(ihdr))
}

// webpLossless writes a WebP (VP8L, lossless) image of w × h pixels whose
// green channel alternates between g0 and g1 in a checkerboard, red, blue
// and alpha fixed: two "simple" prefix codes of RFC 9649 make it a few
// bits per pixel, written here by hand.
func webpLossless(w, h int, g0, g1, r, b uint8) []byte {
	var bw bitWriter
	bw.bits(0x2f, 8) // signature
	bw.bits(uint32(w-1), 14)
	bw.bits(uint32(h-1), 14)
	bw.bits(0, 1) // alpha_is_used
	bw.bits(0, 3) // version
	bw.bits(0, 1) // no transform
	bw.bits(0, 1) // no colour cache
	bw.bits(0, 1) // no meta prefix codes
	// Green: a simple code of two 8-bit symbols (1 bit each, the smaller
	// symbol coded 0).
	bw.bits(1, 1)
	bw.bits(1, 1) // two symbols
	bw.bits(1, 1) // first is 8 bits
	bw.bits(uint32(g0), 8)
	bw.bits(uint32(g1), 8)
	for _, v := range []uint8{r, b, 255} { // red, blue, alpha: one symbol each, 0 bits
		bw.bits(1, 1)
		bw.bits(0, 1)
		bw.bits(1, 1)
		bw.bits(uint32(v), 8)
	}
	bw.bits(1, 1) // distance: one 1-bit symbol, 0
	bw.bits(0, 1)
	bw.bits(0, 1)
	bw.bits(0, 1)
	lo, hi := min(g0, g1), max(g0, g1)
	for y := range h {
		for x := range w {
			g := g0
			if (x+y)%2 == 1 {
				g = g1
			}
			bit := uint32(0)
			if g == hi && hi != lo {
				bit = 1
			}
			bw.bits(bit, 1)
		}
	}
	data := bw.flush()
	if len(data)%2 == 1 {
		data = append(data, 0)
	}
	chunk := binary.LittleEndian.AppendUint32([]byte("VP8L"), uint32(len(bw.flush())))
	chunk = append(chunk, data...)
	out := binary.LittleEndian.AppendUint32([]byte("RIFF"), uint32(4+len(chunk)))
	out = append(out, "WEBP"...)
	return append(out, chunk...)
}

// bitWriter packs values LSB first, as VP8L reads them.
type bitWriter struct {
	out  []byte
	acc  uint64
	nacc uint
}

func (w *bitWriter) bits(v uint32, n uint) {
	w.acc |= uint64(v) << w.nacc
	w.nacc += n
	for w.nacc >= 8 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.nacc -= 8
	}
}

func (w *bitWriter) flush() []byte {
	out := w.out
	if w.nacc > 0 {
		out = append(out[:len(out):len(out)], byte(w.acc))
	}
	return out
}

func TestDecodeFormats(t *testing.T) {
	src := testImage(5, 3)
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, src, &jpeg.Options{Quality: 100}); err != nil {
		t.Fatal(err)
	}
	// A two-frame GIF: Decode keeps the first.
	pal := color.Palette{color.RGBA{0, 0, 0, 255}, color.RGBA{255, 0, 0, 255}, color.RGBA{0, 0, 255, 255}}
	f1, f2 := image.NewPaletted(image.Rect(0, 0, 4, 2), pal), image.NewPaletted(image.Rect(0, 0, 4, 2), pal)
	for i := range f1.Pix {
		f1.Pix[i], f2.Pix[i] = 1, 2
	}
	var gb bytes.Buffer
	if err := gif.EncodeAll(&gb, &gif.GIF{Image: []*image.Paletted{f1, f2}, Delay: []int{0, 0}}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		data []byte
		w, h int
		at   color.NRGBA // pixel (1, 0)
	}{
		{"png", encodePNG(t, src), 5, 3, color.NRGBA{40, 0, 1, 255}},
		{"jpeg", jb.Bytes(), 5, 3, color.NRGBA{}},
		{"gif", gb.Bytes(), 4, 2, color.NRGBA{255, 0, 0, 255}},
		{"webp", webpLossless(3, 2, 10, 200, 7, 9), 3, 2, color.NRGBA{7, 200, 9, 255}},
	}
	for _, tc := range cases {
		img, err := Decode(tc.data, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if b := img.Bounds(); b.Dx() != tc.w || b.Dy() != tc.h {
			t.Fatalf("%s: %v, want %dx%d", tc.name, b, tc.w, tc.h)
		}
		if tc.at != (color.NRGBA{}) {
			if got := color.NRGBAModel.Convert(img.At(1, 0)).(color.NRGBA); got != tc.at {
				t.Errorf("%s: pixel (1,0) is %v, want %v", tc.name, got, tc.at)
			}
		}
	}
	// The WebP's checkerboard came through: (0,0) has the other green.
	img, _ := Decode(cases[3].data, Limits{})
	if got := color.NRGBAModel.Convert(img.At(0, 0)).(color.NRGBA); got != (color.NRGBA{7, 10, 9, 255}) {
		t.Errorf("webp: pixel (0,0) is %v", got)
	}
}

func TestDecodeRefusals(t *testing.T) {
	good := encodePNG(t, testImage(8, 8))
	cases := []struct {
		name string
		data []byte
		lim  Limits
		want string
	}{
		{"empty", nil, Limits{}, "empty"},
		{"garbage", []byte("this is not an image at all"), Limits{}, "unsupported image format"},
		{"bmp", append([]byte("BM"), make([]byte, 60)...), Limits{}, "unsupported image format"},
		{"truncated png", good[:len(good)/2], Limits{}, "corrupt or truncated PNG"},
		{"truncated header", good[:12], Limits{}, "corrupt or truncated PNG"},
		{"png bomb", pngHeader(100000, 100000), Limits{}, "image is 100000x100000 pixels, more than the 33177600 allowed"},
		{"over max pixels", good, Limits{MaxPixels: 63}, "image is 8x8 pixels, more than the 63 allowed"},
		{"over max bytes", good, Limits{MaxBytes: 10}, "more than the 10 allowed"},
		{"zero width", pngHeader(0, 5), Limits{}, "corrupt or truncated PNG"},
		{"truncated jpeg", []byte("\xff\xd8\xff\xe0\x00\x10JFIF"), Limits{}, "corrupt or truncated JPEG"},
		{"truncated gif", []byte("GIF89a\x05"), Limits{}, "corrupt or truncated GIF"},
		{"truncated webp", webpLossless(3, 2, 1, 2, 3, 4)[:24], Limits{}, "corrupt or truncated WebP"},
	}
	for _, tc := range cases {
		img, err := Decode(tc.data, tc.lim)
		if err == nil || img != nil {
			t.Errorf("%s: decoded (%v)", tc.name, img)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want it to contain %q on one line", tc.name, err, tc.want)
		}
	}
}

// TestDecodeBombAllocatesNothing: the 100000×100000 header is refused from
// the header, before the decoder allocates its 30 GB.
func TestDecodeBombAllocatesNothing(t *testing.T) {
	data := pngHeader(100000, 100000)
	if n := allocated(func() { _, _ = Decode(data, Limits{}) }); n > 1<<20 {
		t.Fatalf("refusing a 100000x100000 header allocated %d bytes", n)
	}
}

// allocated returns the bytes fn allocated on the heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// FuzzDecode: Decode never panics, and never decodes (or allocates for) an
// image larger than the limit.
func FuzzDecode(f *testing.F) {
	var jb bytes.Buffer
	if err := jpeg.Encode(&jb, testImage(9, 7), nil); err != nil {
		f.Fatal(err)
	}
	var gb bytes.Buffer
	if err := gif.Encode(&gb, testImage(6, 4), nil); err != nil {
		f.Fatal(err)
	}
	f.Add(encodePNG(f, testImage(7, 5)))
	f.Add(jb.Bytes())
	f.Add(gb.Bytes())
	f.Add(webpLossless(5, 4, 1, 250, 3, 4))
	f.Add(pngHeader(100000, 100000))
	f.Add([]byte("RIFF\x00\x00\x00\x00WEBPVP8X"))
	const maxPixels = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		var img image.Image
		var err error
		n := allocated(func() { img, err = Decode(data, Limits{MaxPixels: maxPixels}) })
		if err != nil {
			if img != nil || err.Error() == "" || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q with image %v", err, img)
			}
		} else if b := img.Bounds(); b.Empty() || int64(b.Dx())*int64(b.Dy()) > maxPixels {
			t.Fatalf("decoded %v past the limit of %d pixels", b, maxPixels)
		}
		// Sixteen bytes per allowed pixel (the widest decoded form), the
		// decoders' tables and their copies of the input.
		if limit := uint64(16*maxPixels + 4<<20 + 8*len(data)); n > limit {
			t.Fatalf("decoding %d bytes allocated %d bytes, more than %d", len(data), n, limit)
		}
	})
}
