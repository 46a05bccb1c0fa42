package engine

import (
	"container/list"
	"encoding/binary"
	"fmt"
	"slices"
	"sync/atomic"

	"mistralrs/internal/kernels"
	"mistralrs/internal/model"
	"mistralrs/internal/model/nn"
)

// Images. A request's images are runs of its prompt whose input rows come
// from an encoder (a vision projector) instead of the token embeddings.
// Submit writes placeholder ids over their positions, derived from each
// image's Key, so that the prefix cache's block hashes cover the image's
// content: the same image after the same text is a prefix hit, another
// image is not.
//
// The embeddings live in the encoder cache (encoderCache): an LRU keyed by
// Image.Key, bounded in bytes (4 per float), whose entries a sequence
// holds (pins) from its admission until its prompt has computed the
// image's positions (for --no-kv-cache, until it ends: every token
// recomputes the prompt). Pinned entries are never evicted, so the budget
// can be exceeded by what running sequences hold; an entry nobody holds
// stays while the budget allows (0: never). A sequence that is preempted
// or ends lets go of its entries; an encoding nobody holds any more is
// dropped unfinished.
//
// Encoding runs inside the engine's steps: after each scheduling
// decision, the encodings under way advance (oldest first) by the FLOPs
// the step's leftover token budget would have cost the text model (its
// FLOPs per token: twice its parameter count), at least one unit when the
// step runs nothing else. A sequence's prefill runs the text before an
// image while the image encodes, never past an image whose embeddings are
// not ready, and never splits a non-causal image across two steps (see
// imageChunk). A request with images does not speculate.

// Encoder is one image's encoding, done in slices inside the engine's
// steps.
type Encoder interface {
	Cost() int64                               // work left, in FLOPs (estimate)
	Advance(p *kernels.Pool, flops int64) bool // do about this much work (at least one unit); true when done
	Embeddings() []float32                     // rows × n_embd, valid once Advance returned true
}

// Image is one image in a request's prompt.
type Image struct {
	Pos, Len  int            // its positions in Request.Prompt: [Pos, Pos+Len)
	Key       [32]byte       // encoder-cache key (vision.Prepared.Hash)
	NonCausal bool           // vision.Projector.NonCausal: its positions attend to the whole image
	Encode    func() Encoder // starts the encoding on a cache miss (called on the engine goroutine)
}

// End is one past the image's last position.
func (im *Image) End() int { return im.Pos + im.Len }

// placeholders writes the placeholder ids of the image with key over dst
// (its positions): negative, so that no vocabulary id collides, and 31
// bits of a hash of the key and the position each.
func placeholders(key [32]byte, dst []int32) {
	var k [4]uint64
	for i := range k {
		k[i] = binary.LittleEndian.Uint64(key[8*i:])
	}
	for j := range dst {
		h := mix64(k[0] ^ mix64(k[1]^mix64(k[2]^mix64(k[3]+uint64(j)))))
		dst[j] = int32(uint32(h) | 1<<31)
	}
}

// mix64 is SplitMix64's finaliser.
func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// checkImages validates a request's images against its prompt.
func checkImages(req *Request) error {
	end := 0
	for i := range req.Images {
		im := &req.Images[i]
		switch {
		case im.Len <= 0:
			return fmt.Errorf("image %d has %d positions", i, im.Len)
		case im.Pos < end:
			return fmt.Errorf("image %d at position %d overlaps or precedes image %d", i, im.Pos, i-1)
		case im.End() > len(req.Prompt):
			return fmt.Errorf("image %d covers positions [%d, %d) of a prompt of %d", i, im.Pos, im.End(), len(req.Prompt))
		case im.Encode == nil:
			return fmt.Errorf("image %d has no encoder", i)
		}
		end = im.End()
	}
	return nil
}

// checkPromptIDs checks that the prompt's ids outside its images are in
// the vocabulary.
func checkPromptIDs(req *Request, vocab int32) error {
	next := 0
	check := func(ids []int32) error {
		for _, t := range ids {
			if t < 0 || t >= vocab {
				return fmt.Errorf("prompt token %d outside the vocabulary (size %d)", t, vocab)
			}
		}
		return nil
	}
	for i := range req.Images {
		if err := check(req.Prompt[next:req.Images[i].Pos]); err != nil {
			return err
		}
		next = req.Images[i].End()
	}
	return check(req.Prompt[next:])
}

// flopsPerToken estimates what the text model computes per token: twice
// its parameter count (one multiply and one add per weight), from the
// file's tensors.
func flopsPerToken(m *model.Model, params uint64) int64 {
	if params == 0 {
		c := &m.Config
		per := c.Embd*(c.QDim()+c.KDim()+c.VDim()) + c.ODim()*c.Embd + 3*c.Embd*c.FF
		params = uint64(c.Layers*per + c.Vocab*c.Embd)
	}
	return 2 * int64(params)
}

// seqImage is one image of a sequence and its hold on the encoder cache.
type seqImage struct {
	Image
	ent *encEntry // held from admission while the sequence may compute the image
}

// ready reports whether the image's embeddings can be used.
func (im *seqImage) ready() bool { return im.ent != nil && im.ent.rows != nil }

// holds reports whether sq holds e.
func (sq *seq) holds(e *encEntry) bool {
	for i := range sq.imgs {
		if sq.imgs[i].ent == e {
			return true
		}
	}
	return false
}

// embeds returns the runs of image rows among sq's tokens [pos, pos+n),
// in sq's scratch. The scheduler computes only images whose embeddings
// are ready, and a non-causal image to its end: anything else is an error
// of the engine's, which fails the step.
func (sq *seq) embeds(pos, n, embd int) ([]nn.Embeds, error) {
	sq.runs = sq.runs[:0]
	for i := range sq.imgs {
		im := &sq.imgs[i]
		lo, hi := max(im.Pos, pos), min(im.End(), pos+n)
		if lo >= hi {
			continue
		}
		if !im.ready() || (im.NonCausal && hi != im.End()) {
			return nil, fmt.Errorf("engine: image %d at [%d, %d) scheduled in [%d, %d) without its embeddings or cut", i, im.Pos, im.End(), pos, pos+n)
		}
		sq.runs = append(sq.runs, nn.Embeds{Off: lo - pos, Rows: im.ent.rows[(lo-im.Pos)*embd : (hi-im.Pos)*embd], NonCausal: im.NonCausal})
	}
	if len(sq.runs) == 0 {
		return nil, nil
	}
	return sq.runs, nil
}

// encEntry is one image's embeddings in the encoder cache, or its encoding
// under way.
type encEntry struct {
	key   [32]byte
	enc   Encoder   // under way: non-nil until done
	rows  []float32 // done: the embeddings
	want  int       // floats the embeddings must have (Len × Embd)
	refs  int       // sequences holding it
	elem  *list.Element
	fails error // the encoding gave unusable embeddings
}

func (e *encEntry) bytes() int64 { return 4 * int64(e.want) }

// EncoderUsage is the encoder cache's memory, for tests and monitoring.
type EncoderUsage struct {
	CachedBytes   int64 // embeddings no sequence holds, kept for later requests
	PinnedBytes   int64 // embeddings running sequences hold
	InFlightBytes int64 // embeddings being encoded (their size once done)
	InFlight      int   // encodings under way
}

// encoderCache is the LRU of image embeddings, owned by the engine
// goroutine; its usage is published for other goroutines.
type encoderCache struct {
	budget   int64
	embd     int
	entries  map[[32]byte]*encEntry
	lru      list.List   // done entries nobody holds, least recently used first
	inflight []*encEntry // encodings under way, in the order they started
	cached   int64       // bytes of lru
	pinned   int64       // bytes of done entries that are held

	pub struct{ cached, pinned, inflight, n atomic.Int64 }
}

func newEncoderCache(budget int64) *encoderCache {
	return &encoderCache{budget: max(budget, 0), entries: map[[32]byte]*encEntry{}}
}

// acquire holds the embeddings of im for a sequence, starting its encoding
// on a miss.
func (c *encoderCache) acquire(im *Image) (ent *encEntry, hit bool, err error) {
	if e, ok := c.entries[im.Key]; ok {
		if e.want != im.Len*c.embd {
			return nil, false, fmt.Errorf("image of %d positions has the key of one of %d", im.Len, e.want/c.embd)
		}
		if e.refs == 0 && e.elem != nil {
			c.lru.Remove(e.elem)
			e.elem = nil
			c.cached -= e.bytes()
			c.pinned += e.bytes()
		}
		e.refs++
		c.publish()
		return e, true, nil
	}
	enc := im.Encode()
	if enc == nil {
		return nil, false, fmt.Errorf("the image encoder did not start")
	}
	e := &encEntry{key: im.Key, enc: enc, want: im.Len * c.embd, refs: 1}
	c.entries[im.Key] = e
	c.inflight = append(c.inflight, e)
	c.publish()
	return e, false, nil
}

// release lets go of a sequence's hold on e: an encoding nobody holds is
// dropped, embeddings nobody holds wait in the LRU within the budget.
func (c *encoderCache) release(e *encEntry) {
	e.refs--
	if e.refs > 0 {
		return
	}
	switch {
	case e.rows == nil:
		c.dropInFlight(e)
	default:
		c.pinned -= e.bytes()
		c.cached += e.bytes()
		e.elem = c.lru.PushBack(e)
		c.evict()
	}
	c.publish()
}

// dropInFlight forgets an entry without embeddings: an encoding under way
// (its encoder goes to the garbage collector) or one that failed.
func (c *encoderCache) dropInFlight(e *encEntry) {
	if i := slices.Index(c.inflight, e); i >= 0 {
		c.inflight = slices.Delete(c.inflight, i, i+1)
	}
	if c.entries[e.key] == e {
		delete(c.entries, e.key)
	}
	e.enc = nil
}

// evict drops the least recently used embeddings nobody holds while the
// cache is over its budget.
func (c *encoderCache) evict() {
	for c.cached+c.pinned > c.budget && c.lru.Len() > 0 {
		e := c.lru.Remove(c.lru.Front()).(*encEntry)
		e.elem = nil
		c.cached -= e.bytes()
		delete(c.entries, e.key)
	}
}

// advance runs the encodings under way, oldest first, for about flops
// FLOPs (at least one unit of the first when flops > 0), and returns the
// entries that finished.
func (c *encoderCache) advance(p *kernels.Pool, flops int64, done []*encEntry) []*encEntry {
	for flops > 0 && len(c.inflight) > 0 {
		e := c.inflight[0]
		before := e.enc.Cost()
		give := max(min(flops, before), 1)
		finished := e.enc.Advance(p, give)
		used := give
		if !finished {
			used = max(give, before-e.enc.Cost())
		}
		flops -= used
		if !finished {
			continue
		}
		c.inflight = slices.Delete(c.inflight, 0, 1)
		rows := e.enc.Embeddings()
		e.enc = nil
		if len(rows) != e.want {
			e.fails = fmt.Errorf("the image encoder gave %d values, want %d rows of %d", len(rows), e.want/c.embd, c.embd)
			delete(c.entries, e.key)
		} else {
			e.rows = rows
			c.pinned += e.bytes()
			c.evict() // room for it among what nobody holds
		}
		done = append(done, e)
	}
	c.publish()
	return done
}

// publish makes the usage visible to other goroutines.
func (c *encoderCache) publish() {
	var fl int64
	for _, e := range c.inflight {
		fl += e.bytes()
	}
	c.pub.cached.Store(c.cached)
	c.pub.pinned.Store(c.pinned)
	c.pub.inflight.Store(fl)
	c.pub.n.Store(int64(len(c.inflight)))
}

func (c *encoderCache) usage() EncoderUsage {
	return EncoderUsage{CachedBytes: c.pub.cached.Load(), PinnedBytes: c.pub.pinned.Load(),
		InFlightBytes: c.pub.inflight.Load(), InFlight: int(c.pub.n.Load())}
}

// EncoderUsage is the encoder cache's memory now (safe from any
// goroutine): after every request has ended, PinnedBytes and InFlight are
// 0, and CachedBytes at most Options.EncoderCacheBytes.
func (e *Engine) EncoderUsage() EncoderUsage { return e.enc.usage() }
