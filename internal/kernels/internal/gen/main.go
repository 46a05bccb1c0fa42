// Command gen writes the kernels package's per-type Go code from one table
// of weight types × instruction-set paths (run by go generate in
// internal/kernels): the pure-Go dispatch table; per architecture the
// declarations of the assembly kernels, the table of each path's kernels
// (asmKernel values, whose Go wrappers in simd_wrap.go are written once for
// every type and path) and the two functions that call the assembly
// kernels directly by path and type (asmDot, asmDot4); and the tables and
// declarations of the kernels over packed weights (gen_pack_amd64.go, from
// packPaths). A new type or path is rows of the tables below plus its
// unpack function (Go) and its assembly.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// isa is an instruction-set path with assembly kernels.
type isa struct {
	Name  string // the path's name in cpuPaths (cpu.go)
	Asm   string // suffix of its assembly functions
	Const string // its asmPath constant (simd_wrap.go)
	Arch  string // its GOARCH
	CPU   string // the golang.org/x/sys/cpu variable of its features (X86, ARM64)
	// Pairs marks a path whose assembly has only four-input kernels that
	// take the weight rows two at a time (i8mm's SMMLA): it keeps Base's
	// one-input kernels, and runs Base's four-input kernel on an odd last
	// row.
	Pairs bool
	Base  *isa
}

// dotprod is the dotprod path's row (the base of i8mm).
var dotprod = isa{Name: "dotprod", Asm: "SDOT", Const: "asmSDOT", Arch: "arm64", CPU: "ARM64"}

var isas = []isa{
	{Name: "avx2", Asm: "AVX2", Const: "asmAVX2", Arch: "amd64", CPU: "X86"},
	{Name: "neon", Asm: "NEON", Const: "asmNEON", Arch: "arm64", CPU: "ARM64"},
	// The dotprod path (SDOT) replaces the neon kernels of its types and
	// keeps the others.
	dotprod,
	// The i8mm path (SMMLA: two weight rows × two activation rows an
	// instruction) replaces the dotprod four-input kernels of its types; a
	// single activation row gains nothing from it, so the one-input kernels
	// stay dotprod's.
	{Name: "i8mm", Asm: "SMMLA", Const: "asmSMMLA", Arch: "arm64", CPU: "ARM64", Pairs: true, Base: &dotprod},
}

// kvPath is an instruction-set path with KV cache kernels (the tile
// decoders, the flash kernels over the cache in place). avx512 is one
// here, though its dot products come from the packed kernels (packPaths).
type kvPath struct {
	Name, Asm, Arch, CPU string
}

var kvPaths = []kvPath{
	{Name: "avx2", Asm: "AVX2", Arch: "amd64", CPU: "X86"},
	{Name: "avx512", Asm: "AVX512", Arch: "amd64", CPU: "X86"},
	{Name: "neon", Asm: "NEON", Arch: "arm64", CPU: "ARM64"},
}

// kvTile is a KV cache type (kernels.KVType KV<Name>) with assembly tile
// decoders, kTile<Name><Asm> and vTile<Name><Asm>, on the paths of ISAs
// (mapped to the extra CPU feature they need on top of the path's own).
type kvTile struct {
	Name string
	ISAs map[string]string
}

var kvTiles = []kvTile{
	{Name: "F32", ISAs: map[string]string{"avx2": "", "avx512": "", "neon": ""}},
	{Name: "F16", ISAs: map[string]string{"avx2": "HasF16C", "avx512": "", "neon": ""}},
	{Name: "BF16", ISAs: map[string]string{"avx2": "", "neon": ""}},
	{Name: "Q8_0", ISAs: map[string]string{"avx2": "", "avx512": "", "neon": ""}},
	{Name: "Q4_0", ISAs: map[string]string{"avx2": "", "neon": ""}},
	{Name: "F8E4M3", ISAs: map[string]string{"avx2": "", "neon": ""}},
}

// Kinds of flash kernels over a KV type's rows in place (flashKV.Kinds).
const (
	// accumKV<Short><Asm>: FlashAccumKV, values by row.
	fkAccum = "accum"
	// flashScoresCol<Short><Asm>: FlashScores of 32 keys by column
	// (avx2's FlashTileKV is these, FlashSoftmax and accum).
	fkScores = "scores"
	// flashTile<K><V><Asm>: FlashTileKV in one kernel, keys by column,
	// for every pair of key and value types of the path with it.
	fkTile = "tile"
	// kTile<Short>Col<Asm>: KTile of keys by column.
	fkCol = "col"
)

// flashKV is a KV cache type whose rows the flash kernels read in place:
// for each path, the kinds of kernels it has (each a macro per block in
// the path's assembly skeletons) and the extra CPU feature they need.
type flashKV struct {
	Name  string // the KVType constant's suffix
	Short string // its name in the kernels' names
	Paths map[string]flashKinds
}

type flashKinds struct {
	Kinds []string
	Need  string
}

var flashKVs = []flashKV{
	{Name: "F16", Short: "F16", Paths: map[string]flashKinds{
		"avx2":   {Kinds: []string{fkAccum, fkScores}, Need: "HasF16C"},
		"avx512": {Kinds: []string{fkAccum, fkTile}},
		"neon":   {Kinds: []string{fkAccum}},
	}},
	{Name: "Q8_0", Short: "Q8", Paths: map[string]flashKinds{
		"avx2":   {Kinds: []string{fkAccum, fkScores, fkCol}, Need: "HasF16C"},
		"avx512": {Kinds: []string{fkAccum, fkTile, fkCol}},
		"neon":   {Kinds: []string{fkAccum}},
	}},
}

// arches are the architectures with assembly kernels, one generated file
// each.
var arches = []string{"amd64", "arm64"}

// Kinds of weight types, by the arguments their assembly kernels take.
const (
	float = "float" // float weights against float activations (Act.F)
	qd    = "qd"    // quantized: activation quants and block scales (Act.Qs, D)
	qds   = "qds"   // quantized with minimums or offsets: also the block sums (Act.S)
	qdb   = "qdb"   // quantized with 16-element sub-blocks: the sums of 16 quants (Act.B)
)

// wtype is a weight type: a row of the table.
type wtype struct {
	Name  string // the Type constant
	Kind  string
	Size  int    // float: bytes per element
	Ptr   string // float: the assembly's weight pointer type
	Elems int    // quantized: elements per (super-)block
	Bytes int    // quantized: bytes per (super-)block
	NB    string // quantized: the assembly's name for the block count
	// ISAs maps the paths with kernels for this type to the extra CPU
	// feature they need on top of the path's own ("" none).
	ISAs map[string]string
}

var types = []wtype{
	{Name: "F32", Kind: float, Size: 4, Ptr: "*float32", ISAs: map[string]string{"avx2": "", "neon": ""}},
	{Name: "F16", Kind: float, Size: 2, Ptr: "*byte", ISAs: map[string]string{"avx2": "HasF16C", "neon": ""}},
	{Name: "BF16", Kind: float, Size: 2, Ptr: "*byte", ISAs: map[string]string{"avx2": "", "neon": ""}},
	{Name: "Q4_0", Kind: qds, Elems: 32, Bytes: 18, NB: "nb", ISAs: map[string]string{"avx2": "", "neon": "", "dotprod": "", "i8mm": ""}},
	{Name: "Q4_1", Kind: qds, Elems: 32, Bytes: 20, NB: "nb", ISAs: map[string]string{"avx2": "", "neon": "", "dotprod": "", "i8mm": ""}},
	{Name: "Q5_0", Kind: qds, Elems: 32, Bytes: 22, NB: "nb", ISAs: map[string]string{"avx2": "", "neon": "", "dotprod": "", "i8mm": ""}},
	{Name: "Q5_1", Kind: qds, Elems: 32, Bytes: 24, NB: "nb", ISAs: map[string]string{"avx2": "", "neon": "", "dotprod": "", "i8mm": ""}},
	{Name: "Q8_0", Kind: qd, Elems: 32, Bytes: 34, NB: "nb", ISAs: map[string]string{"avx2": "", "neon": "", "dotprod": "", "i8mm": ""}},
	{Name: "Q4_K", Kind: qds, Elems: 256, Bytes: 144, NB: "nsb", ISAs: map[string]string{"avx2": "", "neon": "", "dotprod": "", "i8mm": ""}},
	{Name: "Q5_K", Kind: qds, Elems: 256, Bytes: 176, NB: "nsb", ISAs: map[string]string{"avx2": "", "neon": "", "dotprod": "", "i8mm": ""}},
	{Name: "Q6_K", Kind: qdb, Elems: 256, Bytes: 210, NB: "nsb", ISAs: map[string]string{"avx2": "", "neon": "", "dotprod": "", "i8mm": ""}},
}

// Sub is the number of activation blocks of 32 per weight block.
func (t wtype) Sub() int { return t.Elems / 32 }

const header = "// Code generated by internal/gen (go generate in internal/kernels); DO NOT EDIT.\n\n"

var genericTmpl = template.Must(template.New("generic").Parse(header + `package kernels

// genericKernels returns the pure-Go kernel of every supported type. dotTable
// is initialised from it as a package variable, so it is complete before any
// init function (the assembly files' included) runs.
func genericKernels() map[Type]*typeKernels {
	return map[Type]*typeKernels{
{{- range .}}
		{{.Name}}: {dot: dot{{.Name}}, dot4: {{if eq .Kind "float"}}dot4{{.Name}}{{else}}dot4Of(unpack{{.Name}}){{end}}},
{{- end}}
	}
}
`))

// asmTypesTmpl writes the table of what each type's assembly kernels take
// (asmKernel, simd_wrap.go).
var asmTypesTmpl = template.Must(template.New("asmtypes").Parse(header + `//go:build (amd64 || arm64) && !purego

package kernels

// asmTypes holds what the assembly kernels of each type take.
var asmTypes = map[Type]asmKernel{
{{- range .}}
	{{.Name}}: {{.AsmKernel}},
{{- end}}
}
`))

// AsmKernel is the type's asmKernel literal (without its paths).
func (t wtype) AsmKernel() string {
	kind := map[string]string{float: "kindFloat", qd: "kindQD", qds: "kindQDS", qdb: "kindQDB"}[t.Kind]
	if t.Kind == float {
		return fmt.Sprintf("{t: %s, kind: %s, size: %d, elems: 1}", t.Name, kind, t.Size)
	}
	return fmt.Sprintf("{t: %s, kind: %s, size: %d, elems: %d}", t.Name, kind, t.Bytes, t.Elems)
}

// archTmpl writes an architecture's file: its paths' tables, the
// kernels' direct callers and their declarations.
var archTmpl = template.Must(template.New("arch").Funcs(template.FuncMap{"comment": comment}).Parse(header + `//go:build {{.Arch}} && !purego

package kernels

{{if or .Unsafe .CPU}}import (
{{- if .Unsafe}}
	"unsafe"
{{end}}
{{- if .CPU}}
	"golang.org/x/sys/cpu"
{{end -}}
)
{{end}}
// The assembly paths of {{.Arch}} (asmKernel's paths).
const (
{{- range $i, $p := .ISAs}}
	{{$p.Const}}{{if eq $i 0}} asmPath = iota + 1{{end}}
{{- end}}
)
{{range $p := .Paths}}
{{comment .Doc}}
func {{.ISA.Name}}Kernels() map[Type]typeKernels {
	m := asmKernelsOf({{$p.On}}{{range .Types}}{{if not .Need}}, {{.T.Name}}{{end}}{{end}})
{{- range .Types}}{{if .Need}}
	if cpu.{{.CPU}}.{{.Need}} {
		m[{{.T.Name}}] = asmTypes[{{.T.Name}}].on({{$p.On}}).kernels()
	}
{{- end}}{{end}}
	return m
}
{{end}}
// asmDot runs path p's one-input assembly kernel of type t (the arguments
// of t's kind; nil for the others).
func asmDot(p asmPath, t Type, w *byte, x *float32, qs *int8, d, s *float32, b *int16, n, rows int, out *float32) {
	switch p {
{{- range .Paths}}{{if not .ISA.Pairs}}
	case {{.ISA.Const}}:
		switch t {
{{- range .Types}}
		case {{.T.Name}}:
			{{.Call1}}
{{- end}}
		default:
			panic(noAsm(p, t))
		}
{{- end}}{{end}}
	default:
		panic(noAsm(p, t))
	}
}

// asmDot4 runs path p's four-input assembly kernel of type t.
func asmDot4(p asmPath, t Type, w *byte, x *[4]*float32, qs *[4]*int8, d, s *[4]*float32, b *[4]*int16, n, rows int, out *float32, stride int) {
	switch p {
{{- range .Paths}}
	case {{.ISA.Const}}:
		switch t {
{{- range .Types}}
		case {{.T.Name}}:
			{{.Call4}}
{{- end}}
		default:
			panic(noAsm(p, t))
		}
{{- end}}
	default:
		panic(noAsm(p, t))
	}
}
{{range .KV}}{{$p := .}}{{if .Tiles}}
// {{.Path.Name}}TileKernels returns the {{.Path.Name}} path's KV tile decoders
// (nil: the Go decoder's).
func {{.Path.Name}}TileKernels() (k, v [NumKVTypes]tileAsm) {
{{- range .Tiles}}
	{{if .Need}}if cpu.{{.CPU}}.{{.Need}} {
		{{end}}k[KV{{.Name}}], v[KV{{.Name}}] = kTile{{.Name}}{{.Asm}}, vTile{{.Name}}{{.Asm}}
	{{- if .Need}}
	}{{end}}
{{- end}}
	return k, v
}
{{range .Tiles}}
//go:noescape
func kTile{{.Name}}{{.Asm}}(dst *float32, ld int, src *byte, stride, w, cnt int)

//go:noescape
func vTile{{.Name}}{{.Asm}}(dst *float32, ld int, src *byte, stride, w, cnt int)
{{end}}{{end}}{{if .Flash}}
// {{.Path.Name}}FlashKV returns the {{.Path.Name}} path's flash kernels over
// the cache's rows in place by KV type (nil: none).
func {{.Path.Name}}FlashKV() (f flashKVAsm) {
{{- if .Need}}
	if !cpu.{{.Path.CPU}}.{{.Need}} {
		return f
	}
{{- end}}
{{- range .Flash}}{{$t := .}}
{{- range .Kinds}}{{if eq . "accum"}}
	f.accum[KV{{$t.Name}}] = accumKV{{$t.Short}}{{$p.Path.Asm}}
{{- else if eq . "scores"}}
	f.scores[KV{{$t.Name}}] = flashScoresCol{{$t.Short}}{{$p.Path.Asm}}
{{- else if eq . "col"}}
	f.col[KV{{$t.Name}}] = kTile{{$t.Short}}Col{{$p.Path.Asm}}
{{- end}}{{end}}
{{- end}}
{{- range .Pairs}}
	f.tile[KV{{.K.Name}}][KV{{.V.Name}}] = flashTile{{.K.Short}}{{.V.Short}}{{$p.Path.Asm}}
{{- end}}
	return f
}
{{range .Flash}}{{$t := .}}{{range .Kinds}}{{if eq . "accum"}}
//go:noescape
func accumKV{{$t.Short}}{{$p.Path.Asm}}(o *float32, ldo int, p *float32, ldp int, v *byte, stride, nq, nk, vd int)
{{else if eq . "scores"}}
//go:noescape
func flashScoresCol{{$t.Short}}{{$p.Path.Asm}}(s, q *float32, ldq int, k *uint16, kstride, nq, hd int, scale float32)
{{else if eq . "col"}}
//go:noescape
func kTile{{$t.Short}}Col{{$p.Path.Asm}}(dst *float32, ld int, src *uint16, stride, blocks, cnt int)
{{end}}{{end}}{{end}}{{range .Pairs}}
//go:noescape
func flashTile{{.K.Short}}{{.V.Short}}{{$p.Path.Asm}}(s, q *float32, ldq int, k0, k1 *uint16, kstride int, v0, v1 *uint16, vstride int, m, l, o *float32, ldo int, scale float32, pk0, pk1, pv0, pv1 *uint16)
{{end}}{{end}}{{end}}
{{- range .Paths}}{{$p := .}}
// The {{.ISA.Name}} path's kernels ({{.ISA.Asm}}).
{{range .Types}}{{if not $p.ISA.Pairs}}
//go:noescape
func {{.Decl1}}
{{end}}
//go:noescape
func {{.Decl4}}
{{end}}{{end}}`))

// pathData is a path's part of its architecture's file.
type pathData struct {
	ISA   isa
	Doc   string
	Types []isaType
}

// kvPathData is a KV path's part of its architecture's file: its tile
// decoders, and its flash kernels by type (Flash) and pair of types
// (Pairs: the types with fkTile kernels, keys by values), all needing
// Need.
type kvPathData struct {
	Path  kvPath
	Tiles []tileType
	Flash []flashType
	Pairs []struct{ K, V flashType }
	Need  string
}

// flashType is a KV type's flash kernels on a path.
type flashType struct {
	Name, Short string
	Kinds       []string
}

// tileType is a KV type's tile decoders on a path.
type tileType struct {
	Name, Asm, CPU, Need string
}

// On is the path's asmKernel paths: one-input, four-input, odd row.
func (p pathData) On() string {
	if p.ISA.Pairs {
		return p.ISA.Base.Const + ", " + p.ISA.Const + ", " + p.ISA.Base.Const
	}
	return p.ISA.Const + ", " + p.ISA.Const + ", asmNone"
}

type isaType struct {
	T    wtype
	ISA  isa
	Need string
}

// CPU is the cpu package's variable of the path's features.
func (t isaType) CPU() string { return t.ISA.CPU }

// args are the arguments of t's kernels after w, x or qs (d, s, b as its
// kind takes them), one-input (four false) or four-input.
func (t isaType) args(four bool) (decl, call string) {
	p := "*"
	if four {
		p = "*[4]*"
	}
	switch t.T.Kind {
	case qd:
		return "d " + p + "float32, ", "d, "
	case qds:
		return "d, s " + p + "float32, ", "d, s, "
	case qdb:
		return "d " + p + "float32, b " + p + "int16, ", "d, b, "
	}
	return "", ""
}

// Decl1 and Decl4 are the assembly kernels' declarations (without func).
func (t isaType) Decl1() string {
	n := "dot" + t.T.Name + t.ISA.Asm
	if t.T.Kind == float {
		return n + "(w " + t.T.Ptr + ", x *float32, n, rows int, out *float32)"
	}
	a, _ := t.args(false)
	return n + "(w *byte, qs *int8, " + a + t.T.NB + " int, tab *float32, rows int, out *float32)"
}

func (t isaType) Decl4() string {
	n := "dot4" + t.T.Name + t.ISA.Asm
	if t.T.Kind == float {
		return n + "(w " + t.T.Ptr + ", x *[4]*float32, n, rows int, out *float32, stride int)"
	}
	a, _ := t.args(true)
	return n + "(w *byte, qs *[4]*int8, " + a + t.T.NB + " int, tab *float32, rows int, out *float32, stride int)"
}

// wptr is the weights' argument of a float kernel.
func (t isaType) wptr() string {
	if t.T.Ptr == "*float32" {
		return "(*float32)(unsafe.Pointer(w))"
	}
	return "w"
}

// Call1 and Call4 are asmDot's and asmDot4's calls of the kernels.
func (t isaType) Call1() string {
	n := "dot" + t.T.Name + t.ISA.Asm
	if t.T.Kind == float {
		return n + "(" + t.wptr() + ", x, n, rows, out)"
	}
	_, a := t.args(false)
	return n + "(w, qs, " + a + "n, &f16Table[0], rows, out)"
}

func (t isaType) Call4() string {
	n := "dot4" + t.T.Name + t.ISA.Asm
	if t.T.Kind == float {
		return n + "(" + t.wptr() + ", x, n, rows, out, stride)"
	}
	_, a := t.args(true)
	return n + "(w, qs, " + a + "n, &f16Table[0], rows, out, stride)"
}

// packPath is a path's table of kernels over packed weights (pack.go):
// the map Var of its types, each with its four-token and one-token
// kernels gemm4<type><Suffix>, gemm1<type><Suffix>, gemm42<type><Suffix>
// (two groups at a time) where Pair is set, and gemmT2..8<type><Suffix>
// (2-8 tokens in one pass, in the array Small) where Small is set.
type packPath struct {
	Var, Suffix, Doc string
	Types            []packType
}

type packType struct {
	Name   string
	Suffix string // the kernels' suffix when it is not the path's
	Pair   bool
	Ref    string // the map whose entry this one reuses (no kernels of its own)
	Small  string // the array of its small-batch kernels (packKernels.gemmT), if any
	Inter  bool   // its kernels read the interleaved layout (packKernels.inter)
	NoSums bool   // its kernels read no activation sums though packSums has the type
}

// SmallKs are the token counts of the small-batch kernels (2..maxSmallBatch).
func (t packType) SmallKs() []int { return []int{2, 3, 4, 5, 6, 7, 8} }

// packSums are the types whose packed kernels take Act.I (sums of runs
// of sumsPer quants times sumsMul) instead of Act.S.
var packSums = map[string]string{"Q8_0": ", sumsPer: 32, sumsMul: 128", "Q6_K": ", sumsPer: 16, sumsMul: 32"}

var packPaths = []packPath{
	{Var: "vnniPackKernels", Suffix: "VNNI", Doc: "the avx512 path's kernels over packed weights (simd_pack_amd64.s): VPDPBUSD, and for F16/BF16 conversion and FMA.",
		Types: []packType{{Name: "Q8_0", Pair: true}, {Name: "Q4_0", Pair: true}, {Name: "Q4_1", Pair: true}, {Name: "Q5_0", Pair: true}, {Name: "Q5_1", Pair: true},
			{Name: "Q4_K", Pair: true}, {Name: "Q5_K", Pair: true}, {Name: "Q6_K"}, {Name: "F16", Suffix: "AVX512"}, {Name: "BF16", Suffix: "AVX512"}}},
	{Var: "bwPackKernels", Suffix: "BW", Doc: "the avx512bw path's (simd_packbw_amd64.s): the VNNI ones' layouts and results without VPDPBUSD, for every type but Q8_0 (whose w+128 would overflow VPMADDUBSW's int16 pairs: it keeps the AVX2 kernels there).",
		Types: []packType{{Name: "Q4_0"}, {Name: "Q4_1"}, {Name: "Q5_0"}, {Name: "Q5_1"}, {Name: "Q4_K"}, {Name: "Q5_K"}, {Name: "Q6_K"},
			{Name: "F16", Ref: "vnniPackKernels"}, {Name: "BF16", Ref: "vnniPackKernels"}}},
	{Var: "avxvnniPackKernels", Suffix: "AVXVNNI", Doc: "the avxvnni path's (simd_packy_amd64.s): the avx512 path's layouts and bits in 256-bit registers with the VEX VPDPBUSD, for the quantized types but Q6_K. Q6_K, F16 and BF16 keep the AVX2 kernels there: the one-token Q6_K kernel over the packed layout (its 6-bit unpack for 8 rows per register, without AVX-512's VPTERNLOGD) decoded at 0.5-0.65x the AVX2 one (Zen 5, 134M Q6_K model; 0.75x with both halves of a chunk per step), where prefill gained 1.6-1.8x.",
		Types: []packType{{Name: "Q8_0"}, {Name: "Q4_0"}, {Name: "Q4_1"}, {Name: "Q5_0"}, {Name: "Q5_1"}, {Name: "Q4_K"}, {Name: "Q5_K"}}},
	{Var: "avx2PackKernels", Suffix: "AVX2P", Doc: "the avx2 path's, where the CPU's vector units are 256 bits wide and it converts halves (avx2Pack): Q8_0's (simd_packa_amd64.s: VPSIGNB, VPMADDUBSW and VPMADDWD on the interleaved layout, the file kernels' bits; it reads no sums), the other quantized types' (simd_packya_amd64.s: int16 sums, scaled by VPMADDWD or summed by it). F16 and BF16 keep the kernels over the file's rows.",
		Types: []packType{{Name: "Q8_0", Small: "avx2SmallBatch", Inter: true, NoSums: true}, {Name: "Q4_0"}, {Name: "Q4_1"}, {Name: "Q5_0"}, {Name: "Q5_1"}, {Name: "Q4_K"}, {Name: "Q5_K"}, {Name: "Q6_K", Inter: true}}},
}

// Fn is the kernels' name suffix of packed type t on path p.
func (t packType) Fn(p packPath) string {
	if t.Suffix != "" {
		return t.Name + t.Suffix
	}
	return t.Name + p.Suffix
}

func (t packType) Sums() string {
	if t.NoSums {
		return ""
	}
	return packSums[t.Name]
}

// comment wraps text as // lines of at most 76 columns.
func comment(text string) string {
	var b strings.Builder
	line := "//"
	for _, w := range strings.Fields(text) {
		if len(line)+1+len(w) > 76 && line != "//" {
			b.WriteString(line + "\n")
			line = "//"
		}
		line += " " + w
	}
	b.WriteString(line)
	return b.String()
}

var packTmpl = template.Must(template.New("pack").Funcs(template.FuncMap{"comment": comment}).Parse(header + `//go:build amd64 && !purego

package kernels

import "unsafe"
{{range $p := .}}
{{comment (print $p.Var " are " $p.Doc)}}
var {{$p.Var}} = map[Type]*packKernels{
{{- range $p.Types}}
	{{.Name}}: {{if .Ref}}{{.Ref}}[{{.Name}}]{{else}}{gemm4: gemm4{{.Fn $p}}, gemm1: gemm1{{.Fn $p}}{{if .Pair}}, gemm42: gemm42{{.Fn $p}}{{end}}{{if .Small}}, gemmT: {{.Small}}{{end}}{{.Sums}}{{if .Inter}}, inter: true{{end}}}{{end}},
{{- end}}
}
{{range $p.Types}}{{if not .Ref}}
//go:noescape
func gemm4{{.Fn $p}}(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)

//go:noescape
func gemm1{{.Fn $p}}(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
{{if .Pair}}
//go:noescape
func gemm42{{.Fn $p}}(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
{{end}}{{if .Small}}{{$t := .}}
// {{.Small}} are {{$p.Var}}' {{.Name}} kernels of 2-8 tokens.
var {{.Small}} = [maxSmallBatch + 1]gemmFunc{ {{- range .SmallKs}}{{.}}: gemmT{{.}}{{$t.Fn $p}}, {{end}}}
{{range .SmallKs}}
//go:noescape
func gemmT{{.}}{{$t.Fn $p}}(w *byte, nb, groups int, qs *int8, qstride int, d *float32, s unsafe.Pointer, dstride int, out *float32, ostride int, mask int)
{{end}}{{end}}{{end}}{{end}}{{end}}`))

// archFile returns the generated file of architecture arch.
func archFile(arch string) ([]byte, error) {
	data := struct {
		Arch        string
		ISAs        []isa
		Paths       []pathData
		KV          []kvPathData
		Unsafe, CPU bool // imports
	}{Arch: arch}
	for _, is := range isas {
		if is.Arch != arch {
			continue
		}
		pd := pathData{ISA: is, Doc: is.Name + "Kernels returns the kernels of the " + is.Name + " path."}
		if is.Pairs {
			pd.Doc = is.Name + "Kernels returns the kernels of the " + is.Name + " path: the four-input kernels over pairs of weight rows (the " + is.Base.Name + " path's on an odd last row), and the " + is.Base.Name + " path's one-input kernels."
		}
		for _, t := range types {
			need, ok := t.ISAs[is.Name]
			if !ok {
				continue
			}
			if is.Pairs && (t.Kind == float || need != "") {
				return nil, fmt.Errorf("path %s: type %s: a pairs path has quantized types without extra features only", is.Name, t.Name)
			}
			pd.Types = append(pd.Types, isaType{T: t, ISA: is, Need: need})
			data.Unsafe = data.Unsafe || t.Ptr == "*float32"
			data.CPU = data.CPU || need != ""
		}
		data.ISAs = append(data.ISAs, is)
		data.Paths = append(data.Paths, pd)
	}
	for _, kp := range kvPaths {
		if kp.Arch != arch {
			continue
		}
		kd := kvPathData{Path: kp}
		for _, kt := range kvTiles {
			if need, ok := kt.ISAs[kp.Name]; ok {
				kd.Tiles = append(kd.Tiles, tileType{Name: kt.Name, Asm: kp.Asm, CPU: kp.CPU, Need: need})
				data.CPU = data.CPU || need != ""
			}
		}
		var tiles []flashType
		for i, f := range flashKVs {
			k, ok := f.Paths[kp.Name]
			if !ok {
				continue
			}
			if i > 0 && len(kd.Flash) > 0 && k.Need != kd.Need {
				return nil, fmt.Errorf("path %s: type %s: the flash kernels of a path need one feature", kp.Name, f.Name)
			}
			kd.Need = k.Need
			data.CPU = data.CPU || k.Need != ""
			ft := flashType{Name: f.Name, Short: f.Short, Kinds: k.Kinds}
			kd.Flash = append(kd.Flash, ft)
			for _, kind := range k.Kinds {
				if kind == fkTile {
					tiles = append(tiles, ft)
				}
			}
		}
		for _, kt := range tiles {
			for _, vt := range tiles {
				kd.Pairs = append(kd.Pairs, struct{ K, V flashType }{kt, vt})
			}
		}
		data.KV = append(data.KV, kd)
	}
	var b bytes.Buffer
	if err := archTmpl.Execute(&b, data); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// generate returns the generated files by name.
func generate() (map[string][]byte, error) {
	files := map[string][]byte{}
	var b bytes.Buffer
	if err := genericTmpl.Execute(&b, types); err != nil {
		return nil, err
	}
	files["gen_generic.go"] = b.Bytes()
	var tb bytes.Buffer
	if err := asmTypesTmpl.Execute(&tb, types); err != nil {
		return nil, err
	}
	files["gen_asm.go"] = tb.Bytes()
	for _, arch := range arches {
		src, err := archFile(arch)
		if err != nil {
			return nil, err
		}
		files["gen_asm_"+arch+".go"] = src
	}
	var pb bytes.Buffer
	if err := packTmpl.Execute(&pb, packPaths); err != nil {
		return nil, err
	}
	files["gen_pack_amd64.go"] = pb.Bytes()
	for name, src := range files {
		out, err := format.Source(src)
		if err != nil {
			return nil, fmt.Errorf("%s: %v\n%s", name, err, src)
		}
		files[name] = out
	}
	return files, nil
}

// write generates the files into dir.
func write(dir string) error {
	files, err := generate()
	if err != nil {
		return err
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), src, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	dir := flag.String("dir", ".", "the kernels package's directory")
	flag.Parse()
	if err := write(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
