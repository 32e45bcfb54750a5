#!/bin/bash
# Black-box: what a new user meets in the first hour, tried as a normal
# account on a spool of its own where it matters: a timeout's SIGTERM and
# kill grace, the exit codes of kart wait, no worker running, a missing
# `--`, a network request refused at once, many results, the worker's
# environment, the cron recipe, make demo, and the small hints; then the
# second round, on the README's own layout (the spool at ~/spool): why a
# task did not end ok, options anywhere, a dead worker said, the COMMAND
# column, cancel by pattern, the progress line, the clients' files,
# kart init --shared.
. "$(dirname "$0")/../lib.sh"

# A real account with a real home (made by the test, removed at its end),
# named after KART_TEST_USER_TAG so that runs side by side keep apart.
U=${KART_TEST_USER_TAG:-kt}fhuser
UHOME=/home/$U

# The test's user, made here and removed at the end (it is ours alone:
# the tag kt23 keeps parallel runs of other suites apart).
user_setup() {
	[ "$(id -u)" = 0 ] || { skip "needs root (to make the user $U)"; return 1; }
	command -v setpriv >/dev/null || { skip "setpriv (util-linux) is missing"; return 1; }
	if ! id "$U" >/dev/null 2>&1; then
		useradd -m -d "$UHOME" -s /bin/sh "$U" || { fail "useradd $U"; return 1; }
		_T_MADE_USER=1
	fi
	chmod 0711 "$T_ROOT"
	return 0
}
user_cleanup() {
	[ "${_T_MADE_USER:-0}" = 1 ] || return 0
	pkill -KILL -u "$U" 2>/dev/null
	wait_until 5 sh -c "! pgrep -u $U >/dev/null"
	userdel -r "$U" 2>/dev/null
}
trap 'in_main_shell || exit; user_cleanup; _cleanup' EXIT

# as_user CMD...: CMD as the user, in their home, with a login's plain
# environment (setpriv, env and sh exec: its pid is the command's, for
# stop_worker). In their home: kart submit binds the directory it runs in.
as_user() {
	setpriv --reuid="$U" --regid="$U" --init-groups -- env -i "${SAN_ENV[@]}" PATH="$KART_BUILD:/usr/bin:/bin" HOME="$UHOME" LANG=C.UTF-8 \
		sh -c 'cd "$HOME" && exec "$@"' sh "$@"
}
# A spool of the user's own, made by the user (kart init --personal).
user_spool() {
	local d
	d=$(mktemp -d "$T_ROOT/u.XXXXXX") && chown "$U:" "$d" && chmod 0755 "$d" &&
		as_user kart -s "$d/spool" init --personal >/dev/null || fail "kart init --personal as $U"
	echo "$d/spool"
}
user_drain() {
	local s=$1; shift
	as_user timeout "$(slow 60)" kart -s "$s" worker --drain "$@" >>"$s.worker.log" 2>&1 ||
		fail "worker --drain as $U exited $? (log: $(tail -3 "$s.worker.log"))"
}
# user_task SPOOL NAME BODY: written by the user, submitted by the user.
user_submit() {
	local s=$1 n=$2
	printf '%s\n' "$3" >"$T_ROOT/$n.task" && chmod 0644 "$T_ROOT/$n.task"
	as_user kart -s "$s" submit --name "$n" "$T_ROOT/$n.task" >/dev/null || fail "submit $n as $U"
}

# ---- 4. a timeout gives a chance to clean up ---------------------------------

# The body of a task that cleans up on SIGTERM; $1: what else it does.
trap_body() {
	printf '%s\n' "#!/bin/sh" "$1" \
		"trap 'echo cleaning; sleep 0.3; echo cleaned; exit 3' TERM" \
		"echo started" "sleep 30 & wait"
}

test_timeout_sigterm_first() {
	user_setup || return
	local s; s=$(user_spool)
	user_submit "$s" clean "$(trap_body '#kart: timeout=1s kill_grace=10s')"
	user_drain "$s"
	assert_eq timeout "$(field "$s" clean .status)" status
	assert_eq 3 "$(field "$s" clean .exit_code)" "exit code chosen within the grace"
	assert_eq null "$(field "$s" clean .signal)" "no signal ended it"
	assert_eq 10 "$(field "$s" clean .limits.kill_grace_s)" "limits.kill_grace_s"
	assert_match "after SIGTERM it exited with status 3" "$(field "$s" clean .error)" error
	assert_eq "started cleaning cleaned" "$(tr '\n' ' ' <"$s/done/clean.stdout" | sed 's/ $//')" stdout
	local d; d=$(field "$s" clean .duration_ms)
	# Less than the timeout and the whole grace (11 s): the exit status
	# above says so too; a loaded machine may take some seconds more.
	[ "$d" -lt 10500 ] || fail "the clean-up took the whole grace: ${d}ms"
	as_user kart -s "$s" wait clean 2>/dev/null
	assert_eq 124 "$?" "kart wait on a timeout"
}

test_timeout_sigkill_after_grace() {
	user_setup || return
	local s; s=$(user_spool)
	# It ignores SIGTERM: SIGKILL comes after the grace, not before.
	user_submit "$s" stubborn "$(printf '%s\n' '#!/bin/sh' '#kart: timeout=1s kill_grace=2s' \
		"trap '' TERM" 'while :; do sleep 0.1; done')"
	user_drain "$s"
	assert_eq timeout "$(field "$s" stubborn .status)" status
	assert_eq SIGKILL "$(field "$s" stubborn .signal)" signal
	assert_match "SIGTERM, then SIGKILL after the kill grace of 2s" "$(field "$s" stubborn .error)" error
	local d; d=$(field "$s" stubborn .duration_ms)
	[ "$d" -ge 2900 ] || fail "killed after ${d}ms: before timeout + grace (3s)"
}

test_timeout_term_reaches_the_tree() {
	user_setup || return
	local s; s=$(user_spool) d="31.$$$RANDOM"
	# A daemon in a session of its own hears the SIGTERM too.
	user_submit "$s" tree "$(printf '%s\n' '#!/bin/sh' '#kart: timeout=1s kill_grace=3s' \
		"setsid sh -c 'trap \"echo daemon-term >&2; exit 0\" TERM; sleep $d & wait' &" \
		"sleep $d & wait")"
	user_drain "$s"
	assert_eq timeout "$(field "$s" tree .status)" status
	assert_eq SIGTERM "$(field "$s" tree .signal)" "the main process ended by SIGTERM"
	assert_match daemon-term "$(cat "$s/done/tree.stderr")" "the daemon's trap ran"
	pgrep -f "sleep $d" >/dev/null && fail "a process of the task survived"
	true
}

test_timeout_policy_default_and_ceiling() {
	user_setup || return
	local s; s=$(user_spool)
	user_submit "$s" dflt "$(printf '%s\n' '#!/bin/sh' '#kart: timeout=1s' "trap '' TERM" 'sleep 30')"
	# kart submit refuses it before it queues; copied in, the worker does.
	printf '%s\n' '#!/bin/sh' '#kart: kill_grace=2h' 'true' >"$T_ROOT/over.task"
	chmod 0644 "$T_ROOT/over.task"
	local out; out=$(as_user kart -s "$s" submit --name over "$T_ROOT/over.task" 2>&1)
	assert_match "over.task: line 2: kill_grace=7200s is above the policy's ceiling of 300s" "$out" \
		"kart submit refuses it"
	as_user sh -c "cat '$T_ROOT/over.task' >'$s/new/over'"
	user_submit "$s" zero "$(printf '%s\n' '#!/bin/sh' '#kart: timeout=1s kill_grace=0' "trap 'exit 0' TERM" 'sleep 30 & wait')"
	user_drain "$s"
	assert_eq 5 "$(field "$s" dflt .limits.kill_grace_s)" "the policy's default grace"
	local d; d=$(field "$s" dflt .duration_ms)
	[ "$d" -ge 5900 ] || fail "default grace: killed after ${d}ms, before 1s + 5s"
	assert_eq rejected "$(field "$s" over .status)" "kill_grace above the ceiling"
	assert_match "kill_grace=7200s is above the policy's ceiling of 300s" "$(field "$s" over .error)" error
	assert_eq SIGKILL "$(field "$s" zero .signal)" "kill_grace=0: SIGKILL at once"
	as_user kart -s "$s" wait over 2>/dev/null
	assert_eq 65 "$?" "kart wait on a rejected task"
}

test_cancel_sigterm_first() {
	user_setup || return
	local s; s=$(user_spool)
	user_submit "$s" job "$(trap_body '#kart: kill_grace=5s')"
	as_user kart -s "$s" worker >>"$s.worker.log" 2>&1 &
	local wpid=$!
	T_PIDS+=("$wpid")
	# "started" comes after its trap is set. (A function, so that the
	# glob is made again at each try: the claim may not be there yet.)
	job_started() { grep -qs started "$s"/cur/*/.job.stdout; }
	if ! wait_until 20 job_started; then
		wait_until 20 is_running "$s" job || fail "job never ran"
		sleep 0.3 # no word from it: time for its trap to be set
	fi
	run_cmd -s "$s" cancel job
	wait_until 20 test -e "$s/done/job.json" || fail "no result after cancel"
	assert_eq cancelled "$(field "$s" job .status)" status
	assert_eq 3 "$(field "$s" job .exit_code)" "its own exit within the grace"
	assert_match cleaned "$(cat "$s/done/job.stdout")" "its trap ran"
	run_cmd -s "$s" wait job
	assert_eq 130 "$RC" "kart wait on a cancelled task"
	stop_worker "$wpid"
}

test_timeout_backend_none() {
	local s; s=$(mkspool)
	printf '%s\n' "$(trap_body '#kart: timeout=1s kill_grace=5s')" >"$s/new/clean"
	KART_BACKEND=none drain "$s"
	assert_eq timeout "$(field "$s" clean .status)" status
	assert_eq 3 "$(field "$s" clean .exit_code)" "exit code within the grace (backend none)"
	assert_match cleaned "$(cat "$s/done/clean.stdout")" "its trap ran (backend none)"
}

test_wait_codes_and_names() {
	local s; s=$(mkspool)
	printf '#!/bin/sh\nexit 3\n' >"$s/new/three"
	printf '#!/bin/sh\nexit 0\n' >"$s/new/fine"
	printf '#!/bin/sh\nkill -USR1 $$\n' >"$s/new/sig"
	printf '#!/bin/sh\n#kart: bogus\n' >"$s/new/bad"
	drain "$s"
	run_cmd -s "$s" wait three
	assert_eq 3 "$RC" "failed: its own code"
	assert_match "three: failed \(exit 3\)" "$ERR" "stderr names it"
	run_cmd -s "$s" wait sig
	assert_eq $((128 + 10)) "$RC" "killed: 128+N"
	run_cmd -s "$s" wait fine three bad sig
	assert_eq 1 "$RC" "several, some not ok"
	assert_match "three: failed" "$ERR" "names three"
	assert_match "bad: rejected" "$ERR" "names bad"
	assert_match "sig: killed \(SIGUSR1\)" "$ERR" "names sig"
	[[ $ERR == *fine* ]] && fail "an ok task was named: $ERR"
	run_cmd -s "$s" wait fine
	assert_eq "0:" "$RC:$ERR" "ok: 0, nothing said"
}

# ---- 1. no worker running ----------------------------------------------------

test_no_worker_said() {
	user_setup || return
	local s; s=$(user_spool)
	local out err
	err=$(as_user kart -s "$s" submit --name lonely -- true 2>&1 >/dev/null)
	assert_match "no worker is running on $s" "$err" "submit says so"
	assert_match "kart -s $s worker --daemon" "$err" "submit gives the command"
	err=$(as_user kart -s "$s" wait --timeout 1 lonely 2>&1 >/dev/null)
	assert_match "no worker is running" "$err" "wait says so"
	# --daemon: detached, logging to SPOOL/worker.log; then nothing is said.
	out=$(as_user kart -s "$s" worker --daemon 2>&1)
	assert_match "running in the background as pid [0-9]+; log: $s/worker.log" "$out" "--daemon says where"
	local dpid; dpid=$(sed -n 's/.*as pid \([0-9]*\);.*/\1/p' <<<"$out")
	[ -n "$dpid" ] && T_PIDS+=("$dpid")
	as_user kart -s "$s" wait --timeout 20 lonely 2>/dev/null || fail "the daemon did not run the task"
	err=$(as_user kart -s "$s" submit --name second -- true 2>&1 >/dev/null)
	assert_eq "" "$err" "submit with a worker running says nothing"
	assert_match "event=finished.*id=lonely" "$(cat "$s/worker.log")" "the daemon's log"
	[ "$(ps -o sid= -p "$dpid" | tr -d ' ')" != "$(ps -o sid= -p $$ | tr -d ' ')" ] ||
		fail "the daemon is still in our session"
	[ -n "$dpid" ] && stop_worker "$dpid"
}

# ---- 2. leaving out -- ----------------------------------------------------------

test_submit_hints_double_dash() {
	user_setup || return
	local s err; s=$(user_spool)
	err=$(cd "$UHOME" && as_user kart -s "$s" submit make 2>&1)
	assert_eq 1 "$?" "exit status"
	assert_match "did you mean: kart submit -- make" "$err" "the hint"
	err=$(cd "$UHOME" && as_user kart -s "$s" submit make -j2 2>&1)
	assert_match "did you mean: kart submit -- make -j2" "$err" "the hint, with arguments"
	err=$(as_user kart -s "$s" submit no-such-command-kt23 2>&1)
	[[ $err == *"did you mean"* ]] && fail "a hint for what is no command: $err"
	true
}

# ---- 3. network refused at once --------------------------------------------------

test_net_refused_at_submit() {
	user_setup || return
	local s err; s=$(mkspool)
	# Shared, as kart.tmpfiles lays it out: users drop into drop/USER/.
	chmod 0755 "$s" && chmod 1777 "$s/tmp" && mkdir -m 1777 "$s/drop"
	err=$(as_user kart -s "$s" submit --net -- true 2>&1)
	assert_eq 1 "$?" "submit --net without a grant"
	assert_match "allow_uids or allow_groups in $s/kart.conf" "$err" "names the key and the file"
	assert_eq "" "$(ls "$s/new"; ls -A "$s/drop/$U" 2>/dev/null)" "nothing queued"
	# The worker's error names them too (the file came another way).
	printf '#!/bin/sh\n#kart: net\ntrue\n' >"$s/new/direct"
	drain "$s"
	assert_match "allow_uids or allow_groups in .*kart.conf" "$(field "$s" direct .error)" "worker's error"
}

test_personal_spool_grants_net() {
	user_setup || return
	local s; s=$(user_spool)
	assert_match "allow_uids = $(id -u "$U")" "$(cat "$s/kart.conf")" "kart init --personal's grant"
	as_user kart -s "$s" submit --name withnet --net -- sh -c 'cat /sys/class/net/*/operstate 2>/dev/null | sort -u; ls /sys/class/net' >/dev/null ||
		fail "submit --net on a personal spool"
	as_user kart -s "$s" submit --name nonet -- ls /sys/class/net >/dev/null
	user_drain "$s"
	assert_eq true "$(field "$s" withnet .sandbox.network)" "net granted on request"
	assert_eq false "$(field "$s" nonet .sandbox.network)" "still opt-in per task"
	# Again: the user's own kart.conf stays.
	echo "# mine" >>"$s/kart.conf"
	as_user kart -s "$s" init --personal 2>/dev/null
	assert_match "# mine" "$(cat "$s/kart.conf")" "an existing kart.conf kept"
}

# ---- 11. small things -----------------------------------------------------------

test_missing_spool_hints_init() {
	run_cmd -s "$T_ROOT/nope" status
	assert_eq 1 "$RC" "exit status"
	assert_match "kart -s $T_ROOT/nope init" "$ERR" "hint"
	run_cmd worker --help
	assert_match "usage: .*--log-format" "$(head -2 <<<"$OUT")" "worker usage line"
}

# ---- 8. many results ----------------------------------------------------------------

test_status_sort_glob_last_label() {
	local s i; s=$(mkspool)
	# Submitted in an order their ids do not sort in.
	for i in up-f03 up-f01 other up-f02; do
		run_cmd -s "$s" submit --name "$i" --label "night batch" -- true
		sleep 0.02
	done
	run_cmd -s "$s" submit --name loner -- true
	run_cmd -s "$s" status --label "night batch"
	assert_eq "up-f03 up-f01 other up-f02" "$(cut -f1 <<<"$OUT" | tr '\n' ' ' | sed 's/ $//')" "queued, by label, by time"
	KART_BACKEND=none drain "$s"
	assert_eq "night batch" "$(field "$s" up-f01 .label | sed 's/%20/ /')" "label in the result"
	run_cmd -s "$s" status 'up-f0*'
	assert_eq 0 "$RC" "a glob: exit status ($ERR)"
	assert_eq 3 "$(wc -l <<<"$OUT")" "a glob matches three"
	run_cmd -s "$s" status --sort id 'up-f0*'
	assert_eq "up-f01 up-f02 up-f03" "$(cut -f1 <<<"$OUT" | tr '\n' ' ' | sed 's/ $//')" "--sort id"
	run_cmd -s "$s" status --last 2
	assert_eq 2 "$(wc -l <<<"$OUT")" "--last 2"
	run_cmd -s "$s" status --label "night batch" --json
	assert_eq 4 "$(jq length <<<"$OUT")" "--label: the batch, done"
	[[ $OUT == *loner* ]] && fail "--label showed an unlabelled task"
	run_cmd -s "$s" status 'zz*'
	assert_eq 1 "$RC" "a glob that matches nothing"
	assert_match "no task matches" "$ERR" "said"
}

# ---- 5. the worker's environment ---------------------------------------------------

test_env_named_by_policy() {
	local s; s=$(mkspool)
	printf '[sandbox]\nenv_pass = KT23_SET KT23_UNSET\n[network]\ncred_env = KT23_TOKEN\n' >"$s/kart.conf"
	env -u KT23_UNSET -u KT23_TOKEN KT23_SET=1 KART_BACKEND=none "$KART" -s "$s" worker >>"$s.worker.log" 2>&1 &
	local wpid=$!
	T_PIDS+=("$wpid")
	wait_until 20 grep -q "lacks: KT23_UNSET KT23_TOKEN" "$s.worker.log" ||
		fail "start: no line naming what lacks ($(tail -2 "$s.worker.log"))"
	kill -HUP "$wpid"
	wait_until 20 grep -q "SIGHUP: the policy passes variables .*lacks: KT23_UNSET KT23_TOKEN" "$s.worker.log" ||
		fail "SIGHUP: no line naming what lacks"
	grep -q "lacks:.*KT23_SET" "$s.worker.log" && fail "a variable that is set was named"
	stop_worker "$wpid"
	local out err
	out=$(env -u KT23_UNSET -u KT23_TOKEN KT23_SET=1 "$KART" -s "$s" doctor --json 2>"$T_ROOT/doc.err")
	assert_eq true "$(jq .environment.KT23_SET.set <<<"$out")" "doctor: KT23_SET set"
	assert_eq false "$(jq .environment.KT23_UNSET.set <<<"$out")" "doctor: KT23_UNSET not set"
	assert_eq '"[network] cred_env"' "$(jq .environment.KT23_TOKEN.in <<<"$out")" "doctor: where it is named"
	assert_match "KT23_TOKEN .*is not set" "$(cat "$T_ROOT/doc.err")" "doctor warns"
}

# ---- 7. the cron recipe under cron's environment --------------------------------------

test_cron_consume_with_crons_path() {
	local s p; s=$(mkspool) p=$T_ROOT/prefix
	printf '#!/bin/sh\necho hi\n' >"$s/new/one"
	KART_BACKEND=none drain "$s"
	# As make install lays it out: PREFIX/bin/kart, PREFIX/share/doc/kart/.
	mkdir -p "$p/bin" "$p/share/doc/kart"
	ln -s "$KART" "$p/bin/kart"
	cp "$ROOT/contrib/cron/kart-consume" "$p/share/doc/kart/"
	printf '#!/bin/sh\necho "$KART_ID $KART_STATUS" >>%s\n' "$T_ROOT/handled" >"$T_ROOT/on-result"
	chmod +x "$T_ROOT/on-result"
	[ -e /usr/bin/kart ] || [ -e /bin/kart ] && { skip "a kart in /usr/bin would hide the search"; return; }
	env -i PATH=/usr/bin:/bin HOME="$T_ROOT" "$p/share/doc/kart/kart-consume" "$s" "$T_ROOT/state" "$T_ROOT/on-result" \
		>"$T_ROOT/cron.out" 2>&1
	assert_eq 0 "$?" "kart-consume under cron's PATH ($(cat "$T_ROOT/cron.out"))"
	assert_eq "one ok" "$(cat "$T_ROOT/handled" 2>/dev/null)" "the handler ran"
	# Nowhere to find it: it says so, naming what to set.
	cp "$ROOT/contrib/cron/kart-consume" "$T_ROOT/lone-consume"
	env -i PATH=/usr/bin:/bin "$T_ROOT/lone-consume" "$s" "$T_ROOT/state2" "$T_ROOT/on-result" >"$T_ROOT/cron.out" 2>&1
	assert_eq 1 "$?" "without kart anywhere"
	assert_match "set KART or PATH" "$(cat "$T_ROOT/cron.out")" "says what to set"
	# The README's crontab line sets PATH itself.
	assert_match "^PATH=.*/usr/local/bin" "$(grep -A4 'crontab -e' "$ROOT/README.md" | grep '^PATH=')" "README's crontab sets PATH"
}

# ---- 9. make demo shows what it runs ----------------------------------------------------

test_demo_shows_what_runs() {
	have_bwrap || { skip "bwrap cannot build a sandbox here"; return; }
	local out
	out=$(cd "$T_ROOT" && KART_B=$KART_BUILD DEMO_LOG="$T_ROOT/demo.log" timeout "$(slow 120)" bash "$ROOT/tests/demo" 2>&1)
	assert_eq 0 "$?" "the demo ran"
	# Every line shown after "$ " is a text that was run, and the other way round.
	sed -n 's/^.*\$ \(.*\)\x1b\[0m$/\1/p' <<<"$out" >"$T_ROOT/shown"
	[ -s "$T_ROOT/shown" ] || fail "no command shown"
	assert_eq "$(cat "$T_ROOT/demo.log")" "$(cat "$T_ROOT/shown")" "shown = run"
	assert_match "import socket" "$(grep nonet "$T_ROOT/shown")" "the network probe imports socket"
	# Nothing is shown but through run: no say of a text run some other way.
	assert_eq "" "$(grep -nE '(^|[;&|[:space:]])say '  "$ROOT/tests/demo" | grep -v 'say "\$1"')" "say outside run"
	[[ $out == *NameError* ]] && fail "the probe failed on its own code: $out"
	assert_match "nonet	failed" "$out" "the probe failed for want of network"
}

# ---- the README's personal walkthrough, as a normal user -------------------------------

test_readme_personal_as_a_user() {
	user_setup || return
	local out rc dpid b
	for b in personal personal-jobs personal-secret; do
		[ -n "$(readme_block $b)" ] || fail "README has no ops: $b block"
	done
	rm -rf "$UHOME/spool"
	# Top to bottom, as typed; no kart.conf edit but the one line shown.
	out=$(cd "$UHOME" && as_user timeout "$(slow 120)" bash -c "
		set -u
		$(readme_block personal)
		$(readme_block personal-jobs)
		$(readme_block personal-secret)" 2>"$T_ROOT/walk.err")
	rc=$?
	dpid=$(sed -n 's/.*in the background as pid \([0-9]*\);.*/\1/p' <<<"$out")
	[ -n "$dpid" ] && T_PIDS+=("$dpid")
	assert_eq 0 "$rc" "the walkthrough as $U (stderr: $(tail -5 "$T_ROOT/walk.err"))"
	assert_match "hello from a sandbox" "$out" "hello"
	assert_match "exit 3" "$out" "a failing task's own code"
	assert_match "exit 130" "$out" "cancelled"
	assert_match "exit 124" "$out" "timed out"
	assert_match "token received" "$out" "the secret, from the worker's environment"
	assert_eq cancelled "$(jq -r .status "$UHOME/spool/done/long.json")" "long: cancelled"
	assert_match "cleaned up" "$(cat "$UHOME/spool/done/long.stdout")" "long: its trap ran"
	assert_eq true "$(jq -r .sandbox.network "$UHOME/spool/done/web.json")" "web: network"
	assert_eq "$(id -u "$U")" "$(stat -c %u "$UHOME/spool/kart.conf")" "kart.conf is the user's"
	[ "$(grep -vc '^#\|^$' "$UHOME/spool/kart.conf")" = 3 ] ||
		fail "kart.conf has more than [network], allow_uids and the one line: $(cat "$UHOME/spool/kart.conf")"
	[ -n "$dpid" ] && stop_worker "$dpid"
	true
}


# ---- the second round: the README's layout, a spool at ~/spool -----------------

# home_spool: a fresh personal spool at the user's ~/spool, made by the
# user (kart init --personal), as the README's walkthrough does.
home_spool() {
	as_user sh -c 'rm -rf "$HOME/spool" && kart -s "$HOME/spool" init --personal' >/dev/null ||
		{ fail "kart init --personal ~/spool as $U"; return 1; }
	echo "$UHOME/spool"
}
# user_worker SPOOL: a background worker of the user's; sets UWPID, the
# worker's own pid (each command execs the next: no shell stays between).
user_worker() {
	(exec setpriv --reuid="$U" --regid="$U" --init-groups -- env -i "${SAN_ENV[@]}" \
		PATH="$KART_BUILD:/usr/bin:/bin" HOME="$UHOME" LANG=C.UTF-8 \
		sh -c 'cd "$HOME" && exec "$@"' sh kart -s "$1" worker) >>"$1.worker.log" 2>&1 &
	UWPID=$!
	T_PIDS+=("$UWPID")
}
# on_tty CMD...: CMD on a pseudo-terminal (script(1)), as the user, 100
# columns wide; its output (the terminal's) on stdout, CR and all.
on_tty() {
	local q="" a
	for a in "$@"; do q+=" $(printf '%q' "$a")"; done
	as_user script -qec "stty cols 100 2>/dev/null; $q" /dev/null
}

# 1. Say why: wait, status (text and --json), cat and watch show the
# result's error; the reason was only in done/ID.json.
test_says_why_everywhere() {
	user_setup || return
	local s err; s=$(home_spool) || return
	# A plain file is a task (kart submit would refuse this one now).
	printf '%s\n' '#!/bin/sh' '#kart: kind=cobol' 'echo never' | as_user sh -c 'cat >"$HOME/spool/new/cobol"'
	user_drain "$s"
	assert_eq rejected "$(field "$s" cobol .status)" status
	err=$(as_user kart -s "$s" wait cobol 2>&1 >/dev/null)
	assert_eq 65 "$(as_user kart -s "$s" wait cobol >/dev/null 2>&1; echo $?)" "wait's exit status"
	assert_match "cobol: rejected: line 2: kind=cobol is not a kind of the policy" "$err" "kart wait says why"
	assert_match "^cobol	rejected	line 2: kind=cobol is not a kind" "$(as_user kart -s "$s" status cobol)" \
		"kart status says why"
	assert_match "line 2: kind=cobol" "$(as_user kart -s "$s" status --json cobol | jq -r '.[0].error')" \
		"kart status --json has the error"
	err=$(as_user kart -s "$s" cat --stderr cobol 2>&1)
	assert_match "no captured stderr: it ended rejected: line 2: kind=cobol" "$err" "kart cat says why"
	assert_match "^cobol	rejected	line 2: kind=cobol" "$(as_user timeout 2 kart -s "$s" watch --all)" \
		"kart watch says why"
}

# For a task not ok, kart wait adds the last line of its stderr, and a
# task without network that failed to connect is told the network was off.
test_wait_stderr_and_network_off() {
	user_setup || return
	have_bwrap || { skip "bwrap cannot make a sandbox here (no network namespace)"; return; }
	local s err
	s=$(home_spool) || return
	as_user kart -s "$s" submit --name nonet -- bash -c 'echo trying >&2; exec 3<>/dev/tcp/127.0.0.1/9' >/dev/null
	as_user kart -s "$s" submit --name withnet --net -- bash -c 'exec 3<>/dev/tcp/127.0.0.1/9' >/dev/null
	user_drain "$s"
	assert_eq "false true" "$(field "$s" nonet .sandbox.network) $(field "$s" withnet .sandbox.network)" network
	err=$(as_user kart -s "$s" wait nonet 2>&1 >/dev/null)
	assert_match "nonet: failed \(exit 1\)" "$err" "the status"
	assert_match "nonet: its stderr ends: bash: line 1: /dev/tcp/127.0.0.1/9: Permission denied" "$err" \
		"the last line of its stderr (the sandbox refuses a connect without network)"
	assert_match "nonet: the task ran without network: kart submit --net" "$err" "the network was off"
	err=$(as_user kart -s "$s" wait withnet 2>&1 >/dev/null)
	assert_match "withnet: its stderr ends: .*Connection refused" "$err" "with network: its stderr"
	[[ $err == *"without network"* ]] && fail "a task with network was told the network was off: $err"
	true
}

# 4. Options after ids: read as options (GNU permutation); -- still ends
# them, and kart submit -- CMD is unchanged.
test_options_anywhere() {
	user_setup || return
	local s out rc i; s=$(home_spool) || return
	for i in 1 2 3; do as_user kart -s "$s" submit --name gzip -- true >/dev/null 2>&1; done
	as_user kart -s "$s" submit --name keep -- echo --timeout 5s >/dev/null 2>&1
	user_drain "$s"
	out=$(as_user kart -s "$s" wait gzip --timeout 5s 2>&1); rc=$?
	assert_eq "0:" "$rc:$out" "kart wait gzip --timeout 5s"
	out=$(as_user kart -s "$s" status 'gzip*' --last 2 2>&1); rc=$?
	assert_eq 0 "$rc" "kart status 'gzip*' --last 2 ($out)"
	assert_eq 2 "$(grep -c . <<<"$out")" "two lines, not all three and two errors"
	assert_eq "--timeout 5s" "$(cat "$s/done/keep.stdout")" "kart submit -- CMD: its arguments are the command's"
	out=$(as_user kart -s "$s" status -- --last 2>&1); rc=$?
	assert_eq 1 "$rc" "after --, --last is an id"
	assert_match "^kart status: --last: no such task" "$out" "said"
	out=$(as_user kart -s "$s" wait gzip --bogus 2>&1); rc=$?
	assert_eq 2 "$rc" "an unknown option is a usage error wherever it stands"
	assert_match "unknown option '--bogus'" "$out" "said"
}

# 5. A worker killed with -9: its claim is not "running" as if all were well.
test_status_says_worker_gone() {
	user_setup || return
	local s out w; s=$(home_spool) || return
	user_worker "$s"
	as_user kart -s "$s" submit --name sleeper -- sleep 60 >/dev/null 2>&1
	wait_until 20 is_running "$s" sleeper || { fail "sleeper never ran"; return; }
	w=$(as_user kart -s "$s" status --json sleeper | jq -r '.[0].worker')
	kill -9 "$UWPID"
	wait_gone 10 "$UWPID"
	out=$(as_user kart -s "$s" status sleeper)
	assert_eq "sleeper	running	(worker $w is gone; re-queued when a worker starts)" "$out" "kart status"
	out=$(as_user kart -s "$s" status --json sleeper)
	assert_eq "true|worker $w is gone; re-queued when a worker starts" \
		"$(jq -r '.[0] | "\(.worker_gone)|\(.note)"' <<<"$out")" "kart status --json"
	if "$KART" --version | grep -q sync-sqlite; then
		as_user kart -s "$s" sync sqlite "$UHOME/mirror.db" || fail "kart sync sqlite"
		assert_eq "running|worker $w is gone; re-queued when a worker starts" \
			"$(sqlite3 "$UHOME/mirror.db" "SELECT state, error FROM tasks WHERE id = 'sleeper'")" "the mirror's row"
	fi
	as_user pkill -KILL -f "sleep 60" 2>/dev/null
	true
}

# 6. What a task is: the COMMAND column on a terminal, the whole in --json;
# the README's loops name their tasks.
test_status_command_column() {
	user_setup || return
	local s out; s=$(home_spool) || return
	as_user sh -c 'mkdir -p "$HOME/logs" && cd "$HOME/logs" && : >"a b.log" &&
		kart -s "$HOME/spool" submit --name gz-a -- gzip -k9 "a b.log"' >/dev/null 2>&1
	user_submit "$s" script "$(printf '%s\n' '#!/bin/sh' '#kart: timeout=5m' '# a comment' '' 'make -C src all')"
	as_user kart -s "$s" submit --name long -- sh -c "echo $(printf 'x%.0s' $(seq 1 150))" >/dev/null 2>&1
	out=$(on_tty kart -s "$s" status | tr -d '\r')
	assert_match "^ID +STATE +INFO +COMMAND" "$out" "the heading"
	assert_match "gz-a +queued +gzip -k9 'a b.log'" "$out" "kart submit's command, quoted where a shell needs it"
	assert_match "script +queued +make -C src all" "$out" "a file's first line after its directives"
	local line; line=$(grep "^long" <<<"$out")
	[ "${#line}" -le 100 ] || fail "the line is wider than the terminal: ${#line}"
	assert_match "\.\.\.$" "$line" "a long command is cut to fit"
	assert_eq "gzip -k9 'a b.log'" "$(as_user kart -s "$s" status --json gz-a | jq -r '.[0].command')" "--json"
	assert_eq 150 "$(as_user kart -s "$s" status --json long | jq -r '.[0].command' | tr -cd x | wc -c)" \
		"--json has the whole of it"
	[[ $(as_user kart -s "$s" status) == *COMMAND* ]] && fail "a table on a pipe"
	# The README's loops: each task named.
	assert_match 'kart submit --name "gzip-\$\{f%\.log\}"' "$(grep -A2 'cd ~/logs' "$ROOT/README.md")" "the gzip loop"
	assert_match 'kart submit --name "input-\$i"' "$(readme_block personal-jobs)" "the inputs loop"
}

# kart cancel takes globs, --label and --state, as kart status does.
test_cancel_globs_label_state() {
	user_setup || return
	local s out i; s=$(home_spool) || return
	for i in 1 2 3; do as_user kart -s "$s" submit --name "gz-$i" -- true >/dev/null 2>&1; done
	as_user kart -s "$s" submit --name other --label batch7 -- true >/dev/null 2>&1
	as_user kart -s "$s" submit --name later --in 1h -- true >/dev/null 2>&1
	as_user kart -s "$s" submit --name stays -- true >/dev/null 2>&1
	out=$(as_user kart -s "$s" cancel 'gz-*' 2>&1)
	assert_eq 0 "$?" "cancel 'gz-*' ($out)"
	assert_eq "cancelled cancelled cancelled" "$(for i in 1 2 3; do field "$s" "gz-$i" .status; done | tr '\n' ' ' | sed 's/ $//')" "the glob"
	as_user kart -s "$s" cancel --label batch7 >/dev/null 2>&1 || fail "cancel --label"
	assert_eq cancelled "$(field "$s" other .status)" "--label"
	as_user kart -s "$s" cancel --state scheduled >/dev/null 2>&1 || fail "cancel --state scheduled"
	assert_eq cancelled "$(field "$s" later .status)" "--state"
	assert_eq "stays	queued" "$(as_user kart -s "$s" status stays)" "the others stay"
	out=$(as_user kart -s "$s" cancel 'gz-*' 2>&1)
	assert_eq 1 "$?" "a pattern of finished tasks only: exit status"
	assert_match "no task to cancel" "$out" "a pattern of finished tasks only: said"
	as_user kart -s "$s" cancel >/dev/null 2>&1
	assert_eq 2 "$?" "no id, no filter: a usage error, never everything"
}

# kart edit --set not_before=now starts a scheduled task at once.
test_edit_not_before_now() {
	user_setup || return
	local s out; s=$(home_spool) || return
	as_user kart -s "$s" submit --name later --in 1h -- echo ran >/dev/null 2>&1
	assert_match "^later	scheduled	" "$(as_user kart -s "$s" status later)" "scheduled"
	out=$(as_user kart -s "$s" edit --set not_before=now later 2>&1)
	assert_eq 0 "$?" "edit --set not_before=now ($out)"
	user_drain "$s"
	assert_eq ok "$(field "$s" later .status 2>/dev/null)" "it ran at once"
}

# 12. A directive error of kart submit FILE names the file's own line.
test_submit_error_names_files_line() {
	user_setup || return
	local s out; s=$(home_spool) || return
	printf '%s\n' '#!/bin/sh' '# a comment' '#kart: pids=0' 'true' >"$T_ROOT/bad.sh"
	chmod 0644 "$T_ROOT/bad.sh"
	out=$(as_user kart -s "$s" submit --timeout 5m --label x "$T_ROOT/bad.sh" 2>&1)
	assert_eq 1 "$?" "refused"
	assert_match "bad.sh: line 3: pids=0 is not a number" "$out" "its own line 3, whatever submit adds"
	out=$(as_user kart -s "$s" submit --pids 0 "$T_ROOT/bad.sh" 2>&1)
	assert_match "pids 0: pids=0 is not a number" "$out" "an option's own error names the option"
}

# 12. kart resume of a task never paused: said, exit 1 (kart(1)).
test_resume_not_paused() {
	user_setup || return
	local s out; s=$(home_spool) || return
	user_worker "$s"
	as_user kart -s "$s" submit --name busy -- sleep 30 >/dev/null 2>&1
	wait_until 20 is_running "$s" busy || { fail "busy never ran"; stop_worker "$UWPID"; return; }
	out=$(as_user kart -s "$s" resume busy 2>&1)
	assert_eq 1 "$?" "exit status"
	assert_match "busy: not paused" "$out" "said"
	as_user kart -s "$s" cancel busy >/dev/null 2>&1
	stop_worker "$UWPID"
}

# The worker's environment on the terminal: --daemon logs to a file, and
# said nothing where the user looks.
test_worker_says_missing_variables() {
	user_setup || return
	local s out; s=$(home_spool) || return
	echo 'cred_env = KT37_TOKEN' >>"$s/kart.conf"
	out=$(as_user kart -s "$s" worker --daemon 2>&1)
	local dpid; dpid=$(sed -n 's/.*as pid \([0-9]*\);.*/\1/p' <<<"$out")
	[ -n "$dpid" ] && T_PIDS+=("$dpid")
	assert_match "KT37_TOKEN is not set: \[network\] cred_env passes it to tasks" "$out" "--daemon says it"
	[ -n "$dpid" ] && stop_worker "$dpid"
	out=$(as_user env KT37_TOKEN=x kart -s "$s" worker --drain 2>&1)
	[[ $out == *"KT37_TOKEN is not set"* ]] && fail "said with the variable set: $out"
	out=$(as_user kart -s "$s" worker --drain 2>&1)
	assert_match "warning: KT37_TOKEN is not set" "$out" "a worker in the foreground says it too"
}

# The progress line of kart wait on a terminal, GNU parallel --bar style;
# none on a pipe, none with --quiet.
test_wait_progress_line() {
	user_setup || return
	local s out; s=$(home_spool) || return
	as_user kart -s "$s" submit --name p1 -- true >/dev/null 2>&1
	as_user kart -s "$s" submit --name p2 -- sh -c 'exit 3' >/dev/null 2>&1
	as_user kart -s "$s" submit --name p3 -- sleep 2 >/dev/null 2>&1
	user_worker "$s"
	out=$(on_tty kart -s "$s" wait p1 p2 p3)
	assert_match "\[####################\] 3/3 done, 1 failed, 0 running, ETA 0:00" "$out" "the last state"
	assert_match "[0-9]/3 done, [01] failed, 1 running, ETA [0-9]+:[0-9][0-9]" "$out" "a line while p3 runs"
	out=$(on_tty kart -s "$s" wait --quiet p1 p2 p3)
	[[ $out == *"3/3 done"* ]] && fail "--quiet: a progress line: $out"
	out=$(as_user kart -s "$s" wait p1 p2 p3 2>&1)
	[[ $out == *"done,"* ]] && fail "on a pipe: a progress line: $out"
	stop_worker "$UWPID"
}

# 10. The clients take cwd, binds and env as kart submit does.
test_clients_take_cwd_binds_env() {
	user_setup || return
	local s c id n=0; s=$(home_spool) || return
	as_user sh -c 'mkdir -p "$HOME/work" && echo from-the-bind >"$HOME/input"'
	local py=$ROOT/contrib/clients/kart_submit.py mjs=$ROOT/contrib/clients/kart_submit.mjs sh=$ROOT/contrib/clients/kart-submit.sh
	for c in py mjs sh; do
		[ $c = mjs ] && ! command -v node >/dev/null && { skip "node is not installed"; continue; }
		local task='#!/bin/sh
echo "$(pwd) $KT37 $(cat '"$UHOME"'/input)" >out.'$c
		case $c in
		py) id=$(printf '%s\n' "$task" | as_user python3 "$py" -C "$UHOME/work" --ro "$UHOME/input" -e KT37=v-$c "$s" - cl-$c) ;;
		mjs) id=$(printf '%s\n' "$task" | as_user node "$mjs" -C "$UHOME/work" --ro "$UHOME/input" -e KT37=v-$c "$s" - cl-$c) ;;
		sh) id=$(printf '%s\n' "$task" | as_user sh "$sh" -C "$UHOME/work" --ro "$UHOME/input" -e KT37=v-$c "$s" cl-$c) ;;
		esac
		assert_eq "cl-$c" "$id" "$c: the id"
		assert_eq "600" "$(stat -c %a "$s/new/cl-$c")" "$c: with env=, the task file is the user's alone"
		n=$((n + 1))
	done
	user_drain "$s"
	for c in py mjs sh; do
		[ -e "$s/done/cl-$c.json" ] || continue
		assert_eq ok "$(field "$s" "cl-$c" .status)" "$c: status ($(field "$s" "cl-$c" .error))"
		assert_eq "$UHOME/work v-$c from-the-bind" "$(cat "$UHOME/work/out.$c" 2>/dev/null)" "$c: cwd, env, the bind"
	done
	# Without -C: no cwd= (the library's default too), a private /work.
	id=$(echo 'pwd' | as_user python3 "$py" "$s" - nocwd)
	user_drain "$s"
	assert_eq "/work|true" "$(cat "$s/done/nocwd.stdout")|$(field "$s" nocwd .work_discarded)" "python: no cwd by default"
}

# kart init --shared GROUP lays a spool out exactly as kart.tmpfiles does;
# kart doctor names each directory of a shared spool that is not so.
test_init_shared_as_tmpfiles() {
	G_KART=${KART_TEST_USER_TAG:-kt}fhgrp U_IN= U_OUT=
	users_make || return
	tmpfiles_spool || return
	local want got mine=$T_ROOT/shared
	want=$(cd "$S" && find . -maxdepth 1 -type d -printf '%p %m %u %g\n' | sort)
	run_cmd -s "$mine" init --shared "$G_KART"
	assert_eq 0 "$RC" "kart init --shared ($ERR)"
	got=$(cd "$mine" && find . -maxdepth 1 -type d -printf '%p %m %u %g\n' | sort)
	assert_eq "$want" "$got" "the layout of kart.tmpfiles"
	run_cmd -s "$mine" doctor --json
	assert_eq "true" "$(jq .spool.modes_ok <<<"$OUT")" "doctor: the modes are right"
	chmod 0777 "$mine/new"
	chgrp root "$mine/done"
	run_cmd -s "$mine" doctor
	assert_eq 1 "$RC" "doctor fails"
	assert_match "$mine/new: mode 0777, uid 0, gid [0-9]+; should be a directory of mode 0755" "$ERR" "names new/"
	assert_match "$mine/done: mode [0-7]+, uid 0, gid 0; should be .* mode 2750, uid 0, gid [1-9]" "$ERR" "names done/"
	run_cmd -s "$mine" init --shared no-such-group-kt37
	assert_eq 2 "$RC" "an unknown group"
}

# 13. tests/deps-guard judges awk by mawk, required, whatever else offers
# it: the rule in its selftest (gawk as the alternative, mawk named), and
# the real check where this machine's awk is another package's file.
test_deps_guard_alternatives() {
	local tests_dg=$ROOT/tests/deps-guard out
	out=$("$tests_dg" selftest 2>&1) || fail "deps-guard selftest: $out"
	if [ "$(readlink -f "$(command -v awk)")" != "$(readlink -f /usr/bin/mawk)" ]; then
		out=$("$tests_dg" check 2>/dev/null)
		[[ $out == *"for awk"* ]] && fail "deps-guard: $out"
	fi
	true
}

# 8. Cancel says what happened: a TERM trap that exits 1 is not "killed".
test_cancel_says_what_happened() {
	user_setup || return
	local s out; s=$(home_spool) || return
	user_worker "$s"
	as_user kart -s "$s" submit --name trapped -- sh -c "trap 'echo bye; exit 1' TERM; echo up; sleep 30 & wait" >/dev/null 2>&1
	as_user kart -s "$s" submit --name stubborn --kill-grace 1s -- sh -c "trap '' TERM; echo up; while :; do sleep 0.1; done" >/dev/null 2>&1
	up() { grep -qs up "$s"/cur/*/."$1".stdout; }
	wait_until 20 up trapped && wait_until 20 up stubborn || fail "they never started"
	out=$(as_user kart -s "$s" cancel trapped 2>&1)
	assert_eq "trapped: cancelled: SIGTERM, exited 1 within the grace" "$out" "a trap that exits"
	out=$(as_user kart -s "$s" cancel stubborn 2>&1)
	assert_eq "stubborn: cancelled: SIGKILL after the 1s grace" "$out" "a task that ignores SIGTERM"
	as_user kart -s "$s" submit --name queued-one --in 1h -- true >/dev/null 2>&1
	out=$(as_user kart -s "$s" cancel queued-one 2>&1)
	assert_eq "queued-one: cancelled (it never ran)" "$out" "a queued task"
	stop_worker "$UWPID"
}

# 2. Whatever kart submit can check, it checks before it queues, in the
# worker's words: a path the submitter cannot open, the spool, the kind.
test_submit_checks_before_queue() {
	user_setup || return
	local s out why; s=$(home_spool) || return
	out=$(as_user kart -s "$s" submit --name secret --bind /root -- true 2>&1)
	assert_eq 1 "$?" "--bind /root: refused"
	assert_match "bind=/root: uid $(id -u "$U") has no read, write and search access to it" "$out" "the words"
	why=${out##*options: }
	assert_eq "" "$(ls -A "$s/new")" "nothing queued"
	# The worker says the same of the same task, come another way.
	printf '#!/bin/sh\n#kart: bind=/root\ntrue\n' | as_user sh -c 'cat >"$HOME/spool/new/other"'
	user_drain "$s"
	assert_eq "line 2: $why" "$(field "$s" other .error)" "the worker's words are submit's"
	out=$(as_user kart -s "$s" submit --bind "$s/done" -- true 2>&1)
	assert_match "bind=$s/done is refused: it is in the spool" "$out" "a path in the spool"
	out=$(as_user kart -s "$s" submit --kind cobol -- true 2>&1)
	assert_match "kind=cobol is not a kind of the policy" "$out" "an unknown kind"
	# Where the default cwd cannot be written: a private /work, said.
	mkdir -p "$T_ROOT/ro" && chmod 0755 "$T_ROOT/ro"
	out=$(as_user sh -c "cd '$T_ROOT/ro' && kart -s '$s' submit --name inro -- pwd" 2>&1)
	assert_match "runs in a private /work, not in $T_ROOT/ro \(cwd=$T_ROOT/ro: uid [0-9]+ has no write access to it\)" \
		"$out" "a directory the user cannot write"
	user_drain "$s"
	assert_eq /work "$(cat "$s/done/inro.stdout" 2>/dev/null)" "it ran in /work"
}

# 12. The attempt lost to a dead worker is in the result's attempts.
test_lost_attempt_in_attempts() {
	user_setup || return
	local s; s=$(home_spool) || return
	user_worker "$s"
	as_user kart -s "$s" submit --name twice -- sh -c 'echo run; sleep 2' >/dev/null 2>&1
	twice_ran() { grep -qs run "$s"/cur/*/.twice.stdout; } # the glob made again at each try
	wait_until 20 twice_ran || { fail "twice never ran"; return; }
	kill -9 "$UWPID"
	wait_gone 10 "$UWPID"
	user_drain "$s"
	assert_eq ok "$(field "$s" twice .status)" "the second run"
	assert_eq "1 lost|2 ok" "$(jq -r '[.attempts[] | "\(.attempt) \(.status)"] | join("|")' "$s/done/twice.json")" \
		"both attempts, the lost one first"
	assert_eq run "$(cat "$s/$(jq -r '.attempts[0].stdout.path' "$s/done/twice.json")" 2>/dev/null)" \
		"what the lost attempt wrote is kept"
}

# 2. $HOME works with the spool in it: a task run from ~ runs in ~ (HOME
# is the real home), and inside its sandbox no path reaches the spool.
test_home_holds_the_spool() {
	user_setup || return
	have_bwrap || { skip "bwrap cannot make a sandbox here (the mask is bwrap's)"; return; }
	local s out; s=$(home_spool) || return
	as_user sh -c 'rm -f "$HOME/f" "$HOME/lnk" && ln -s spool "$HOME/lnk" && mkdir -p "$HOME/sub"'
	out=$(as_user kart -s "$s" submit --name home -- sh -c '
		echo x >"$HOME/f"; echo "HOME=$HOME PWD=$(pwd)"
		for p in "$HOME/spool" "$HOME/lnk/" "$HOME/sub/../spool" /proc/self/cwd/spool; do
			if ls "$p" >/dev/null 2>&1; then echo "$p: visible"; else echo "$p: masked"; fi
		done
		touch "$HOME/spool/new/evil" 2>/dev/null && echo "wrote into new/" || echo "new/: no"' 2>&1)
	[[ $out == *"private /work"* ]] && fail "submitted from ~: $out"
	as_user kart -s "$s" submit --name homebind --no-cwd --bind "$UHOME" -- sh -c 'echo y >"$HOME/g"' >/dev/null 2>&1 ||
		fail "--bind ~ refused at submit"
	user_drain "$s"
	assert_eq ok "$(field "$s" home .status)" "status ($(field "$s" home .error))"
	assert_eq "x" "$(cat "$UHOME/f" 2>/dev/null)" "\$HOME/f exists afterwards"
	assert_eq "$U" "$(stat -c %U "$UHOME/f" 2>/dev/null)" "and is the user's"
	assert_eq "HOME=$UHOME PWD=$UHOME
$UHOME/spool: masked
$UHOME/lnk/: masked
$UHOME/sub/../spool: masked
/proc/self/cwd/spool: masked
new/: no" "$(cat "$s/done/home.stdout")" "the spool, by every path"
	assert_eq false "$(field "$s" home .work_discarded)" "work_discarded"
	assert_eq "ok y" "$(field "$s" homebind .status) $(cat "$UHOME/g" 2>/dev/null)" "--bind ~"
	assert_no_file "$s/new/evil"
}

# 9. A limit no live worker can hold is refused at submit, in the
# worker's words; each worker publishes what it holds (cur/W/.enforced).
test_submit_refuses_what_no_worker_holds() {
	user_setup || return
	local s out w; s=$(home_spool) || return
	user_worker "$s"
	wait_until 20 sh -c "ls '$s'/cur/*/.enforced >/dev/null 2>&1" || { fail "no .enforced published"; return; }
	w=$(cat "$s"/cur/*/.enforced)
	assert_match "^kart-enforced 1" "$w" "the record"
	if [[ $w == *"memory yes"* ]]; then
		skip "this user's worker can hold memory= here (a delegated cgroup): nothing to refuse"
		stop_worker "$UWPID"
		return
	fi
	out=$(as_user kart -s "$s" submit --name big --memory 64M -- true 2>&1)
	assert_eq 1 "$?" "--memory refused at submit"
	assert_match "memory= needs a cgroup .*\(no live worker can hold it\)" "$out" "in the worker's words"
	assert_eq "" "$(ls "$s/new")" "nothing queued"
	# Copied in, the worker refuses it so.
	printf '#!/bin/sh\n#kart: memory=64M\ntrue\n' | as_user sh -c 'cat >"$HOME/spool/new/copied"'
	wait_until 20 test -e "$s/done/copied.json" || fail "no result for the copied task"
	assert_eq refused "$(field "$s" copied .status)" "the worker refuses it"
	assert_match "line 2: memory= needs a cgroup" "$(field "$s" copied .error)" "the same words"
	stop_worker "$UWPID"
	# No live worker: nothing can be told, and it is queued.
	as_user kart -s "$s" submit --name later --memory 64M -- true >/dev/null 2>&1 || fail "queued without a worker"
}

# 3. kart submit --net warns when every live worker lacks a credential
# variable the policy names.
test_submit_net_warns_missing_credential() {
	user_setup || return
	local s out; s=$(home_spool) || return
	echo 'cred_env = KT37_TOKEN' >>"$s/kart.conf"
	user_worker "$s"
	wait_until 20 sh -c "grep -q '^lacks.*KT37_TOKEN' '$s'/cur/*/.enforced 2>/dev/null" || fail "not published"
	out=$(as_user kart -s "$s" submit --name web --net -- true 2>&1 >/dev/null)
	assert_match "warning: KT37_TOKEN is not set in any live worker's environment" "$out" "said"
	out=$(as_user kart -s "$s" submit --name local -- true 2>&1 >/dev/null)
	[[ $out == *KT37_TOKEN* ]] && fail "said for a task without network: $out"
	stop_worker "$UWPID"
	(exec setpriv --reuid="$U" --regid="$U" --init-groups -- env -i PATH="$KART_BUILD:/usr/bin:/bin" \
		HOME="$UHOME" KT37_TOKEN=set sh -c 'cd "$HOME" && exec kart -s "$1" worker' sh "$s") >>"$s.worker.log" 2>&1 &
	UWPID=$!
	T_PIDS+=("$UWPID")
	wait_until 20 sh -c "grep -qx 'lacks' '$s'/cur/*/.enforced 2>/dev/null" || fail "not published again"
	out=$(as_user kart -s "$s" submit --name web2 --net -- true 2>&1 >/dev/null)
	[[ $out == *KT37_TOKEN* ]] && fail "said with a worker that has it: $out"
	stop_worker "$UWPID"
	true
}

# 11. A secret given with -e leaves the kept done/ID.task once the result
# is written: the names stay, the result says so; kart retry takes the
# value again from its caller's environment.
test_secret_leaves_kept_task() {
	user_setup || return
	local s out v=kt37-$RANDOM$RANDOM; s=$(home_spool) || return
	local sum; sum=$(printf %s "$v" | md5sum | cut -d' ' -f1)
	# The task prints a digest of what it got: the value is in no file
	# of the test's but the queued task's.
	as_user env API_TOKEN="$v" kart -s "$s" submit --name tok -e API_TOKEN -- \
		sh -c 'printf %s "$API_TOKEN" | md5sum | cut -d" " -f1' >/dev/null 2>&1
	grep -q -- "$v" "$s/new/tok" || fail "the queued file holds the value (the worker needs it)"
	user_drain "$s"
	assert_eq "$sum" "$(cat "$s/done/tok.stdout")" "the task had it"
	grep -rq -- "$v" "$s/done" "$s/cur" && fail "the value is still in the spool: $(grep -rl -- "$v" "$s/done" "$s/cur")"
	assert_match "^#kart: env=API_TOKEN=$" "$(grep env= "$s/done/tok.task")" "the name stays"
	assert_eq "600 $U" "$(stat -c '%a %U' "$s/done/tok.task")" "its owner and mode kept"
	assert_eq '["API_TOKEN"] true' "$(jq -c .env "$s/done/tok.json") $(field "$s" tok .env_values_removed)" "the result says so"
	out=$(as_user kart -s "$s" retry tok 2>&1)
	assert_eq 1 "$?" "retry without the variable"
	assert_match "set API_TOKEN in your environment" "$out" "said"
	out=$(as_user env API_TOKEN="$v" kart -s "$s" retry tok 2>&1)
	assert_eq "0 tok.2" "$? $out" "retry with it"
	user_drain "$s"
	assert_eq "$sum" "$(cat "$s/done/tok.2.stdout" 2>/dev/null)" "the retry had it"
}

# What a Slurm user reaches for: --after-any (afterany) runs once the
# upstream ends whatever its status, --after-fail (afternotok) only if it
# did not end ok; both while it still runs (the waiting set) and after.
test_after_any_and_after_fail() {
	user_setup || return
	local s; s=$(home_spool) || return
	user_worker "$s"
	as_user kart -s "$s" submit --name up-bad -- sh -c 'sleep 2; echo partial; exit 3' >/dev/null 2>&1
	as_user kart -s "$s" submit --name up-good -- sh -c 'sleep 2' >/dev/null 2>&1
	as_user kart -s "$s" submit --name any --after-any up-bad -- sh -c 'cat "$KART_INPUTS/up-bad/stdout"' >/dev/null 2>&1
	as_user kart -s "$s" submit --name onfail --after-fail up-bad -- echo cleaning up >/dev/null 2>&1
	as_user kart -s "$s" submit --name notrun --after-fail up-good -- echo never >/dev/null 2>&1
	as_user kart -s "$s" submit --name okonly --after up-bad -- echo never >/dev/null 2>&1
	assert_match "^any	waiting	up-bad" "$(as_user kart -s "$s" status any)" "any waits while up-bad runs"
	as_user kart -s "$s" wait --timeout 60 any onfail notrun okonly >/dev/null 2>&1
	assert_eq "ok partial" "$(field "$s" any .status) $(cat "$s/done/any.stdout")" "after-any: ran, with its input"
	assert_eq "ok cleaning up" "$(field "$s" onfail .status) $(cat "$s/done/onfail.stdout")" "after-fail: ran"
	assert_eq skipped "$(field "$s" notrun .status)" "after-fail of a task that ended ok"
	assert_match "up-good ended ok \(after_fail=up-good: it runs only if that one did not end ok\)" \
		"$(field "$s" notrun .error)" "said"
	assert_eq skipped "$(field "$s" okonly .status)" "plain after= of a failed task"
	# Once the upstream has its result, the same at once.
	as_user kart -s "$s" submit --name late --after-fail up-bad -- true >/dev/null 2>&1
	as_user kart -s "$s" wait --timeout 30 late >/dev/null 2>&1
	assert_eq ok "$(field "$s" late .status)" "after-fail, the upstream done already"
	stop_worker "$UWPID"
}

run_tests
