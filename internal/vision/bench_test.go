package vision

import (
	"math"
	"testing"

	"mistralrs/internal/kernels"
)

// BenchmarkEncode times one image's encoding (img-square-224 through the
// fixture's F32 and F16 projectors) on a pool of all the CPUs, the
// preprocessing excluded.
func BenchmarkEncode(b *testing.B) {
	for _, mmproj := range []string{"mmproj-f32.gguf", "mmproj-f16.gguf"} {
		b.Run(mmproj, func(b *testing.B) {
			p := loadFixture(b, mmproj)
			pr, err := p.Prepare(decodeFile(b, fixture(b, "img-square-224.png")), 0)
			if err != nil {
				b.Fatal(err)
			}
			pool := kernels.NewPool(0)
			defer pool.Close()
			b.ResetTimer()
			for b.Loop() {
				if e := p.Encode(pr); !e.Advance(pool, math.MaxInt64) {
					b.Fatal("not done")
				}
			}
		})
	}
}

// BenchmarkPrepare times the preprocessing of an image that needs resizing.
func BenchmarkPrepare(b *testing.B) {
	p := loadFixture(b, "mmproj-f32.gguf")
	img := decodeFile(b, fixture(b, "img-wide-300x180.png"))
	for b.Loop() {
		if _, err := p.Prepare(img, 0); err != nil {
			b.Fatal(err)
		}
	}
}
