// Package kernels holds the tensor types of GGML/GGUF files and the hot
// numeric kernels over them: quantization, dequantization, dot products and
// matrix products, each with a pure-Go version that serves as the oracle for
// the assembly versions.
package kernels

import "fmt"

// Type is a GGML tensor type, numbered as in GGUF files.
type Type uint32

const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q8_1 Type = 9
	Q2_K Type = 10
	Q3_K Type = 11
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	Q8_K Type = 15
	BF16 Type = 30
)

type typeInfo struct {
	name      string
	blockSize int // elements per block
	typeSize  int // bytes per block
	supported bool
}

// typeTable lists every type a GGUF file may name. Types we cannot compute
// with still have a name and a size so that files holding them can be
// inspected and a clear error given.
var typeTable = map[Type]typeInfo{
	F32:  {"F32", 1, 4, true},
	F16:  {"F16", 1, 2, true},
	Q4_0: {"Q4_0", 32, 18, true},
	Q4_1: {"Q4_1", 32, 20, true},
	Q5_0: {"Q5_0", 32, 22, true},
	Q5_1: {"Q5_1", 32, 24, true},
	Q8_0: {"Q8_0", 32, 34, true},
	Q8_1: {"Q8_1", 32, 36, false},
	Q2_K: {"Q2_K", 256, 84, false},
	Q3_K: {"Q3_K", 256, 110, false},
	Q4_K: {"Q4_K", 256, 144, true},
	Q5_K: {"Q5_K", 256, 176, true},
	Q6_K: {"Q6_K", 256, 210, true},
	Q8_K: {"Q8_K", 256, 292, false},
	BF16: {"BF16", 1, 2, true},
}

// String returns the GGML name of the type, such as "Q4_K".
func (t Type) String() string {
	if info, ok := typeTable[t]; ok {
		return info.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Known reports whether t is a GGML type whose block layout we know.
func (t Type) Known() bool { _, ok := typeTable[t]; return ok }

// Supported reports whether the kernels can compute with t.
func (t Type) Supported() bool { return typeTable[t].supported }

// BlockSize is the number of elements in one block of t (1 for float types).
func (t Type) BlockSize() int { return typeTable[t].blockSize }

// FitRow returns t, or llama.cpp's fallback type when rows of n elements
// do not fit t's blocks (Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, then
// F16), as its quantizer chooses.
func (t Type) FitRow(n int) Type {
	for n%t.BlockSize() != 0 {
		switch t {
		case Q4_K:
			t = Q5_0
		case Q5_K:
			t = Q5_1
		case Q6_K:
			t = Q8_0
		default:
			t = F16
		}
	}
	return t
}

// TypeSize is the number of bytes in one block of t.
func (t Type) TypeSize() int { return typeTable[t].typeSize }

// RowSize returns the bytes taken by n elements of t; n must be a multiple of
// the block size (see CheckRow).
func (t Type) RowSize(n int) int { return n / t.BlockSize() * t.TypeSize() }

// CheckRow reports an error when a row of n elements cannot be stored in t.
func (t Type) CheckRow(n int) error {
	info, ok := typeTable[t]
	if !ok {
		return fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	if n%info.blockSize != 0 {
		return fmt.Errorf("row of %d elements is not a multiple of the %s block size %d", n, info.name, info.blockSize)
	}
	return nil
}

// ParseType returns the type with the given GGML name (case-sensitive, "Q4_K").
func ParseType(name string) (Type, bool) {
	for t, info := range typeTable {
		if info.name == name {
			return t, true
		}
	}
	return 0, false
}
