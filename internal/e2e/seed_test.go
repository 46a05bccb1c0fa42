package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// seedQuery is one PromQL expression of the "Useful PromQL" section of
// shared/spec/observability-seed.txt, and what it must return against this server.
type seedQuery struct {
	Comment string
	Expr    string
	Want    want
}

// want says what a query must return in the integration test.
type want int

const (
	// wantFinite: at least one sample, every value finite and >= 0.
	wantFinite want = iota
	// wantRatio: at least one sample, every value in [0, 1].
	wantRatio
	// wantOpenRatio: a speculative acceptance rate on live data: at least one sample strictly
	// between 0 and 1 (some guesses accepted, some not), none outside [0, 1].
	wantOpenRatio
	// wantAboveOne: the mean tokens per verified step: at least one sample above 1, none below.
	wantAboveOne
)

func (w want) String() string {
	return [...]string{"finite values", "ratios in [0, 1]", "ratios strictly between 0 and 1", "values above 1"}[w]
}

// seedQueries are the seed's expressions, copied verbatim (TestSeedQueriesMatchSpec keeps them
// equal to the seed file when shared/ is present).
var seedQueries = []seedQuery{
	{
		Comment: "Fraction of proposed draft tokens that were accepted",
		Expr: "rate(mistralrs_speculative_draft_tokens_accepted_total[5m])\n" +
			"  / rate(mistralrs_speculative_draft_tokens_proposed_total[5m])",
		Want: wantOpenRatio,
	},
	{
		Comment: "Mean tokens accepted per verification step (1.0 = speculation is not helping)",
		Expr: "1 + rate(mistralrs_speculative_draft_tokens_accepted_total[5m])\n" +
			"  / rate(mistralrs_speculative_drafts_total[5m])",
		Want: wantAboveOne,
	},
	{
		Comment: "P99 time to first token, all models",
		Expr: "histogram_quantile(0.99,\n" +
			"  sum(rate(mistralrs_time_to_first_token_seconds_bucket[5m])) by (le))",
		Want: wantFinite,
	},
	{
		Comment: "P95 inter-token latency for one route/model",
		Expr: "histogram_quantile(0.95,\n" +
			"  sum(rate(mistralrs_inter_token_latency_seconds_bucket{path=\"/v1/chat/completions\"}[5m])) by (le))",
		Want: wantFinite,
	},
	{
		Comment: "KV cache pressure (sustained 1.0 with a growing waiting queue means preemptions are likely)",
		Expr:    "mistralrs_kv_cache_blocks_used / mistralrs_kv_cache_blocks_total",
		Want:    wantRatio,
	},
}

// seedRecordingRule is the seed's recording-rule example.
var seedRecordingRule = struct{ Record, Expr string }{
	Record: "mistralrs:mtp_accept_rate:rate5m",
	Expr: "rate(mistralrs_speculative_draft_tokens_accepted_total[5m])\n" +
		"  / rate(mistralrs_speculative_draft_tokens_proposed_total[5m])\n",
}

// seedPath finds shared/spec/observability-seed.txt beside the repository.
func seedPath(t *testing.T) string {
	p := filepath.Join(repoRoot(t), "..", "shared", "spec", "observability-seed.txt")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("seed not found (%v): shared/ is not beside the repository", err)
	}
	return p
}

// TestSeedQueriesMatchSpec parses the seed's "Useful PromQL" section and its recording-rule
// example, and checks the copies above (which the integration test runs) are exactly those.
func TestSeedQueriesMatchSpec(t *testing.T) {
	data, err := os.ReadFile(seedPath(t))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	start := strings.Index(text, "Useful PromQL")
	end := strings.Index(text, "If you want gauge-like ergonomics")
	if start < 0 || end < start {
		t.Fatal("seed: Useful PromQL section not found")
	}
	var got []seedQuery
	for _, block := range strings.Split(text[start:end], "\n\n") {
		block = strings.Trim(block, "\n")
		if !strings.HasPrefix(block, "# ") {
			continue
		}
		comment, expr, _ := strings.Cut(block, "\n")
		got = append(got, seedQuery{Comment: strings.TrimPrefix(comment, "# "), Expr: expr})
	}
	if len(got) != len(seedQueries) {
		t.Fatalf("seed has %d PromQL examples, the test runs %d", len(got), len(seedQueries))
	}
	for i, g := range got {
		if g.Comment != seedQueries[i].Comment || g.Expr != seedQueries[i].Expr {
			t.Errorf("seed example %d:\n# %s\n%s\ntest copy:\n# %s\n%s", i, g.Comment, g.Expr, seedQueries[i].Comment, seedQueries[i].Expr)
		}
	}

	g := strings.Index(text[end:], "groups:")
	if g < 0 {
		t.Fatal("seed: recording-rule example not found")
	}
	ruleText, _, _ := strings.Cut(text[end+g:], "\n\n")
	var rf ruleFile
	if err := yaml.Unmarshal([]byte(ruleText), &rf); err != nil {
		t.Fatalf("seed recording rule: %v\n%s", err, ruleText)
	}
	if len(rf.Groups) != 1 || len(rf.Groups[0].Rules) != 1 {
		t.Fatalf("seed recording rule: want one group with one rule:\n%s", ruleText)
	}
	r := rf.Groups[0].Rules[0]
	if r.Record != seedRecordingRule.Record || strings.TrimSpace(r.Expr) != strings.TrimSpace(seedRecordingRule.Expr) {
		t.Errorf("seed recording rule %s: %q, test copy %s: %q", r.Record, r.Expr, seedRecordingRule.Record, seedRecordingRule.Expr)
	}
}

// TestRulesContainSeedRule checks deploy/prometheus records the seed's rule with the seed's expression.
func TestRulesContainSeedRule(t *testing.T) {
	for _, q := range ruleQueries(t, repoRoot(t)) {
		if q.Name == seedRecordingRule.Record {
			if q.Expr != seedRecordingRule.Expr {
				t.Errorf("%s: expr %q, the seed's is %q", q.Name, q.Expr, seedRecordingRule.Expr)
			}
			return
		}
	}
	t.Errorf("%s does not record %s", rulesPath, seedRecordingRule.Record)
}
