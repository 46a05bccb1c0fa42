package constrain

import (
	"bytes"
	"slices"
	"sync"
	"testing"

	"mistralrs/internal/gguf"
	"mistralrs/internal/testutil"
	"mistralrs/internal/tokenizer"
)

var (
	mtVocabMu    sync.Mutex
	mtVocabCache = map[string]*Vocab{}
)

// mtRealVocab loads a shared vocabulary file (ggml-vocab-NAME.gguf) once
// per test binary, as token bytes; it skips when the shared data is absent.
func mtRealVocab(t testing.TB, name string) *Vocab {
	t.Helper()
	path := testutil.SharedFile(t, "testdata", "vocab", "ggml-vocab-"+name+".gguf")
	mtVocabMu.Lock()
	defer mtVocabMu.Unlock()
	if v, ok := mtVocabCache[path]; ok {
		return v
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	toks := make([][]byte, tok.VocabSize())
	for id := range toks {
		toks[id] = tok.TokenBytes(int32(id))
	}
	v := NewVocab(toks)
	mtVocabCache[path] = v
	return v
}

// checkTrie verifies the trie against the token list: every node's path
// is a prefix, its tokens are exactly those whose bytes are the path, the
// skip and sub fields describe its subtree.
func checkTrie(t *testing.T, v *Vocab) {
	t.Helper()
	n := len(v.nodes) - 1
	var path []byte
	seen := make([]bool, v.Size())
	for i := range n {
		nd := v.nodes[i]
		path = append(path[:nd.depth-1], nd.b)
		for _, id := range v.order[nd.tokOff:v.nodes[i+1].tokOff] {
			if !bytes.Equal(v.Token(id), path) {
				t.Fatalf("node %d (%q) holds token %d %q", i, path, id, v.Token(id))
			}
			if seen[id] {
				t.Fatalf("token %d twice", id)
			}
			seen[id] = true
		}
		var sub ByteSet
		for j := i + 1; j < int(nd.skip); j++ {
			if v.nodes[j].depth <= nd.depth {
				t.Fatalf("node %d: subtree to %d holds node %d of depth %d", i, nd.skip, j, v.nodes[j].depth)
			}
			sub.Add(v.nodes[j].b)
		}
		if int(nd.skip) < n && v.nodes[nd.skip].depth > nd.depth {
			t.Fatalf("node %d: subtree ends early at %d", i, nd.skip)
		}
		if sub != v.sub[i] {
			t.Fatalf("node %d: sub %v, want %v", i, v.sub[i], sub)
		}
		if n > 5000 && i > 2000 {
			break // the subtree scans are quadratic near the root of big tries
		}
	}
	if n <= 5000 {
		for id, ok := range seen {
			if ok != (len(v.Token(int32(id))) > 0) {
				t.Fatalf("token %d %q in trie: %v", id, v.Token(int32(id)), ok)
			}
		}
	}
}

func TestVocabTrie(t *testing.T) {
	v := mtVocab("", "b", "a", "ab", "abc", "abd", "b", "", "x", "abc", "ba")
	checkTrie(t, v)
	if v.Size() != 11 {
		t.Fatalf("size %d", v.Size())
	}
	if got := v.trieSize(); got != 7 { // a ab abc abd b ba x
		t.Fatalf("%d nodes, want 7", got)
	}
	if got := v.order; !slices.Equal(got, []int32{2, 3, 4, 9, 5, 1, 6, 10, 8}) {
		t.Fatalf("order %v", got)
	}
	empty := NewVocab(nil)
	if empty.Size() != 0 || empty.trieSize() != 0 {
		t.Fatal("empty vocab")
	}
	m := mustMatcher(t, mtDigits(t), empty)
	m.Allowed(m.Start(), nil)
}

func TestVocabReal(t *testing.T) {
	for _, name := range []string{"llama-bpe", "llama-spm"} {
		t.Run(name, func(t *testing.T) {
			v := mtRealVocab(t, name)
			checkTrie(t, v)
			t.Logf("%d tokens, %d trie nodes, longest %d bytes", v.Size(), v.trieSize(), v.depth)
		})
	}
}
