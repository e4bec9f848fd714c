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

N=${N:-5}              # transfers per cipher and column
MIB=${MIB:-256}        # size of the file read with cat
GO_BENCHTIME=${GO_BENCHTIME:-10x}
# The client's -c values; "default" is no -c (the client's own list).
CIPHERS=${CIPHERS:-"default aes128-gcm@openssh.com aes256-gcm@openssh.com aes128-ctr chacha20-poly1305@openssh.com"}

work=$(mktemp -d "${TMPDIR:-/tmp}/postern-ciphers.XXXXXX")
pids=()
cleanup() {
	local rc=$? p
	set +e
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	if [[ ${KEEP:-} == 1 ]]; then echo "scratch directory kept: $work" >&2; else rm -rf "$work"; fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
die() { echo "bench: $*" >&2; exit 1; }

free_port() {
	local i p
	for ((i = 0; i < 100; i++)); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return 0; fi
	done
	die "no free port found"
}
wait_listening() { # PORT PID NAME LOG
	local i
	for ((i = 0; i < 100; i++)); do
		kill -0 "$2" 2>/dev/null || { cat "$4" >&2; die "$3 exited before listening"; }
		if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
		sleep 0.1
	done
	cat "$4" >&2
	die "$3 is not listening on 127.0.0.1:$1 after 10 s"
}
# cpu_ticks [PID]: CPU clock ticks of the whole machine (busy), or of PID.
cpu_ticks() {
	local line f
	if (($# == 0)); then
		read -r line </proc/stat || return 0
		read -ra f <<<"$line"
		echo $((f[1] + f[2] + f[3] + f[6] + f[7]))
	else
		read -r line <"/proc/$1/stat" || return 0
		line=${line##*) }
		read -ra f <<<"$line"
		echo $((f[11] + f[12]))
	fi
}
now_us() { local t=${EPOCHREALTIME/[.,]/}; echo "$((10#$t))"; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- Go benchmark
echo "running BenchmarkCipher and BenchmarkKeyExchange ($GO_BENCHTIME)" >&2
go test ./bastion -run '^$' -bench 'Cipher|KeyExchange' -benchtime "$GO_BENCHTIME" >"$work/gobench.txt" 2>&1 ||
	{ cat "$work/gobench.txt" >&2; die "go benchmark failed"; }

# ---------------------------------------------------------------- target and postern
echo "building postern" >&2
go build -o "$work/postern" ./cmd/postern
postern=$work/postern
user=$(id -un)
ssh-keygen -q -t ed25519 -N '' -C bench-target -f "$work/target_key"
ssh-keygen -q -t ed25519 -N '' -C bench-agent -f "$work/agent_key"
ssh-keygen -q -t ed25519 -N '' -C bench-sshd-host -f "$work/sshd_host_key"
# An empty HOME for the target's shell, as in run.sh: a slow ~/.bashrc
# would be measured in both columns.
mkdir -m 0700 "$work/home"
printf 'environment="HOME=%s" %s\n' "$work/home" "$(cat "$work/target_key.pub")" >"$work/authorized_keys"
sshd_port=$(free_port)
cat >"$work/sshd_config" <<CONF
ListenAddress 127.0.0.1:$sshd_port
HostKey $work/sshd_host_key
PidFile none
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AuthorizedKeysFile $work/authorized_keys
PermitUserEnvironment HOME
PermitUserRC no
LogLevel ERROR
CONF
if [[ $(id -u) == 0 ]]; then mkdir -p /run/sshd && chmod 0755 /run/sshd; fi
/usr/sbin/sshd -D -e -f "$work/sshd_config" 2>"$work/sshd.log" &
pids+=($!)
wait_listening "$sshd_port" "${pids[-1]}" "target sshd" "$work/sshd.log"

data=$work/data
"$postern" init --data "$data" >/dev/null
"$postern" agent add bench --key "$work/agent_key.pub" --data "$data" >/dev/null
"$postern" conn add tgt --host 127.0.0.1 --port "$sshd_port" --user "$user" --key-file "$work/target_key" \
	--host-key "[127.0.0.1]:$sshd_port $(cut -d' ' -f1,2 "$work/sshd_host_key.pub")" --data "$data" >/dev/null
"$postern" grant bench tgt --read allow --write allow --destructive allow --data "$data" >/dev/null
postern_port=$(free_port)
"$postern" serve --data "$data" --ssh-listen "127.0.0.1:$postern_port" >"$work/postern.log" 2>&1 &
pids+=($!)
postern_pid=$!
wait_listening "$postern_port" "$postern_pid" "postern serve" "$work/postern.log"

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
