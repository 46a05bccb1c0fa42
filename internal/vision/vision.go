// Package vision turns images into embedding rows for a text model: it
// loads llama.cpp's multimodal projector files ("mmproj" GGUF, architecture
// clip), decodes images with limits read from their headers, preprocesses
// them the way llama.cpp does, and runs the projector's vision encoder in
// slices (Encoding) that the engine schedules inside its steps.
//
// Each projector type (clip.projector_type) is one entry of a registry,
// declared in the type's own file (gemma3.go).
package vision

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"image"
	"slices"
	"strings"

	"mistralrs/internal/gguf"
	"mistralrs/internal/kernels"
)

// kind is one projector type of the registry: how to build its model from
// an open mmproj file.
type kind struct {
	load func(f *gguf.File) (model, error)
}

// kinds is the registry by clip.projector_type; each type's file adds its
// entry with register.
var kinds = map[string]kind{}

// register adds projector type name to the registry (from an init of the
// type's own file).
func register(name string, k kind) {
	if _, dup := kinds[name]; dup {
		panic("vision: projector type registered twice: " + name)
	}
	kinds[name] = k
}

// Types returns the supported clip.projector_type values, sorted.
func Types() []string {
	out := make([]string, 0, len(kinds))
	for name := range kinds {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// model is what a projector type implements.
type model interface {
	embd() int       // width of the output rows
	nonCausal() bool // image rows attend to the whole image
	markers() (before, after string)
	// prepare preprocesses an image (rgb: its 8-bit RGB pixels); maxEdge
	// > 0 caps the longer side where the type resizes freely.
	prepare(img *rgbImage, maxEdge int) (*Prepared, error)
	// units lays out the encoding of pr as a run of work units.
	units(pr *Prepared) *Encoding
}

// Projector is a loaded mmproj file and the model of its projector type.
// It is immutable after Load and safe for concurrent use; Close it when no
// Encoding of it runs any more.
type Projector struct {
	path, typ string
	f         *gguf.File
	m         model
	identity  []byte
}

// Load opens an mmproj GGUF (general.architecture "clip") and builds its
// projector from the registry by clip.projector_type. Errors are one line
// naming the file; an unknown projector type lists the supported ones.
func Load(path string) (*Projector, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	p, err := fromFile(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return p, nil
}

// fromFile checks f's header keys and builds its projector type's model.
func fromFile(f *gguf.File) (p *Projector, err error) {
	// The weights are memory-mapped: a file cut short under the map faults
	// while they are copied or converted, which must be an error, not a crash.
	defer func() {
		if r := recover(); r != nil {
			if ferr := gguf.Fault(r); ferr != nil {
				p, err = nil, fmt.Errorf("%s: %v", f.Path, ferr)
				return
			}
			panic(r)
		}
	}()
	if arch := f.Architecture(); arch != "clip" {
		return nil, fmt.Errorf("%s: general.architecture is %q, not \"clip\": not a multimodal projector (mmproj) file", f.Path, arch)
	}
	if t, ok := f.String("general.type"); ok && t != "mmproj" {
		return nil, fmt.Errorf("%s: general.type is %q, not \"mmproj\"", f.Path, t)
	}
	if has, ok := f.Bool("clip.has_vision_encoder"); ok && !has {
		return nil, fmt.Errorf("%s: the projector has no vision encoder (clip.has_vision_encoder is false)", f.Path)
	}
	typ, ok := f.String("clip.projector_type")
	if !ok {
		return nil, fmt.Errorf("%s: missing clip.projector_type (supported: %s)", f.Path, strings.Join(Types(), ", "))
	}
	k, ok := kinds[typ]
	if !ok {
		return nil, fmt.Errorf("%s: unknown projector type %q (supported: %s)", f.Path, typ, strings.Join(Types(), ", "))
	}
	m, err := k.load(f)
	if err != nil {
		return nil, err
	}
	return &Projector{path: f.Path, typ: typ, f: f, m: m, identity: identity(f)}, nil
}

// identity digests what the embeddings come from (path, projector type,
// name, every tensor's name, type, size and first bytes), as the loader's
// model identity does: cheap, no tensor is read past 64 bytes.
func identity(f *gguf.File) []byte {
	h := sha256.New()
	h.Write([]byte(f.Path))
	h.Write([]byte{0})
	h.Write([]byte(f.Architecture()))
	if typ, ok := f.String("clip.projector_type"); ok {
		h.Write([]byte(typ))
	}
	if name, ok := f.String("general.name"); ok {
		h.Write([]byte(name))
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		h.Write([]byte(t.Name))
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(t.Type)))
		h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(t.Data))))
		h.Write(t.Data[:min(len(t.Data), 64)])
	}
	return h.Sum(nil)
}

// Close releases the file's memory map: no Encoding of p may run after it.
func (p *Projector) Close() error { return p.f.Close() }

// Type returns the projector type ("gemma3", ...).
func (p *Projector) Type() string { return p.typ }

// Path returns the mmproj file's path.
func (p *Projector) Path() string { return p.path }

// Identity returns a digest of the projector; equal digests give equal
// embeddings for equal preprocessed images.
func (p *Projector) Identity() []byte { return slices.Clone(p.identity) }

// Embd returns the width of the output rows: the text model's n_embd.
func (p *Projector) Embd() int { return p.m.embd() }

// NonCausal reports whether an image's rows attend to all rows of the
// image (later ones too) in the text model.
func (p *Projector) NonCausal() bool { return p.m.nonCausal() }

// Markers returns the text around one image's embedding rows, as token
// strings to tokenize with special tokens parsed (empty: none).
func (p *Projector) Markers() (before, after string) { return p.m.markers() }

// Prepared is one image resized, padded and normalised for a projector.
type Prepared struct {
	Hash   [32]byte // sha256 of the projector identity and the preprocessed pixels: the encoder-cache key
	Tokens int      // embedding rows the encoder will produce (positions in the prompt)

	// The preprocessed 8-bit RGB image (interleaved), before normalisation.
	w, h int
	pix  []uint8
	// planes are the normalised values, planar [3][h][w] (R, G, B).
	planes []float32
}

// Prepare preprocesses img for p; maxEdge > 0 caps the longer side before
// the projector's own sizing (types with a fixed size ignore it).
func (p *Projector) Prepare(img image.Image, maxEdge int) (*Prepared, error) {
	if img == nil {
		return nil, fmt.Errorf("no image")
	}
	b := img.Bounds()
	if b.Empty() {
		return nil, fmt.Errorf("image is empty (%dx%d pixels)", b.Dx(), b.Dy())
	}
	if maxEdge < 0 {
		return nil, fmt.Errorf("max edge %d is negative", maxEdge)
	}
	pr, err := p.m.prepare(toRGB(img), maxEdge)
	if err != nil {
		return nil, err
	}
	pr.Hash = p.pixelHash(pr)
	return pr, nil
}

// pixelHash digests the projector identity and pr's preprocessed pixels.
func (p *Projector) pixelHash(pr *Prepared) [32]byte {
	h := sha256.New()
	h.Write(p.identity)
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(pr.w)))
	h.Write(binary.LittleEndian.AppendUint64(nil, uint64(pr.h)))
	h.Write(pr.pix)
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// Encode starts the encoding of one prepared image (of this projector);
// the caller runs it in slices with Advance.
func (p *Projector) Encode(pr *Prepared) *Encoding { return p.m.units(pr) }

// Encoding is one image's encoding as a run of work units (the patch
// embedding, each encoder layer's halves, the projection): Advance runs
// units until about the FLOPs asked for are spent, so the engine can
// interleave an encode with its decoding steps. It implements
// engine.Encoder. An Encoding is used by one goroutine at a time.
type Encoding struct {
	steps []unit
	next  int
	left  int64
	out   func() []float32 // the embeddings, once every unit ran
	done  []float32
	free  func() // drops the scratch memory once done
}

// unit is one step of an encoding and its cost in FLOPs.
type unit struct {
	flops int64
	run   func(p *kernels.Pool)
}

// newEncoding lays out units; out gives the embeddings after the last one,
// free drops the scratch.
func newEncoding(steps []unit, out func() []float32, free func()) *Encoding {
	e := &Encoding{steps: steps, out: out, free: free}
	for _, u := range steps {
		e.left += u.flops
	}
	return e
}

// Cost returns the work left, in FLOPs (an estimate: the products').
func (e *Encoding) Cost() int64 { return e.left }

// Advance runs units until about flops FLOPs are spent (at least one unit)
// on p (nil: the calling goroutine) and reports whether the encoding is
// done. It does nothing once done.
func (e *Encoding) Advance(p *kernels.Pool, flops int64) bool {
	var spent int64
	for e.next < len(e.steps) {
		u := e.steps[e.next]
		u.run(p)
		e.steps[e.next] = unit{}
		e.next++
		e.left -= u.flops
		spent += u.flops
		if spent >= flops {
			break
		}
	}
	if e.next == len(e.steps) && e.done == nil {
		e.done = e.out()
		e.left = 0
		if e.free != nil {
			e.free()
		}
		e.out, e.free = nil, nil
	}
	return e.done != nil
}

// Embeddings returns the rows (Tokens × Embd, row-major) once Advance has
// returned true, else nil.
func (e *Encoding) Embeddings() []float32 { return e.done }
