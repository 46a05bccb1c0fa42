package constrain

import (
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/testutil"
	"mistralrs/internal/tokenizer"
)

// benchDoc is a JSON document the benchmarks replay token by token, as a
// model generating it would.
const benchDoc = `{"name": "Alice Smith", "age": 42, "email": "alice.smith@example.com", "tags": ["admin", "user", "beta-tester"], ` +
	`"address": {"street": "123 Main St", "city": "Springfield", "zip": "12345", "geo": [37.7749, -122.4194]}, ` +
	`"active": true, "score": 98.6, "notes": null, "bio": "Loves hiking, café visits and writing code: \"Go\" mostly.", ` +
	`"history": [{"year": 2021, "event": "joined"}, {"year": 2023, "event": "promoted to senior engineer"}]}`

// benchStates are the states the mask benchmarks start from: the prefix
// of benchDoc consumed.
var benchStates = []struct{ name, prefix string }{
	{"start", ``},
	{"after-brace", `{`},
	{"in-key", `{"na`},
	{"in-string", `{"name": "Alice Sm`},
	{"in-number", `{"name": "Alice Smith", "age": 4`},
	{"after-value", `{"name": "Alice Smith", "age": 42`},
}

func benchVocabs(b *testing.B) []struct {
	name string
	v    *Vocab
	tok  *tokenizer.Tokenizer
} {
	var out []struct {
		name string
		v    *Vocab
		tok  *tokenizer.Tokenizer
	}
	for _, name := range []string{"llama-spm", "llama-bpe"} {
		v := mtRealVocab(b, name)
		f, err := gguf.Open(testutil.SharedFile(b, "testdata", "vocab", "ggml-vocab-"+name+".gguf"))
		if err != nil {
			b.Fatal(err)
		}
		tok, err := tokenizer.FromGGUF(f)
		f.Close()
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, struct {
			name string
			v    *Vocab
			tok  *tokenizer.Tokenizer
		}{name, v, tok})
	}
	return out
}

// BenchmarkMask times one mask at fixed states of the hand JSON grammar:
// cold (a new Matcher: every automaton transition computed), walk (the
// automaton known, no mask cached: the trie walks alone), context (the
// walk relative to the state's context cached, as when the same kind of
// state is met in a new context, e.g. a second string) and hit (the mask
// cached for the state: a copy).
func BenchmarkMask(b *testing.B) {
	g := mtJSON(b, false)
	for _, bv := range benchVocabs(b) {
		mask := make([]bool, bv.v.Size())
		for _, bs := range benchStates {
			b.Run(bv.name+"/"+bs.name+"/cold", func(b *testing.B) {
				for b.Loop() {
					m := mustMatcher(b, g, bv.v)
					st := mustAdvance(b, m, m.Start(), bs.prefix)
					m.Allowed(st, mask)
				}
				b.ReportMetric(float64(bv.v.Size()), "vocab")
			})
			b.Run(bv.name+"/"+bs.name+"/walk", func(b *testing.B) {
				m := mustMatcher(b, g, bv.v)
				st := mustAdvance(b, m, m.Start(), bs.prefix)
				m.Allowed(st, mask)
				d := m.stateID(st)
				for b.Loop() {
					m.dropMasks(true)
					fillMask(mask, m.mask(d))
				}
				b.ReportMetric(float64(bv.v.Size()), "vocab")
			})
			b.Run(bv.name+"/"+bs.name+"/context", func(b *testing.B) {
				m := mustMatcher(b, g, bv.v)
				st := mustAdvance(b, m, m.Start(), bs.prefix)
				m.Allowed(st, mask)
				d := m.stateID(st)
				for b.Loop() {
					m.dropMasks(false)
					fillMask(mask, m.mask(d))
				}
				b.ReportMetric(float64(bv.v.Size()), "vocab")
			})
			b.Run(bv.name+"/"+bs.name+"/hit", func(b *testing.B) {
				m := mustMatcher(b, g, bv.v)
				st := mustAdvance(b, m, m.Start(), bs.prefix)
				m.Allowed(st, mask)
				for b.Loop() {
					m.Allowed(st, mask)
				}
				b.ReportMetric(float64(bv.v.Size()), "vocab")
			})
		}
	}
}

// BenchmarkGenerate replays benchDoc as a model would generate it: a mask
// then an Advance per token. "first" is a request on a new Matcher (every
// state met for the first time), "again" the same document on a Matcher
// that has seen it (a compiled grammar cached across requests). The
// reported metric is µs per token, mask and advance together.
func BenchmarkGenerate(b *testing.B) {
	g := mtJSON(b, false)
	for _, bv := range benchVocabs(b) {
		ids := bv.tok.Encode(benchDoc, false, false)
		mask := make([]bool, bv.v.Size())
		run := func(b *testing.B, m *Matcher) {
			st := m.Start()
			for _, id := range ids {
				m.Allowed(st, mask)
				if !mask[id] {
					b.Fatalf("token %d %q refused", id, bv.v.Token(id))
				}
				var ok bool
				if st, ok = m.Advance(st, id); !ok {
					b.Fatal("advance refused")
				}
			}
			if !st.Complete() {
				b.Fatal("document incomplete")
			}
		}
		b.Run(bv.name+"/first", func(b *testing.B) {
			for b.Loop() {
				run(b, mustMatcher(b, g, bv.v))
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(ids)), "µs/token")
			b.ReportMetric(float64(len(ids)), "tokens")
		})
		b.Run(bv.name+"/again", func(b *testing.B) {
			m := mustMatcher(b, g, bv.v)
			run(b, m)
			for b.Loop() {
				run(b, m)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(ids)), "µs/token")
		})
	}
}

// BenchmarkNewVocab times building the trie of a vocabulary.
func BenchmarkNewVocab(b *testing.B) {
	for _, bv := range benchVocabs(b) {
		toks := bv.v.tokens
		b.Run(bv.name, func(b *testing.B) {
			for b.Loop() {
				NewVocab(toks)
			}
		})
	}
}

// dropMasks forgets the cached masks, and the relative walks if rel.
func (m *Matcher) dropMasks(rel bool) {
	for i := range m.c.states {
		m.c.states[i].mask = nil
		if rel {
			m.c.states[i].rel = nil
		}
	}
	m.c.maskBytes = 0
	if rel {
		m.c.relBytes = 0
	}
}
