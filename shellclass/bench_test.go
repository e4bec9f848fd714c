package shellclass

import (
	"sort"
	"strings"
	"testing"
	"time"
)

// BenchmarkCorpus classifies every row of the corpus once per iteration and
// reports the median time per command.
func BenchmarkCorpus(b *testing.B) {
	var cmds []string
	for _, rows := range loadCorpus(b, "*.jsonl") {
		for _, r := range rows {
			if len(r.Command) < 4096 {
				cmds = append(cmds, r.Command)
			}
		}
	}
	per := make([]time.Duration, 0, len(cmds))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, c := range cmds {
			start := time.Now()
			Classify(c, Options{})
			if i == 0 {
				per = append(per, time.Since(start))
			}
		}
	}
	b.StopTimer()
	sort.Slice(per, func(i, j int) bool { return per[i] < per[j] })
	b.ReportMetric(float64(per[len(per)/2].Nanoseconds())/1e3, "µs/cmd-median")
	b.ReportMetric(float64(per[len(per)*99/100].Nanoseconds())/1e3, "µs/cmd-p99")
}

// BenchmarkTypical is one everyday read command.
func BenchmarkTypical(b *testing.B) {
	for i := 0; i < b.N; i++ {
		Classify("tail -n 100 /var/log/nginx/error.log | grep -i error | sort | uniq -c", Options{})
	}
}

// BenchmarkWorstCase runs the inputs that could make the walk expensive;
// each must stay bounded (linear in the input, capped by the limits).
func BenchmarkWorstCase(b *testing.B) {
	cases := map[string]string{
		"64KiB-of-a;":       strings.Repeat("a;", DefaultMaxLength/2-1),
		"deep-substitution": strings.Repeat("$(", 4000) + strings.Repeat(")", 4000),
		"long-pipeline":     strings.Repeat("cat x | ", DefaultMaxLength/8-1) + "cat",
		"nested-sh-c":       nestShC(12, "ls"),
		"eval-chain":        strings.Repeat("eval ", DefaultMaxLength/5-1) + "ls",
		"many-words":        "ls " + strings.Repeat("a ", DefaultMaxLength/2-3),
		"alias-chain":       strings.Repeat("alias a=a; ", 2000) + "a",
	}
	for name, cmd := range cases {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(cmd)))
			for i := 0; i < b.N; i++ {
				Classify(cmd, Options{})
			}
		})
	}
}
