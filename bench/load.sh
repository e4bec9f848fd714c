#!/usr/bin/env bash
# bench/load.sh: postern's numbers under load, from the bastion package's
# benchmarks against a real sshd. See bench/README.md ("Load").
#
#   bash bench/load.sh              # from anywhere inside the repository
#   ROUNDS=3 bash bench/load.sh     # each load benchmark three times
#   FLOOD=0 bash bench/load.sh      # skip BenchmarkLoginUnderFlood
#
# It runs, with POSTERN_E2E=1 (a missing sshd fails instead of skipping):
#   BenchmarkLoad200Agents   200 agents × 50 mixed commands (TestLoad200Agents)
#   BenchmarkLoad1000Sleep   1,000 concurrent `sleep 1` (TestLoad1000Sleep)
#   BenchmarkLoginUnderFlood a real ssh login under 500 idle and 20 slow-drip
#                            connections (TestLoginUnderFlood)
# and prints their metrics in one table, with the machine and its load
# average before and after: other work on the same cores moves every number.
# Everything listens on 127.0.0.1. No timing makes it fail: it fails only
# when a benchmark does, that is when a command ends with the wrong exit
# status or output (the audit rows are counted by the tests, not here).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

ROUNDS=${ROUNDS:-1}  # -count of the two load benchmarks (one whole run each)
FLOOD=${FLOOD:-1}    # 0 skips the flood benchmark
FLOOD_N=${FLOOD_N:-3} # its -benchtime: logins, each under a fresh flood

out=$(mktemp "${TMPDIR:-/tmp}/postern-load.XXXXXX")
trap 'rm -f "$out"' EXIT

loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown; }

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$({
	git status --porcelain --untracked-files=no -- . ':!bench'
	git ls-files --others --exclude-standard -- '*.go' ':!bench'
} 2>/dev/null | head -n1 || true) # head may close the pipe early: not a failure
load_before=$(loadavg)

# bench NAME BENCHTIME COUNT: run one benchmark of ./bastion; its output
# (result lines and b.Logf lines) goes to the terminal and to $out. A
# failing benchmark is noted in $failed and the others still run.
failed=()
bench() {
	echo "running $1 (-benchtime $2 -count $3)" >&2
	if ! POSTERN_E2E=1 go test ./bastion -run '^$' -bench "^$1\$" -benchtime "$2" -count "$3" -timeout 30m 2>&1 | tee -a "$out" >&2; then
		failed+=("$1")
	fi
}

bench BenchmarkLoad200Agents 1x "$ROUNDS"
bench BenchmarkLoad1000Sleep 1x "$ROUNDS"
if ((FLOOD)); then
	bench BenchmarkLoginUnderFlood "${FLOOD_N}x" 1
fi
load_after=$(loadavg)

echo
echo "postern load  $(date -u +%Y-%m-%dT%H:%MZ)  commit $commit${dirty:+ plus uncommitted changes}"
echo "$(nproc) cores, $(uname -sr), $(ssh -V 2>&1 | cut -d, -f1), $(go version | cut -d' ' -f3)"
echo "load average before: $load_before; after: $load_after"
echo
# A result line: NAME-CPUS  N  X ns/op  V1 UNIT1  V2 UNIT2 ...; one row per
# line, the metrics as UNIT=VALUE (ns/op left out: it is the wall time of
# a whole run, which wall-s gives in seconds).
awk '/^Benchmark/ {
	name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
	row = sprintf("%-18s", name)
	for (i = 3; i < NF; i += 2) if ($(i + 1) != "ns/op") row = row sprintf("  %s=%s", $(i + 1), $i)
	print row
}' "$out"
echo
echo "p50-ms, p99-ms: per command, session open to exit status (sleep included for Load1000Sleep)."
echo "peak-KiB/session: peak HeapInuse growth / peak concurrent sessions; the in-process test clients included."
echo "ms/login: a real ssh login and command under the flood; ms/login-before: the same before it."
if ((${#failed[@]} > 0)); then
	echo
	echo "FAILED (no numbers; see their output above): ${failed[*]}"
	exit 1
fi
