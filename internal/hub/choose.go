package hub

import (
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Preference is the order in which Choose takes a GGUF quantization when no
// file is named: the usual best trade-off first (Q4_K_M), then the
// near-lossless Q8_0, then the other types this engine runs, the
// unquantized ones last. Files of other types (Q2_K, Q3_K_*, IQ*, …) hold
// tensor types the engine cannot run and are never chosen.
var Preference = []string{
	"Q4_K_M", "Q8_0", "Q5_K_M", "Q6_K", "Q4_K_S", "Q5_K_S",
	"Q4_0", "Q4_1", "Q5_0", "Q5_1", "F16", "BF16", "F32",
}

// shardRe matches llama.cpp's split names: "name-00001-of-00003.gguf".
var shardRe = regexp.MustCompile(`(?i)^(.*)-(\d{5})-of-(\d{5})(\.gguf)$`)

// expandShards replaces each shard of a split model by its whole set, in
// order, keeping the spelling; other names stay. Duplicates are dropped.
func expandShards(files []string) []string {
	var out []string
	seen := map[string]bool{}
	add := func(f string) {
		if !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for _, f := range files {
		m := shardRe.FindStringSubmatch(f)
		n := 0
		if m != nil {
			n, _ = strconv.Atoi(m[3])
		}
		if n < 1 {
			add(f)
			continue
		}
		for i := 1; i <= n; i++ {
			add(fmt.Sprintf("%s-%05d-of-%s%s", m[1], i, m[3], m[4]))
		}
	}
	return out
}

// candidate is one GGUF model among a repository's files.
type candidate struct {
	files []string
	rank  int
	name  string
}

// Choose picks one GGUF model among a repository's files (repo-relative
// names): the first quantization of Preference that a file name carries
// (as a word: "model-Q4_K_M.gguf", "model.q8_0.gguf", "BF16/model-BF16-00001-of-00002.gguf"),
// the first by name when several carry it. Vision projectors (mmproj) are
// skipped, and a split model counts only with all its shards. It returns
// the model's files, shards in order.
func Choose(names []string) ([]string, error) {
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	var cands []candidate
	var gguf []string
	seen := map[string]bool{}
	for _, n := range names {
		base := path.Base(n)
		if !isGGUF(base) || isMMProj(n) {
			continue
		}
		gguf = append(gguf, n)
		files := expandShards([]string{n})
		if seen[files[0]] {
			continue
		}
		seen[files[0]] = true
		complete := true
		for _, f := range files {
			complete = complete && have[f]
		}
		if !complete {
			continue
		}
		if r := quantRank(files[0]); r >= 0 {
			cands = append(cands, candidate{files: files, rank: r, name: files[0]})
		}
	}
	if len(gguf) == 0 {
		return nil, fmt.Errorf("no .gguf file in the repository: this server runs GGUF models only; pick a GGUF repository (often named …-GGUF)")
	}
	if len(cands) == 0 {
		if len(gguf) > 12 {
			gguf = append(gguf[:12], "…")
		}
		return nil, fmt.Errorf("none of its GGUF files has a quantization this server chooses by itself (%s); name one with -f (models.format.quantized_file): %s",
			strings.Join(Preference, ", "), strings.Join(gguf, ", "))
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].rank != cands[j].rank {
			return cands[i].rank < cands[j].rank
		}
		return cands[i].name < cands[j].name
	})
	return cands[0].files, nil
}

// quantRank is the place in Preference of the quantization a file name
// carries, -1 when none.
func quantRank(name string) int {
	stem := path.Base(name)
	if m := shardRe.FindStringSubmatch(stem); m != nil {
		stem = m[1]
	} else {
		stem = stem[:len(stem)-len(".gguf")]
	}
	stem = strings.ToUpper(stem)
	dir := strings.ToUpper(path.Dir(name))
	for i, q := range Preference {
		if hasWord(stem, q) || hasWord(dir, q) {
			return i
		}
	}
	return -1
}

// hasWord reports whether s holds q between separators: preceded by the
// start or one of "-._/ ", followed by the end or one of "-./ " (not "_",
// so that Q4_0 does not match Q4_0_4_4).
func hasWord(s, q string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], q)
		if j < 0 {
			return false
		}
		j += i
		before := j == 0 || strings.ContainsRune("-._/ ", rune(s[j-1]))
		end := j + len(q)
		after := end == len(s) || strings.ContainsRune("-./ ", rune(s[end]))
		if before && after {
			return true
		}
		i = j + 1
	}
}

// ChooseMMProj picks the vision projector to fetch with a model (its
// chosen files, repo-relative) among a repository's files: of the
// *mmproj*.gguf files, the one whose name carries the model's own type (an
// F16 model gets the F16 projector, a Q8_0 one a Q8_0 projector when there
// is one), else one carrying F16 (the precision projectors are usually
// published in), else the first by name. "" when the repository has none.
func ChooseMMProj(names, model []string) string {
	var cands []string
	for _, n := range names {
		if isMMProj(n) {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return ""
	}
	sort.Strings(cands)
	var prefer []string
	if len(model) > 0 {
		if r := quantRank(model[0]); r >= 0 {
			prefer = append(prefer, Preference[r])
		}
	}
	prefer = append(prefer, "F16")
	for _, q := range prefer {
		for _, c := range cands {
			if carries(c, q) {
				return c
			}
		}
	}
	return cands[0]
}

// isMMProj: llama.cpp's vision projectors are published as *mmproj*.gguf.
func isMMProj(name string) bool {
	base := path.Base(name)
	return isGGUF(base) && strings.Contains(strings.ToLower(base), "mmproj")
}

// carries reports whether a file's name (or folder) carries type q as a word.
func carries(name, q string) bool {
	stem := strings.ToUpper(strings.TrimSuffix(path.Base(name), path.Ext(name)))
	return hasWord(stem, q) || hasWord(strings.ToUpper(path.Dir(name)), q)
}
