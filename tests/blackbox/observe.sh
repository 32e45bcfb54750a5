#!/bin/bash
# Black-box: seeing the queue. kart metrics (the Prometheus format checked
# by promtool, served by a real node_exporter, its counts kept right across
# a finisher killed between its result and its claim's removal, cheap at
# 100,000 results), kart top (under tmux: typed keys, the screen read back),
# kart report --html (loaded in headless Chromium), kart eff, and the
# progress lines of kart gc and kart sync on a terminal.
. "$(dirname "$0")/../lib.sh"

# The accounts of the shared-spool cases (tests/lib.sh users_make).
U_TAG=${KART_TEST_USER_TAG:-}kt38
U_ALICE=${U_TAG}alice U_MALLORY=${U_TAG}mallory G_KART=${U_TAG}kart
U_IN="$U_ALICE $U_MALLORY" U_OUT=

n_results() { find "$1/done" -maxdepth 1 -name '[!.]*.json' | wc -l; }
# results_total SPOOL: the sum of kart_results_total.
results_total() { "$KART" -s "$1" metrics | awk '/^kart_results_total\{/ { n += $2 } END { print n + 0 }'; }
metric() { "$KART" -s "$1" metrics | awk -v k="$2" '$1 == k { print $2 }'; }

# Counts by status, lane and user, as done/ has them; promtool accepts
# the text.
test_metrics_counts_promtool() {
	local s
	s=$(mkspool)
	"$KART" -s "$s" submit --no-cwd --name ok1 -- true >/dev/null 2>&1
	"$KART" -s "$s" submit --no-cwd --name ok2 -- true >/dev/null 2>&1
	"$KART" -s "$s" submit --no-cwd --name bad -- false >/dev/null 2>&1
	"$KART" -s "$s" submit --no-cwd --lane batch --name slow -- sleep 0.2 >/dev/null 2>&1
	drain "$s"
	"$KART" -s "$s" submit --no-cwd --name waiting -- true >/dev/null 2>&1
	"$KART" -s "$s" metrics >"$s.prom" || fail "kart metrics exited $?"
	promtool check metrics <"$s.prom" || fail "promtool check metrics: $(promtool check metrics <"$s.prom" 2>&1)"
	assert_eq 2 "$(awk '$1 == "kart_results_total{status=\"ok\",lane=\"fast\",user=\"root\"}" {print $2}' "$s.prom")" "ok results, fast lane"
	assert_eq 1 "$(awk '$1 == "kart_results_total{status=\"failed\",lane=\"fast\",user=\"root\"}" {print $2}' "$s.prom")" "failed results"
	assert_eq 1 "$(awk '$1 == "kart_results_total{status=\"ok\",lane=\"batch\",user=\"root\"}" {print $2}' "$s.prom")" "batch results"
	assert_eq 1 "$(awk '$1 == "kart_tasks{state=\"queued\",lane=\"fast\"}" {print $2}' "$s.prom")" "queued now"
	assert_eq 3 "$(awk '$1 == "kart_run_duration_seconds_count{lane=\"fast\"}" {print $2}' "$s.prom")" "run histogram count"
	assert_eq 1 "$(awk '$1 == "kart_run_duration_seconds_bucket{lane=\"batch\",le=\"+Inf\"}" {print $2}' "$s.prom")" "+Inf bucket"
	local age
	age=$(awk '$1 == "kart_oldest_queued_age_seconds" {print $2}' "$s.prom")
	awk -v a="$age" 'BEGIN { exit !(a > 0 && a < 60) }' || fail "oldest queued age: $age"
	"$KART" -s "$s" pause --all >/dev/null 2>&1
	assert_eq 1 "$(metric "$s" 'kart_claiming_stopped{reason="pause"}')" "claiming stopped by pause --all"
}

# --textfile writes DIR/kart.prom whole; the real node_exporter serves it
# on 127.0.0.1, and a scrape with curl finds the counts.
test_metrics_node_exporter() {
	command -v prometheus-node-exporter >/dev/null || { skip "prometheus-node-exporter is not installed"; return; }
	local s dir port pid out
	s=$(mkspool)
	"$KART" -s "$s" submit --no-cwd --name a -- true >/dev/null 2>&1
	drain "$s"
	dir=$T_ROOT/textfile
	mkdir -p "$dir"
	"$KART" -s "$s" metrics --textfile "$dir" || fail "metrics --textfile exited $?"
	assert_file "$dir/kart.prom"
	[ -z "$(find "$dir" -name '.kart.prom.*')" ] || fail "a temporary file is left in $dir"
	port=$((20000 + RANDOM % 20000))
	prometheus-node-exporter --web.listen-address="127.0.0.1:$port" --collector.disable-defaults \
		--collector.textfile --collector.textfile.directory="$dir" >"$T_ROOT/ne.log" 2>&1 &
	pid=$!
	T_PIDS+=("$pid")
	wait_until 10 curl -sf "http://127.0.0.1:$port/metrics" -o /dev/null ||
		{ fail "node_exporter did not serve (log: $(tail -3 "$T_ROOT/ne.log"))"; kill "$pid"; return; }
	out=$(curl -sf "http://127.0.0.1:$port/metrics")
	assert_match 'kart_results_total\{lane="fast",status="ok",user="root"\} 1' "$out" "scraped counter"
	assert_match 'node_textfile_scrape_error 0' "$out" "node_exporter read the file without error"
	kill "$pid"
	wait "$pid" 2>/dev/null
}

# A finisher killed after its result and before its claim went leaves the
# claim to recovery. Made here by hand: done/ID.task linked back into a
# dead worker's directory, as the kill leaves it. Its row had landed: not
# counted again. Its row had not (the tally cut back to the claim's mark):
# counted once.
test_metrics_recovery_counts_once() {
	local s mark off file
	s=$(mkspool)
	"$KART" -s "$s" submit --no-cwd --name once -- true >/dev/null 2>&1
	drain "$s" --id first
	assert_eq 1 "$(results_total "$s")" "counted after the run"
	mark=$(getfattr -n user.kart.tally --only-values "$s/done/once.task" 2>/dev/null)
	assert_match '^[0-9]+ [0-9]+ w\.first$' "$(head -1 <<<"$mark")" "the claim's mark"
	# The row landed: recovery must not add it again.
	mkdir "$s/cur/dead" && : >"$s/cur/dead/.lock" && ln "$s/done/once.task" "$s/cur/dead/once"
	drain "$s" --id second
	assert_no_file "$s/cur/dead/once"
	assert_eq 1 "$(results_total "$s")" "counted once after recovery of a landed row"
	# The row did not land: cut the tally back to where the mark says it went.
	off=${mark%% *}
	file=$(head -1 <<<"$mark" | cut -d' ' -f3)
	truncate -s "$off" "$s/tally/$file"
	assert_eq 0 "$(results_total "$s")" "the cut tally"
	mkdir -p "$s/cur/dead" && : >"$s/cur/dead/.lock" && ln "$s/done/once.task" "$s/cur/dead/once"
	drain "$s" --id third
	assert_eq 1 "$(results_total "$s")" "counted once after recovery of a lost row"
	assert_eq 1 "$(n_results "$s")" "results in done/"
}

# status_counts SPOOL: "STATUS=N ..." of kart_results_total, sorted.
status_counts() {
	# (sorted by awk itself: the fold sweep calls this hundreds of times)
	"$KART" -s "$1" metrics | awk -F'[{}" ]' '/^kart_results_total\{/ { n[$3] += $NF }
		END { m = 0; for (k in n) { for (i = m++; i > 0 && ks[i - 1] > k; i--) ks[i] = ks[i - 1]; ks[i] = k }
			for (i = 0; i < m; i++) printf "%s%s=%d", (i ? " " : ""), ks[i], n[ks[i]]; if (m) print "" }'
}

# tally_spool: a spool whose counts come from everywhere a fold takes
# them: three workers that are gone (a row file each), and three results
# published before tally/ existed (no tally/, no mark on their task files,
# as an older kart left them). Sets TS; prints nothing.
tally_spool() {
	local i
	TS=$(mkspool)
	for i in 1 2 3; do "$KART" -s "$TS" submit --no-cwd --name "old$i" -- sh -c "exit $((i % 2))" >/dev/null 2>&1; done
	KART_BACKEND=none drain "$TS"
	rm -rf "$TS/tally"
	for i in 1 2 3; do setfattr -x user.kart.tally "$TS/done/old$i.task" || fail "setfattr"; done
	sleep 1.1 # tally/ younger than the old results, as an upgrade makes it
	for i in 1 2 3; do
		"$KART" -s "$TS" submit --no-cwd --name "new$i" -- true >/dev/null 2>&1
		KART_BACKEND=none drain "$TS"
	done
}

# kart gc folds the row files of workers that are gone into tally/folded,
# and counts once the results older than tally/: the counts do not change
# (but for those older results, now counted), tally/ keeps one file, and
# a second gc changes nothing. A worker that starts again under a gone
# worker's id after the fold counts on.
test_tally_fold_and_upgrade() {
	local before
	tally_spool
	assert_eq 3 "$(ls "$TS/tally" | grep -c '^w\.')" "a row file per worker start"
	assert_eq "ok=3" "$(status_counts "$TS")" "before gc: the results since tally/"
	# JSON older than tally/ is not enough: the first result a writer
	# counts is published just before it makes tally/, and mtimes move
	# (a restore, a touch). Its task file's mark says its row exists.
	touch -d '1 hour ago' "$TS"/done/new*.json
	run_cmd -s "$TS" gc -v
	assert_eq 0 "$RC" "kart gc ($ERR)"
	assert_match 'tally/: 3 files of workers that are gone folded' "$OUT" "gc says it folded"
	assert_match 'tally/: 3 results older than tally/ counted' "$OUT" "gc says it counted the old ones"
	assert_eq "failed=2 ok=4" "$(status_counts "$TS")" "after gc: every result, once"
	assert_eq "folded" "$(ls "$TS/tally")" "tally/ after the fold"
	assert_eq "" "$(ls -A "$TS/cur")" "no claim directory left by the fold"
	before=$("$KART" -s "$TS" metrics | grep -v '^kart_oldest\|^kart_claiming')
	"$KART" -s "$TS" gc >/dev/null || fail "second gc"
	"$KART" -s "$TS" gc >/dev/null || fail "third gc"
	assert_eq "$before" "$("$KART" -s "$TS" metrics | grep -v '^kart_oldest\|^kart_claiming')" "gc again changes no count"
	assert_match '^kart-tally-folded 1$' "$(head -1 "$TS/tally/folded")" "folded's header"
	[ "$(grep -c '^m ' "$TS/tally/folded")" = 0 ] || fail "marks of removed files kept: $(cat "$TS/tally/folded")"
	"$KART" -s "$TS" submit --no-cwd --name again -- true >/dev/null 2>&1
	KART_BACKEND=none drain "$TS" --id again-w
	assert_eq "failed=2 ok=5" "$(status_counts "$TS")" "a result after the fold"
}

# A claim whose mark names a gone worker's row file (its finisher died
# before the claim went) keeps that file out of the fold, for recovery to
# find it as the mark says; once recovered, it folds.
test_tally_fold_spares_marked() {
	local s
	s=$(mkspool)
	"$KART" -s "$s" submit --no-cwd --name once -- true >/dev/null 2>&1
	drain "$s" --id first
	mkdir "$s/cur/dead" && : >"$s/cur/dead/.lock" && ln "$s/done/once.task" "$s/cur/dead/once"
	"$KART" -s "$s" gc >/dev/null 2>&1
	assert_file "$s/tally/w.first"
	assert_eq "ok=1" "$(status_counts "$s")" "before recovery"
	drain "$s" --id second
	assert_eq "ok=1" "$(status_counts "$s")" "recovery of a landed row, after a gc"
	"$KART" -s "$s" gc >/dev/null 2>&1
	assert_no_file "$s/tally/w.first"
	assert_eq "ok=1" "$(status_counts "$s")" "after the fold"
}

# Folds beside live workers, and workers that stop and start again under
# the same id while gc folds their old files: every result is counted
# once.
test_tally_fold_beside_live_workers() {
	local s i r gcs
	s=$(mkspool)
	for i in $(seq 1 60); do "$KART" -s "$s" submit --no-cwd --name "t$i" -- true >/dev/null 2>&1; done
	(while [ ! -e "$s.stop" ]; do "$KART" -s "$s" gc >/dev/null 2>&1; echo >>"$s.gcs"; done) &
	local loop=$!
	T_PIDS+=("$loop")
	for r in 1 2 3 4 5 6; do
		KART_BACKEND=none start_worker "$s" --id "a$((r % 2))" --slots 2
		sleep 0.7
		stop_worker "$WPID"
	done
	KART_BACKEND=none drain "$s" --id a1
	: >"$s.stop"
	wait_gone 30 "$loop" || fail "the gc loop did not stop"
	gcs=$(wc -l <"$s.gcs")
	echo "    $gcs folds beside the workers" >&2
	[ "$gcs" -ge 3 ] || fail "only $gcs gc runs"
	"$KART" -s "$s" gc >/dev/null 2>&1
	assert_eq 60 "$(n_results "$s")" "results"
	assert_eq 60 "$(results_total "$s")" "counted, each once"
}

# On a shared spool (kart.tmpfiles' layout), a member cannot write, plant
# or hold anything in tally/ that bends the counts: no file, link or
# FIFO; the rows and the fold's lock are not hers to lock; her kart gc
# folds nothing, and her kart metrics counts what the workers counted.
test_tally_hostile_member() {
	shared_spool || return
	local out w
	start_worker "$S" --id w1
	w=$WPID
	out=$(as "$U_ALICE" kart submit --name a1 -- true) || fail "alice's submit: $out"
	wait_until 30 test -e "$S/done/$U_ALICE:a1.json" || { fail "no result for a1"; stop_worker "$w"; return; }
	wait_until 10 test -e "$S/tally/w.w1" || fail "no tally row file"
	assert_eq "2750 root $G_KART" "$(stat -c '%a %U %G' "$S/tally")" "tally/'s mode and owners, as done/'s"
	as "$U_MALLORY" sh -c "echo 'r ok fast $U_MALLORY 1 1' >$S/tally/w.evil" 2>/dev/null && fail "mallory wrote a row file"
	as "$U_MALLORY" sh -c "echo 'r ok fast $U_MALLORY 1 1' >>$S/tally/w.w1" 2>/dev/null && fail "mallory appended to a worker's rows"
	as "$U_MALLORY" ln -s /etc/shadow "$S/tally/w.link" 2>/dev/null && fail "mallory planted a link"
	as "$U_MALLORY" mkfifo "$S/tally/w.w2" 2>/dev/null && fail "mallory planted a FIFO"
	as "$U_MALLORY" sh -c "echo 'c ok fast $U_MALLORY 99' >$S/tally/folded" 2>/dev/null && fail "mallory wrote folded"
	as "$U_MALLORY" mv "$S/tally/w.w1" "$S/tally/w.gone" 2>/dev/null && fail "mallory renamed a row file"
	# The fold's lock: hers to open neither before nor after the first fold.
	"$KART" -s "$S" gc >/dev/null 2>&1
	as "$U_MALLORY" flock -n "$S/tally/.lock" true 2>/dev/null && fail "mallory could hold the fold's lock"
	assert_eq "" "$(ls "$S/tally" | grep -v '^w\.w1$\|^folded$')" "what is in tally/"
	out=$(as "$U_MALLORY" kart gc 2>&1)
	assert_eq "" "$(ls "$S/tally" | grep -v '^w\.w1$\|^folded$')" "tally/ after mallory's gc"
	out=$(as "$U_MALLORY" kart metrics) || fail "mallory's kart metrics exited $?"
	assert_match "kart_results_total\{status=\"ok\",lane=\"fast\",user=\"$U_ALICE\"\} 1" "$out" "alice's result, counted"
	assert_match 'kart_tally_up 1' "$out" "the tally read"
	stop_worker "$w"
}

# What someone who may write tally/ (root, or the owner of a personal
# spool) leaves there by mistake neither hangs nor bends kart metrics or a
# worker: a FIFO under the worker's own name, a link, a directory, junk
# lines, a line longer than any row, a huge file of junk.
test_tally_junk_planted() {
	local s t0 ms canary
	s=$(mkspool)
	canary=$T_ROOT/canary
	echo secret >"$canary"
	mkfifo "$s/tally/w.fifo-w"
	ln -s "$canary" "$s/tally/w.link-w"
	mkdir "$s/tally/w.dir"
	printf 'kart-tally 1\nzzz\nr ok\nr ok fast root x 1\nr ok fast root 1 1 1 1\n\001\377\n' >"$s/tally/w.junk"
	{ echo 'kart-tally 1'; head -c 100000 /dev/zero | tr '\0' x; echo; echo 'r ok fast root 5 5'; } >"$s/tally/w.long"
	head -c $((64 << 20)) /dev/zero | tr '\0' 'y' >"$s/tally/w.huge"
	echo 'not a tally' >"$s/tally/w.other"
	"$KART" -s "$s" submit --no-cwd --name a -- true >/dev/null 2>&1
	"$KART" -s "$s" submit --no-cwd --name b -- true >/dev/null 2>&1
	KART_BACKEND=none timeout 60 "$KART" -s "$s" worker --drain --id fifo-w >>"$s.worker.log" 2>&1 ||
		fail "the worker whose row file is a FIFO: exit $? ($(tail -2 "$s.worker.log"))"
	KART_BACKEND=none timeout 60 "$KART" -s "$s" worker --drain --id link-w >>"$s.worker.log" 2>&1 ||
		fail "the worker whose row file is a link: exit $?"
	assert_eq 2 "$(n_results "$s")" "both ran"
	assert_eq secret "$(cat "$canary")" "the link's target, untouched"
	t0=$(date +%s%N)
	run_cmd -s "$s" metrics
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "    kart metrics beside a 64 MiB junk file: $ms ms" >&2
	assert_eq 0 "$RC" "kart metrics ($ERR)"
	# The one good row (after w.long's long line); a and b were not
	# counted, and their workers said so.
	assert_match 'kart_results_total\{status="ok",lane="fast",user="root"\} 1' "$OUT" "the good row, alone"
	[[ $OUT == *secret* ]] && fail "the link was followed"
	[ "$ms" -lt 10000 ] || fail "kart metrics took $ms ms"
	grep -q "tally/w.fifo-w: cannot open" "$s.worker.log" || fail "the worker did not say why it could not count: $(grep tally "$s.worker.log")"
	grep -q "tally/w.link-w: cannot open" "$s.worker.log" || fail "the worker did not say why it could not count: $(grep tally "$s.worker.log")"
}

# kart gc killed (SIGKILL, strace's inject) at each call of each syscall
# it makes: the counts are never more or less than the results, and the
# next gc finishes the fold. Two spools: one whose first fold also counts
# the results older than tally/, one with a folded already and two more
# row files to fold into it.
test_tally_fold_crash_sweep() {
	command -v strace >/dev/null || { skip "strace is not installed"; return; }
	local sc n s src want early points=0 got i
	tally_spool
	cp -a "$TS" "$T_ROOT/second"
	"$KART" -s "$T_ROOT/second" gc >/dev/null 2>&1 || fail "the second spool's first gc"
	for i in 4 5; do
		"$KART" -s "$T_ROOT/second" submit --no-cwd --name "new$i" -- true >/dev/null 2>&1
		KART_BACKEND=none drain "$T_ROOT/second"
	done
	for src in "$TS" "$T_ROOT/second"; do
		if [ "$src" = "$TS" ]; then
			want="failed=2 ok=4" early="ok=3"
		else
			want="failed=2 ok=6" early=$want
		fi
		assert_eq "$early" "$(status_counts "$src")" "before the sweep"
		for sc in openat mkdir flock renameat rename unlinkat write fsync; do
			for ((n = 1; n <= 40; n++)); do
				s=$T_ROOT/sweep
				# (cp -a makes tally/ now: younger than every result, as in $src.)
				rm -rf "$s" && cp -a "$src" "$s"
				strace -f -o /dev/null -e trace="$sc" -e inject="$sc:signal=KILL:when=$n" \
					"$KART" -s "$s" gc >/dev/null 2>&1 && break # ran to the end
				points=$((points + 1))
				got=$(status_counts "$s")
				[ "$got" = "$want" ] || [ "$got" = "$early" ] ||
					fail "$sc #$n: counted $got after the kill (want $want, or $early before the old ones are in)"
				"$KART" -s "$s" gc >/dev/null 2>&1 || fail "$sc #$n: the gc after"
				got=$(status_counts "$s")
				[ "$got" = "$want" ] || fail "$sc #$n: counted $got after the next gc (want $want)"
				[ "$(ls "$s/tally")" = folded ] || fail "$sc #$n: tally/ after the next gc: $(ls -A "$s/tally" | xargs)"
			done
		done
	done
	echo "    $points kill points of kart gc's fold survived" >&2
	[ "$points" -ge 60 ] || fail "only $points kill points"
}

# One kart metrics over 100,000 counted results (tally rows as the
# workers write them) and 100,000 entries in done/: under 1 s and 50 MiB.
test_metrics_cheap_at_100k() {
	local s
	s=$(mkspool)
	awk 'BEGIN { print "kart-tally 1"; print "s 3 1"
		for (i = 0; i < 100000; i++)
			printf "r %s %s u%d %d %d\n", (i % 7 ? "ok" : "failed"), (i % 3 ? "fast" : "batch"), i % 20, i % 5000, i % 90000 }' \
		>"$s/tally/w.bench"
	(cd "$s/done" && seq 1 100000 | sed 's/$/.json/' | xargs touch)
	python3 - "$KART" "$s" <<'EOF' >"$T_ROOT/cheap" || fail "measure: $(cat "$T_ROOT/cheap")"
import resource, subprocess, sys, time
t = time.monotonic()
out = subprocess.run([sys.argv[1], "-s", sys.argv[2], "metrics"], capture_output=True, check=True).stdout
dt = time.monotonic() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
total = sum(int(l.split()[-1]) for l in out.decode().splitlines() if l.startswith("kart_results_total{"))
print(f"{dt:.3f} {rss} {total}")
EOF
	read -r secs kib total <"$T_ROOT/cheap"
	echo "    kart metrics at 100,000 results: ${secs} s, $((kib / 1024)) MiB" >&2
	assert_eq 100000 "$total" "results counted"
	awk -v t="$secs" 'BEGIN { exit !(t < 1.0) }' || fail "kart metrics took $secs s"
	[ "$kib" -lt $((50 * 1024)) ] || fail "kart metrics used $kib KiB"
}

# kart top under tmux: the rows of a known queue appear, and change when
# a key cancels the running one.
test_top_tmux() {
	command -v tmux >/dev/null || { skip "tmux is not installed"; return; }
	local s sock screen
	s=$(mkspool)
	"$KART" -s "$s" submit --no-cwd --name spinner -- sh -c 'while :; do echo tick; sleep 0.2; done' >/dev/null 2>&1
	"$KART" -s "$s" submit --no-cwd --name behind -- sleep 30 >/dev/null 2>&1
	start_worker "$s" --slots 1
	wait_until 20 is_running "$s" spinner || { fail "spinner did not start"; return; }
	sock=kart-top-$$
	tmux -L "$sock" new-session -d -x 150 -y 30 "env TERM=xterm $KART -s $s top" || { fail "tmux"; return; }
	capture() { tmux -L "$sock" capture-pane -p; }
	wait_until 10 sh -c "tmux -L $sock capture-pane -p | grep -q '^spinner .* running .*tick'" ||
		fail "no running row for spinner: $(capture)"
	screen=$(capture)
	assert_match 'behind +root +fast +queued' "$screen" "the queued row"
	assert_match 'fast +1 +0 +0 +0 +1 +0' "$screen" "the queue by state and lane"
	tmux -L "$sock" send-keys c
	wait_until 5 sh -c "tmux -L $sock capture-pane -p | grep -q 'cancel spinner? (y/n)'" ||
		fail "no confirmation asked: $(capture)"
	tmux -L "$sock" send-keys y
	wait_until 10 sh -c "tmux -L $sock capture-pane -p | grep -q 'spinner cancelled'" ||
		fail "the cancel did not show: $(capture)"
	wait_until 10 sh -c "tmux -L $sock capture-pane -p | grep -q '^behind .* running'" ||
		fail "behind did not become running: $(capture)"
	assert_eq cancelled "$(field "$s" spinner .status)" "spinner's result"
	tmux -L "$sock" send-keys q
	wait_until 5 sh -c "! tmux -L $sock has-session 2>/dev/null" || fail "q did not quit"
	tmux -L "$sock" kill-server 2>/dev/null
	# Not on a terminal: one snapshot.
	run_cmd -s "$s" top
	assert_eq 0 "$RC" "kart top without a terminal"
	assert_match 'behind +root +fast +running' "$OUT" "the snapshot's row"
	"$KART" -s "$s" cancel behind >/dev/null 2>&1
	stop_worker "$WPID"
}

# A hostile name is shown escaped, never raw, on the terminal.
test_top_escapes_names() {
	local s
	s=$(mkspool)
	printf 'sleep 30\n' >"$s/new/$(printf 'evil\033[2Jx')"
	run_cmd -s "$s" top --once
	[[ $OUT == *$'\033'* ]] && fail "an escape byte reached the terminal"
	assert_match 'evil\\x1b\[2Jx' "$OUT" "the name, escaped"
}

# kart eff of a task that asked for 1G and used 60M; over a label, the
# spread and the suggested memory= and timeout=.
test_eff() {
	local s
	s=$(mkspool)
	"$KART" -s "$s" submit --no-cwd --name hog --memory 1G --label grp -- python3 -c 'b = bytearray(60 << 20); import time; time.sleep(0.3)' >/dev/null 2>&1
	"$KART" -s "$s" submit --no-cwd --name small --memory 256M --label grp -- true >/dev/null 2>&1
	drain "$s"
	run_cmd -s "$s" eff hog
	assert_eq 0 "$RC" "kart eff hog ($ERR)"
	echo "$OUT" | sed 's/^/      /' >&2
	assert_match 'Memory efficiency: [5-7]\.[0-9]% of 1\.0G' "$OUT" "memory efficiency of 60M of 1G"
	assert_match 'Memory peak: +6[0-9]M' "$OUT" "memory peak"
	assert_match 'Storage I/O: +[0-9.]+[BKMG] read, [0-9.]+[BKMG] written' "$OUT" "storage I/O"
	assert_match 'Measured by: ' "$OUT" "where it was measured"
	# The figures are the result's efficiency, as the worker wrote it.
	jq '.efficiency.memory = 0.5 | .efficiency.cpu = 0.25' "$s/done/hog.json" >"$s/hog.json" &&
		cat "$s/hog.json" >"$s/done/hog.json"
	run_cmd -s "$s" eff hog
	assert_match 'Memory efficiency: 50\.0% of 1\.0G' "$OUT" "memory efficiency from the result"
	assert_match 'CPU efficiency: +25\.0% of' "$OUT" "CPU efficiency from the result"
	run_cmd -s "$s" eff --label grp
	assert_match 'Tasks: +2' "$OUT" "tasks over the label"
	assert_match 'Suggested: +memory=(80|88|96)M' "$OUT" "suggested memory="
	assert_match 'Suggested: +timeout=[0-9]+s' "$OUT" "suggested timeout="
	run_cmd -s "$s" eff nosuch
	assert_eq 1 "$RC" "eff of an unknown id"
}

# fstype PATH: the type of the filesystem PATH is on, as mounted (statfs
# would say the host's through 9p).
fstype() { awk -v m="$(stat -c %m "$1")" '$2 == m { t = $3 } END { print t }' /proc/self/mounts; }

# usage SPOOL ID FIELD: a field of the result's usage ("" for null).
usage() { jq -r ".usage.$3 // empty" "$1/done/$2.json"; }
# A task of known appetite: 200 MiB held, then a fixed count of loops
# (CPU time, whatever the machine's load), a direct read of bash (storage
# I/O that no cache answers).
HOG='import os; b = bytearray(200 << 20); sum(range(5 * 10**6)); os.system("dd if=/usr/bin/bash of=/dev/null bs=64k iflag=direct 2>/dev/null")'

# The receipt is the task's own, under each way kart runs it: bwrap in
# its leaf (cgroup v1 here), bwrap without a leaf (cgroup = off:
# kart-launch's report of the tree it reaped), backend none (the
# worker's wait4 and /proc/PID/io). Never bwrap's own few milliseconds
# and 3 MB; a figure the host cannot give is null, with why.
test_usage_receipt() {
	local s id cg ncpu usrfs spoolfs
	s=$(mkspool)
	# Where the files are: storage I/O needs a block device under them
	# (the v2 tier's guest has the host's / over 9p, its spool on tmpfs).
	usrfs=$(fstype /usr/bin/bash) spoolfs=$(fstype "$s")
	"$KART" -s "$s" submit --no-cwd --name leaf -- python3 -c "$HOG" >/dev/null 2>&1
	drain "$s"
	"$KART" -s "$s" submit --no-cwd --name off -- python3 -c "$HOG" >/dev/null 2>&1
	KART_CGROUP=off drain "$s"
	"$KART" -s "$s" submit --no-cwd --name none -- python3 -c "$HOG; os.system('dd if=/dev/zero of=f bs=1M count=4 conv=fsync 2>/dev/null')" >/dev/null 2>&1
	KART_BACKEND=none drain "$s"
	ncpu=$(nproc)
	for id in leaf off none; do
		echo "      $id: $(jq -c '{cgroup: .sandbox.cgroup, usage, efficiency}' "$s/done/$id.json")" >&2
		assert_eq ok "$(field "$s" "$id" .status)" "$id's status"
		[ "$(usage "$s" "$id" memory_peak_bytes)" -ge $((200 << 20)) ] 2>/dev/null ||
			fail "$id: memory peak $(usage "$s" "$id" memory_peak_bytes), not the 200 MiB it held"
		[ $(($(usage "$s" "$id" cpu_user_ms) + $(usage "$s" "$id" cpu_system_ms))) -ge 100 ] 2>/dev/null ||
			fail "$id: CPU time $(usage "$s" "$id" cpu_user_ms) + $(usage "$s" "$id" cpu_system_ms) ms"
		# Storage I/O where there is a block device under it (not the v2
		# tier's guest, whose / is the host's over 9p).
		if [ "$usrfs" != 9p ]; then
			[ "$(usage "$s" "$id" io_read_bytes)" -ge "$(stat -c %s /usr/bin/bash)" ] 2>/dev/null ||
				fail "$id: read $(usage "$s" "$id" io_read_bytes) bytes, less than bash"
		else
			assert_match '^[0-9]+$' "$(usage "$s" "$id" io_read_bytes)" "$id: read bytes, measured"
		fi
		assert_match '^0\.[0-9]+$|^1(\.0+)?$' "$(field "$s" "$id" .efficiency.cpu)" "$id's CPU efficiency"
		assert_eq "$ncpu" "$(field "$s" "$id" .efficiency.cpus)" "$id's CPUs (no cpu= limit)"
		# As seff computes it, from the result's own fields.
		assert_eq "$(jq -r '((.usage.cpu_user_ms + .usage.cpu_system_ms) / ((.duration_ms - .paused_ms) * .efficiency.cpus) * 10000 | round) / 10000' "$s/done/$id.json")" \
			"$(field "$s" "$id" .efficiency.cpu)" "$id's CPU efficiency, recomputed"
	done
	cg=$(field "$s" leaf .sandbox.cgroup)
	if [ "$cg" != none ]; then
		assert_eq cgroup "$(usage "$s" leaf measured_by.cpu)" "measured in the leaf"
		assert_eq cgroup "$(usage "$s" leaf measured_by.memory)" "memory measured in the leaf"
		# PSI lives in a cgroup2 directory: v2, or a hybrid host's unified/.
		if [ -e /sys/fs/cgroup/unified/cpu.pressure ] || [ -e /sys/fs/cgroup/cpu.pressure ]; then
			assert_match '^[0-9]+$' "$(usage "$s" leaf psi_cpu_some_us)" "cpu pressure in the leaf"
			assert_match '^[0-9]+$' "$(usage "$s" leaf psi_memory_full_us)" "memory pressure in the leaf"
			assert_match '^[0-9]+$' "$(usage "$s" leaf psi_io_some_us)" "io pressure in the leaf"
		else
			assert_match 'pressure stall' "$(usage "$s" leaf why_null.pressure)" "why no pressure"
		fi
	else
		echo "    (no cgroup here: the leaf case ran as cgroup none)" >&2
	fi
	assert_eq none "$(field "$s" off .sandbox.cgroup)" "cgroup = off ran without a leaf"
	assert_eq launcher "$(usage "$s" off measured_by.cpu)" "measured by kart-launch"
	assert_eq launcher "$(usage "$s" off measured_by.io)" "I/O measured by kart-launch"
	assert_eq "" "$(usage "$s" off pids_peak)" "no leaf, no pids peak"
	assert_match 'no cgroup leaf' "$(usage "$s" off why_null.pids)" "why no pids peak"
	assert_eq "" "$(usage "$s" off psi_cpu_some_us)" "no leaf, no pressure"
	assert_match 'no cgroup leaf' "$(usage "$s" off why_null.pressure)" "why no pressure"
	assert_eq process "$(usage "$s" none measured_by.io)" "backend none: the process's I/O"
	if [ "$spoolfs" != tmpfs ]; then
		[ "$(usage "$s" none io_write_bytes)" -ge $((4 << 20)) ] 2>/dev/null ||
			fail "backend none: wrote $(usage "$s" none io_write_bytes) bytes, not the 4 MiB fsynced"
	else
		assert_eq 0 "$(usage "$s" none io_write_bytes)" "backend none: a tmpfs is no storage I/O"
	fi
	return 0
}

# kart status of a running task gives its use so far, as Slurm's sstat:
# CPU time, memory now and at its peak, output bytes; from its leaf, and
# without one (cgroup = off) summed over its processes, with no peak.
test_status_running_usage() {
	local s mode line js
	for mode in leaf off; do
		s=$(mkspool)
		"$KART" -s "$s" submit --no-cwd --name live -- python3 -c \
			'import sys, time; b = bytearray(120 << 20); print("x" * 999, flush=True); sum(range(3 * 10**6)); time.sleep(60)' \
			>/dev/null 2>&1
		if [ $mode = off ]; then KART_CGROUP=off start_worker "$s"; else start_worker "$s"; fi
		wait_until 30 is_running "$s" live || { fail "$mode: live did not start"; stop_worker "$WPID"; continue; }
		wait_until 30 sh -c "'$KART' -s '$s' status --json live | jq -e '.[0].usage.memory_bytes >= (120 * 1048576) and .[0].usage.output_bytes >= 1000' >/dev/null" ||
			fail "$mode: the running task's memory and output: $("$KART" -s "$s" status --json live)"
		line=$("$KART" -s "$s" status live)
		js=$("$KART" -s "$s" status --json live)
		echo "      $mode: $line" >&2
		assert_match "^live	running	[^	]+	cpu [0-9.]+m?s, memory 1[2-9][0-9]M \(peak [^)]+\), output 1000B$" "$line" "$mode: the line"
		assert_match '^[0-9]+$' "$(jq -r '.[0].usage.cpu_ms' <<<"$js")" "$mode: cpu_ms"
		if [ $mode = leaf ] && [ "$(jq -r '.[0].usage.measured_by' <<<"$js")" = cgroup ]; then
			[ "$(jq -r '.[0].usage.memory_peak_bytes' <<<"$js")" -ge $((120 << 20)) ] ||
				fail "leaf: peak $(jq -r '.[0].usage.memory_peak_bytes' <<<"$js")"
		elif [ $mode = off ]; then
			assert_eq processes "$(jq -r '.[0].usage.measured_by' <<<"$js")" "off: summed over its processes"
			assert_eq null "$(jq -r '.[0].usage.memory_peak_bytes' <<<"$js")" "off: no peak without a leaf"
		fi
		"$KART" -s "$s" cancel live >/dev/null 2>&1
		stop_worker "$WPID"
	done
}

# A daemon the task left behind is part of its tree: kart-launch, the
# subreaper of the sandbox, reaps it at the end and counts its CPU time.
# The same loop in the foreground is the yardstick.
test_usage_counts_orphans() {
	local s fg bg
	s=$(mkspool)
	"$KART" -s "$s" submit --no-cwd --name fg -- python3 -c 'sum(range(6 * 10**7))' >/dev/null 2>&1
	"$KART" -s "$s" submit --no-cwd --name bg -- sh -c \
		'(python3 -c "sum(range(6 * 10**7))"; : >/tmp/spun; sleep 60) & while [ ! -e /tmp/spun ]; do sleep 0.05; done' \
		>/dev/null 2>&1
	KART_CGROUP=off drain "$s"
	fg=$(($(usage "$s" fg cpu_user_ms) + $(usage "$s" fg cpu_system_ms)))
	bg=$(($(usage "$s" bg cpu_user_ms) + $(usage "$s" bg cpu_system_ms)))
	echo "      the loop in the foreground: $fg ms; left behind, reaped by kart-launch: $bg ms" >&2
	[ "$fg" -ge 200 ] || fail "the yardstick took $fg ms of CPU"
	[ "$bg" -ge $((fg * 7 / 10)) ] || fail "the orphan's CPU time was not counted: $bg ms against $fg ms"
	assert_eq ok "$(field "$s" bg .status)" "bg's status"
}

# kart report: text, and a page that headless Chromium loads; its DOM has
# a bar for each task, and a screenshot is taken.
test_report_html_chromium() {
	command -v chromium >/dev/null || { skip "chromium is not installed"; return; }
	local s dom ud
	s=$(mkspool)
	"$KART" -s "$s" submit --no-cwd --name r-ok --memory 512M -- sleep 0.3 >/dev/null 2>&1
	"$KART" -s "$s" submit --no-cwd --name r-fail -- sh -c 'sleep 0.2; exit 3' >/dev/null 2>&1
	"$KART" -s "$s" submit --no-cwd --name 'r-<i>x' -- true >/dev/null 2>&1
	drain "$s" --slots 2
	run_cmd -s "$s" report
	assert_match 'fast +2 +1 ' "$OUT" "status by lane (ok, failed... columns)"
	assert_match 'Longest tasks' "$OUT" "text report"
	run_cmd -s "$s" report --html "$T_ROOT/report.html"
	assert_eq 0 "$RC" "report --html ($ERR)"
	grep -Eq '(src|href)="https?:' "$T_ROOT/report.html" && fail "the page loads something from the network"
	ud=$(mktemp -d "$T_ROOT/chromium.XXXXXX")
	local flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking
		--disable-component-update --disable-sync --user-data-dir="$ud")
	dom=$(timeout 120 chromium "${flags[@]}" --dump-dom "file://$T_ROOT/report.html" 2>/dev/null)
	assert_match 'data-id="r-ok" data-status="ok"' "$dom" "r-ok's bar"
	assert_match 'data-id="r-fail" data-status="failed"' "$dom" "r-fail's bar"
	assert_match '<title>r-&lt;i&gt;x: ' "$dom" "the hostile name, as text"
	[[ $dom == *'</i>'* ]] && fail "a name became markup"
	assert_match '<b id="count">3</b>' "$dom" "the count"
	timeout 120 chromium "${flags[@]}" --window-size=1100,900 --screenshot="$T_ROOT/report.png" \
		"file://$T_ROOT/report.html" >/dev/null 2>&1
	[ "$(head -c 4 "$T_ROOT/report.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "no PNG screenshot"
	[ -n "${KART_REPORT_PNG:-}" ] && cp "$T_ROOT/report.png" "$KART_REPORT_PNG"
	return 0
}

# kart gc and kart sync over a spool show a progress line on a terminal
# (script(1) gives them one), and none when stderr is a file.
test_progress_gc_sync() {
	local s out
	s=$(mkspool)
	for i in 1 2 3; do "$KART" -s "$s" submit --no-cwd --name "p$i" -- true >/dev/null 2>&1; done
	drain "$s"
	out=$(script -qec "$KART -s $s gc --older-than 0s" /dev/null)
	assert_match 'kart: gc: [0-9]+ entries of done/ looked at' "$out" "gc's progress on a terminal"
	assert_eq 0 "$(n_results "$s")" "gc removed the old results"
	for i in 4 5; do "$KART" -s "$s" submit --no-cwd --name "p$i" -- true >/dev/null 2>&1; done
	drain "$s"
	out=$(script -qec "$KART -s $s sync sqlite $T_ROOT/p.db" /dev/null)
	assert_match 'kart: sync: [0-9]+ tasks mirrored' "$out" "sync's progress on a terminal"
	"$KART" -s "$s" gc --older-than 0s 2>"$T_ROOT/gc.err" >/dev/null
	[ -s "$T_ROOT/gc.err" ] && fail "progress written to a file: $(cat "$T_ROOT/gc.err")"
	return 0
}

run_tests
