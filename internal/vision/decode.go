package vision

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"

	"golang.org/x/image/webp"
)

// DefaultMaxPixels is the most pixels (width × height) Decode accepts when
// Limits.MaxPixels is 0: 7680 × 4320 (8K UHD), about 133 MB decoded as
// RGBA. Every projector scales an image down to well under a megapixel, so
// a larger one only costs memory.
const DefaultMaxPixels = 7680 * 4320

// Limits bound what Decode accepts, checked from the header before any
// pixel is decoded.
type Limits struct {
	MaxPixels int64 // width × height; 0: DefaultMaxPixels
	MaxBytes  int   // encoded size; 0: no limit here (the HTTP layer bounds bodies)
}

// format is one image format Decode reads.
type format struct {
	name   string
	magic  func(b []byte) bool
	config func(r io.Reader) (image.Config, error)
	decode func(r io.Reader) (image.Image, error)
}

var formats = []format{
	{"PNG", func(b []byte) bool { return bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) }, png.DecodeConfig, png.Decode},
	{"JPEG", func(b []byte) bool { return bytes.HasPrefix(b, []byte("\xff\xd8\xff")) }, jpeg.DecodeConfig, jpeg.Decode},
	{"GIF", func(b []byte) bool {
		return bytes.HasPrefix(b, []byte("GIF87a")) || bytes.HasPrefix(b, []byte("GIF89a"))
	}, gif.DecodeConfig, gif.Decode}, // gif.Decode stops after the first frame
	{"WebP", func(b []byte) bool {
		return len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP"
	}, webp.DecodeConfig, webp.Decode},
}

// Decode reads a PNG, JPEG, WebP or GIF (its first frame) into an image.
// The dimensions are read from the header first and an image over
// lim.MaxPixels is refused before any pixel is decoded (no decompression
// bomb). Errors are plain, with a short reason.
func Decode(data []byte, lim Limits) (image.Image, error) {
	if lim.MaxBytes > 0 && len(data) > lim.MaxBytes {
		return nil, fmt.Errorf("image is %d bytes, more than the %d allowed", len(data), lim.MaxBytes)
	}
	if len(data) == 0 {
		return nil, errors.New("image is empty (0 bytes)")
	}
	var f *format
	for i := range formats {
		if formats[i].magic(data) {
			f = &formats[i]
			break
		}
	}
	if f == nil {
		return nil, errors.New("unsupported image format (PNG, JPEG, WebP and GIF are supported)")
	}
	cfg, err := f.config(bytes.NewReader(data))
	if err != nil {
		return nil, corrupt(f.name, err)
	}
	if err := checkSize(cfg.Width, cfg.Height, lim.maxPixels()); err != nil {
		return nil, err
	}
	img, err := decodeCaught(f, data)
	if err != nil {
		return nil, corrupt(f.name, err)
	}
	// The header's size bounded the decoder's allocations; a decoder that
	// read another size from the body would be a corrupt file.
	if b := img.Bounds(); b.Dx() > cfg.Width || b.Dy() > cfg.Height || b.Empty() {
		return nil, corrupt(f.name, fmt.Errorf("decoded %dx%d pixels, the header says %dx%d", b.Dx(), b.Dy(), cfg.Width, cfg.Height))
	}
	return img, nil
}

// decodeCaught runs f's decoder, turning a panic inside it (a decoder bug
// on hostile input) into an error.
func decodeCaught(f *format, data []byte) (img image.Image, err error) {
	defer func() {
		if r := recover(); r != nil {
			img, err = nil, fmt.Errorf("decoder failed: %v", r)
		}
	}()
	return f.decode(bytes.NewReader(data))
}

// corrupt words a decoder's error.
func corrupt(name string, err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return fmt.Errorf("corrupt or truncated %s: the data ends early", name)
	}
	return fmt.Errorf("corrupt or truncated %s: %v", name, err)
}

func (lim Limits) maxPixels() int64 {
	if lim.MaxPixels > 0 {
		return lim.MaxPixels
	}
	return DefaultMaxPixels
}

// checkSize refuses an empty image or one of more than max pixels.
func checkSize(w, h int, max int64) error {
	if w <= 0 || h <= 0 {
		return fmt.Errorf("image is %dx%d pixels: empty", w, h)
	}
	if int64(w) > max || int64(h) > max || int64(w)*int64(h) > max {
		return fmt.Errorf("image is %dx%d pixels, more than the %d allowed", w, h, max)
	}
	return nil
}
