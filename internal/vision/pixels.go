package vision

import (
	"image"
	"image/color"
	"math"
)

// rgbImage is an 8-bit RGB image, interleaved, row-major: what llama.cpp's
// image loader (stb_image with 3 channels) hands its preprocessing.
type rgbImage struct {
	w, h int
	pix  []uint8 // 3 × w × h
}

// at returns the channel c of pixel (x, y) as a float32.
func (m *rgbImage) at(x, y, c int) float32 { return float32(m.pix[(y*m.w+x)*3+c]) }

// toRGB converts img to 8-bit RGB the way stb_image does for 3 channels:
// the colour channels of the non-premultiplied pixel, alpha dropped, 16-bit
// samples by their high byte.
func toRGB(img image.Image) *rgbImage {
	b := img.Bounds()
	m := &rgbImage{w: b.Dx(), h: b.Dy(), pix: make([]uint8, 3*b.Dx()*b.Dy())}
	switch src := img.(type) {
	case *image.NRGBA:
		m.fromRows(b, func(y int, row []uint8) {
			s := src.Pix[src.PixOffset(b.Min.X, y):]
			for x := range m.w {
				row[3*x], row[3*x+1], row[3*x+2] = s[4*x], s[4*x+1], s[4*x+2]
			}
		})
	case *image.RGBA:
		m.fromRows(b, func(y int, row []uint8) {
			s := src.Pix[src.PixOffset(b.Min.X, y):]
			for x := range m.w {
				if a := s[4*x+3]; a != 0xff {
					c := color.NRGBAModel.Convert(color.RGBA{s[4*x], s[4*x+1], s[4*x+2], a}).(color.NRGBA)
					row[3*x], row[3*x+1], row[3*x+2] = c.R, c.G, c.B
					continue
				}
				row[3*x], row[3*x+1], row[3*x+2] = s[4*x], s[4*x+1], s[4*x+2]
			}
		})
	case *image.Gray:
		m.fromRows(b, func(y int, row []uint8) {
			s := src.Pix[src.PixOffset(b.Min.X, y):]
			for x := range m.w {
				row[3*x], row[3*x+1], row[3*x+2] = s[x], s[x], s[x]
			}
		})
	case *image.YCbCr:
		m.fromRows(b, func(y int, row []uint8) {
			for x := range m.w {
				yi, ci := src.YOffset(b.Min.X+x, y), src.COffset(b.Min.X+x, y)
				row[3*x], row[3*x+1], row[3*x+2] = color.YCbCrToRGB(src.Y[yi], src.Cb[ci], src.Cr[ci])
			}
		})
	default:
		m.fromRows(b, func(y int, row []uint8) {
			for x := range m.w {
				c := color.NRGBA64Model.Convert(img.At(b.Min.X+x, y)).(color.NRGBA64)
				row[3*x], row[3*x+1], row[3*x+2] = uint8(c.R>>8), uint8(c.G>>8), uint8(c.B>>8)
			}
		})
	}
	return m
}

// fromRows fills m row by row: fill gets the source row y and m's row.
func (m *rgbImage) fromRows(b image.Rectangle, fill func(y int, row []uint8)) {
	for y := b.Min.Y; y < b.Max.Y; y++ {
		r := y - b.Min.Y
		fill(y, m.pix[3*r*m.w:3*(r+1)*m.w])
	}
}

// fitSize is llama.cpp's aspect-preserving size of a w × h image inside a
// tw × th box: the scale and the products in float32, rounded up, capped.
func fitSize(w, h, tw, th int) (int, int) {
	k := min(float32(tw)/float32(w), float32(th)/float32(h))
	nw := int(math.Ceil(float64(float32(float32(w) * k))))
	nh := int(math.Ceil(float64(float32(float32(h) * k))))
	return max(min(nw, tw), 1), max(min(nh, th), 1)
}

// resizeBilinear is llama.cpp's bilinear resize: corner-aligned sampling
// (the first and last outputs hit the first and last source pixels), every
// step in float32 without fused multiply-adds (the explicit conversions
// keep the compiler from fusing), the result truncated. It is neither PIL's
// nor x/image/draw's bilinear filter.
func resizeBilinear(src *rgbImage, nw, nh int) *rgbImage {
	dst := &rgbImage{w: nw, h: nh, pix: make([]uint8, 3*nw*nh)}
	xs := corners(src.w, nw)
	ys := corners(src.h, nh)
	for y, sy := range ys {
		for x, sx := range xs {
			o := (y*nw + x) * 3
			for c := range 3 {
				p00 := src.at(sx.i0, sy.i0, c)
				p10 := src.at(sx.i1, sy.i0, c)
				p01 := src.at(sx.i0, sy.i1, c)
				p11 := src.at(sx.i1, sy.i1, c)
				top := float32(p00 + float32((p10-p00)*sx.f))
				bottom := float32(p01 + float32((p11-p01)*sx.f))
				v := float32(top + float32((bottom-top)*sy.f))
				dst.pix[o+c] = uint8(v)
			}
		}
	}
	return dst
}

// sample is one output coordinate's two source indices and the weight of
// the second.
type sample struct {
	i0, i1 int
	f      float32
}

// corners maps n outputs onto src inputs corner to corner.
func corners(src, n int) []sample {
	out := make([]sample, n)
	var ratio float32
	if n > 1 {
		ratio = float32(src-1) / float32(n-1)
	}
	for i := range out {
		p := float32(float32(i) * ratio)
		i0 := min(int(math.Floor(float64(p))), src-1)
		out[i] = sample{i0: i0, i1: min(i0+1, src-1), f: float32(p - float32(i0))}
	}
	return out
}

// padCenter pastes m at the centre of a tw × th black canvas (offsets by
// integer division, as llama.cpp does).
func padCenter(m *rgbImage, tw, th int) *rgbImage {
	if m.w == tw && m.h == th {
		return m
	}
	dst := &rgbImage{w: tw, h: th, pix: make([]uint8, 3*tw*th)}
	ox, oy := (tw-m.w)/2, (th-m.h)/2
	for y := range m.h {
		copy(dst.pix[3*((y+oy)*tw+ox):], m.pix[3*y*m.w:3*(y+1)*m.w])
	}
	return dst
}

// normalize returns m's values as (byte/255 − mean[c]) / std[c] in
// float32, planar [3][h][w].
func normalize(m *rgbImage, mean, std [3]float32) []float32 {
	n := m.w * m.h
	out := make([]float32, 3*n)
	for i := range n {
		for c := range 3 {
			v := float32(float32(m.pix[3*i+c]) / 255)
			out[c*n+i] = float32(v-mean[c]) / std[c]
		}
	}
	return out
}
