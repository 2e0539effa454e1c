#!/usr/bin/env bash
# compare-builds.sh measures builds of blaise-agent against the build of HEAD,
# in rounds that take the builds in turn, on the targets of
# docs/performance.md: the throughput and the session process's CPU time per
# message of `acp` with 0 and 5 no-op plugs (BenchmarkACPFrontEnd), the
# throughput of the server path against local `acp` (BenchmarkServer), the
# ready times (BenchmarkReady, and through `acp --server`, of a resume and
# of `run "hello"`) and resident memory (BenchmarkMemory). It prints, for
# each target, the median of the rounds and their range, for HEAD and for
# each build, and the build's median over HEAD's.
#
# usage: docs/compare-builds.sh NAME=SPEC...
#   NAME=COMMIT           HEAD with COMMIT's change applied (git show COMMIT)
#   NAME=-COMMIT          HEAD with COMMIT's change taken back
#   NAME=FILE.patch       HEAD with the patch in FILE applied (or, -FILE.patch, taken back)
#   NAME=C1,-C2,...       HEAD with each change applied or taken back, in order
#   NAME=@COMMIT          the build of COMMIT itself (an earlier day's build)
#   NAME=env:VAR=VALUE    HEAD, its processes run with VAR=VALUE
# environment: ROUNDS (5), BENCHES (of "throughput server ready memory",
#   those to run; all), MSGS (messages of a throughput round, 300000), READY (starts
#   of a ready round, 10), SESSIONS (sessions of a memory round, 1), OUT
#   (where builds and results go; a new temporary directory).
#
# A build's median is over its rounds; "paired" is the median over its
# rounds of the build's value over that of the round of HEAD next to it,
# which the machine's drift from one round to the next moves less.
#
# The benchmarks run the processes of `acp` (front end, session process)
# from each build; the agent is the test binary's flood agent or, for
# memory, the build's demo agent. The builds use the module cache and the
# build cache of `go`; nothing is fetched but the modules of go.mod.
set -euo pipefail

root=$(git rev-parse --show-toplevel)
cd "$root"
[ $# -gt 0 ] && [ "${1#-}" = "$1" ] || { sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
rounds=${ROUNDS:-5}
msgs=${MSGS:-300000}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out/bin" "$out/src" "$out/res"
head=$(git rev-parse HEAD)
echo "builds and results in $out; HEAD is $head" >&2

# build NAME [PATCH-ARGS]: HEAD's tree, with a change applied, built. Only
# the change's code counts: its tests and docs may no longer apply to HEAD.
build() {
	local name=$1 src=$out/src/$1
	rm -rf "$src" && mkdir -p "$src"
	local commit reverse changes=${2:-} tree=$head
	if [ "${changes#@}" != "$changes" ]; then
		tree=${changes#@} changes=
	fi
	git archive "$tree" | tar -x -C "$src"
	for commit in ${changes//,/ }; do
		reverse=
		[ "${commit#-}" != "$commit" ] && commit=${commit#-} reverse=-R
		if [ "${commit%.patch}" != "$commit" ]; then cat "$root/$commit"; else git show --format= --binary "$commit"; fi |
			(cd "$src" && git apply $reverse --exclude='*_test.go' --exclude='docs/*' --exclude='*.md') ||
			{ echo "$1: $commit does not apply to HEAD" >&2 && exit 1; }
	done
	# -trimpath: the packages a change leaves alone come from the build cache.
	(cd "$src" && go build -trimpath -o "$out/bin/$name" ./cmd/blaise-agent)
}

names=(head)
declare -A bins envs
build head
bins[head]=$out/bin/head envs[head]=
for arg in "$@"; do
	name=${arg%%=*} spec=${arg#*=}
	[ "$name" != head ] || { echo "head is HEAD's name" >&2; exit 2; }
	names+=("$name")
	case $spec in
	env:*) bins[$name]=$out/bin/head envs[$name]=${spec#env:} ;;
	*)
		build "$name" "$spec"
		bins[$name]=$out/bin/$name envs[$name]=
		;;
	esac
done
go test -c -o "$out/bin/main.test" ./cmd/blaise-agent

# bench NAME FILE BENCH BENCHTIME runs a benchmark of the build NAME; the
# test binary runs in its package's directory, as go test runs it.
bench() {
	(cd "$root/cmd/blaise-agent" && env ${envs[$1]} BLAISE_BENCH_BIN="${bins[$1]}" \
		"$out/bin/main.test" -test.run '^$' -test.bench "$3" -test.benchtime "$4") |
		grep '^Benchmark' >>"$out/res/$2.txt" || true
}
# measure NAME FILE runs the benchmarks of a round.
measure() {
	echo "round $((r + 1))/$rounds: $1" >&2
	for b in ${BENCHES:-throughput server ready memory}; do
		case $b in
		throughput) bench "$1" "$2" 'BenchmarkACPFrontEnd$/throughput/(acp|acp-5plugs)$' "${msgs}x" ;;
		server) bench "$1" "$2" 'BenchmarkServer$/throughput/server$' "${msgs}x" ;;
		ready) bench "$1" "$2" 'BenchmarkReady(Server|Resume|Run)?$' "${READY:-10}x" ;;
		memory) bench "$1" "$2" 'BenchmarkMemory$' "${SESSIONS:-1}x" ;;
		*) echo "unknown benchmark $b" >&2 && exit 2 ;;
		esac
	done
}

# A round measures each build next to a round of HEAD of its own (in
# head@NAME), one first in a round and the other in the next, and starts
# with another build than the round before.
n=$((${#names[@]} - 1))
for ((r = 0; r < rounds; r++)); do
	for ((i = 0; i < n; i++)); do
		name=${names[1 + (i + r) % n]}
		if ((r % 2 == 0)); then
			measure head "head@$name" && measure "$name" "$name"
		else
			measure "$name" "$name" && measure head "head@$name"
		fi
	done
done
cat "$out"/res/head@*.txt >"$out/res/head.txt" 2>/dev/null || true

# The targets: benchmark, metric, and whether more (+) or less (-) is better.
targets='ACPFrontEnd/throughput/acp x-pipe +
ACPFrontEnd/throughput/acp msgs/s +
ACPFrontEnd/throughput/acp session-cpu-ns/msg -
ACPFrontEnd/throughput/acp-5plugs x-pipe +
ACPFrontEnd/throughput/acp-5plugs msgs/s +
ACPFrontEnd/throughput/acp-5plugs session-cpu-ns/msg -
Server/throughput/server x-acp +
Server/throughput/server msgs/s +
Server/throughput/server server-cpu-ns/msg -
Ready/acp over-agent-ms -
Ready/acp-10plugs over-agent-ms -
Ready/acp-first over-agent-ms -
Ready/acp-200stored over-agent-ms -
ReadyServer over-acp-ms -
ReadyResume over-agent-ms -
ReadyRun ms/run-median -
Memory/0plugs session-MiB -
Memory/10plugs session-MiB -
Memory/10plugs front-MiB -
Memory/10plugs agent-MiB -'

# rounds NAME BENCH METRIC: the values of the rounds, in order.
rounds() {
	[ -f "$out/res/$1.txt" ] || return 0
	awk -v b="Benchmark$2" -v m="$3" '{ name = $1; sub(/-[0-9]+$/, "", name) }
		name == b { for (i = 3; i < NF; i++) if ($(i + 1) == m) print $i }' "$out/res/$1.txt"
}
# values NAME BENCH METRIC: the values of the rounds, sorted.
values() { rounds "$@" | sort -g; }
# paired NAME BENCH METRIC: the ratios to the round of HEAD next to each
# round, sorted.
paired() {
	paste <(rounds "$@") <(rounds "head@$1" "$2" "$3") | awk 'NF == 2 && $2 != 0 { print $1 / $2 }' | sort -g
}
# summary: median (min–max) of sorted values on stdin, or "-".
summary() {
	awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "-"; exit }
		med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.4g (%.4g–%.4g)\n", med, v[1], v[NR] }'
}

echo
echo "rounds: $rounds, $(date -u +%Y-%m-%d), HEAD $head; (+): more is better, (-): less; ratio: the build's median over HEAD's"
printf '%-50s %-12s %-26s %-6s %s\n' target build 'median (range)' ratio 'paired (range)'
while read -r bench metric better; do
	base=$(values head "$bench" "$metric" | summary)
	printf '%-50s %-12s %-26s\n' "$bench $metric ($better)" head "$base"
	for name in "${names[@]:1}"; do
		s=$(values "$name" "$bench" "$metric" | summary)
		ratio=$(awk -v a="${base%% *}" -v b="${s%% *}" 'BEGIN { if (a == "-" || b == "-" || a == 0) print "-"; else printf "%.2f", b / a }')
		printf '%-50s %-12s %-26s %-6s %s\n' "" "$name" "$s" "$ratio" "$(paired "$name" "$bench" "$metric" | summary)"
	done
done <<<"$targets"
