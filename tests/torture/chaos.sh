#!/bin/bash
# Chaos: several workers on one spool (backend none, plus one bwrap), a few
# thousand tasks submitted while random workers get SIGKILL (and are
# restarted) or SIGSTOP/SIGCONT, throughout. At the end, after a final
# recovery pass, the invariant:
#   - every submitted name has exactly one result (no loss, no duplicate);
#   - every result is valid JSON, status ok (retries are set high, so no
#     task may end `lost`);
#   - a task that ran more than once says attempt > 1;
#   - nothing is left in new/ or cur/.
# Prints one figure line:
#   "chaos: N tasks, W workers, K kill -9, P stop/cont, R re-runs (attempt>1),
#    0 lost, 0 duplicates, 0 left behind, 0 invalid JSON"
#   CHAOS_N        tasks (default 2000)
#   CHAOS_WORKERS  workers with backend none (default 3; one bwrap worker is
#                  added when bwrap works, CHAOS_BWRAP=0 turns it off)
#   CHAOS_SEED     RANDOM seed (default: the PID), printed for replay
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kart=${KART:-$root/${KART_B:-build}/kart}
n=${CHAOS_N:-2000}
nw=${CHAOS_WORKERS:-3}
seed=${CHAOS_SEED:-$$}
RANDOM=$seed
work=$(mktemp -d "${TMPDIR:-/tmp}/kart-chaos.XXXXXX")
s=$work/spool
declare -A wpid wbackend
cleanup() {
	local w
	for w in "${!wpid[@]}"; do kill -CONT "${wpid[$w]}" 2>/dev/null; kill -9 "${wpid[$w]}" 2>/dev/null; done
	[ -n "${subpid:-}" ] && kill -9 "$subpid" 2>/dev/null
	wait 2>/dev/null
	[ "${CHAOS_KEEP:-0}" = 1 ] && echo "kept: $work" >&2 || rm -rf "$work"
}
trap cleanup EXIT
unset KART_SPOOL
"$kart" -s "$s" init || exit 1
# Retries high: a task may be interrupted many times, and must still end ok.
printf '[worker]\nretries = 100\n[sandbox]\nallow_root = yes\n' >"$s/kart.conf"

have_bwrap() {
	bwrap --unshare-all --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
		--symlink usr/lib64 /lib64 --proc /proc --dev /dev /bin/true 2>/dev/null
}
for ((i = 1; i <= nw; i++)); do wbackend[w$i]=none; done
[ "${CHAOS_BWRAP:-1}" = 1 ] && have_bwrap && wbackend[wb]=bwrap

start() { # worker id
	KART_BACKEND=${wbackend[$1]} KART_LANDLOCK=off "$kart" -s "$s" worker --id "$1" --slots 4 \
		>>"$work/$1.log" 2>&1 &
	wpid[$1]=$!
}
for w in "${!wbackend[@]}"; do start "$w"; done
sleep 0.3
for w in "${!wbackend[@]}"; do
	kill -0 "${wpid[$w]}" 2>/dev/null || { echo "worker $w did not start: $(tail -n 3 "$work/$w.log")" >&2; exit 1; }
done

# Each run of a task appends "ID ATTEMPT" to runs.log (workers with backend
# none only, Landlock off for them: the bwrap sandbox hides it). Two runs of one task under the
# same attempt number are a re-run that was not flagged.
: >"$work/runs.log"; chmod 666 "$work/runs.log"
runlog="echo \"\$KART_TASK_ID \$KART_ATTEMPT\" >>$work/runs.log 2>/dev/null"
# Submitters: half through `kart submit`, half by the maildir way (write in
# tmp/, rename into new/), interleaved, while the chaos goes on.
(
	for ((i = 1; i <= n; i++)); do
		if ((i % 2)); then
			printf '#!/bin/sh\n%s\necho %d\n' "$runlog" "$i" | "$kart" -s "$s" submit --name "c$i" - >/dev/null ||
				echo "submit c$i failed" >&2
		else
			printf '#!/bin/sh\n%s\n[ $((%d %% 7)) = 0 ] && sleep 0.2\necho %d\n' "$runlog" "$i" "$i" >"$s/tmp/m$i"
			mv "$s/tmp/m$i" "$s/new/m$i"
		fi
	done
) 2>"$work/submit.err" &
subpid=$!

kills=0 stops=0 t0=$SECONDS
limit=${CHAOS_TIMEOUT:-300}
results() { find "$s/done" -maxdepth 1 -name '*.json' ! -name '.*' | wc -l; }
# The chaos: until the submitter is done and every task has a result.
while :; do
	if ! kill -0 "$subpid" 2>/dev/null && [ "$(results)" -ge "$n" ]; then break; fi
	[ $((SECONDS - t0)) -gt "$limit" ] && { echo "chaos: timed out after ${limit}s" >&2; break; }
	ws=("${!wpid[@]}")
	w=${ws[RANDOM % ${#ws[@]}]}
	case $((RANDOM % 3)) in
	0)
		kill -9 "${wpid[$w]}" 2>/dev/null; wait "${wpid[$w]}" 2>/dev/null
		kills=$((kills + 1))
		sleep "0.$((RANDOM % 3))"
		start "$w"
		;;
	1)
		kill -STOP "${wpid[$w]}" 2>/dev/null
		stops=$((stops + 1))
		sleep "0.$((RANDOM % 5))"
		kill -CONT "${wpid[$w]}" 2>/dev/null
		;;
	2) sleep "0.$((RANDOM % 5))" ;;
	esac
done
wait "$subpid"; subpid=

# Quiet down: stop every worker gracefully, then one recovery pass.
for w in "${!wpid[@]}"; do kill -CONT "${wpid[$w]}" 2>/dev/null; kill -TERM "${wpid[$w]}" 2>/dev/null; done
for w in "${!wpid[@]}"; do
	for ((k = 0; k < 200; k++)); do kill -0 "${wpid[$w]}" 2>/dev/null || break; sleep 0.1; done
	kill -9 "${wpid[$w]}" 2>/dev/null; wait "${wpid[$w]}" 2>/dev/null
done
wpid=()
bad=0
KART_BACKEND=none timeout 300 "$kart" -s "$s" worker --drain --id final >>"$work/final.log" 2>&1 ||
	{ echo "the final recovery worker failed: $(tail -3 "$work/final.log")" >&2; bad=$((bad + 1)); }
[ -s "$work/submit.err" ] && { echo "submit errors: $(head -3 "$work/submit.err")" >&2; bad=$((bad + 1)); }

# The invariant.
invalid=0
for f in "$s"/done/*.json; do
	[ -e "$f" ] || continue
	jq -e 'type == "object"' "$f" >/dev/null 2>&1 || { echo "invalid JSON: $f" >&2; invalid=$((invalid + 1)); }
done
# name status attempt, one line per result (valid ones).
find "$s/done" -maxdepth 1 -name '*.json' ! -name '.*' -print0 | xargs -0 -r cat |
	jq -r '[.name, .status, .attempt] | @tsv' 2>/dev/null | sort >"$work/results.tsv"
{ for ((i = 1; i <= n; i++)); do if ((i % 2)); then echo "c$i"; else echo "m$i"; fi; done; } |
	sort >"$work/submitted"
cut -f1 "$work/results.tsv" | sort | uniq -c | awk '$1 > 1 {print $2}' >"$work/dups"
cut -f1 "$work/results.tsv" | sort -u >"$work/seen"
lost=$(comm -23 "$work/submitted" "$work/seen" | wc -l)
extra=$(comm -13 "$work/submitted" "$work/seen" | wc -l)
dups=$(wc -l <"$work/dups")
notok=$(awk -F'\t' '$2 != "ok"' "$work/results.tsv" | wc -l)
reruns=$(awk -F'\t' '$3 > 1' "$work/results.tsv" | wc -l)
# Runs logged twice with one attempt number: run twice unflagged.
twice=$(sort "$work/runs.log" | uniq -d | wc -l)
[ "$twice" -eq 0 ] || echo "run twice under one attempt: $(sort "$work/runs.log" | uniq -d | head -5 | tr '\n' ' ')" >&2
left=$(find "$s/new" "$s/cur" -mindepth 1 ! -name '.*' ! -path '*/.*' | wc -l)
[ "$lost" -eq 0 ] || echo "lost: $(comm -23 "$work/submitted" "$work/seen" | head -5 | tr '\n' ' ')" >&2
[ "$dups" -eq 0 ] || echo "duplicates: $(head -5 "$work/dups" | tr '\n' ' ')" >&2
[ "$extra" -eq 0 ] || echo "results for names never submitted: $(comm -13 "$work/submitted" "$work/seen" | head -5 | tr '\n' ' ')" >&2
[ "$notok" -eq 0 ] || echo "not ok: $(awk -F'\t' '$2 != "ok"' "$work/results.tsv" | head -5 | tr '\n' ' ')" >&2
[ "$left" -eq 0 ] || echo "left behind: $(find "$s/new" "$s/cur" -mindepth 1 ! -path '*/.*' | head -5 | tr '\n' ' ')" >&2
echo "seed $seed, $((SECONDS - t0))s, workers: ${!wbackend[*]}, $(wc -l <"$work/runs.log") runs logged" >&2
echo "chaos: $n tasks, ${#wbackend[@]} workers, $kills kill -9, $stops stop/cont, $reruns re-runs (attempt>1), $lost lost, $dups duplicates, $twice run twice unflagged, $left left behind, $invalid invalid JSON, $notok not ok"
[ $((twice + lost + dups + extra + left + invalid + notok + bad)) -eq 0 ]
