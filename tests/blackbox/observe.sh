#!/bin/bash
# Black-box: seeing the queue. kart metrics (the Prometheus format checked
# by promtool, served by a real node_exporter, its counts kept right across
# a finisher killed between its result and its claim's removal, cheap at
# 100,000 results), kart top (under tmux: typed keys, the screen read back),
# kart report --html (loaded in headless Chromium), kart eff, and the
# progress lines of kart gc and kart sync on a terminal.
. "$(dirname "$0")/../lib.sh"

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
	run_cmd -s "$s" eff --label grp
	assert_match 'Tasks: +2' "$OUT" "tasks over the label"
	assert_match 'Suggested: +memory=(80|88|96)M' "$OUT" "suggested memory="
	assert_match 'Suggested: +timeout=[0-9]+s' "$OUT" "suggested timeout="
	run_cmd -s "$s" eff nosuch
	assert_eq 1 "$RC" "eff of an unknown id"
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
