package main

import (
	"fmt"
	"image"
	"image/color"
	"io"
	"math"
	"path/filepath"
	"strings"
	"time"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
	"mistralrs/internal/smallfile"
	"mistralrs/internal/vision"
)

// imageFileCap bounds an image file read whole (--image): far above any
// photo; the pixels are bounded by vision.Decode's default limit.
const imageFileCap = 64 << 20

// imageBench is bench's image-encode test: one image, preprocessed once
// for the model's projector, encoded whole at each repetition (as
// llama.cpp's "image slice encoded in N ms" times it: preprocessing
// excluded).
type imageBench struct {
	proj  *vision.Projector
	pr    *vision.Prepared
	label string // the image: "224x224 generated" or the file's name and size
}

// newImageBench prepares the image file for p, or without one a generated
// image of the projector's input size.
func newImageBench(p *vision.Projector, file string) (*imageBench, error) {
	var img image.Image
	var label string
	if file != "" {
		data, err := smallfile.Read(file, imageFileCap)
		if err != nil {
			return nil, fmt.Errorf("--image: %w", err)
		}
		if img, err = vision.Decode(data, vision.Limits{}); err != nil {
			return nil, fmt.Errorf("--image %s: %w", file, err)
		}
		b := img.Bounds()
		label = fmt.Sprintf("%s %dx%d", filepath.Base(file), b.Dx(), b.Dy())
	} else {
		side, err := projectorImageSize(p.Path())
		if err != nil {
			return nil, err
		}
		img = testImage(side)
		label = fmt.Sprintf("%dx%d generated", side, side)
	}
	pr, err := p.Prepare(img, 0)
	if err != nil {
		return nil, fmt.Errorf("preparing the image for %s: %w", p.Path(), err)
	}
	return &imageBench{proj: p, pr: pr, label: label}, nil
}

// projectorImageSize is the input size the projector's file declares
// (clip.vision.image_size): the size of the image it encodes without
// resizing.
func projectorImageSize(path string) (int, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	v, ok := f.Uint("clip.vision.image_size")
	if !ok || v == 0 || v > 1<<14 {
		return 0, fmt.Errorf("%s: no usable clip.vision.image_size; give an image with --image", path)
	}
	return int(v), nil
}

// testImage is a side×side picture with gradients and edges, so that it
// is not one flat colour; its content does not change the encoder's work.
func testImage(side int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, side, side))
	for y := range side {
		for x := range side {
			img.Set(x, y, color.RGBA{R: uint8(x * 255 / side), G: uint8(y * 255 / side), B: uint8((x ^ y) & 0xff), A: 0xff})
		}
	}
	return img
}

// once encodes the image on pool and times it.
func (b *imageBench) once(pool *kernels.Pool) (time.Duration, error) {
	start := time.Now()
	e := b.proj.Encode(b.pr)
	if !e.Advance(pool, math.MaxInt64) {
		return 0, fmt.Errorf("the encoding of %s did not finish", b.label)
	}
	return time.Since(start), nil
}

// run times reps encodings on pool (after one warm-up unless noWarm).
func (b *imageBench) run(pool *kernels.Pool, reps int, noWarm bool) (benchResult, error) {
	if !noWarm {
		if _, err := b.once(pool); err != nil {
			return benchResult{}, err
		}
	}
	r := benchResult{Backends: kernels.Backend(), NThreads: pool.Threads(), TestTime: time.Now().UTC().Format(time.RFC3339),
		MMProjFilename: filepath.Base(b.proj.Path()), MMProjType: b.proj.Type(), Image: b.label, NImageTokens: b.pr.Tokens}
	for range reps {
		d, err := b.once(pool)
		if err != nil {
			return benchResult{}, err
		}
		r.SamplesNs = append(r.SamplesNs, d.Nanoseconds())
		r.SamplesTs = append(r.SamplesTs, float64(b.pr.Tokens)/d.Seconds())
	}
	r.AvgNs, r.StddevNs = meanSD64(r.SamplesNs)
	r.AvgTs, r.StddevTs = meanSD(r.SamplesTs)
	return r, nil
}

// writeImageTable prints the image-encode rows: milliseconds per image and
// the image rows (tokens) made per second.
func writeImageTable(out io.Writer, rows []benchResult) {
	fmt.Fprintf(out, "\n| %-40s | %-15s | %7s | %-30s | %6s | %16s | %16s |\n", "projector", "backend", "threads", "image", "tokens", "ms/image", "t/s")
	fmt.Fprintf(out, "| %s | %s | %s: | %s | %s: | %s: | %s: |\n", strings.Repeat("-", 40), strings.Repeat("-", 15), strings.Repeat("-", 6),
		strings.Repeat("-", 30), strings.Repeat("-", 5), strings.Repeat("-", 15), strings.Repeat("-", 15))
	for _, r := range rows {
		fmt.Fprintf(out, "| %-40s | %-15s | %7d | %-30s | %6d | %16s | %16s |\n",
			truncate(r.MMProjFilename+" ("+r.MMProjType+")", 40), r.Backends, r.NThreads, truncate(r.Image, 30), r.NImageTokens,
			fmt.Sprintf("%.2f ± %.2f", float64(r.AvgNs)/1e6, float64(r.StddevNs)/1e6), fmt.Sprintf("%.2f ± %.2f", r.AvgTs, r.StddevTs))
	}
}
