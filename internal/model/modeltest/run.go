package modeltest

import (
	"math"
	"testing"

	"mistralrs/internal/kernels"
	"mistralrs/internal/kvcache"
	"mistralrs/internal/model"
)

// MaxDiff returns max |got-want| and max |want|.
func MaxDiff(got []float32, want []float64) (diff, scale float64) {
	for i, w := range want {
		diff = math.Max(diff, math.Abs(float64(got[i])-w))
		scale = math.Max(scale, math.Abs(w))
	}
	return diff, scale
}

// Argmax is the index of the largest value (the first of equal ones).
func Argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}

// FixtureTokens is a prompt for the fixtures.
var FixtureTokens = []int32{1, 17, 5, 33, 60, 2, 9, 41, 12, 0}

// NewContiguous is a float32 contiguous cache of n positions (n <= 0: the
// context length) for a model of configuration cfg.
func NewContiguous(cfg model.Config, n int) *kvcache.ContiguousCache {
	if n <= 0 {
		n = cfg.ContextLen
	}
	return kvcache.NewContiguousCache(cfg.KVShape(), n, false)
}

// NewContiguousF16 is NewContiguous storing halves.
func NewContiguousF16(cfg model.Config, n int) *kvcache.ContiguousCache {
	if n <= 0 {
		n = cfg.ContextLen
	}
	return kvcache.NewContiguousCache(cfg.KVShape(), n, true)
}

// NewTestCache makes the caches of RunBatched (tests switch it to F16).
var NewTestCache = func(cfg model.Config, n int) model.KVCache { return NewContiguous(cfg, n) }

// RunBatched feeds steps of tokens for one or more sequences and returns the last
// logits of each sequence after each step.
type SeqRun struct {
	Tokens []int32
	Steps  []int // tokens per step (0: sequence idle in that step)
}

func RunBatched(t *testing.T, m *model.Model, p *kernels.Pool, runs []SeqRun, together bool) [][][]float32 {
	t.Helper()
	V := m.Config.Vocab
	out := make([][][]float32, len(runs))
	caches := make([]model.KVCache, len(runs))
	pos := make([]int, len(runs))
	for i := range runs {
		caches[i] = NewTestCache(m.Config, 64)
	}
	nsteps := len(runs[0].Steps)
	for s := range nsteps {
		var b model.Batch
		for i, r := range runs {
			n := r.Steps[s]
			if n == 0 {
				continue
			}
			in := &model.SeqInput{Tokens: r.Tokens[pos[i] : pos[i]+n], Pos: pos[i], Cache: caches[i], Logits: make([]float32, V)}
			out[i] = append(out[i], in.Logits)
			pos[i] += n
			if together {
				b.Seqs = append(b.Seqs, in)
			} else if err := m.Forward(p, &model.Batch{Seqs: []*model.SeqInput{in}}); err != nil {
				t.Fatal(err)
			}
		}
		if together {
			if err := m.Forward(p, &b); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// DecodeAllocs checks that a steady-state decode step of the model cfg
// (its weights Q8_0) does not allocate in the model code (kernels.MatMul
// and the pool are measured with it).
func DecodeAllocs(t *testing.T, cfg model.RandomConfig) {
	if RaceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	cfg.Type = kernels.Q8_0
	m, _ := LoadFixture(t, cfg)
	pool := kernels.NewPool(2)
	defer pool.Close()
	seq := &model.SeqInput{Tokens: []int32{3}, Cache: NewContiguous(m.Config, 32), Logits: make([]float32, m.Config.Vocab)}
	batch := &model.Batch{Seqs: []*model.SeqInput{seq}}
	for i := range 8 {
		seq.Pos = i
		if err := m.Forward(pool, batch); err != nil {
			t.Fatal(err)
		}
	}
	allocs := testing.AllocsPerRun(20, func() {
		seq.Pos = 7
		if err := m.Forward(pool, batch); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Errorf("decode step allocates %v times", allocs)
	}
}

// LargestGroup is the most queries one attention group held in m's last
// Forward.
func LargestGroup(m *model.Model) int {
	_, n := m.LastStep()
	return n
}

// StepTokens is the number of tokens of m's last Forward.
func StepTokens(m *model.Model) int {
	n, _ := m.LastStep()
	return n
}
