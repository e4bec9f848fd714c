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
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROUNDS=${ROUNDS:-1}  # -count of the two load benchmarks (one whole run each)
FLOOD=${FLOOD:-1}    # 0 skips the flood benchmark
FLOOD_N=${FLOOD_N:-3} # its -benchtime: logins, each under a fresh flood

out=$(mktemp "${TMPDIR:-/tmp}/postern-load.XXXXXX")
trap 'rm -f "$out"' EXIT

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(dirty_tree)
load_before=$(loadavg)

# A failing benchmark is noted in $failed (by go_bench) and the others
# still run.
failed=()
go_bench ./bastion '^BenchmarkLoad200Agents$' 1x -count "$ROUNDS"
go_bench ./bastion '^BenchmarkLoad1000Sleep$' 1x -count "$ROUNDS"
if ((FLOOD)); then
	go_bench ./bastion '^BenchmarkLoginUnderFlood$' "${FLOOD_N}x" -count 1
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
bench_rows 18 "$out"
echo
echo "p50-ms, p99-ms: per command, session open to exit status (sleep included for Load1000Sleep)."
echo "peak-KiB/session: peak HeapInuse growth / peak concurrent sessions; the in-process test clients included."
echo "ms/login: a real ssh login and command under the flood; ms/login-before: the same before it."
if ((${#failed[@]} > 0)); then
	echo
	echo "FAILED (no numbers; see their output above): ${failed[*]}"
	exit 1
fi
