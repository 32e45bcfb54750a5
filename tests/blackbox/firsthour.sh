#!/bin/bash
# Black-box: what a new user meets in the first hour (issue 23), tried as
# a normal account on a spool of its own where it matters: a timeout's
# SIGTERM and kill grace, the exit codes of kart wait, no worker running,
# a missing `--`, a network request refused at once, many results, the
# worker's environment, the cron recipe, make demo, and the small hints.
. "$(dirname "$0")/../lib.sh"

U=kt23user
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
trap 'user_cleanup; _cleanup' EXIT

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
	[ "$d" -lt 5500 ] || fail "the clean-up took the whole grace: ${d}ms"
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
	user_submit "$s" over "$(printf '%s\n' '#!/bin/sh' '#kart: kill_grace=2h' 'true')"
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

run_tests
