// Package gguf reads and writes GGUF model files (versions 2 and 3), the
// format of llama.cpp. Tensor data stays in a read-only memory map; only the
// metadata is decoded into Go values.
package gguf

import (
	"fmt"
	"math"

	"mistralrs/internal/kernels"
)

// File is an open GGUF file, or all shards of a split model seen as one.
type File struct {
	Path    string // first shard's path
	Version uint32
	KV      []KV         // file order (first shard's metadata)
	Tensors []TensorInfo // file order, all shards

	tensorIndex map[string]int
	maps        [][]byte   // one mmap per shard, released by Close
	mapped      []*mapping // the files behind maps (watch.go)
}

// KV is one metadata entry. Value holds uint8, int8, uint16, int16, uint32,
// int32, uint64, int64, float32, float64, bool or string; arrays are slices
// of those types, and arrays of arrays are []any.
type KV struct {
	Key   string
	Value any
}

// TensorInfo describes one tensor. Dims are in GGML order: Dims[0] is the
// number of elements in a row.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   kernels.Type
	Offset uint64 // from the start of its shard's data section
	Data   []byte // the tensor's bytes inside the mmap; invalid after Close

	// Released: the pages of Data were handed back (File.Release); they
	// are read from the file again if Data is touched.
	Released bool
}

// Elements returns the number of elements (1 for a tensor with no dims).
func (t *TensorInfo) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Close releases the memory maps; the Data of every tensor becomes invalid.
func (f *File) Close() error {
	var first error
	for _, mp := range f.mapped {
		untrack(mp)
	}
	f.mapped = nil
	for _, m := range f.maps {
		if err := munmap(m); err != nil && first == nil {
			first = fmt.Errorf("%s: %v", f.Path, err)
		}
	}
	f.maps = nil
	for i := range f.Tensors {
		f.Tensors[i].Data = nil
	}
	return first
}

// Get returns the value of a metadata key.
func (f *File) Get(key string) (any, bool) {
	// A linear scan: files have a few dozen keys and lookups happen at load.
	for i := range f.KV {
		if f.KV[i].Key == key {
			return f.KV[i].Value, true
		}
	}
	return nil, false
}

// String returns a string value.
func (f *File) String(key string) (string, bool) {
	v, _ := f.Get(key)
	s, ok := v.(string)
	return s, ok
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, bool) {
	v, _ := f.Get(key)
	b, ok := v.(bool)
	return b, ok
}

// Uint returns an integer value of any type if it is not negative.
func (f *File) Uint(key string) (uint64, bool) {
	v, _ := f.Get(key)
	if u, ok := v.(uint64); ok {
		return u, true
	}
	i, ok := toInt(v)
	return uint64(i), ok && i >= 0
}

// Int returns an integer value of any type that fits in an int64.
func (f *File) Int(key string) (int64, bool) {
	v, _ := f.Get(key)
	return toInt(v)
}

// Float returns a numeric value of any type.
func (f *File) Float(key string) (float64, bool) {
	v, _ := f.Get(key)
	return toFloat(v)
}

// Strings returns a string array.
func (f *File) Strings(key string) ([]string, bool) {
	v, _ := f.Get(key)
	s, ok := v.([]string)
	return s, ok
}

// Float32s returns a numeric array as float32 values. A []float32 is
// returned as stored, so callers must not modify it.
func (f *File) Float32s(key string) ([]float32, bool) {
	v, _ := f.Get(key)
	switch x := v.(type) {
	case []float32:
		return x, true
	case []float64:
		return convert[float32](x), true
	case []uint64:
		return convert[float32](x), true
	}
	i, ok := ints(v)
	return convert[float32](i), ok
}

// Int32s returns an integer array as int32 values; it fails when a value
// does not fit.
func (f *File) Int32s(key string) ([]int32, bool) {
	v, _ := f.Get(key)
	if x, ok := v.([]int32); ok {
		return x, true
	}
	i, ok := ints(v)
	for _, x := range i {
		if x < math.MinInt32 || x > math.MaxInt32 {
			return nil, false
		}
	}
	return convert[int32](i), ok
}

// Tensor returns the tensor with the given name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	if f.tensorIndex == nil { // a File built by hand rather than by Open
		for i := range f.Tensors {
			if f.Tensors[i].Name == name {
				return &f.Tensors[i], true
			}
		}
		return nil, false
	}
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Architecture returns general.architecture, or "" when it is absent.
func (f *File) Architecture() string {
	s, _ := f.String("general.architecture")
	return s
}

func toInt(v any) (int64, bool) {
	switch x := v.(type) {
	case uint8:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case int16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case int32:
		return int64(x), true
	case uint64:
		return int64(x), x <= math.MaxInt64
	case int64:
		return x, true
	}
	return 0, false
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	case uint64:
		return float64(x), true
	}
	i, ok := toInt(v)
	return float64(i), ok
}

// ints returns an integer array as int64 values.
func ints(v any) ([]int64, bool) {
	switch x := v.(type) {
	case []uint8:
		return convert[int64](x), true
	case []int8:
		return convert[int64](x), true
	case []uint16:
		return convert[int64](x), true
	case []int16:
		return convert[int64](x), true
	case []uint32:
		return convert[int64](x), true
	case []int32:
		return convert[int64](x), true
	case []int64:
		return x, true
	case []uint64:
		for _, u := range x {
			if u > math.MaxInt64 {
				return nil, false
			}
		}
		return convert[int64](x), true
	}
	return nil, false
}

type number interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | uint64 | int64 | float32 | float64
}

func convert[D, S number](s []S) []D {
	out := make([]D, len(s))
	for i, x := range s {
		out[i] = D(x)
	}
	return out
}
