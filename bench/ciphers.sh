#!/usr/bin/env bash
# bench/ciphers.sh: what each cipher costs postern, in one run: x/crypto's
# ciphers in a Go benchmark (BenchmarkCipher, BenchmarkKeyExchange), then
# real `ssh -c CIPHER ... cat FILE >/dev/null` transfers, directly to an
# OpenSSH target and through postern, interleaved sample by sample.
# See bench/README.md.
#
#   bash bench/ciphers.sh          # from anywhere inside the repository
#   KEEP=1 bash bench/ciphers.sh   # keep the scratch directory
#
# Everything listens on 127.0.0.1 only. Every process started here is stopped
# on exit. No timing threshold makes this script fail: it measures and prints.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

N=${N:-5}              # transfers per cipher and column
MIB=${MIB:-256}        # size of the file read with cat
GO_BENCHTIME=${GO_BENCHTIME:-10x}
# The client's -c values; "default" is no -c (the client's own list).
CIPHERS=${CIPHERS:-"default aes128-gcm@openssh.com aes256-gcm@openssh.com aes128-ctr chacha20-poly1305@openssh.com"}

scratch ciphers

load_before=$(loadavg)

# ---------------------------------------------------------------- Go benchmark
echo "running BenchmarkCipher and BenchmarkKeyExchange ($GO_BENCHTIME)" >&2
go test ./bastion -run '^$' -bench 'Cipher|KeyExchange' -benchtime "$GO_BENCHTIME" >"$work/gobench.txt" 2>&1 ||
	{ cat "$work/gobench.txt" >&2; die "go benchmark failed"; }

# ---------------------------------------------------------------- target and postern
build_postern
make_keys # and the empty HOME: a slow ~/.bashrc would be measured in both columns
start_target_sshd
start_postern

opts=(-F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
	-o LogLevel=ERROR -o IdentitiesOnly=yes -o IdentityAgent=none -o UpdateHostKeys=no)
blob=$work/blob
echo "creating the ${MIB} MiB file from /dev/urandom" >&2
head -c $((MIB << 20)) /dev/urandom >"$blob"

# client COLUMN CIPHER: the ssh command line of a column with -c CIPHER.
client() {
	local c=()
	[[ $2 == default ]] || c=(-c "$2")
	case $1 in
	direct) echo ssh "${opts[@]}" "${c[@]}" -i "$work/target_key" -p "$sshd_port" "$user@127.0.0.1" ;;
	postern) echo ssh "${opts[@]}" "${c[@]}" -i "$work/agent_key" -p "$postern_port" 127.0.0.1 tgt ;;
	esac
}
# negotiated COLUMN CIPHER: the cipher and MAC the client says it uses.
negotiated() {
	local cmd
	read -ra cmd <<<"$(client "$1" "$2")"
	"${cmd[@]:0:1}" -v "${cmd[@]:1}" true 2>&1 | sed -n 's/.*kex: client->server cipher: \([^ ]*\) MAC: \([^ ]*\).*/\1 \2/p' | head -n1
}
# one COLUMN CIPHER: one `cat FILE` transfer; appends wall us, machine and
# postern CPU ticks.
one() {
	local cmd t0 t1 c0 c1 p0 p1 f=$work/$1.${2//[^a-z0-9]/_}
	read -ra cmd <<<"$(client "$1" "$2")"
	c0=$(cpu_ticks); p0=$(cpu_ticks "$postern_pid"); t0=$(now_us)
	"${cmd[@]}" cat "$blob" >"$work/out" || die "failed: ${cmd[*]} cat"
	t1=$(now_us); c1=$(cpu_ticks); p1=$(cpu_ticks "$postern_pid")
	[[ $(stat -c %s "$work/out") == $((MIB << 20)) ]] || die "$1 $2: short transfer"
	echo "$((t1 - t0)) $((c1 - c0)) $((p1 - p0))" >>"$f"
}

echo "measuring: cat of ${MIB} MiB, $N samples per cipher and column (interleaved)" >&2
for c in $CIPHERS; do
	one direct "$c"; one postern "$c" # warm: page cache, postern's upstream pool
	: >"$work/direct.${c//[^a-z0-9]/_}"
	: >"$work/postern.${c//[^a-z0-9]/_}"
	for ((i = 0; i < N; i++)); do
		if ((i % 2 == 0)); then one direct "$c"; one postern "$c"; else one postern "$c"; one direct "$c"; fi
	done
done

# ---------------------------------------------------------------- report
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
# med FILE COL: the median of column COL (1 wall us, 2 machine ticks, 3 postern ticks).
med() { awk -v c="$2" '{ print $c }' "$1" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
least() { awk -v c="$2" '{ print $c }' "$1" | sort -n | head -n1; }
mibs() { awk -v us="$1" -v mib="$MIB" 'BEGIN { printf "%.1f", mib / (us / 1e6) }'; }
secs() { awk -v t="$1" -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }'; }
commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo
echo "postern cipher bench  $(date -u +%Y-%m-%dT%H:%MZ)  commit $commit"
echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(uname -sr), $(ssh -V 2>&1 | cut -d, -f1), $(go version | cut -d' ' -f3)"
echo "load average before: $load_before; after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "x/crypto, both ends of one connection in one process (cpu-ns/B: CPU per byte, both ends):"
grep -E '^Benchmark' "$work/gobench.txt" | sed 's/^Benchmark/  /'
echo
printf '%-30s %-42s %-42s %7s %7s %6s %9s %6s %7s\n' "ssh -c" "direct: negotiated" "postern, agent leg: negotiated" "direct" "postern" "ratio" "postern s" "ns/B" "min s"
for c in $CIPHERS; do
	d=$work/direct.${c//[^a-z0-9]/_}
	p=$work/postern.${c//[^a-z0-9]/_}
	dm=$(mibs "$(med "$d" 1)")
	pm=$(mibs "$(med "$p" 1)")
	pt=$(med "$p" 3)
	printf '%-30s %-42s %-42s %7s %7s %6s %9s %6s %7s\n' "$c" "$(negotiated direct "$c")" "$(negotiated postern "$c")" "$dm" "$pm" \
		"$(awk -v a="$dm" -v b="$pm" 'BEGIN { printf "%.2f", b / a }')" "$(secs "$pt")" \
		"$(awk -v t="$pt" -v hz="$hz" -v mib="$MIB" 'BEGIN { printf "%.2f", t / hz * 1e9 / (mib * 1048576) }')" \
		"$(secs "$(least "$p" 3)")"
done
echo
echo "direct, postern: MiB/s of \`ssh ... cat FILE >/dev/null\` (${MIB} MiB, whole ssh process), median of $N;"
echo "ratio = postern / direct throughput. postern s: CPU seconds (user and system) of postern's process per"
echo "transfer, median; ns/B: the same per byte; min s: the least of the samples (other load on a shared"
echo "machine only adds to a sample's CPU time). Both legs: the agent leg's cipher is the column's, the"
echo "upstream leg's is postern's own pick (below)."
up=$(grep '"upstream client connected"' "$work/postern.log" | grep -o '"cipher":"[^"]*","mac":"[^"]*"' | sort -u | tr '\n' ' ')
echo "upstream leg (postern to the target), from postern's log: ${up:-not logged}"
