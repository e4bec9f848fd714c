# shellcheck shell=bash
# bench/lib.sh: what the bench scripts share. Sourced, never run:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# after the script's `set -euo pipefail`. It only defines functions; each
# says what it does, its arguments, and the variables it reads or sets.

# die MESSAGE...: print "bench: MESSAGE" on stderr and exit 1.
die() { echo "bench: $*" >&2; exit 1; }

# loadavg: the 1, 5 and 15 minute load averages, or "unknown".
loadavg() { cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown; }

# dirty_tree: one line of `git status` when the build sees uncommitted
# changes outside bench/ (tracked files, and untracked Go files, not stray
# binaries such as a `go test -c` output), else nothing. Run from the
# repository.
dirty_tree() {
	{
		git status --porcelain --untracked-files=no -- . ':!bench'
		git ls-files --others --exclude-standard -- '*.go' ':!bench'
	} 2>/dev/null | head -n1 || true # head may close the pipe early: not a failure
}

# ---------------------------------------------------------------- go benchmarks

# go_bench PKG REGEX BENCHTIME [FLAG...]: run the benchmarks of PKG matching
# REGEX with POSTERN_E2E=1 (a missing sshd or PostgreSQL fails instead of
# skipping), -benchtime BENCHTIME and any further `go test` FLAGs (such as
# -count 3). The output goes to stderr and is appended to the file $out. A
# failing run is appended ("PKG REGEX") to the array $failed, which the
# caller declares, and the next benchmarks still run.
go_bench() {
	local pkg=$1 re=$2 bt=$3
	shift 3
	echo "running $pkg $re (-benchtime $bt${*:+ $*})" >&2
	if ! POSTERN_E2E=1 go test "$pkg" -run '^$' -bench "$re" -benchtime "$bt" "$@" -timeout 30m 2>&1 | tee -a "$out" >&2; then
		failed+=("$pkg $re")
	fi
}

# bench_rows WIDTH FILE: one line per result line of `go test -bench` in
# FILE (NAME-CPUS  N  X ns/op  V1 UNIT1 ...): the name without "Benchmark"
# and the CPU suffix, padded to WIDTH, then the metrics as UNIT=VALUE
# (ns/op left out: for these benchmarks it is the wall time of a whole run).
bench_rows() {
	awk -v w="$1" '/^Benchmark/ {
		name = $1; sub(/-[0-9]+$/, "", name); sub(/^Benchmark/, "", name)
		row = sprintf("%-" w "s", name)
		for (i = 3; i < NF; i += 2) if ($(i + 1) != "ns/op") row = row sprintf("  %s=%s", $(i + 1), $i)
		print row
	}' "$2"
}

# ---------------------------------------------------------------- scratch and processes

# scratch NAME: make the scratch directory $work under $TMPDIR (or /tmp) as
# postern-NAME.XXXXXX, start the arrays $pids (processes to stop) and
# $masters (ControlPath sockets of ssh ControlMasters to close), and set the
# traps: on exit, cleanup; on INT or TERM, exit 130 (which runs cleanup).
scratch() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/postern-$1.XXXXXX")
	pids=()
	masters=()
	trap cleanup EXIT
	trap 'exit 130' INT TERM
}

# cleanup: the EXIT trap that scratch sets. Closes every ControlMaster in
# $masters, kills every process in $pids and waits for them, then removes
# $work, or keeps it and says so when KEEP=1. Exits with the script's status.
cleanup() {
	local rc=$? cp p
	set +e
	for cp in "${masters[@]}"; do
		ssh -F /dev/null -o ControlPath="$cp" -O exit 127.0.0.1 >/dev/null 2>&1
	done
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
	if [[ ${KEEP:-} == 1 ]]; then
		echo "scratch directory kept: $work" >&2
	else
		rm -rf "$work"
	fi
	exit "$rc"
}

# free_port: print a TCP port on 127.0.0.1 that nothing listens on now.
free_port() {
	local i p
	for ((i = 0; i < 100; i++)); do
		p=$((20000 + RANDOM % 40000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	die "no free port found"
}

# wait_listening PORT PID NAME LOG: wait (at most 10 s) until 127.0.0.1:PORT
# accepts a connection. If process PID (called NAME in messages) exits
# first, or the time runs out, print its LOG file and die.
wait_listening() {
	local port=$1 pid=$2 name=$3 log=$4 i
	for ((i = 0; i < 100; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$log" >&2
			die "$name exited before listening on 127.0.0.1:$port"
		fi
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	cat "$log" >&2
	die "$name is not listening on 127.0.0.1:$port after 10 s"
}

# ---------------------------------------------------------------- measuring

# now_us: print the wall clock in microseconds (bash's EPOCHREALTIME: no fork).
now_us() { local t=${EPOCHREALTIME/[.,]/}; echo "$((10#$t))"; }

# cpu_ticks [PID]: print the CPU time (clock ticks) the whole machine has
# spent busy (user, nice, system, irq, softirq), or with PID that of one
# process (user and system). Reads /proc with bash builtins only (no fork
# inside a sample).
cpu_ticks() {
	local line f
	if (($# == 0)); then
		read -r line </proc/stat || return 0
		read -ra f <<<"$line"
		echo $((f[1] + f[2] + f[3] + f[6] + f[7]))
	else
		read -r line <"/proc/$1/stat" || return 0
		line=${line##*) } # fields after the command name; utime and stime are 12 and 13
		read -ra f <<<"$line"
		echo $((f[11] + f[12]))
	fi
}

# tree_ticks PID...: print the CPU time (clock ticks) that the processes
# PID and all their descendants have used, including the descendants that
# ended and were waited for (a process's cutime and cstime): a counter that
# only grows while the tree lives, whatever else the machine runs. One cat
# and one awk over /proc/*/stat.
tree_ticks() {
	# cat fails on a process that ended between the glob and its read.
	{ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v roots="$*" '
		{
			pid = $1
			sub(/.*\) /, "") # after the command name: state ppid ... utime(12) stime(13) cutime(14) cstime(15)
			kids[$2] = kids[$2] " " pid
			ticks[pid] = $12 + $13 + $14 + $15
		}
		END {
			n = split(roots, queue, " ")
			for (i = 1; i <= n; i++) {
				p = queue[i]
				if (seen[p]++) continue
				total += ticks[p]
				m = split(kids[p], c, " ")
				for (j = 1; j <= m; j++) queue[++n] = c[j]
			}
			print total + 0
		}'
}

# ---------------------------------------------------------------- target and postern
# In this order: build_postern, make_keys, start_target_sshd, start_postern.

# build_postern: build ./cmd/postern into $work/postern and set $postern to
# it. Run from the repository.
build_postern() {
	echo "building postern" >&2
	go build -o "$work/postern" ./cmd/postern
	postern=$work/postern
}

# make_keys: set $user to the user running the script (the target user) and
# make three fresh ed25519 keys in $work: target_key (the target user's,
# which postern holds), agent_key (the agent's) and sshd_host_key (the
# target sshd's host key). Then the empty HOME and authorized_keys:
#
# The target user's shell gets HOME=$work/home, an empty directory: sshd sets
# HOME from the password entry, and bash started by sshd reads ~/.bashrc even
# for `ssh host cmd`, so a slow rc file (pyenv, nvm, conda) would dominate
# both columns and measure the target, not the relay. The environment= option
# on the authorized key (allowed for HOME only by PermitUserEnvironment)
# replaces HOME after sshd has set it. Both columns log in with this same
# key, so both get the same empty HOME.
make_keys() {
	user=$(id -un)
	ssh-keygen -q -t ed25519 -N '' -C bench-target -f "$work/target_key"
	ssh-keygen -q -t ed25519 -N '' -C bench-agent -f "$work/agent_key"
	ssh-keygen -q -t ed25519 -N '' -C bench-sshd-host -f "$work/sshd_host_key"
	mkdir -m 0700 "$work/home"
	printf 'environment="HOME=%s" %s\n' "$work/home" "$(cat "$work/target_key.pub")" \
		>"$work/authorized_keys"
}

# start_target_sshd [LINE...]: start the target, an OpenSSH sshd on a free
# port $sshd_port of 127.0.0.1, with the keys of make_keys and the config
# $work/sshd_config: the lines below, then each LINE (extra sshd_config
# lines, such as "MaxSessions 100"). Checks the config (sshd -t), starts
# `sshd -D -e` with its log in $work/sshd.log, adds it to $pids and waits
# until it listens. As root, creates /run/sshd (privilege separation).
start_target_sshd() {
	local line
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
	for line in "$@"; do echo "$line" >>"$work/sshd_config"; done
	if [[ $(id -u) == 0 ]]; then
		mkdir -p /run/sshd
		chmod 0755 /run/sshd
	fi
	/usr/sbin/sshd -t -f "$work/sshd_config"
	/usr/sbin/sshd -D -e -f "$work/sshd_config" 2>"$work/sshd.log" &
	pids+=($!)
	sshd_pid=$!
	wait_listening "$sshd_port" "${pids[-1]}" "target sshd" "$work/sshd.log"
}

# start_postern: set up postern's data directory $data in $work (init;
# agent "bench" with agent_key; connection "tgt" to the target sshd as
# $user with target_key, with the read sandbox off so that the relay's rows
# measure the relay alone; connection "tgt-sb" to the same target with the
# read sandbox required, for the sandbox's rows; grants of bench on both
# that allow every class, so nothing waits for an approval), then start
# `postern serve` on a free port $postern_port of 127.0.0.1 with its log in
# $work/postern.log, add it to $pids, set $postern_pid and wait until it
# listens. conn add probes the target for the read sandbox: tgt-sb's add
# fails when no sandbox works on this machine (install bubblewrap).
start_postern() {
	data=$work/data
	"$postern" init --data "$data" >/dev/null
	"$postern" agent add bench --key "$work/agent_key.pub" --data "$data" >/dev/null
	# The host key is pinned from the key file sshd serves, as a known_hosts line.
	"$postern" conn add tgt --host 127.0.0.1 --port "$sshd_port" --user "$user" \
		--key-file "$work/target_key" \
		--host-key "[127.0.0.1]:$sshd_port $(cut -d' ' -f1,2 "$work/sshd_host_key.pub")" \
		--read-sandbox off --read-sandbox-reason "bench: the relay's rows measure the relay alone" \
		--data "$data" >/dev/null
	"$postern" grant bench tgt --read allow --write allow --destructive allow --data "$data" >/dev/null
	"$postern" conn add tgt-sb --host 127.0.0.1 --port "$sshd_port" --user "$user" \
		--key-file "$work/target_key" \
		--host-key "[127.0.0.1]:$sshd_port $(cut -d' ' -f1,2 "$work/sshd_host_key.pub")" \
		--read-sandbox require --data "$data" >"$work/tgt-sb.add"
	sandbox_found=$(sed -n 's/^read sandbox probe: \([a-z]*\).*/\1/p' "$work/tgt-sb.add")
	"$postern" grant bench tgt-sb --read allow --write allow --destructive allow --data "$data" >/dev/null

	postern_port=$(free_port)
	"$postern" serve --data "$data" --ssh-listen "127.0.0.1:$postern_port" >"$work/postern.log" 2>&1 &
	pids+=($!)
	postern_pid=$!
	wait_listening "$postern_port" "$postern_pid" "postern serve" "$work/postern.log"
}
