#!/usr/bin/env bash
# bench/run.sh: direct OpenSSH against the same target through postern, in
# one run, interleaved sample by sample. See bench/README.md.
#
#   bash bench/run.sh            # from anywhere inside the repository
#   KEEP=1 bash bench/run.sh     # keep the scratch directory (logs, configs)
#   SFTP_ROWS=0 / EXEC_ROWS=0    # skip the sftp rows / the exec rows
#   SFTP_FLOOR=0                 # skip the sftp relay-floor column
#   META_ROWS=0                  # skip the metadata-heavy sftp row (1,000 small files)
#   SANDBOX_ROWS=0               # skip the read sandbox's rows
#
# Everything listens on 127.0.0.1 only. Every process started here is stopped
# on exit. No timing threshold makes this script fail: it measures and prints.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
# shellcheck source=bench/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Sample counts (those of bench/README.md's rows; override only to
# experiment).
N_EXEC=${N_EXEC:-31}      # exec on a new connection, and over ControlMaster
N_ECHO=${N_ECHO:-200}     # sequential `echo hi` on new connections
N_CONC=${N_CONC:-50}      # concurrent `sleep 1` on new connections
CONC_ROUNDS=${CONC_ROUNDS:-3}
WARMUP=${WARMUP:-3}       # unmeasured runs per column before each row
N_SFTP=${N_SFTP:-5}       # sftp get and put samples per column
SFTP_MIB=${SFTP_MIB:-256} # size of the transferred file
# Which rows run (both by default; the recorded results have both).
EXEC_ROWS=${EXEC_ROWS:-1}
SFTP_ROWS=${SFTP_ROWS:-1}
# The read sandbox's rows: a read command through postern with the sandbox
# off and with it (issue 21), beside direct.
SANDBOX_ROWS=${SANDBOX_ROWS:-1}
N_SANDBOX=${N_SANDBOX:-31} # samples per column, new connection and ControlMaster
SANDBOX_CMD=${SANDBOX_CMD:-cat /etc/hostname}
# A third sftp column: the same transfers through postern's exec relay, with
# no SFTP parsing at all (see the sftp section of README.md).
SFTP_FLOOR=${SFTP_FLOOR:-1}
# The metadata-heavy sftp row: `put -p -r` of a directory of small files.
META_ROWS=${META_ROWS:-$SFTP_ROWS}
N_META=${N_META:-5}           # samples per column
META_FILES=${META_FILES:-1000} # files in the directory
META_BYTES=${META_BYTES:-1024} # bytes per file

scratch bench

# ---------------------------------------------------------------- build
build_postern
make_keys # and the empty HOME (see lib.sh)

# ---------------------------------------------------------------- target sshd
# The target serves sftp as Debian's sshd_config does, with the sftp-server
# binary (internal-sftp only where that binary is not found).
sftp_server=internal-sftp
for f in /usr/lib/openssh/sftp-server /usr/libexec/openssh/sftp-server /usr/libexec/sftp-server; do
	if [[ -x $f ]]; then
		sftp_server=$f
		break
	fi
done
start_target_sshd "PrintMotd no" "PrintLastLog no" "MaxStartups 200:30:300" "MaxSessions 100" \
	"Subsystem sftp $sftp_server"

# ---------------------------------------------------------------- postern
start_postern

# ---------------------------------------------------------------- clients
# Both columns use the same client options. curve25519-sha256 is pinned
# because OpenSSH picks a post-quantum key exchange (sntrup761x25519) only
# against OpenSSH servers, which would charge the direct column a slower
# exchange than the postern column. See README.md.
opts=(-F /dev/null -o BatchMode=yes -o StrictHostKeyChecking=no
	-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR
	-o KexAlgorithms=curve25519-sha256 -o Ciphers=aes128-gcm@openssh.com
	-o IdentitiesOnly=yes -o IdentityAgent=none -o UpdateHostKeys=no)
direct=(ssh "${opts[@]}" -i "$work/target_key" -p "$sshd_port" "$user@127.0.0.1")
via=(ssh "${opts[@]}" -i "$work/agent_key" -p "$postern_port" 127.0.0.1 tgt)

# Check both paths once, and that the target's shell sees the empty HOME.
got=$("${direct[@]}" 'echo "$HOME"') || die "direct ssh failed (see $work/sshd.log)"
[[ $got == "$work/home" ]] || die "direct: target HOME is '$got', want $work/home"
got=$("${via[@]}" 'echo "$HOME"') || {
	tail -n 20 "$work/postern.log" >&2
	die "ssh through postern failed"
}
[[ $got == "$work/home" ]] || die "postern: target HOME is '$got', want $work/home"

cm_direct=$work/cm-direct
cm_via=$work/cm-via
ssh "${opts[@]}" -i "$work/target_key" -p "$sshd_port" \
	-o ControlMaster=yes -o ControlPath="$cm_direct" -o ControlPersist=60 -N -f "$user@127.0.0.1"
masters+=("$cm_direct")
ssh "${opts[@]}" -i "$work/agent_key" -p "$postern_port" \
	-o ControlMaster=yes -o ControlPath="$cm_via" -o ControlPersist=60 -N -f 127.0.0.1
masters+=("$cm_via")
mux_direct=(ssh "${opts[@]}" -o ControlMaster=no -o ControlPath="$cm_direct" "$user@127.0.0.1")
mux_via=(ssh "${opts[@]}" -o ControlMaster=no -o ControlPath="$cm_via" 127.0.0.1 tgt)

# ---------------------------------------------------------------- measuring
# time_one FILE CMD...: run CMD (stdout discarded) and append its wall time
# in microseconds to FILE; a failing run is fatal, since a timing of an
# error would be meaningless.
time_one() {
	local file=$1 t0 t1
	shift
	t0=$(now_us)
	"$@" >/dev/null || die "failed: $*"
	t1=$(now_us)
	echo $((t1 - t0)) >>"$file"
}

# warm CMD...: unmeasured runs, so that neither column pays a one-off cost
# (first dial of postern's upstream pool, page cache) inside the samples.
warm() {
	local i
	for ((i = 0; i < WARMUP; i++)); do "$@" true >/dev/null; done
}

# interleave N NAME CMD_DIRECT... -- CMD_VIA... : N samples of each command
# with `true` appended, alternating direct and postern (the order of the pair
# alternates too); writes $work/NAME.direct and $work/NAME.via.
interleave() {
	local n=$1 name=$2 i
	shift 2
	local a=() b=()
	while (($# > 0)) && [[ $1 != -- ]]; do a+=("$1"); shift; done
	(($# > 0)) || die "interleave: no -- between the two commands"
	shift
	b=("$@")
	: >"$work/$name.direct"
	: >"$work/$name.via"
	warm "${a[@]}"
	warm "${b[@]}"
	for ((i = 0; i < n; i++)); do
		if ((i % 2 == 0)); then
			time_one "$work/$name.direct" "${a[@]}" "${CMD[@]}"
			time_one "$work/$name.via" "${b[@]}" "${CMD[@]}"
		else
			time_one "$work/$name.via" "${b[@]}" "${CMD[@]}"
			time_one "$work/$name.direct" "${a[@]}" "${CMD[@]}"
		fi
	done
}

# quantile FILE Q: the Q quantile (nearest rank) of the numbers in FILE, in ms.
quantile() {
	sort -n "$1" | awk -v q="$2" '{ v[NR] = $1 } END {
		r = int(q * NR + 0.999999); if (r < 1) r = 1; if (r > NR) r = NR
		printf "%.1f", v[r] / 1000 }'
}
# total FILE: the sum of the numbers in FILE, in ms.
total() { awk '{ s += $1 } END { printf "%.1f", s / 1000 }' "$1"; }

# concurrent NAME ROUND CMD...: start N_CONC copies of CMD `sleep 1` at once,
# wait for all; append the wall time (us) to NAME and the failures to
# NAME.fail.
concurrent() {
	local name=$1 i p t0 t1 fail=0
	shift
	local cpids=()
	t0=$(now_us)
	for ((i = 0; i < N_CONC; i++)); do
		"$@" sleep 1 >/dev/null 2>>"$name.err" &
		cpids+=($!)
	done
	for p in "${cpids[@]}"; do
		wait "$p" || fail=$((fail + 1))
	done
	t1=$(now_us)
	echo $((t1 - t0)) >>"$name"
	echo "$fail" >>"$name.fail"
}

# ---------------------------------------------------------------- sftp
# The sftp rows drive the real sftp client in batch mode (-b) with the same
# ssh options as the exec rows. Directly: the target user with the target
# key. Through postern: the agent key, with the alias as the SSH user name,
# so postern serves that alias's own tree and the absolute paths below are
# the same paths on the target in both columns. Target and client share this
# machine, so the scratch directory is both the local and the remote side.
sftp_cmd() { # COLUMN BATCHFILE
	case $1 in
	direct) sftp "${opts[@]}" -i "$work/target_key" -P "$sshd_port" -b "$2" "$user@127.0.0.1" ;;
	via) sftp "${opts[@]}" -i "$work/agent_key" -P "$postern_port" -b "$2" "tgt@127.0.0.1" ;;
	# `sftp -s PATH` runs the target's sftp-server as an exec command instead
	# of asking for the sftp subsystem: postern classifies that one command
	# and relays its bytes like any other (write, allowed by the bench's
	# grant), so this column costs only the SSH legs, never sftpgate.
	floor) sftp "${opts[@]}" -s "$sftp_server" -i "$work/agent_key" -P "$postern_port" -b "$2" "tgt@127.0.0.1" ;;
	esac
}

# sftp_fail COLUMN WHAT: print what sftp (and, for postern, its log) said; die.
sftp_fail() {
	cat "$work/sftp.err" >&2
	if [[ $1 == via ]]; then
		tail -n 20 "$work/postern.log" >&2
		die "sftp through postern failed: $2"
	fi
	die "direct sftp failed: $2"
}

# sftp_one COLUMN OP: one transfer of the test file with sftp's `get`
# (target to client) or `put` (client to target) into a fresh file, then its
# sha256, which must match the original. Appends to $work/sftp.OP.COLUMN the
# transfer time in us, taken between two `!date` marks that sftp itself runs
# around the get or put (so the handshake, authentication and exit are left
# out), and to $work/sftp.OP.COLUMN.proc the whole sftp process's time,
# and to .cpu and .pcpu the CPU ticks of the machine and of postern.
sftp_one() {
	local col=$1 op=$2 t0 t1 sum m c0 c1 p0 p1
	local dst=$work/$op.$col.out batch=$work/sftp.batch marks=$work/sftp.marks
	rm -f "$dst"
	: >"$marks"
	{
		echo "!date +%s%N >>$marks"
		echo "$op \"$blob\" \"$dst\""
		echo "!date +%s%N >>$marks"
	} >"$batch"
	c0=$(cpu_ticks)
	p0=$(cpu_ticks "$postern_pid")
	t0=$(now_us)
	sftp_cmd "$col" "$batch" >/dev/null 2>"$work/sftp.err" || sftp_fail "$col" "$op"
	t1=$(now_us)
	c1=$(cpu_ticks)
	p1=$(cpu_ticks "$postern_pid")
	echo $((c1 - c0)) >>"$work/sftp.$op.$col.cpu"
	echo $((p1 - p0)) >>"$work/sftp.$op.$col.pcpu"
	mapfile -t m <"$marks"
	((${#m[@]} == 2)) || die "sftp $op ($col): expected two timing marks in $marks"
	echo $(((m[1] - m[0]) / 1000)) >>"$work/sftp.$op.$col"
	echo $((t1 - t0)) >>"$work/sftp.$op.$col.proc"
	[[ -f $dst ]] || die "sftp $op ($col): $dst was not created"
	sum=$(sha256sum "$dst" | cut -d' ' -f1)
	[[ $sum == "$blob_sum" ]] || die "sftp $op ($col): sha256 of the received file is $sum, want $blob_sum"
	rm -f "$dst"
	sftp_checked=$((sftp_checked + 1))
}

# meta_one COLUMN: one `put -p -r` of the directory of small files into a
# fresh directory on the target: per file an open (decided by postern), a
# write, an fsetstat of mode and times (which rides on the open) and a
# close. Appends the transfer time (us, between `!date` marks) to
# $work/meta.COLUMN and the CPU ticks as sftp_one does; checks every file's
# sha256, and one file's mode and time.
meta_one() {
	local col=$1 sum m c0 c1 p0 p1
	local dst=$work/meta.$col.out batch=$work/meta.batch marks=$work/sftp.marks
	rm -rf "$dst"
	: >"$marks"
	{
		echo "!date +%s%N >>$marks"
		echo "put -p -r \"$small\" \"$dst\""
		echo "!date +%s%N >>$marks"
	} >"$batch"
	c0=$(cpu_ticks)
	p0=$(cpu_ticks "$postern_pid")
	sftp_cmd "$col" "$batch" >/dev/null 2>"$work/sftp.err" || sftp_fail "$col" "put -p -r of $META_FILES files"
	c1=$(cpu_ticks)
	p1=$(cpu_ticks "$postern_pid")
	echo $((c1 - c0)) >>"$work/meta.$col.cpu"
	echo $((p1 - p0)) >>"$work/meta.$col.pcpu"
	mapfile -t m <"$marks"
	((${#m[@]} == 2)) || die "put -p -r ($col): expected two timing marks in $marks"
	echo $(((m[1] - m[0]) / 1000)) >>"$work/meta.$col"
	sum=$(cd "$dst" && sha256sum -- * | sha256sum | cut -d' ' -f1)
	[[ $sum == "$small_sum" ]] || die "put -p -r ($col): the files differ from the originals"
	[[ $(stat -c '%a %Y' "$dst/f0000") == "$(stat -c '%a %Y' "$small/f0000")" ]] ||
		die "put -p -r ($col): f0000's mode or time was not kept"
	rm -rf "$dst"
	meta_checked=$((meta_checked + 1))
}

sftp_checked=0
meta_checked=0
if ((META_ROWS)); then
	small=$work/small
	mkdir "$small"
	echo "creating $META_FILES files of $META_BYTES bytes" >&2
	head -c $((META_FILES * META_BYTES)) /dev/urandom | split -b "$META_BYTES" -d -a 4 - "$small/f"
	chmod 0640 "$small"/*
	touch -d '2021-03-04 05:06:07' "$small"/*
	small_sum=$(cd "$small" && sha256sum -- * | sha256sum | cut -d' ' -f1)
fi
if ((SFTP_ROWS || META_ROWS)); then
	# The batch files name paths unquoted in `!date` lines and in double
	# quotes in sftp commands; keep the scratch path plain.
	[[ $work =~ ^[A-Za-z0-9_./-]+$ ]] || die "sftp rows need a plain scratch path, not $work (set TMPDIR)"
	if ((SFTP_ROWS)); then
		blob=$work/blob
		echo "creating the ${SFTP_MIB} MiB test file from /dev/urandom" >&2
		head -c $((SFTP_MIB << 20)) /dev/urandom >"$blob"
		blob_sum=$(sha256sum "$blob" | cut -d' ' -f1)
	fi
	# Check both paths, and warm them (pool, sftp-server, page cache).
	echo pwd >"$work/sftp.warm"
	for ((i = 0; i < WARMUP; i++)); do
		sftp_cmd direct "$work/sftp.warm" >/dev/null 2>"$work/sftp.err" || sftp_fail direct "pwd"
		sftp_cmd via "$work/sftp.warm" >/dev/null 2>"$work/sftp.err" || sftp_fail via "pwd"
		if ((SFTP_FLOOR)); then
			sftp_cmd floor "$work/sftp.warm" >/dev/null 2>"$work/sftp.err" || sftp_fail via "pwd (sftp -s)"
		fi
	done
fi

if ((EXEC_ROWS)); then
	echo "measuring the exec rows (interleaved; about two minutes)" >&2

	echo "  exec on a new connection: $N_EXEC samples per column" >&2
	CMD=(true)
	interleave "$N_EXEC" newconn "${direct[@]}" -- "${via[@]}"

	echo "  exec over ControlMaster: $N_EXEC samples per column" >&2
	interleave "$N_EXEC" mux "${mux_direct[@]}" -- "${mux_via[@]}"

	echo "  $N_ECHO sequential echo hi per column" >&2
	CMD=(echo hi)
	interleave "$N_ECHO" echo "${direct[@]}" -- "${via[@]}"

	echo "  $N_CONC concurrent sleep 1: $CONC_ROUNDS rounds per column" >&2
	: >"$work/conc.direct"; : >"$work/conc.direct.fail"
	: >"$work/conc.via"; : >"$work/conc.via.fail"
	for ((r = 0; r < CONC_ROUNDS; r++)); do
		if ((r % 2 == 0)); then
			concurrent "$work/conc.direct" "${direct[@]}"
			concurrent "$work/conc.via" "${via[@]}"
		else
			concurrent "$work/conc.via" "${via[@]}"
			concurrent "$work/conc.direct" "${direct[@]}"
		fi
	done
fi

# time_cpu FILE CMD...: time_one, and the CPU ticks the sample cost
# appended to FILE.cpu: the client (this shell's waited-for children),
# postern, and the target sshd with every process under it (the session,
# the login shell, the sandbox, the command). Other work on the machine is
# not counted. The /proc reads happen outside the timed part.
time_cpu() {
	local file=$1 c0 c1 s0 s1
	shift
	c0=$(tree_ticks "$postern_pid" "$sshd_pid")
	s0=$(self_children_ticks)
	time_one "$file" "$@"
	s1=$(self_children_ticks)
	c1=$(tree_ticks "$postern_pid" "$sshd_pid")
	echo $((c1 - c0 + s1 - s0)) >>"$file.cpu"
}

# self_children_ticks: the CPU ticks of this shell's children that ended
# and were waited for (cutime and cstime of /proc/$$/stat).
self_children_ticks() {
	local line
	local -a a
	read -r line <"/proc/$$/stat"
	line=${line##*) }
	read -ra a <<<"$line"
	echo $((a[13] + a[14]))
}

# interleave3 N NAME: N samples of the three commands in the arrays col_a,
# col_b and col_c, each with $SANDBOX_CMD, in a rotating order; writes
# $work/NAME.{a,b,c} (us) and .cpu (ticks).
interleave3() {
	local n=$1 name=$2 i c
	local -a order
	for c in a b c; do : >"$work/$name.$c"; : >"$work/$name.$c.cpu"; done
	for ((i = 0; i < WARMUP; i++)); do
		"${col_a[@]}" true >/dev/null
		"${col_b[@]}" true >/dev/null
		"${col_c[@]}" true >/dev/null
	done
	read -ra cmd <<<"$SANDBOX_CMD"
	for ((i = 0; i < n; i++)); do
		case $((i % 3)) in
		0) order=(a b c) ;;
		1) order=(b c a) ;;
		2) order=(c a b) ;;
		esac
		for c in "${order[@]}"; do
			local -n col=col_$c
			time_cpu "$work/$name.$c" "${col[@]}" "${cmd[@]}"
			unset -n col
		done
	done
}

if ((SANDBOX_ROWS)); then
	[[ $sandbox_found == bwrap || $sandbox_found == unshare ]] ||
		die "no read sandbox works on this machine (tgt-sb's probe: $(cat "$work/tgt-sb.add")); install bubblewrap or SANDBOX_ROWS=0"
	echo "measuring the read sandbox's rows ($SANDBOX_CMD, in $sandbox_found): $N_SANDBOX samples per column" >&2
	col_a=("${direct[@]}")
	col_b=("${via[@]}")
	col_c=(ssh "${opts[@]}" -i "$work/agent_key" -p "$postern_port" 127.0.0.1 tgt-sb)
	interleave3 "$N_SANDBOX" sbnew
	# Masters of their own: those of the exec rows close 60 s after their
	# last session (ControlPersist), which the rows in between outlast.
	ssh "${opts[@]}" -i "$work/target_key" -p "$sshd_port" \
		-o ControlMaster=yes -o ControlPath="$work/cm-sb-direct" -o ControlPersist=60 -N -f "$user@127.0.0.1"
	masters+=("$work/cm-sb-direct")
	ssh "${opts[@]}" -i "$work/agent_key" -p "$postern_port" \
		-o ControlMaster=yes -o ControlPath="$work/cm-sb-via" -o ControlPersist=60 -N -f 127.0.0.1
	masters+=("$work/cm-sb-via")
	col_a=(ssh "${opts[@]}" -o ControlMaster=no -o ControlPath="$work/cm-sb-direct" "$user@127.0.0.1")
	col_b=(ssh "${opts[@]}" -o ControlMaster=no -o ControlPath="$work/cm-sb-via" 127.0.0.1 tgt)
	col_c=(ssh "${opts[@]}" -o ControlMaster=no -o ControlPath="$work/cm-sb-via" 127.0.0.1 tgt-sb)
	interleave3 "$N_SANDBOX" sbmux
fi

sftp_cols=(direct via)
((SFTP_FLOOR)) && sftp_cols+=(floor)
if ((SFTP_ROWS)); then
	echo "measuring the sftp rows: get and put of ${SFTP_MIB} MiB, $N_SFTP samples per column (interleaved)" >&2
	for op in get put; do
		for col in "${sftp_cols[@]}"; do
			for ext in "" .proc .cpu .pcpu; do : >"$work/sftp.$op.$col$ext"; done
		done
	done
	for ((i = 0; i < N_SFTP; i++)); do
		for op in get put; do
			# Columns in turn, the order reversed every other sample.
			if ((i % 2 == 0)); then
				for col in "${sftp_cols[@]}"; do sftp_one "$col" "$op"; done
			else
				for ((c = ${#sftp_cols[@]} - 1; c >= 0; c--)); do sftp_one "${sftp_cols[c]}" "$op"; done
			fi
		done
	done
fi
if ((META_ROWS)); then
	echo "measuring the metadata row: put -p -r of $META_FILES files, $N_META samples per column (interleaved)" >&2
	for col in "${sftp_cols[@]}"; do
		for ext in "" .cpu .pcpu; do : >"$work/meta.$col$ext"; done
	done
	for ((i = 0; i < N_META; i++)); do
		if ((i % 2 == 0)); then
			for col in "${sftp_cols[@]}"; do meta_one "$col"; done
		else
			for ((c = ${#sftp_cols[@]} - 1; c >= 0; c--)); do meta_one "${sftp_cols[c]}"; done
		fi
	done
fi

# ---------------------------------------------------------------- report
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "-" }'; }
fails() { awk '{ s += $1 } END { print s + 0 }' "$1"; }

row() { # LABEL DIRECT VIA GOAL
	printf '%-38s %10s %10s %7s   %s\n' "$1" "$2" "$3" "$(ratio "$2" "$3")" "$4"
}

# mibs FILE Q: throughput in MiB/s of the Q quantile of the transfer times
# (us) in FILE; Q = 1 is the slowest sample.
mibs() {
	sort -n "$1" | awk -v q="$2" -v mib="$SFTP_MIB" '{ v[NR] = $1 } END {
		r = int(q * NR + 0.999999); if (r < 1) r = 1; if (r > NR) r = NR
		if (v[r] > 0) printf "%.1f", mib / (v[r] / 1e6); else print "-" }'
}
# secs FILE: the median of the numbers (us) in FILE, in seconds.
secs() { awk -v ms="$(quantile "$1" 0.5)" 'BEGIN { printf "%.2f", ms / 1000 }'; }

commit=$(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(dirty_tree)
echo
echo "postern bench  $(date -u +%Y-%m-%dT%H:%MZ)  commit $commit${dirty:+ plus uncommitted changes}"
echo "$(nproc) cores, $(uname -sr), $(ssh -V 2>&1 | cut -d, -f1), $(go version | cut -d' ' -f3)"
echo "client: -o KexAlgorithms=curve25519-sha256 -o Ciphers=aes128-gcm@openssh.com (both columns)"
if ((EXEC_ROWS)); then
	echo
	printf '%-38s %10s %10s %7s   %s\n' "row (ms)" direct postern ratio goal
	row "exec, new connection: median" "$(quantile "$work/newconn.direct" 0.5)" "$(quantile "$work/newconn.via" 0.5)" "<= 0.60"
	row "exec, new connection: p90" "$(quantile "$work/newconn.direct" 0.9)" "$(quantile "$work/newconn.via" 0.9)" ""
	row "exec, ControlMaster: median" "$(quantile "$work/mux.direct" 0.5)" "$(quantile "$work/mux.via" 0.5)" "<= 1.05"
	row "exec, ControlMaster: p90" "$(quantile "$work/mux.direct" 0.9)" "$(quantile "$work/mux.via" 0.9)" ""
	row "$N_ECHO x echo hi, sequential: total" "$(total "$work/echo.direct")" "$(total "$work/echo.via")" "<= 0.60"
	row "$N_CONC x sleep 1, concurrent: median" "$(quantile "$work/conc.direct" 0.5)" "$(quantile "$work/conc.via" 0.5)" "<= 1.05, no failures"
	printf '%-38s %10s %10s %7s   %s\n' "  failures ($CONC_ROUNDS rounds x $N_CONC)" \
		"$(fails "$work/conc.direct.fail")" "$(fails "$work/conc.via.fail")" "" "0"
	echo
	echo "ratio = postern / direct time; below 1 means postern is faster."
	if (($(fails "$work/conc.direct.fail") + $(fails "$work/conc.via.fail") > 0)); then
		echo "the concurrent wall times include failed clients, which end early: not comparable."
	fi
fi
if ((SANDBOX_ROWS)); then
	hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
	# cpu_ms FILE: the mean CPU ms per sample of the ticks in FILE.
	cpu_ms() { awk -v hz="$hz" '{ s += $1 } END { if (NR) printf "%.1f", s * 1000 / hz / NR; else print "-" }' "$1"; }
	added() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.1f", b - a }'; }
	pct() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0) printf "%+.0f%%", (b - a) * 100 / a; else print "-" }'; }
	sbrow() { # LABEL DIRECT OFF ON ADDED GOAL
		printf '%-38s %9s %9s %9s %9s   %s\n' "$1" "$2" "$3" "$4" "$5" "$6"
	}
	echo
	echo "the read sandbox: \`$SANDBOX_CMD\` directly, through postern with the sandbox off (tgt), and in it (tgt-sb: $sandbox_found)"
	sbrow "row (ms)" direct postern "+sandbox" added goal
	for r in sbnew sbmux; do
		label="read, new connection"
		[[ $r == sbmux ]] && label="read, ControlMaster"
		m_a=$(quantile "$work/$r.a" 0.5) m_b=$(quantile "$work/$r.b" 0.5) m_c=$(quantile "$work/$r.c" 0.5)
		goal="<= +5 ms"
		add=$(added "$m_b" "$m_c")
		if [[ $r == sbmux ]]; then
			goal="<= +10%"
			add="$add ($(pct "$m_b" "$m_c"))"
		fi
		sbrow "$label: median" "$m_a" "$m_b" "$m_c" "$add" "$goal"
		sbrow "$label: p90" "$(quantile "$work/$r.a" 0.9)" "$(quantile "$work/$r.b" 0.9)" "$(quantile "$work/$r.c" 0.9)" "" ""
		sbrow "$label: CPU per command" "$(cpu_ms "$work/$r.a.cpu")" "$(cpu_ms "$work/$r.b.cpu")" "$(cpu_ms "$work/$r.c.cpu")" \
			"$(added "$(cpu_ms "$work/$r.b.cpu")" "$(cpu_ms "$work/$r.c.cpu")")" ""
	done
	echo "CPU per command: the client's, postern's and the target sshd's with all under it (login shell, sandbox, command), mean of $N_SANDBOX."
	echo "added: +sandbox minus postern (tgt's read sandbox is off)."
fi
# row3 LABEL DIRECT VIA FLOOR GOAL: a throughput row with the relay floor,
# and postern's ratio to direct and to the floor.
row3() {
	printf '%-36s %9s %9s %9s %9s %9s   %s\n' "$1" "$2" "$3" "$4" "$(ratio "$2" "$3")" "$(ratio "$4" "$3")" "$5"
}
# floor_or_dash CMD...: CMD's output with the floor column on, else "-".
floor_or_dash() { if ((SFTP_FLOOR)); then "$@"; else echo -; fi; }
# per_s FILE Q N: N per second over the Q quantile of the times (us) in FILE.
per_s() {
	sort -n "$1" | awk -v q="$2" -v n="$3" '{ v[NR] = $1 } END {
		r = int(q * NR + 0.999999); if (r < 1) r = 1; if (r > NR) r = NR
		if (v[r] > 0) printf "%.1f", n / (v[r] / 1e6); else print "-" }'
}
hz=$(getconf CLK_TCK 2>/dev/null || echo 100)
# tsec FILE: the median of the CPU ticks in FILE, in seconds.
tsec() { sort -n "$1" | awk -v hz="$hz" '{ v[NR] = $1 } END { r = int(0.5 * NR + 0.999999); if (r < 1) r = 1; printf "%.2f", v[r] / hz }'; }
if ((SFTP_ROWS || META_ROWS)); then
	echo
	printf '%-36s %9s %9s %9s %9s %9s   %s\n' "row" direct postern floor "p/direct" "p/floor" goal
fi
if ((SFTP_ROWS)); then
	for op in get put; do
		row3 "sftp $op, MiB/s: median of $N_SFTP" "$(mibs "$work/sftp.$op.direct" 0.5)" "$(mibs "$work/sftp.$op.via" 0.5)" \
			"$(floor_or_dash mibs "$work/sftp.$op.floor" 0.5)" "p/floor >= 0.95"
		row3 "sftp $op, MiB/s: slowest" "$(mibs "$work/sftp.$op.direct" 1)" "$(mibs "$work/sftp.$op.via" 1)" \
			"$(floor_or_dash mibs "$work/sftp.$op.floor" 1)" ""
	done
fi
if ((META_ROWS)); then
	row3 "put -p -r $META_FILES files, files/s: median" "$(per_s "$work/meta.direct" 0.5 "$META_FILES")" \
		"$(per_s "$work/meta.via" 0.5 "$META_FILES")" "$(floor_or_dash per_s "$work/meta.floor" 0.5 "$META_FILES")" "p/direct >= 0.80"
	row3 "put -p -r $META_FILES files, files/s: slowest" "$(per_s "$work/meta.direct" 1 "$META_FILES")" \
		"$(per_s "$work/meta.via" 1 "$META_FILES")" "$(floor_or_dash per_s "$work/meta.floor" 1 "$META_FILES")" ""
fi
if ((SFTP_ROWS || META_ROWS)); then
	echo
	echo "p/direct = postern / direct throughput, p/floor = postern / relay floor throughput; ABOVE 1 means postern is faster."
	if ((SFTP_FLOOR)); then
		echo "relay floor: the same sftp batch through postern with \`sftp -s $sftp_server\`, relayed as one exec"
		echo "  command with no SFTP parsing and no per-operation decision: what the two SSH legs alone cost."
	fi
fi
if ((SFTP_ROWS)); then
	echo "MiB/s = ${SFTP_MIB} MiB / time of the get or put alone (between \`!date\` marks in the sftp batch)."
	printf 'whole sftp process (connect, transfer, exit), median s: get %s direct, %s postern; put %s direct, %s postern\n' \
		"$(secs "$work/sftp.get.direct.proc")" "$(secs "$work/sftp.get.via.proc")" \
		"$(secs "$work/sftp.put.direct.proc")" "$(secs "$work/sftp.put.via.proc")"
	# CPU seconds per sample (median), from /proc around the whole sftp process.
	for op in get put; do
		printf 'CPU s per %s, median (whole machine; of it postern): direct %s; postern %s (%s)' \
			"$op" "$(tsec "$work/sftp.$op.direct.cpu")" "$(tsec "$work/sftp.$op.via.cpu")" "$(tsec "$work/sftp.$op.via.pcpu")"
		if ((SFTP_FLOOR)); then
			printf '; floor %s (%s)' "$(tsec "$work/sftp.$op.floor.cpu")" "$(tsec "$work/sftp.$op.floor.pcpu")"
		fi
		echo
	done
	echo "sftp -b with its defaults: buffers from the server's limits@openssh.com (255 KiB from OpenSSH), 64 in flight;"
	echo "  target: Subsystem sftp $sftp_server"
	echo "sha256 matched for all $sftp_checked transfers: ${blob_sum:0:16}..."
fi
if ((META_ROWS)); then
	echo "files/s = $META_FILES files of $META_BYTES bytes / time of the put -p -r alone (between \`!date\` marks)."
	printf 'CPU s per put -p -r, median (whole machine; of it postern): direct %s; postern %s (%s)' \
		"$(tsec "$work/meta.direct.cpu")" "$(tsec "$work/meta.via.cpu")" "$(tsec "$work/meta.via.pcpu")"
	if ((SFTP_FLOOR)); then
		printf '; floor %s (%s)' "$(tsec "$work/meta.floor.cpu")" "$(tsec "$work/meta.floor.pcpu")"
	fi
	echo
	echo "every file's sha256, and f0000's mode and time, matched in all $meta_checked runs"
fi
if [[ -s $work/conc.via.err || -s $work/conc.direct.err ]]; then
	echo
	echo "client errors during the concurrent rows (first lines):"
	sort "$work/conc.direct.err" 2>/dev/null | uniq -c | head -n 5 | sed 's/^/  direct: /'
	sort "$work/conc.via.err" 2>/dev/null | uniq -c | head -n 5 | sed 's/^/  postern: /'
fi
# postern's own warnings and errors, counted by message (never per packet).
warns=$(grep -E '"level":"(warn|error)"' "$work/postern.log" |
	grep -o '"message":"[^"]*"' | sort | uniq -c | sort -rn | head -n 5 || true)
if [[ -n $warns ]]; then
	echo
	echo "postern.log warnings and errors:"
	echo "$warns" | sed 's/"message"://; s/^/  /'
fi
