package config

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// MaxImageSide bounds max_edge and max_image_length: 65536 pixels a side
// is beyond any image a projector is made for, and keeps N×N in range.
const MaxImageSide = 1 << 16

// MaxImagesPerRequest bounds max_num_images.
const MaxImagesPerRequest = 1024

// MultimodalFlags are the flags of mistral.rs's multimodal group, which
// `serve text` and `serve embedding` refuse (their models take no images).
func MultimodalFlags() []string {
	var out []string
	for i := range Options {
		o := &Options[i]
		if o.Flag != "" && (o.Key == "models.format.mmproj" || strings.HasPrefix(o.Key, "models.multimodal.")) {
			out = append(out, o.Flag)
		}
	}
	return out
}

// ImageLimits bound what one request to a multimodal model may carry
// ([models.multimodal]).
type ImageLimits struct {
	MaxEdge   int   // cap of an image's longer side before the projector's own sizing; 0: the projector's own
	MaxImages int   // images in one request
	MaxPixels int64 // pixels of one image (max_image_length squared), checked from its header
}

// ImageLimits returns the entry's bounds, with the table's defaults for
// values left unset.
func (m *ModelConfig) ImageLimits() ImageLimits {
	mm := &m.Multimodal
	side := intOr(mm.MaxImageLength, "models.multimodal.max_image_length")
	return ImageLimits{
		MaxEdge:   mm.MaxEdge,
		MaxImages: intOr(mm.MaxNumImages, "models.multimodal.max_num_images"),
		MaxPixels: int64(side) * int64(side),
	}
}

// intOr is *p, or the table's default of key when p is nil.
func intOr(p *int, key string) int {
	if p != nil {
		return *p
	}
	return OptionByKey(key).Default.(int)
}

// validateRemoteImages checks the limits of image fetches; they are
// checked even with fetching off, so that turning it on never meets a bad
// value first.
func (c *Config) validateRemoteImages() error {
	s := &c.Server
	if s.RemoteImageMaxMB < 1 || s.RemoteImageMaxMB > 1024 {
		return c.bad("server.remote_image_max_mb", s.RemoteImageMaxMB, "must be between 1 and 1024")
	}
	if s.RemoteImageTimeoutSecs < 1 || s.RemoteImageTimeoutSecs > 3600 {
		return c.bad("server.remote_image_timeout_secs", s.RemoteImageTimeoutSecs, "must be between 1 and 3600")
	}
	return nil
}

// checkMultimodal checks models[i]'s projector and image bounds: one
// projector, a .gguf file, not on a text or embedding model.
func (c *Config) checkMultimodal(i int) error {
	m := &c.Models[i]
	k := func(name string) string { return fmt.Sprintf("models[%d].%s", i, name) }
	proj := m.Format.MMProj
	if err := CheckProjectors(proj); err != nil {
		return c.bad(k("format.mmproj"), proj, "%v", err)
	}
	switch {
	case len(proj) == 1 && (m.Kind == KindText || m.Kind == KindEmbedding):
		if c.origin == originFlags {
			return fmt.Errorf("--mmproj cannot be used with `serve %s`: a %s model takes no images (use `serve multimodal` or `serve auto`)", m.Kind, m.Kind)
		}
		return c.bad(k("format.mmproj"), proj[0], "a %s model takes no images (kind = %q); use kind = %q or %q", m.Kind, m.Kind, KindMultimodal, KindAuto)
	}
	mm := &m.Multimodal
	if mm.MaxEdge < 0 || mm.MaxEdge > MaxImageSide {
		return c.bad(k("multimodal.max_edge"), mm.MaxEdge, "must be between 0 (the projector's own size) and %d", MaxImageSide)
	}
	if p := mm.MaxNumImages; p != nil && (*p < 1 || *p > MaxImagesPerRequest) {
		return c.bad(k("multimodal.max_num_images"), *p, "must be between 1 and %d", MaxImagesPerRequest)
	}
	if p := mm.MaxImageLength; p != nil && (*p < 1 || *p > MaxImageSide) {
		return c.bad(k("multimodal.max_image_length"), *p, "must be between 1 and %d", MaxImageSide)
	}
	return nil
}

// CheckProjectors checks a models.format.mmproj list (--mmproj): at most
// one projector (mistral.rs takes a semicolon-separated list; this server
// one projector per model), a .gguf file.
func CheckProjectors(l FileList) error {
	if len(l) > 1 {
		return fmt.Errorf("names %d projectors; this server loads one vision projector per model", len(l))
	}
	if len(l) == 1 && !isGGUF(l[0]) {
		return fmt.Errorf("must be a .gguf file (a llama.cpp mmproj projector)")
	}
	return nil
}

// Projector finds the vision projector of model entry m, whose GGUF model
// was found in dir ("" when its files were named as paths) with modelFile
// its first file:
//   - models.format.mmproj given: that file, relative to dir unless
//     absolute;
//   - otherwise, for kind auto or multimodal, the one *mmproj*.gguf file
//     beside modelFile; none is "" for auto (a text model) and an error for
//     multimodal; several are an error listing them.
//
// Text and embedding models have none ("").
func Projector(m ModelConfig, dir, modelFile string) (string, error) {
	if m.Kind == KindText || m.Kind == KindEmbedding {
		return "", nil
	}
	if len(m.Format.MMProj) > 0 {
		return givenProjector(m.Format.MMProj[0], dir)
	}
	beside := filepath.Dir(modelFile)
	found, err := projectorsIn(beside)
	if err != nil {
		return "", err
	}
	switch {
	case len(found) == 1:
		return filepath.Join(beside, found[0]), nil
	case len(found) > 1:
		return "", &SeveralProjectorsError{Model: modelFile, Found: found}
	case m.Kind == KindMultimodal:
		return "", fmt.Errorf("a multimodal model needs a vision projector, and no *mmproj*.gguf file is beside %s; name one with --mmproj (models.format.mmproj)", modelFile)
	}
	return "", nil
}

// SeveralProjectorsError is Projector's error when several *mmproj*.gguf
// files are beside a model and none is named: the commands without a kind
// (run, bench) load none then, a served model is refused.
type SeveralProjectorsError struct {
	Model string   // the model's first file
	Found []string // the projectors' names, sorted
}

func (e *SeveralProjectorsError) Error() string {
	return fmt.Sprintf("several vision projectors beside %s: %s; name one with --mmproj (models.format.mmproj), or serve the model as text (`serve text`, kind = \"text\")",
		e.Model, strings.Join(e.Found, ", "))
}

// givenProjector is a named projector file, which must be there.
func givenProjector(name, dir string) (string, error) {
	p := name
	if dir != "" && !filepath.IsAbs(name) {
		p = filepath.Join(dir, filepath.FromSlash(name))
	}
	st, err := os.Stat(p)
	switch {
	case err == nil && st.Mode().IsRegular():
		return p, nil
	case err == nil:
		return "", fmt.Errorf("vision projector %s is not a regular file", p)
	}
	if _, lerr := os.Lstat(p); lerr == nil {
		return "", fmt.Errorf("vision projector %s is a broken link (an incomplete download?)", p)
	}
	if dir == "" || filepath.IsAbs(name) {
		return "", fmt.Errorf("vision projector %s: %v", p, unwrapPathError(err))
	}
	hint := " (no *mmproj*.gguf file there)"
	if found, _ := projectorsIn(dir); len(found) > 0 {
		hint = " (mmproj files there: " + strings.Join(found, ", ") + ")"
	}
	return "", fmt.Errorf("vision projector %s not found in %s%s", name, dir, hint)
}

// projectorsIn lists the names of the *mmproj*.gguf files of dir, sorted.
func projectorsIn(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("looking for a vision projector: %w", err)
	}
	var out []string
	for _, e := range ents {
		if !isProjectorName(e.Name()) {
			continue
		}
		// Links are followed; what is no file (a directory, a dangling link) is no projector.
		if st, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && st.Mode().IsRegular() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// isProjectorName: llama.cpp's projectors are published as *mmproj*.gguf.
func isProjectorName(name string) bool {
	return isGGUF(name) && strings.Contains(strings.ToLower(name), "mmproj")
}
