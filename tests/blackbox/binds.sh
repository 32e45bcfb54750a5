#!/bin/bash
# Black-box: tasks that work on their submitter's files (cwd=, bind=, ro=,
# env=), on a real spool with a root worker, submitted by real users (made
# here, tagged kt19, removed at the end). Every path is opened as the
# submitter: what they could not open themselves is rejected, naming the
# path and the access missing, and no race of a symlink swapped under the
# worker reaches anything else.
. "$(dirname "$0")/../lib.sh"

U=${KART_TEST_USER_TAG:-}kt19user O=${KART_TEST_USER_TAG:-}kt19other
B_USERS=()

b_cleanup() {
	local u
	for u in "${B_USERS[@]}"; do
		pkill -9 -u "$u" 2>/dev/null
		userdel -r "$u" 2>/dev/null
	done
	rm -rf /root/kt19secret
	_cleanup
}
trap 'in_main_shell || exit; b_cleanup' EXIT

can_run() {
	[ "$(id -u)" = 0 ] || { skip "needs root (a root worker, users to submit)"; return 1; }
	have_bwrap || { skip "bwrap cannot build a sandbox here"; return 1; }
	command -v runuser >/dev/null || { skip "runuser (util-linux) is missing"; return 1; }
	command -v useradd >/dev/null || { skip "useradd is missing"; return 1; }
	command -v make >/dev/null || { skip "make is missing"; return 1; }
	local u
	# Made afresh once per run (one left over by a killed run goes,
	# home and all), removed at the end.
	for u in "$U" "$O"; do
		case " ${B_USERS[*]} " in *" $u "*) continue ;; esac
		if id "$u" >/dev/null 2>&1; then
			pkill -9 -u "$u" 2>/dev/null
			userdel -r "$u" 2>/dev/null
		fi
		useradd -m -s /bin/sh "$u" || { fail "useradd $u"; return 1; }
		B_USERS+=("$u")
		chmod 0700 "/home/$u"
	done
}

# A spool that the users may submit to, and a root worker on it.
bspool() {
	local s
	s=$(mkspool)
	chmod 755 "$T_ROOT" "$s"
	# The user's own spool, served by a root worker that runs each task
	# as its submitter (a shared spool's drop/ is users.sh's): new/ is
	# written by its owner alone, so a file there is the owner's own.
	chown -R "$U" "$s"
	echo "$s"
}

# as_user CMD...: run as kt19user, in its home, with kart in PATH.
as_user() {
	runuser -u "$U" -- env -i "${SAN_ENV[@]}" PATH="$KART_BUILD:/usr/bin:/bin" HOME="/home/$U" \
		sh -c 'cd "$HOME/${BDIR:-}" && "$@"' _ "$@"
}
as_user_in() { # DIR CMD...
	local d=$1; shift
	runuser -u "$U" -- env -i "${SAN_ENV[@]}" PATH="$KART_BUILD:/usr/bin:/bin" HOME="/home/$U" \
		sh -c 'cd "$1" && shift && "$@"' _ "$d" "$@"
}

# The README's example, as a user would type it: kart submit in a
# project directory builds there, as that user, and the file stays.
test_make_in_cwd() {
	can_run || return
	local s p=/home/$U/proj
	s=$(bspool)
	as_user mkdir -p "$p"
	printf 'out.txt: in.txt\n\ttr a-z A-Z < in.txt > out.txt\n' | as_user sh -c "cat > $p/Makefile"
	as_user sh -c "echo hello > $p/in.txt"
	start_worker "$s"
	local id
	id=$(as_user_in "$p" kart -s "$s" submit --timeout 5m -- make -j2) || { fail "kart submit"; return; }
	as_user_in "$p" timeout 60 kart -s "$s" wait "$id" || fail "kart wait $id: $(field "$s" "$id" .error)"
	stop_worker "$WPID"
	assert_eq ok "$(field "$s" "$id" .status)" "status ($(field "$s" "$id" .error))"
	assert_eq HELLO "$(cat "$p/out.txt" 2>/dev/null)" "the output file in the project directory"
	assert_eq "$U $U 644" "$(stat -c '%U %G %a' "$p/out.txt" 2>/dev/null)" \
		"the output file is the submitter's, with umask 022"
	assert_eq "$p" "$(field "$s" "$id" .cwd)" "result: cwd"
	assert_eq "$p rw" "$(field "$s" "$id" '.binds[0] | .path + " " + .mode')" "result: binds"
	assert_eq "$U" "$(field "$s" "$id" .submitter.user)" "result: submitter"
	assert_eq true "$(field "$s" "$id" .work_discarded)" "HOME (the private /work) was discarded"
}

# umask= sets the mode of what the task makes; --no-cwd gives /work.
test_umask_and_no_cwd() {
	can_run || return
	local s p=/home/$U/um
	s=$(bspool)
	as_user mkdir -p "$p"
	as_user_in "$p" kart -s "$s" submit --name um -- sh -c 'umask; touch made' >/dev/null
	printf '#!/bin/sh\n#kart: umask=077\ntouch made77\n' >"$T_ROOT/u77"
	chmod 644 "$T_ROOT/u77"
	as_user_in "$p" kart -s "$s" submit --name u77 "$T_ROOT/u77" >/dev/null
	as_user_in "$p" kart -s "$s" submit --no-cwd --name nocwd -- pwd >/dev/null
	drain "$s"
	assert_eq 0022 "$(cat "$s/done/um.stdout")" "the task's umask"
	assert_eq 644 "$(stat -c %a "$p/made" 2>/dev/null)" "mode with the default umask"
	assert_eq 600 "$(stat -c %a "$p/made77" 2>/dev/null)" "mode with umask=077"
	assert_eq /work "$(cat "$s/done/nocwd.stdout")" "--no-cwd: the private /work"
	assert_eq null "$(field "$s" nocwd .cwd)" "--no-cwd: no cwd in the result"
}

# submit_file NAME TEXT: a task file of kt19user's, queued as is (--no-cwd).
submit_file() {
	local s=$1 name=$2 text=$3 f=/home/$U/$2.task
	printf '%s' "$text" | as_user sh -c "cat > '$f'"
	as_user kart -s "$s" submit --no-cwd --name "$name" "$f" >/dev/null ||
		fail "submit $name"
}

# refused_then_queued SPOOL NAME TEXT: kart submit refuses it before it
# queues (its words in REFUSED[NAME]); then it goes straight into new/,
# where the worker must say the same.
declare -A REFUSED
refused_then_queued() {
	local s=$1 name=$2 text=$3 f=/home/$U/$2.task
	printf '%s' "$text" | as_user sh -c "cat > '$f'"
	REFUSED[$name]=$(as_user kart -s "$s" submit --no-cwd --name "$name" "$f" 2>&1 >/dev/null) &&
		fail "kart submit queued $name"
	as_user sh -c "cat '$f' >'$s/tmp/$name' && mv '$s/tmp/$name' '$s/new/$name'"
}
# same_words SPOOL NAME: the worker's error is kart submit's refusal, word
# for word.
same_words() {
	local e; e=$(field "$1" "$2" .error)
	[ -n "$e" ] && [[ ${REFUSED[$2]} == *": $e" ]] ||
		fail "$2: kart submit said '${REFUSED[$2]}', the worker '$e'"
}

# What the submitter may not write, or not reach, is rejected, and the
# error names the path and the access missing.
test_rejected_paths() {
	can_run || return
	local s
	s=$(bspool)
	mkdir -p /home/$O/private/sub
	chown -R "$O" /home/$O/private
	chmod 0700 /home/$O/private
	mkdir -p "$T_ROOT/theirs" && chown "$O" "$T_ROOT/theirs" && chmod 0755 "$T_ROOT/theirs"
	# kart submit refuses each before it queues, in the worker's words.
	refused_then_queued "$s" root $'#kart: cwd=/root\npwd\n'
	refused_then_queued "$s" other $'#kart: cwd=/home/'"$O"$'\npwd\n'
	refused_then_queued "$s" deep $'#kart: ro=/home/'"$O"$'/private/sub\npwd\n'
	refused_then_queued "$s" theirs "#kart: bind=$T_ROOT/theirs"$'\npwd\n'
	refused_then_queued "$s" missing $'#kart: cwd=/home/'"$U"$'/nowhere\npwd\n'
	refused_then_queued "$s" proc $'#kart: ro=/proc/1\npwd\n'
	drain "$s"
	local id
	for id in root other deep theirs missing proc; do
		assert_eq rejected "$(field "$s" "$id" .status)" "$id: status"
		assert_eq "" "$(cat "$s/done/$id.stdout" 2>/dev/null)" "$id: never ran"
		same_words "$s" "$id"
	done
	assert_match "cwd=/root: uid [0-9]+ has no read, write and search access" "$(field "$s" root .error)" "root"
	assert_match "cwd=/home/$O: uid [0-9]+ has no .*write" "$(field "$s" other .error)" "other's home"
	assert_match "ro=/home/$O/private/sub cannot be opened as uid [0-9]+: Permission denied" \
		"$(field "$s" deep .error)" "inside another's 0700 directory"
	assert_match "bind=$T_ROOT/theirs: uid [0-9]+ has no write access" "$(field "$s" theirs .error)" "theirs"
	assert_match "No such file" "$(field "$s" missing .error)" "missing"
	assert_match "ro=/proc/1 is refused" "$(field "$s" proc .error)" "/proc"
}

# A symlink of the user's to /etc/shadow (or to a directory they cannot
# search) is followed as the user: no read.
test_symlink_to_shadow() {
	can_run || return
	local s
	s=$(bspool)
	as_user ln -sfn /etc/shadow /home/$U/shadow
	mkdir -p /root/kt19secret/pub && echo "secret-kt19" >/root/kt19secret/pub/f
	chmod 0700 /root/kt19secret && chmod 0755 /root/kt19secret/pub && chmod 0644 /root/kt19secret/pub/f
	as_user ln -sfn /root/kt19secret/pub /home/$U/pub
	refused_then_queued "$s" shadow $'#kart: ro=/home/'"$U"$'/shadow\ncat /home/'"$U"$'/shadow\n'
	refused_then_queued "$s" pub $'#kart: ro=/home/'"$U"$'/pub\ncat /home/'"$U"$'/pub/f\n'
	drain "$s"
	same_words "$s" shadow
	same_words "$s" pub
	assert_eq rejected "$(field "$s" shadow .status)" "shadow: status"
	assert_match "ro=/home/$U/shadow: uid [0-9]+ has no read access" "$(field "$s" shadow .error)" "shadow: error"
	assert_eq rejected "$(field "$s" pub .status)" "pub: status"
	assert_match "Permission denied" "$(field "$s" pub .error)" "pub: error"
	grep -q "root:" "$s/done/shadow.stdout" 2>/dev/null && fail "the shadow file was read"
	grep -q secret-kt19 "$s"/done/* 2>/dev/null && fail "a file under /root was read"
}

# The path swapped between the user's directory and one they cannot
# reach, in a loop beside the worker: each task reads the user's file or
# is rejected, never the other.
test_swap_race() {
	can_run || return
	local s n=24 i
	s=$(bspool)
	mkdir -p /root/kt19secret/pub && echo "secret-kt19" >/root/kt19secret/pub/f
	chmod 0700 /root/kt19secret && chmod 0755 /root/kt19secret/pub && chmod 0644 /root/kt19secret/pub/f
	as_user sh -c 'mkdir -p ~/mine && echo public > ~/mine/f && ln -sfn mine ~/race'
	for i in $(seq 1 $n); do
		submit_file "$s" "r$i" $'#kart: ro=/home/'"$U"$'/race\ncat /home/'"$U"$'/race/f\n'
	done
	# The symlink race flips between the user's directory and one under
	# /root, each flip one rename(2): the name is always there. Until the
	# worker is done (a stop file), or 60 s at most.
	as_user sh -c 'cd ~ && end=$(($(date +%s) + 60)); while [ ! -e stop ] && [ $(date +%s) -lt $end ]; do
		ln -sfn mine .t && mv -T .t race; ln -sfn /root/kt19secret/pub .t && mv -T .t race; done' &
	local loop=$!
	T_PIDS+=("$loop")
	drain "$s" --slots 4
	as_user touch stop
	wait "$loop"
	local ok=0 rej=0
	for i in $(seq 1 $n); do
		case $(field "$s" "r$i" .status) in
		ok) ok=$((ok + 1)); assert_eq public "$(cat "$s/done/r$i.stdout")" "r$i read" ;;
		rejected | failed) rej=$((rej + 1)) ;;
		*) fail "r$i: $(field "$s" "r$i" '[.status, .error]')" ;;
		esac
	done
	grep -l secret-kt19 "$s"/done/* 2>/dev/null && fail "a task read the file under /root"
	echo "    swap race: $n tasks, $ok read the user's file, $rej rejected or failed"
	for i in $(seq 1 $n); do field "$s" "r$i" '.error // .status'; done | sort | uniq -c | sed 's/^/      /'
	[ $((ok + rej)) = "$n" ] || fail "not every task accounted for"
}

# ro= is read-only inside, even for a directory its submitter owns.
test_ro_is_read_only() {
	can_run || return
	local s d=/home/$U/data
	s=$(bspool)
	as_user sh -c "mkdir -p $d && echo in > $d/in"
	as_user_in /home/$U kart -s "$s" submit --no-cwd --ro "$d" --name ro -- \
		sh -c "cat $d/in; echo x > $d/new && echo wrote || echo refused" >/dev/null
	drain "$s"
	assert_eq ok "$(field "$s" ro .status)" "status ($(field "$s" ro .error))"
	assert_eq "in
refused" "$(cat "$s/done/ro.stdout")" "read, but no write"
	assert_no_file "$d/new"
	assert_eq "$d ro" "$(field "$s" ro '.binds[0] | .path + " " + .mode')" "result: binds"
}

# The spool and what is in it: never bound. kart submit refuses them
# before it queues, in the worker's words, and the worker rejects them
# come another way. A directory above the spool (a home that holds it) is
# bound with the spool covered by an empty mount. kart submit run inside
# the spool falls back to /work, saying so.
test_spool_refused() {
	can_run || return
	local s err
	s=$(bspool)
	err=$(as_user_in /home/$U kart -s "$s" submit --name sp -C "$s" -- ls 2>&1 >/dev/null)
	assert_match "cwd=$s is refused: it is the spool$" "$err" "-C SPOOL: refused at submit"
	err=$(as_user_in /home/$U kart -s "$s" submit --name spdone --ro "$s/done" --no-cwd -- ls 2>&1 >/dev/null)
	assert_match "ro=$s/done is refused: it is in the spool" "$err" "--ro SPOOL/done: refused at submit"
	# A file in the spool, the user's own: no directory to walk up from.
	as_user touch "$s/tmp/afile"
	err=$(as_user_in /home/$U kart -s "$s" submit --name spfile --ro "$s/tmp/afile" --no-cwd -- ls 2>&1 >/dev/null)
	assert_match "ro=$s/tmp/afile is refused: it is in the spool" "$err" "a file in the spool: refused at submit"
	# Copied in: the worker says the same.
	as_user sh -c "printf '#kart: cwd=$s\nls\n' >$s/tmp/a && mv $s/tmp/a $s/new/sp2 &&
		printf '#kart: ro=$s/done\nls\n' >$s/tmp/b && mv $s/tmp/b $s/new/spdone2 &&
		printf '#kart: ro=$s/tmp/afile\nls\n' >$s/tmp/c && mv $s/tmp/c $s/new/spfile2"
	as_user_in /home/$U kart -s "$s" submit --name above --ro "$T_ROOT" --no-cwd -- \
		sh -c "ls '$s' || echo masked" >/dev/null
	err=$(as_user_in "$s" kart -s "$s" submit --name inside -- pwd 2>&1 >/dev/null)
	assert_match "private /work, not in $s" "$err" "kart submit in the spool: its note"
	drain "$s"
	assert_match "cwd=$s is refused: it is the spool$" "$(field "$s" sp2 .error)" "sp2: the worker's words"
	assert_match "ro=$s/done is refused: it is in the spool" "$(field "$s" spdone2 .error)" "spdone2"
	assert_match "ro=$s/tmp/afile is refused: it is in the spool" "$(field "$s" spfile2 .error)" "spfile2"
	assert_eq ok "$(field "$s" above .status)" "a directory above the spool is bound ($(field "$s" above .error))"
	assert_eq masked "$(cat "$s/done/above.stdout")" "... with the spool covered"
	assert_eq /work "$(cat "$s/done/inside.stdout")" "submitted from the spool: /work"
}

# -e FOO=value: the task sees it; the value is in no result, log or ps
# line, and the task file is its submitter's alone. LD_PRELOAD is refused.
test_env_secret() {
	can_run || return
	local s v=kt19-sekrit-$RANDOM$RANDOM
	s=$(bspool)
	start_worker "$s"
	as_user_in /home/$U kart -s "$s" submit --no-cwd --name env -e FOO="$v two" -- \
		sh -c 'echo "[$FOO]"; sleep 2' >/dev/null
	wait_until 20 is_running "$s" env || fail "the env task did not start"
	ps -eo args | grep -F -- "$v" | grep -v grep && fail "the value is in ps output"
	runuser -u "$U" -- env -i "${SAN_ENV[@]}" MYVAR="$v-passed" PATH="$KART_BUILD:/usr/bin:/bin" \
		kart -s "$s" submit --no-cwd --name passed -e MYVAR -- sh -c 'echo "$MYVAR"' >/dev/null
	# LD_PRELOAD: refused by kart submit, and by the worker come another way.
	local perr; perr=$(as_user_in /home/$U kart -s "$s" submit --no-cwd --name pre -e LD_PRELOAD=/tmp/x.so -- true 2>&1 >/dev/null) &&
		fail "kart submit queued -e LD_PRELOAD"
	assert_match "env=LD_PRELOAD is refused.*env_deny" "$perr" "LD_PRELOAD: kart submit's words"
	as_user sh -c "printf '#kart: env=LD_PRELOAD=/tmp/x.so\ntrue\n' > $s/tmp/pre && mv $s/tmp/pre $s/new/pre"
	# Copied in, readable by all: the worker makes it its owner's alone.
	as_user sh -c "umask 022; printf '#kart: env=X=$v\\necho copied\\n' > $s/tmp/copied && mv $s/tmp/copied $s/new/copied"
	wait_until 30 test -e "$s/done/env.json" -a -e "$s/done/passed.json" -a -e "$s/done/pre.json" \
		-a -e "$s/done/copied.json" ||
		fail "no results"
	stop_worker "$WPID"
	assert_eq "[$v two]" "$(cat "$s/done/env.stdout")" "the task saw FOO"
	assert_eq "$v-passed" "$(cat "$s/done/passed.stdout")" "-e NAME takes the submitter's value"
	assert_eq '["FOO"]' "$(field "$s" env '.env | tojson')" "the result names FOO"
	grep -rlF -- "$v" "$s"/done/*.json "$s.worker.log" && fail "the value is in a result or the log"
	assert_eq "600 $U" "$(stat -c '%a %U' "$s/done/env.task")" "the task file: its submitter's alone"
	assert_eq "ok 600" "$(field "$s" copied .status) $(stat -c %a "$s/done/copied.task")" \
		"a task file copied in with env=: its submitter's alone after the run"
	assert_eq rejected "$(field "$s" pre .status)" "LD_PRELOAD: status"
	assert_match "env=LD_PRELOAD is refused.*env_deny" "$(field "$s" pre .error)" "LD_PRELOAD: error"
}

# HOME is the submitter's real home where it is bound (as the cwd here):
# what the task writes there stays.
test_home_bound() {
	can_run || return
	local s
	s=$(bspool)
	as_user_in /home/$U kart -s "$s" submit --name h -- sh -c 'echo "$HOME"; echo x > ~/result.txt' >/dev/null
	drain "$s"
	assert_eq ok "$(field "$s" h .status)" "status ($(field "$s" h .error))"
	assert_eq "/home/$U" "$(cat "$s/done/h.stdout")" "HOME"
	assert_eq "/home/$U" "$(field "$s" h .home)" "result: home"
	assert_eq false "$(field "$s" h .work_discarded)" "nothing discarded"
	assert_eq "x $U" "$(cat /home/$U/result.txt 2>/dev/null) $(stat -c %U /home/$U/result.txt 2>/dev/null)" \
		"~/result.txt kept, the submitter's"
}

# The policy: task_binds = no rejects a cwd= and kart submit does not add
# one by itself; task_bind_roots limits where.
test_policy_keys() {
	can_run || return
	local s
	s=$(bspool)
	printf '[sandbox]\ntask_binds = no\n' >"$s/kart.conf"
	as_user_in /home/$U kart -s "$s" submit --name plain -- pwd >/dev/null
	refused_then_queued "$s" asked $'#kart: cwd=/home/'"$U"$'\npwd\n'
	drain "$s"
	assert_eq "ok /work" "$(field "$s" plain .status) $(cat "$s/done/plain.stdout")" "no cwd= by default"
	assert_eq rejected "$(field "$s" asked .status)" "cwd= asked for"
	assert_match "task_binds = no" "$(field "$s" asked .error)" "the error names the key"
	same_words "$s" asked
	printf '[sandbox]\ntask_bind_roots = /srv\n' >"$s/kart.conf"
	# Run outside the roots: by default a private /work, said; asked, refused.
	local err; err=$(as_user_in /home/$U kart -s "$s" submit --name outside -- pwd 2>&1 >/dev/null)
	assert_match "private /work, not in /home/$U .*task_bind_roots" "$err" "the default cwd: a note"
	refused_then_queued "$s" outside2 $'#kart: cwd=/home/'"$U"$'\npwd\n'
	drain "$s"
	assert_eq "ok /work" "$(field "$s" outside .status) $(cat "$s/done/outside.stdout")" "the default: /work"
	assert_eq rejected "$(field "$s" outside2 .status)" "outside the roots"
	assert_match "task_bind_roots" "$(field "$s" outside2 .error)" "the error names the key"
	same_words "$s" outside2
}

# The README's batch example, as written there: one task per input
# file, each writing its output beside its input.
test_readme_batch() {
	can_run || return
	local s d=/home/$U/logs
	s=$(bspool)
	as_user sh -c "mkdir -p $d && for i in 1 2 3; do seq \$i 500 > $d/\$i.log; done"
	start_worker "$s"
	local out
	out=$(as_user_in "$d" env KART_SPOOL="$s" sh -c 'ids=$(for f in *.log; do kart submit -- gzip -k9 "$f"; done)
		timeout 120 kart wait $ids 2>&1; echo "rc=$? ids=" $ids')
	assert_match "rc=0 ids= gzip gzip.2 gzip.3" "$out" "the README's batch: kart wait ($(cat "$s"/done/gzip*.json | jq -c '[.id, .status, .error, .exit_code]' | tr '\n' ' ') $(cat "$s"/done/gzip*.stderr))"
	stop_worker "$WPID"
	local i
	for i in 1 2 3; do
		assert_eq "$(seq $i 500 | md5sum)" "$(zcat $d/$i.log.gz 2>/dev/null | md5sum)" "$i.log.gz"
		assert_eq "$U" "$(stat -c %U $d/$i.log.gz 2>/dev/null)" "$i.log.gz is the submitter's"
	done
}

# The worker's own user's paths (root's tasks on a root worker: no one's
# credentials to take) are opened in the spawn thread, not by a vforked
# opener, and follow no magic link: a symlink to the worker's own
# /proc/self/fd/N (its log, its spool, its leaves' files), cwd or root
# reaches nothing of the worker's, as through the opener of another
# user's tasks (users.sh bind_opener_holds_nothing_of_the_worker). Each
# such task is rejected, none runs, no error names the worker's; a plain
# cwd= runs, with no vfork (strace: the premise that the thread opened it).
test_own_paths_follow_no_magic_link() {
	[ "$(id -u)" = 0 ] || { skip "needs root (the worker's own user is root)"; return; }
	command -v strace >/dev/null || { skip "strace is missing"; return; }
	local s d=$T_ROOT/ownfd t id err; s=$(mkspool)
	printf '[sandbox]\nallow_root = yes\n' >"$s/kart.conf"
	mkdir -p "$d/plain"
	for t in $(seq 0 40) cwd root; do
		case $t in cwd | root) ln -s "/proc/self/$t" "$d/l$t" ;; *) ln -s "/proc/self/fd/$t" "$d/l$t" ;; esac
		printf '#!/bin/sh\n#kart: ro=%s\nhead -c 300 %s; ls %s | head -5\n' "$d/l$t" "$d/l$t" "$d/l$t" >"$s/tmp/fd$t"
		mv "$s/tmp/fd$t" "$s/new/fd$t"
	done
	printf '#!/bin/sh\n#kart: cwd=%s\npwd\n' "$d/plain" >"$s/new/plain"
	KART_BACKEND=none strace -f -qq -o "$s.strace" -e trace=vfork "$KART" -s "$s" worker --drain \
		>>"$s.worker.log" 2>&1 || fail "the worker exited $?: $(tail -2 "$s.worker.log")"
	for t in $(seq 0 40) cwd root; do
		id=fd$t
		assert_eq rejected "$(field "$s" "$id" .status)" "fd$t: status"
		[ -s "$s/done/$id.stdout" ] && fail "fd$t ran: $(head -c 200 "$s/done/$id.stdout")"
		err=$(field "$s" "$id" .error)
		case $err in
		*"$s"* | *"$s.worker.log"* | *anon_inode* | *pipe:* | *memfd* | *socket:* | *"leads to /dev"* | *"leads to /sys"*)
			fail "fd$t: the error names the worker's: $err" ;;
		esac
	done
	assert_eq ok "$(field "$s" plain .status)" "a plain cwd=: status ($(field "$s" plain .error))"
	assert_eq "$d/plain" "$(cat "$s/done/plain.stdout")" "its cwd"
	! grep -q 'vfork(' "$s.strace" || fail "the worker's own paths were opened by a vforked child: $(grep -m1 vfork "$s.strace")"
}

run_tests
