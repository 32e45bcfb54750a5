#!/bin/bash
# Crash-point sweep: kill `kart submit` and `kart worker` (its loop, and
# its commit thread) with SIGKILL at every call of each syscall that
# touches the spool (strace inject), in turn; restart; check the invariant:
#   every acknowledged task ends with exactly one result in done/, every
#   result is valid JSON, nothing is left in new/ or cur/, and a task that
#   ran twice says attempt > 1; an id printed by kart submit (reserved in
#   ids/) is its result's, and no reservation outlives its result (a
#   killed client's goes with kart gc).
# kart hold, release and edit are swept too (sweep_control).
# Prints: "N crash points survived, L tasks lost, D run twice unflagged".
#   SWEEP_MAX  highest call number tried per syscall (default 60)
#   SWEEP_PARTS  which sweeps (default "submit worker commit retry deps";
#                SWEEP_RETRY=0 also leaves out retry)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kart=${KART:-$root/${KART_B:-build}/kart}
max=${SWEEP_MAX:-60}
work=$(mktemp -d "${TMPDIR:-/tmp}/kart-sweep.XXXXXX")
trap 'rm -rf "$work"' EXIT
export KART_BACKEND=none
points=0 lost=0 twice=0 bad=0

mkspool() {
	rm -rf "$1"
	"$kart" -s "$1" init
	[ "$(id -u)" != 0 ] || printf '[sandbox]\nallow_root = yes\n' >"$1/kart.conf"
}

# check SPOOL NAME...: the invariant after recovery.
check() {
	local s=$1; shift
	local n f
	timeout 60 "$kart" -s "$s" worker --drain --id recover >/dev/null 2>&1 ||
		{ echo "  recovery worker failed"; bad=$((bad + 1)); }
	# Every result's name by one jq (each file alone only when one is
	# not valid JSON, to name it): a jq or two per result made this
	# sweep's points slow.
	local names= files=("$s"/done/*.json)
	[ -e "${files[0]}" ] || files=()
	if [ "${#files[@]}" -gt 0 ] && ! names=$(jq -r '.name' "${files[@]}" 2>/dev/null); then
		names=
		for f in "${files[@]}"; do
			n=$(jq -e -r .name "$f" 2>/dev/null) || [ "$n" = null ] ||
				{ echo "  invalid JSON: $f"; bad=$((bad + 1)); continue; }
			names+=$n$'\n'
		done
	fi
	local -A count=()
	while IFS= read -r n; do count[x$n]=$((${count[x$n]:-0} + 1)); done <<<"$names"
	for n in "$@"; do
		local c=${count[x$n]:-0}
		if [ "$c" -eq 0 ]; then echo "  lost: $n"; lost=$((lost + 1)); fi
		if [ "$c" -gt 1 ]; then
			# Two results for one task: only a re-run flagged by attempt is allowed,
			# and even then one result is expected; count it.
			echo "  $c results for $n"; twice=$((twice + 1))
		fi
	done
	local left; left=$(find "$s/new" "$s/cur" -mindepth 1 -not -name '.*' -not -path '*/.*' | wc -l)
	[ "$left" -eq 0 ] || { echo "  left behind: $(find "$s/new" "$s/cur" -mindepth 1 -not -path '*/.*')"; bad=$((bad + 1)); }
	# A killed client's reservation (with its tmp/ file) is gc's; any
	# other went with its result.
	"$kart" -s "$s" gc --tmp-age 0s >/dev/null 2>&1
	[ -z "$(ls -A "$s/ids" 2>/dev/null)" ] || { echo "  reservations left: $(ls -A "$s/ids")"; bad=$((bad + 1)); }
}

# reserved_ok SPOOL ID TEXT: the acknowledged submission printed ID, and
# done/ID is its result (its stdout is TEXT).
reserved_ok() {
	[ "$(cat "$1/done/$2.stdout" 2>/dev/null)" = "$3" ] ||
		{ echo "  the id printed, $2, is not its result's"; bad=$((bad + 1)); }
}

sweep_submit() {
	local sc n s=$work/sub
	for sc in openat symlinkat write fsync renameat2 unlinkat; do
		for ((n = 1; n <= max; n++)); do
			mkspool "$s"
			printf '#!/bin/sh\necho hi\n' >"$work/task.sh"
			# An earlier result under the id t (named pre): the id is
			# t.2, and the file gets name=t.
			echo '{"id": "t", "name": "pre", "status": "ok"}' >"$s/done/t.json"
			out=$(strace -o /dev/null -e trace="$sc" -e inject="$sc:signal=KILL:when=$n" \
				"$kart" -s "$s" submit --name t "$work/task.sh" 2>/dev/null)
			rc=$?
			[ $rc -eq 0 ] && break # ran to the end: no more calls of $sc
			points=$((points + 1))
			# Not acknowledged: may or may not be queued, but never half.
			local names=()
			[ -n "$out" ] && names=(t)
			for f in "$s"/new/*; do [ -e "$f" ] && names=(t); done
			check "$s" "${names[@]}"
			[ -z "$out" ] || reserved_ok "$s" "$out" hi
		done
		echo "submit: $sc: $((n - 1)) call(s) killed"
	done
}

# sweep_drain PART SPOOL SYSCALLS QUEUE AFTER: for each syscall, each of
# its calls in turn: a fresh SPOOL, QUEUE SPOOL puts its tasks there (and
# their names in NAMES), a --drain worker is killed at that call, then the
# invariant (check) and AFTER SPOOL. A run that ends by itself has no
# more calls of that syscall.
sweep_drain() {
	local part=$1 s=$2 syscalls=$3 queue=$4 after=$5 sc n rc
	for sc in $syscalls; do
		for ((n = 1; n <= max; n++)); do
			mkspool "$s"
			NAMES=()
			"$queue" "$s"
			{ timeout 60 strace -o /dev/null -e trace="$sc" -e inject="$sc:signal=KILL:when=$n" \
				"$kart" -s "$s" worker --drain --id w1 >/dev/null 2>&1; } 2>/dev/null
			rc=$?
			[ $rc -eq 0 ] && break
			points=$((points + 1))
			check "$s" "${NAMES[@]}"
			"$after" "$s"
		done
		echo "$part: $sc: $((n - 1)) call(s) killed"
	done
}

# Three tasks dropped in, and one with its id reserved: the id printed is
# final (the worker's and the commit thread's sweeps).
worker_queue() {
	local s=$1 i
	for i in 1 2 3; do
		printf '#!/bin/sh\necho %s\n' "$i" >"$s/tmp/t$i"
		mv "$s/tmp/t$i" "$s/new/t$i"
		NAMES+=("t$i")
	done
	"$kart" -s "$s" submit --name r -- echo r >"$work/r.id" 2>/dev/null
	NAMES+=(r)
}
worker_after() { reserved_ok "$1" "$(cat "$work/r.id")" r; }

sweep_worker() {
	sweep_drain worker "$work/wrk" "openat write fsync renameat2 linkat unlinkat mkdirat fsetxattr" \
		worker_queue worker_after
}

# The commit thread's calls (the thread named kart-commit: it publishes
# results). strace without -f follows the loop alone, so this sweep
# attaches to that thread only, before the tasks arrive; a SIGKILL sent
# at one of its calls ends the whole worker.
sweep_commit() {
	local sc n s=$work/com w ctid i
	for sc in openat write fsync sync_file_range renameat2 linkat unlinkat fsetxattr; do
		for ((n = 1; n <= max; n++)); do
			mkspool "$s"
			"$kart" -s "$s" worker --id w1 >/dev/null 2>"$work/com.log" &
			w=$!
			for ((i = 0; i < 100; i++)); do
				ctid=$(grep -lx kart-commit /proc/"$w"/task/*/comm 2>/dev/null | head -1 | cut -d/ -f5)
				[ -n "$ctid" ] && grep -q ' on ' "$work/com.log" && break
				sleep 0.05
			done
			[ -n "$ctid" ] || { echo "  no commit thread"; bad=$((bad + 1)); kill "$w"; wait "$w"; break; }
			strace -qq -o /dev/null -e trace="$sc" -e inject="$sc:signal=KILL:when=$n" -p "$ctid" 2>/dev/null &
			local sp=$!
			for ((i = 0; i < 100; i++)); do
				[ "$(sed -n 's/^TracerPid:[[:space:]]*//p' "/proc/$ctid/status" 2>/dev/null)" != 0 ] && break
				sleep 0.02
			done
			# Not traced, the run would end as one with no more calls.
			[ "$i" -lt 100 ] || { echo "  strace never attached to the commit thread"; bad=$((bad + 1)); }
			NAMES=()
			worker_queue "$s"
			for ((i = 0; i < 300; i++)); do
				kill -0 "$w" 2>/dev/null || break
				[ "$(find "$s/done" -maxdepth 1 -name '[tr]*.json' | wc -l)" -ge 4 ] && break
				sleep 0.02
			done
			local killed=1
			if kill -0 "$w" 2>/dev/null; then
				killed=0 # ran to the end: no more calls of $sc
				kill "$w"
			fi
			wait "$w" 2>/dev/null
			kill "$sp" 2>/dev/null
			wait "$sp" 2>/dev/null
			[ $killed = 0 ] && break
			points=$((points + 1))
			check "$s" "${NAMES[@]}"
			worker_after "$s"
		done
		echo "commit: $sc: $((n - 1)) call(s) killed"
	done
}

# retry_on= (spool-layout WORKER §6): the worker's loop keeps a failed run in
# done/ID.attempts/ and re-queues the task with its delay; killed at each
# of those calls, every task still ends with one result, whose attempts
# are in order and never more than retries= allows (1 + 1 + a re-queue
# per crash, bounded by retries=2). SWEEP_RETRY=0 skips it.
retry_queue() {
	local s=$1 i
	for i in 1 2; do
		printf '#!/bin/sh\n#kart: retry_on=failed retries=2\necho %s\nexit 1\n' "$i" >"$s/tmp/r$i"
		mv "$s/tmp/r$i" "$s/new/r$i"
		NAMES+=("r$i")
	done
}

retry_after() {
	local s=$1 i f
	for i in "${NAMES[@]}"; do
		f="$s/done/$i.json"
		[ -e "$f" ] || continue
		jq -e '(.attempt <= 3) and ([.attempts[].attempt] | . == sort) and
			(.attempts[-1].attempt == .attempt)' "$f" >/dev/null 2>&1 ||
			{ echo "  bad attempts in $f"; bad=$((bad + 1)); }
	done
}

sweep_retry() {
	sweep_drain retry "$work/rty" "openat fsync renameat renameat2 mkdirat fsetxattr" \
		retry_queue retry_after
}

# after=: the worker's loop killed while it files, releases, skips and
# binds. t2 reads t1's output; t3 fails, so t4 and t5 (after t4) are
# skipped. Besides the invariant: a dependant is skipped exactly when one
# of its upstreams' results is not ok, and a skipped one never ran.
deps_check() {
	local s=$1 d u st ust
	for d in t2:t1 t4:t3 t5:t4; do
		u=${d#*:} d=${d%:*}
		st=$(cat "$s"/done/*.json 2>/dev/null | jq -r --arg n "$d" 'select(.name == $n) | .status' | head -1)
		ust=$(cat "$s"/done/*.json 2>/dev/null | jq -r --arg n "$u" 'select(.name == $n) | .status' | head -1)
		[ -n "$st" ] && [ -n "$ust" ] || continue # lost: counted by check
		if { [ "$ust" = ok ] && [ "$st" = skipped ]; } || { [ "$ust" != ok ] && [ "$st" != skipped ]; }; then
			echo "  $d ended $st after $u ended $ust"; bad=$((bad + 1))
		fi
	done
	if cat "$s"/done/*.json 2>/dev/null | jq -e 'select(.status == "skipped" and .started_at != null)' >/dev/null; then
		echo "  a skipped task ran"; bad=$((bad + 1))
	fi
}

deps_queue() {
	local s=$1 i
	NAMES=(t1 t2 t3 t4 t5)
	printf '#!/bin/sh
echo one >"$KART_OUTDIR/o"
' >"$s/tmp/t1"
	printf '#!/bin/sh
#kart: after=t1
cat "$KART_INPUTS/t1/out/o"
' >"$s/tmp/t2"
	printf '#!/bin/sh
exit 3
' >"$s/tmp/t3"
	printf '#!/bin/sh
#kart: after=t3
echo four
' >"$s/tmp/t4"
	printf '#!/bin/sh
#kart: after=t4
echo five
' >"$s/tmp/t5"
	for i in "${NAMES[@]}"; do mv "$s/tmp/$i" "$s/new/$i"; done
}

sweep_deps() {
	sweep_drain deps "$work/dep" "openat renameat2 linkat unlinkat mkdirat fsetxattr inotify_add_watch" \
		deps_queue deps_check
}

# kart hold, release and edit killed at each call: the task is queued or
# held, whole (its old text or its new, never a mix), and runs once.
sweep_control() {
	local verb sc n s=$work/ctl
	for verb in hold release edit; do
		for sc in openat write fsync renameat2 unlinkat; do
			for ((n = 1; n <= max; n++)); do
				mkspool "$s"
				printf '#!/bin/sh\necho hi\n' >"$s/new/t"
				[ "$verb" = release ] && "$kart" -s "$s" hold t >/dev/null
				local args=("$verb" t)
				[ "$verb" = edit ] && args=(edit --set timeout=5m t)
				strace -o /dev/null -e trace="$sc" -e inject="$sc:signal=KILL:when=$n" \
					"$kart" -s "$s" "${args[@]}" >/dev/null 2>&1
				[ $? -eq 0 ] && break
				points=$((points + 1))
				"$kart" -s "$s" release t >/dev/null 2>&1 # held or not
				check "$s" t
				local out; out=$(cat "$s/done/t.stdout" 2>/dev/null)
				[ "$out" = hi ] || { echo "  $verb/$sc/$n: output '$out'"; bad=$((bad + 1)); }
			done
			echo "$verb: $sc: $((n - 1)) call(s) killed"
		done
	done
}

for part in ${SWEEP_PARTS:-submit worker commit control retry deps}; do
	case $part in
	submit) sweep_submit ;;
	worker) sweep_worker ;;
	commit) sweep_commit 2>/dev/null ;; # (bash reports each killed worker)
	control) sweep_control 2>/dev/null ;; # (bash reports each killed command)
	retry) [ "${SWEEP_RETRY:-1}" = 0 ] || sweep_retry ;;
	deps) sweep_deps ;;
	esac
done
echo
echo "$points crash points survived, $lost tasks lost, $twice run twice unflagged, $bad other violations"
[ $((lost + twice + bad)) -eq 0 ]
