#!/usr/bin/env bash
# bench/replicas.sh: issue 16's numbers — PostgreSQL against SQLite in one
# run, and 200 agents over two replicas. See bench/README.md ("Replicas").
#
#   bash bench/replicas.sh            # from anywhere inside the repository
#   N=500 bash bench/replicas.sh      # iterations of the policy benchmarks
#   LOAD=0 bash bench/replicas.sh     # skip the two 200-agent runs
#
# It runs, with POSTERN_E2E=1 (a missing sshd or PostgreSQL fails instead
# of skipping), each benchmark as sub-benchmarks sqlite and postgres on
# fresh databases; PostgreSQL is internal/testpg's server with its default
# durability (fsync and synchronous commit on):
#   policy BenchmarkDecideAndAudit          decision + journal + audit row, one at a time
#   policy BenchmarkDecideAndAuditParallel  the same from 16 goroutines on two replicas
#   policy BenchmarkWakeLatency             approve -> waiter returns: same engine,
#                                           and another replica's engine
#   bastion BenchmarkLoad200Agents          200 agents x 50 commands, one bastion on SQLite
#   bastion BenchmarkLoad200AgentsReplicas  the same over two bastions on one PostgreSQL
# and prints their metrics in one table with the machine and its load
# average before and after. No timing makes it fail: only a benchmark that
# fails (a wrong exit status, a lost audit row, a broken chain) does.
# Everything listens on 127.0.0.1.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${N:-300}
LOAD=${LOAD:-1}

out=$(mktemp "${TMPDIR:-/tmp}/postern-replicas.XXXXXX")
trap 'rm -f "$out"' EXIT
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no -- . ':!bench' 2>/dev/null | head -n1 || true)
load_before=$(loadavg)

failed=()
go_bench ./policy '^BenchmarkDecideAndAudit$' "${N}x"
go_bench ./policy '^BenchmarkDecideAndAuditParallel$' "$((N * 4))x"
go_bench ./policy '^BenchmarkWakeLatency$' "${N}x"
if ((LOAD)); then
	go_bench ./bastion '^BenchmarkLoad200Agents$' 1x
	go_bench ./bastion '^BenchmarkLoad200AgentsReplicas$' 1x
fi
load_after=$(loadavg)

echo
echo "postern replicas  $(date -u +%Y-%m-%dT%H:%MZ)  commit $commit${dirty:+ plus uncommitted changes}"
echo "$(nproc) cores, $(uname -sr), $(/usr/lib/postgresql/15/bin/postgres --version 2>/dev/null), $(go version | cut -d' ' -f3)"
echo "load average before: $load_before; after: $load_after"
echo
bench_rows 36 "$out"
echo
echo "decisions/s: allowed operations decided, journaled and audited per second."
echo "WakeLatency p50/p99/max-ms: Approve called -> the waiter's Authorize returned with the approval consumed."
echo "Load: p50/p99-ms per command (session open to exit status); commands/s over the whole run; lost-rows: commands without an audit row."
if ((${#failed[@]} > 0)); then
	echo
	echo "FAILED (no numbers; see their output above): ${failed[*]}"
	exit 1
fi
