package server

import (
	"regexp"
	"strconv"
	"testing"
)

// The startup log says how many tokens the KV pool holds, as what, and in
// how much memory: a token takes half the memory as bf16 as it does as
// float32.
func TestStartupLineSaysKVCacheTokens(t *testing.T) {
	re := regexp.MustCompile(`Model tiny: KV cache: (\d+) tokens \(\d+ blocks of \d+\), keys (\S+), values (\S+), up to (\d+(?:\.\d\d)?) MB`)
	perToken := func(k, v string) float64 {
		ts := startServer(t, func(o *Options) { o.Engine.CacheTypeK, o.Engine.CacheTypeV = k, v })
		line := ts.log.waitLines(t, 1, "Model tiny: KV cache: ")[0]
		m := re.FindStringSubmatch(line)
		if m == nil || m[2] != k || m[3] != v {
			t.Fatalf("startup line %q, want keys %s and values %s", line, k, v)
		}
		tokens, _ := strconv.Atoi(m[1])
		mb, _ := strconv.ParseFloat(m[4], 64)
		if tokens <= 0 || mb <= 0 {
			t.Fatalf("startup line %q", line)
		}
		return mb / float64(tokens)
	}
	f32, bf := perToken("f32", "f32"), perToken("bf16", "bf16")
	if r := f32 / bf; r < 1.9 || r > 2.1 {
		t.Errorf("a token takes %.3g MB as f32 and %.3g MB as bf16: want half", f32, bf)
	}
}
