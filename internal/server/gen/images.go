package gen

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"mistralrs/internal/chat"
	"mistralrs/internal/vision"
)

// DefaultMaxImages is the most images one request may carry when
// ImageLimits.MaxImages is 0.
const DefaultMaxImages = 8

// ImageLimits bound the images of one request to a model (config's
// [models.multimodal]); they come with the loaded model (Loaded.Images).
type ImageLimits struct {
	// MaxImages is the most images one request may carry (0:
	// DefaultMaxImages).
	MaxImages int
	// MaxEdge caps an image's longer side before the projector's own
	// sizing (0: the projector's own).
	MaxEdge int
	// MaxPixels refuses, from the header, an image of more pixels (0: the
	// vision package's default).
	MaxPixels int64
}

// ImagePart is one image of a request, as a dialect found it: where it is
// in the body and its URL (data:, or http(s) when remote images are
// allowed). Its media marker stands for it in the messages' text.
type ImagePart struct {
	Param string // e.g. messages[0].content[1].image_url
	URL   string
	id    uint64
}

// Images collects a request's image parts in the order a dialect finds
// them.
type Images []*ImagePart

// Add records the image at param and returns the content part that stands
// for it in its message: a text part holding its media marker, which the
// prompt builder finds again in the rendered template.
func (im *Images) Add(param, u string) chat.ContentPart {
	p := &ImagePart{Param: param, URL: u, id: markerSeq.Add(1)}
	*im = append(*im, p)
	return chat.ContentPart{Type: "text", Text: p.Marker()}
}

// Marker is the text standing for the image in the rendered prompt.
func (p *ImagePart) Marker() string { return mediaMarker(p.id) }

// The media marker is "<__media_" + a random per-process tag + "_" + the
// part's number + "__>": a client cannot write one (it would have to guess
// the tag), so no text of a request is ever taken for an image, and the
// number tells which image a marker stands for even when a template
// reorders or repeats messages.
var (
	markerTag = func() string {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand never fails on supported platforms
		}
		return "<__media_" + hex.EncodeToString(b[:]) + "_"
	}()
	markerSeq atomic.Uint64
)

const markerEnd = "__>"

func mediaMarker(id uint64) string { return markerTag + strconv.FormatUint(id, 10) + markerEnd }

// nextMarker finds the first media marker in s at or after from: its
// start, end and image number; ok is false when there is none.
func nextMarker(s string, from int) (start, end int, id uint64, ok bool) {
	for from < len(s) {
		i := strings.Index(s[from:], markerTag)
		if i < 0 {
			return 0, 0, 0, false
		}
		start = from + i
		rest := s[start+len(markerTag):]
		j := strings.Index(rest, markerEnd)
		if j > 0 {
			if n, err := strconv.ParseUint(rest[:j], 10, 64); err == nil {
				return start, start + len(markerTag) + j + len(markerEnd), n, true
			}
		}
		from = start + len(markerTag)
	}
	return 0, 0, 0, false
}

// imageBytes is the encoded image of p: a data URL's bytes, or the fetched
// body of an http(s) URL when remote images are allowed.
func (b *Base) imageBytes(ctx context.Context, p *ImagePart) ([]byte, error) {
	if len(p.URL) >= 5 && strings.EqualFold(p.URL[:5], "data:") {
		return dataURL(p.URL)
	}
	u, err := url.Parse(p.URL)
	if err != nil || u.Scheme == "" {
		return nil, errors.New("the image URL must be a data: URL (data:image/png;base64,...) or an http(s) URL")
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return nil, fmt.Errorf("image URL scheme %q is not supported (data:, or http(s) when remote images are allowed)", u.Scheme)
	}
	if !b.RemoteImages.Allow {
		return nil, errors.New("remote image URLs are not allowed on this server (--allow-remote-images); send the image as a data: URL")
	}
	if u.Host == "" {
		return nil, errors.New("the image URL has no host")
	}
	return b.fetcher().fetch(ctx, u)
}

// fetcher is the Base's remote image fetcher, made on first use (its
// options are set before the server starts).
func (b *Base) fetcher() *fetcher {
	b.fetchOnce.Do(func() { b.fetch = newFetcher(b.RemoteImages) })
	return b.fetch
}

// dataURL decodes "data:[<media type>][;base64],<data>".
func dataURL(s string) ([]byte, error) {
	meta, data, ok := strings.Cut(s[len("data:"):], ",")
	if !ok {
		return nil, errors.New("malformed data: URL: no comma before the data")
	}
	mediaType, isBase64 := meta, false
	if m, ok := strings.CutSuffix(strings.ToLower(meta), ";base64"); ok {
		mediaType, isBase64 = meta[:len(m)], true
	}
	if mt, _, _ := strings.Cut(mediaType, ";"); mt != "" && !strings.HasPrefix(strings.ToLower(mt), "image/") {
		return nil, fmt.Errorf("data: URL media type %q is not an image type", mt)
	}
	if !isBase64 {
		raw, err := url.PathUnescape(data)
		if err != nil {
			return nil, fmt.Errorf("malformed data: URL: %v", err)
		}
		return []byte(raw), nil
	}
	return decodeBase64(data)
}

// decodeBase64 reads standard base64, padded or not, ignoring the line
// breaks some clients wrap it with.
func decodeBase64(s string) ([]byte, error) {
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r", "", "\n", "").Replace(s)
	}
	enc := base64.StdEncoding
	if len(s)%4 != 0 {
		enc = base64.RawStdEncoding
		s = strings.TrimRight(s, "=")
	}
	out, err := enc.DecodeString(s)
	if err != nil {
		var ce base64.CorruptInputError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("invalid base64 image data at byte %d", int64(ce))
		}
		return nil, fmt.Errorf("invalid base64 image data: %v", err)
	}
	return out, nil
}

// imageError is the 400 of an image part: its param and what is wrong.
func imageError(p *ImagePart, err error) *Error {
	return BadRequest(p.Param, "%s: %v", p.Param, err)
}

// fetchState is the Base's lazily made fetcher.
type fetchState struct {
	fetchOnce sync.Once
	fetch     *fetcher
}

// imageSet is a request's images, prepared for its model's projector.
type imageSet struct {
	proj          *vision.Projector
	images        []*preparedImage
	before, after string // the projector's marker texts
}

// preparedImage is one image part decoded and preprocessed.
type preparedImage struct {
	part     *ImagePart
	tokens   int // the embedding rows, so prompt positions, it takes
	prepared *vision.Prepared
}

// prepareImages decodes and preprocesses a request's images for its
// model's projector: a 400 naming the part for an image the model cannot
// see (a text-only model), one too many, or one that cannot be read.
func (b *Base) prepareImages(ctx context.Context, l *Loaded, parts Images) (*imageSet, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	proj := l.Model.Vision
	if proj == nil {
		return nil, BadRequest(parts[0].Param, "%s: model %q cannot take images: it is served without a vision projector (--mmproj)", parts[0].Param, l.Model.ID)
	}
	limit := l.Images.MaxImages
	if limit <= 0 {
		limit = DefaultMaxImages
	}
	if len(parts) > limit {
		p := parts[limit]
		return nil, BadRequest(p.Param, "%s: too many images: at most %d per request (--max-num-images)", p.Param, limit)
	}
	set := &imageSet{proj: proj}
	set.before, set.after = proj.Markers()
	for _, p := range parts {
		im, err := b.prepareImage(ctx, proj, &l.Images, p)
		if err != nil {
			return nil, err
		}
		set.images = append(set.images, im)
	}
	return set, nil
}

// prepareImage reads, decodes (its size checked from the header first)
// and preprocesses one image.
func (b *Base) prepareImage(ctx context.Context, proj *vision.Projector, lim *ImageLimits, p *ImagePart) (*preparedImage, error) {
	data, err := b.imageBytes(ctx, p)
	if err != nil {
		return nil, imageError(p, err)
	}
	img, err := vision.Decode(data, vision.Limits{MaxPixels: lim.MaxPixels})
	if err != nil {
		return nil, imageError(p, err)
	}
	pr, err := proj.Prepare(img, lim.MaxEdge)
	if err != nil {
		return nil, imageError(p, err)
	}
	return &preparedImage{part: p, tokens: pr.Tokens, prepared: pr}, nil
}
