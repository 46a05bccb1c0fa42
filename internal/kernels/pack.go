package kernels

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"
	"unsafe"
)

// Packed weights. The AVX-512 VNNI kernels (simd_pack_amd64.s) read a
// matrix rearranged at load: rows in groups of packRows, and within a
// group each 32-element block of the 16 rows as chunks of 64 bytes, chunk
// k holding 4 bytes of every row (so that one 512-bit load feeds 16 output
// rows, and the 16 lanes of int32 sums are the 16 rows' block sums), then
// the group's block scales. The file's bytes (Matrix.Data) stay as they
// are: embedding lookups and the other paths read them. A packed group
// takes as many bytes as its 16 rows do in the file (rows are padded to a
// multiple of 16 with zero weights and scales). The avx512 path's Q8_0,
// Q4_K and Q6_K kernels read the interleaved variant (packed.inter): each
// block's scales right after its quants, one stream per group instead of
// two, which a one-token product reads faster from memory.

// packRows is the rows of a group: the 16 int32 lanes of a 512-bit register.
const packRows = 16

// packed is a matrix in the packed layout: groups of gbytes, each nb
// blocks (of the type: 32 or 256 elements) of qbytes of quants, then nb
// blocks of the rows' scales.
type packed struct {
	nb, groups     int
	qbytes, gbytes int
	// inter is the interleaved layout (packKernels.inter): each block's
	// scales right after its quants, where the others have the group's
	// blocks of quants, then their scales.
	inter bool
	data  []byte // 64-byte aligned
}

// block returns the quants and scales of block b of group grp.
func (p *packed) block(grp []byte, f packFormat, b int) (q, sc []byte) {
	if p.inter {
		o := b * (f.qbytes + f.sbytes)
		return grp[o : o+f.qbytes], grp[o+f.qbytes : o+f.qbytes+f.sbytes]
	}
	o := p.nb * f.qbytes
	return grp[b*f.qbytes : (b+1)*f.qbytes], grp[o+b*f.sbytes : o+(b+1)*f.sbytes]
}

// packFormat describes the packed layout of one type.
type packFormat struct {
	qbytes, sbytes int // quant and scale bytes per block of 16 rows
	// block copies one row's block (the type's bytes) into the group's
	// chunks at q (row r's 4-byte slots) and its scales into sc.
	block func(q []byte, sc []byte, r int, src []byte)
}

var packFormats = map[Type]packFormat{
	Q8_0: {512, 32, func(q, sc []byte, r int, src []byte) {
		copy(sc[2*r:2*r+2], src[:2])
		for k := 0; k < 8; k++ {
			// w+128: VPDPBUSD's unsigned operand.
			binary.LittleEndian.PutUint32(q[64*k+4*r:], binary.LittleEndian.Uint32(src[2+4*k:])^0x80808080)
		}
	}},
	Q4_0: {256, 32, func(q, sc []byte, r int, src []byte) {
		copy(sc[2*r:2*r+2], src[:2])
		packChunks(q, r, src[2:18], 4)
	}},
	// Q4_1, Q5_0, Q5_1: Q4_0's nibbles; Q5 then the fifth bits, bit k of
	// a row's 4 bytes being those of chunk k (elements 4k..4k+3); the
	// scales d, then the minimums m (Q4_1, Q5_1).
	Q4_1: {256, 64, func(q, sc []byte, r int, src []byte) {
		copy(sc[2*r:], src[0:2])
		copy(sc[32+2*r:], src[2:4])
		packChunks(q, r, src[4:20], 4)
	}},
	Q5_0: {320, 32, func(q, sc []byte, r int, src []byte) {
		copy(sc[2*r:], src[0:2])
		packChunks(q, r, src[6:22], 4)
		packFifthBits(q[256:], r, binary.LittleEndian.Uint32(src[2:6]))
	}},
	Q5_1: {320, 64, func(q, sc []byte, r int, src []byte) {
		copy(sc[2*r:], src[0:2])
		copy(sc[32+2*r:], src[2:4])
		packChunks(q, r, src[8:24], 4)
		packFifthBits(q[256:], r, binary.LittleEndian.Uint32(src[4:8]))
	}},
	Q4_K: {2048, 320, packQ4_K},
	// F16, BF16: a "block" is 4 columns; each column is the 16 rows'
	// values (32 bytes).
	F16:  {128, 0, packHalves},
	BF16: {128, 0, packHalves},
	// Q5_K: Q4_K's layout with the qh bytes as one more piece.
	Q5_K: {2560, 320, func(q, sc []byte, r int, src []byte) {
		packKScales(sc, r, src)
		packChunks(q, r, src[48:], 32)
		packChunks(q[2048:], r, src[16:], 8)
	}},
	// Q6_K: the ql bytes as 4 pieces (low nibbles of piece 2h+s are block
	// 4h+s, high nibbles block 4h+s+2), the qh bytes as 2 pieces, then
	// the 16 scales (a byte per row) and d.
	Q6_K: {3072, 288, func(q, sc []byte, r int, src []byte) {
		packChunks(q, r, src, 48) // ql at 0..127, qh at 128..191
		for j := 0; j < 16; j++ {
			sc[16*j+r] = src[192+j]
		}
		copy(sc[256+2*r:], src[208:210])
	}},
}

// packHalves writes 4 columns of 16-bit values: column c of row r at
// 32c+2r.
func packHalves(q, _ []byte, r int, src []byte) {
	for c := 0; c < 4; c++ {
		copy(q[32*c+2*r:][:2], src[2*c:])
	}
}

// packChunks writes the first 4*n bytes of src as n chunks of row r: 4
// bytes of chunk k at 64k+4r. A Q4_0-style block's 16 nibble bytes are 4
// chunks (chunk j's low nibbles elements 4j.., its high nibbles 16+4j..);
// a K-quant super-block's quant bytes are pieces of 8 chunks each.
func packChunks(q []byte, r int, src []byte, n int) {
	for k := range n {
		copy(q[64*k+4*r:][:4], src[4*k:])
	}
}

// packFifthBits writes the fifth bits qh of a Q5 block (bit e: element e)
// as bit k of row r's byte i: element 4k+i.
func packFifthBits(q []byte, r int, qh uint32) {
	for i := 0; i < 4; i++ {
		var b byte
		for k := 0; k < 8; k++ {
			b |= byte(qh>>(4*k+i)&1) << k
		}
		q[4*r+i] = b
	}
}

// A Q4_K super-block: piece c (64 elements: sub-blocks 2c and 2c+1 in the
// low and high nibbles) is 8 chunks, then the 8 sub-blocks' scales (a byte
// per row), their minimums, d and dmin.
func packQ4_K(q, sc []byte, r int, src []byte) {
	packKScales(sc, r, src)
	packChunks(q, r, src[16:], 32)
}

// packKScales writes the scales of a Q4_K/Q5_K super-block.
func packKScales(sc []byte, r int, src []byte) {
	scales, mins := kScaleMins((*[12]byte)(src[4:16]))
	for j := 0; j < 8; j++ {
		sc[16*j+r] = byte(scales[j])
		sc[128+16*j+r] = byte(mins[j])
	}
	copy(sc[256+2*r:], src[0:2])
	copy(sc[288+2*r:], src[2:4])
}

// packPad is the quant byte of a padding row: weight zero.
var packPad = map[Type]byte{Q8_0: 0x80, Q4_0: 0x88, Q4_1: 0x88}

// pack returns m in the packed layout (interleaved where inter is set),
// nil when its type has none.
func pack(m *Matrix, inter bool) *packed {
	f, ok := packFormats[m.Type]
	if !ok || m.Rows == 0 {
		return nil
	}
	if m.Type.BlockSize() == 1 && m.Cols%4 != 0 {
		return nil // the float kernels take columns four at a time
	}
	nb := m.Cols / packBlock(m.Type)
	p := &packed{nb: nb, groups: (m.Rows + packRows - 1) / packRows, qbytes: f.qbytes, inter: inter}
	p.gbytes = nb * (f.qbytes + f.sbytes)
	p.data = alignedBytes(p.groups * p.gbytes)
	rb := m.RowBytes()
	bs := m.Type.RowSize(packBlock(m.Type))
	// Packing reads the whole matrix (from the file's pages): spread the
	// groups over the CPUs, a large model's load then waits on the disk.
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), max(1, p.groups/64))
	for w := range workers {
		wg.Go(func() {
			for g := w * p.groups / workers; g < (w+1)*p.groups/workers; g++ {
				packGroup(m, p, f, g, rb, bs)
			}
		})
	}
	wg.Wait()
	return p
}

// packGroup fills group g of p from m's rows.
func packGroup(m *Matrix, p *packed, f packFormat, g, rb, bs int) {
	nb := p.nb
	grp := p.group(g)
	if pad := packPad[m.Type]; pad != 0 {
		for b := 0; b < nb; b++ {
			q, _ := p.block(grp, f, b)
			for i := range q {
				q[i] = pad
			}
		}
	}
	for r := 0; r < packRows && g*packRows+r < m.Rows; r++ {
		row := m.Data[(g*packRows+r)*rb:]
		for b := 0; b < nb; b++ {
			q, sc := p.block(grp, f, b)
			f.block(q, sc, r, row[b*bs:(b+1)*bs])
		}
	}
}

// packBlock is the elements of a packed block of t: its own block, four
// columns of a float type.
func packBlock(t Type) int {
	if t.BlockSize() == 1 {
		return 4
	}
	return t.BlockSize()
}

// group returns the bytes of group g.
func (p *packed) group(g int) []byte { return p.data[g*p.gbytes : (g+1)*p.gbytes] }

// alignedBytes returns n zero bytes starting on a 64-byte boundary (a
// cache line: the kernels' 512-bit loads then never straddle two). A
// matrix of at least hugePage bytes starts on a huge page and asks the
// kernel for huge pages (hugePages), before anything touches it: decode
// streams every packed byte once per token, and with 4 KiB pages it took
// a TLB walk every 4 KiB and the cores' stream prefetchers stopped at
// each page's end (Zen 5, Q8_0 at 1.2B).
func alignedBytes(n int) []byte {
	align := 64
	if n >= hugePage && hugeAdvice {
		align = hugePage
	}
	b := make([]byte, n+align-1)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & uintptr(align-1))
	b = b[off : off+n : off+n]
	if align == hugePage {
		hugePages(b[:n&^(hugePage-1)])
	}
	return b
}

// HugeBytes is alignedBytes for other packages: n zero bytes on a cache
// line, on huge pages from 2 MiB on (the KV cache pool's slabs).
func HugeBytes(n int) []byte { return alignedBytes(n) }

// hugePage is the size of the huge pages alignedBytes asks for (x86-64's
// and arm64's usual 2 MiB).
const hugePage = 2 << 20

// hugeAdvice turns the huge-page advice on (a variable for the
// benchmarks' A/B).
var hugeAdvice = true

// gemmFunc is a packed kernel: groups groups of packed weights at w (nb
// blocks per row) against tokens whose quants start at qs (qstride bytes
// apart), block scales at d and block sums at s (float S or integer I, as
// the kernel asks; dstride elements apart); token t's output for group g's
// row r goes to out[t*ostride + 16*g + r], masked by mask for the last
// group. gemm4 takes four tokens, gemm1 one.
type gemmFunc func(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

// packKernels are a type's kernels over packed weights.
type packKernels struct {
	gemm4, gemm1 gemmFunc
	// gemm42, where set, is gemm4 on an even number of groups, two at a
	// time (the same bits).
	gemm42 gemmFunc
	// inter marks kernels of the interleaved layout (packed.inter):
	// NewMatrix packs for them so.
	inter bool
	// gemmT[k], where set, takes k tokens (2..maxSmallBatch) in one pass
	// over the weights, their activations interleaved by block
	// (actInterleave), with gemm1's bits for each token (smallParts).
	gemmT [maxSmallBatch + 1]gemmFunc
	// bf16 marks kernels of float weights that take the activations
	// rounded to bfloat16 (toBF16), 2 bytes per column, instead of Act.F.
	bf16 bool
	// s is Act.I, sums of runs of sumsPer quants times sumsMul (actSums),
	// when sumsPer > 0; else Act.S.
	sumsPer int
	sumsMul int32
}

// maxSmallBatch is the most tokens a gemmT kernel takes: a speculative
// verification of up to 7 guesses in one pass, of up to 23 in three.
const maxSmallBatch = 8

// maxSmallParts is the most gemmT passes a product is split into.
const maxSmallParts = 3

// packTable holds the packed kernels of the path in use (nil: none).
// NewMatrix packs the matrices of the types it has.
var packTable map[Type]*packKernels

// toBF16Asm converts the first n&^15 floats where the CPU can, else nil.
var toBF16Asm func(dst *uint16, src *float32, n int)

// toBF16 sets dst[i] to src[i] rounded to bfloat16 as VCVTNEPS2BF16 does
// (bf16RNE).
func toBF16(dst []uint16, src []float32) {
	dst = dst[:len(src)]
	i := 0
	if toBF16Asm != nil && len(src) >= 16 {
		toBF16Asm(&dst[0], &src[0], len(src))
		i = len(src) &^ 15
	}
	for ; i < len(src); i++ {
		dst[i] = bf16RNE(src[i])
	}
}

// bf16RNE rounds f to bfloat16 to nearest even, a denormal to zero and a
// NaN to a quiet NaN (VCVTNEPS2BF16's rules).
func bf16RNE(f float32) uint16 {
	b := math.Float32bits(f)
	switch {
	case b&0x7fffffff > 0x7f800000:
		return uint16(b>>16) | 0x40
	case b&0x7f800000 == 0:
		return uint16(b>>16) & 0x8000
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}

// FloatActivations reports whether the kernels of the path in use multiply
// matrices of float type t with the activations as float32 (true on every
// path but avx512 on CPUs with AVX512-BF16, whose BF16 kernels round them
// to bfloat16); quantized types always quantize them.
func FloatActivations(t Type) bool {
	if t.BlockSize() != 1 {
		return false
	}
	pk := packTable[t]
	return pk == nil || !pk.bf16
}
