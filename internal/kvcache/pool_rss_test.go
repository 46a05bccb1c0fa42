package kvcache

import (
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Blocks without a prefix are reused most recently freed first: a
// sequence churning through the pool touches only as many blocks as it
// holds at once, not the whole pool.
func TestPoolReusesMostRecentlyFreed(t *testing.T) {
	const bs = 4
	p := NewPool(Shape{Layers: 1, KDim: 2, VDim: 2}, bs, 64, false)
	a := p.NewSeq()
	if err := a.Extend(3 * bs); err != nil {
		t.Fatal(err)
	}
	held := slices.Clone(a.Blocks())
	a.Release() // block held[0] is freed last
	b := p.NewSeq()
	if err := b.Extend(1); err != nil {
		t.Fatal(err)
	}
	if got := b.Blocks()[0]; got != held[0] {
		t.Errorf("new block %d, want the most recently freed %d (freed %v)", got, held[0], held)
	}
	b.Release()
	for range 1000 {
		s := p.NewSeq()
		if err := s.Extend(3*bs - 1); err != nil {
			t.Fatal(err)
		}
		s.Release()
	}
	if got := p.Resident(); got != 3 {
		t.Errorf("%d blocks hold memory after churning 3 at a time through 64", got)
	}
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

// Free blocks without a prefix past the high-water mark drop their memory,
// the coldest first; cached prefixes keep theirs until a reset of the
// prefix cache makes them plain free blocks.
func TestPoolReturnsColdBlocks(t *testing.T) {
	const bs = 4
	p := NewPool(Shape{Layers: 1, KDim: 2, VDim: 2}, bs, 64, false)
	p.SetKeepWarm(2)
	seqs := make([]*Seq, 8)
	for i := range seqs {
		seqs[i] = p.NewSeq()
		if err := seqs[i].Extend(2 * bs); err != nil {
			t.Fatal(err)
		}
	}
	// Two sequences' first blocks enter the prefix cache.
	root := RootHash([]byte("m"))
	seqs[0].Commit(0, BlockHash(root, []int32{1, 2, 3, 4}))
	seqs[1].Commit(0, BlockHash(root, []int32{5, 6, 7, 8}))
	if p.Resident() != 16 {
		t.Fatalf("resident %d, want 16 in use", p.Resident())
	}
	last := seqs[7].Blocks()[0] // the most recently freed below
	for _, s := range seqs {
		s.Release()
	}
	// 2 cached + 2 kept warm; 12 dropped.
	if p.Resident() != 4 || p.Returned() != 12 || p.Cached() != 2 {
		t.Fatalf("after the burst: resident %d, returned %d, cached %d; want 4, 12, 2", p.Resident(), p.Returned(), p.Cached())
	}
	if b := &p.blocks[last]; !b.resident() {
		t.Errorf("the most recently freed block %d lost its memory", last)
	}
	if n, ok := p.ResetPrefixCache(); !ok || n != 2 || p.Resident() != 2 {
		t.Errorf("reset: %d %v, resident %d; want 2 true 2", n, ok, p.Resident())
	}
	// A dropped block gets memory again when it is handed out.
	s := p.NewSeq()
	if err := s.Extend(5 * bs); err != nil {
		t.Fatal(err)
	}
	for i := range 5 * bs {
		s.Put(0, i, []float32{1, 2}, []float32{3, 4})
	}
	if p.Resident() != 5 {
		t.Errorf("resident %d with 5 blocks in use", p.Resident())
	}
	s.Release()
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

// rssBytes is the process's resident set (Linux), or 0.
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// BenchmarkPoolBurstRSS measures the memory a 512 MiB pool (8192 blocks of
// 64 KiB) holds after traffic: steady churn of 16 sequences of 8 blocks,
// without prefix caching (every block freed is plain), then a burst of 256
// such sequences at once, released. touched-MiB is the blocks' memory
// still held by the pool; rss-MiB the process's RSS after a GC that
// returns freed memory to the OS.
func BenchmarkPoolBurstRSS(b *testing.B) {
	sh := Shape{Layers: 8, KDim: 512, VDim: 512} // 2 positions × 8 layers × 1024 × 4 B = 64 KiB a block
	const bs, blocks = 2, 8192
	for b.Loop() {
		p := NewPool(sh, bs, blocks, false)
		row := make([]float32, 512)
		churn := func(n int) {
			seqs := make([]*Seq, n)
			for i := range seqs {
				seqs[i] = p.NewSeq()
				if err := seqs[i].Extend(8 * bs); err != nil {
					b.Fatal(err)
				}
				for l := range sh.Layers {
					for pos := range 8 * bs {
						seqs[i].Put(l, pos, row, row)
					}
				}
			}
			for _, s := range seqs {
				s.Release()
			}
		}
		for range 100 {
			churn(16)
		}
		steady := p.Resident()
		churn(256)
		runtime.GC()
		debug.FreeOSMemory()
		b.ReportMetric(float64(int64(steady)*BlockBytes(sh, bs, false))/(1<<20), "steady-MiB")
		b.ReportMetric(float64(int64(p.Resident())*BlockBytes(sh, bs, false))/(1<<20), "touched-MiB")
		b.ReportMetric(float64(rssBytes())/(1<<20), "rss-MiB")
		runtime.KeepAlive(p)
	}
}
