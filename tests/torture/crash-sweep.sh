#!/bin/bash
# Crash-point sweep: kill `kart submit` and `kart worker` (its loop, and
# its commit thread) with SIGKILL at every call of each syscall that
# touches the spool (strace inject), in turn; restart; check the invariant:
#   every acknowledged task ends with exactly one result in done/, every
#   result is valid JSON, nothing is left in new/ or cur/, and a task that
#   ran twice says attempt > 1.
# kart hold, release and edit are swept too (sweep_control).
# Prints: "N crash points survived, L tasks lost, D run twice unflagged".
#   SWEEP_MAX  highest call number tried per syscall (default 60)
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
	for f in "$s"/done/*.json; do
		[ -e "$f" ] || continue
		jq -e . "$f" >/dev/null 2>&1 || { echo "  invalid JSON: $f"; bad=$((bad + 1)); }
	done
	for n in "$@"; do
		local c; c=$(cat "$s"/done/*.json 2>/dev/null | jq -r --arg n "$n" 'select(.name == $n) | .status' | wc -l)
		if [ "$c" -eq 0 ]; then echo "  lost: $n"; lost=$((lost + 1)); fi
		if [ "$c" -gt 1 ]; then
			# Two results for one task: only a re-run flagged by attempt is allowed,
			# and even then one result is expected; count it.
			echo "  $c results for $n"; twice=$((twice + 1))
		fi
	done
	local left; left=$(find "$s/new" "$s/cur" -mindepth 1 -not -name '.*' -not -path '*/.*' | wc -l)
	[ "$left" -eq 0 ] || { echo "  left behind: $(find "$s/new" "$s/cur" -mindepth 1 -not -path '*/.*')"; bad=$((bad + 1)); }
}

sweep_submit() {
	local sc n s=$work/sub
	for sc in openat write fsync renameat2 unlinkat; do
		for ((n = 1; n <= max; n++)); do
			mkspool "$s"
			printf '#!/bin/sh\necho hi\n' >"$work/task.sh"
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
		done
		echo "submit: $sc: $((n - 1)) call(s) killed"
	done
}

sweep_worker() {
	local sc n s=$work/wrk
	for sc in openat write fsync renameat2 linkat unlinkat mkdirat fsetxattr; do
		for ((n = 1; n <= max; n++)); do
			mkspool "$s"
			local i names=()
			for i in 1 2 3; do
				printf '#!/bin/sh\necho %s\n' "$i" >"$s/tmp/t$i"
				mv "$s/tmp/t$i" "$s/new/t$i"
				names+=("t$i")
			done
			{ timeout 60 strace -o /dev/null -e trace="$sc" -e inject="$sc:signal=KILL:when=$n" \
				"$kart" -s "$s" worker --drain --id w1 >/dev/null 2>&1; } 2>/dev/null
			rc=$?
			[ $rc -eq 0 ] && break
			points=$((points + 1))
			check "$s" "${names[@]}"
		done
		echo "worker: $sc: $((n - 1)) call(s) killed"
	done
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
			local names=()
			for i in 1 2 3; do
				printf '#!/bin/sh\necho %s\n' "$i" >"$s/tmp/t$i"
				mv "$s/tmp/t$i" "$s/new/t$i"
				names+=("t$i")
			done
			for ((i = 0; i < 300; i++)); do
				kill -0 "$w" 2>/dev/null || break
				[ "$(find "$s/done" -maxdepth 1 -name 't*.json' | wc -l)" -ge 3 ] && break
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
			check "$s" "${names[@]}"
		done
		echo "commit: $sc: $((n - 1)) call(s) killed"
	done
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

sweep_submit
sweep_worker
sweep_commit 2>/dev/null # (bash reports each killed worker)
sweep_control 2>/dev/null # (bash reports each killed command)
echo
echo "$points crash points survived, $lost tasks lost, $twice run twice unflagged, $bad other violations"
[ $((lost + twice + bad)) -eq 0 ]
