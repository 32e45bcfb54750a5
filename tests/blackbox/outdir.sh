# $KART_OUTDIR bounded while the task runs (issue 27): a tmpfs of
# artifacts_max bytes and artifacts_files entries under bwrap, writes past
# it failing with ENOSPC inside the task; what is kept is the worker's and
# readable by its submitter alone; a big copy does not hold up another
# user's result; and a removal killed half-way is finished by kart gc.
# Real accounts on a shared spool, as users.sh makes them.
# tests/torture/outdir.sh runs it with OUTDIR_LONG=1: the issue's own
# sizes, 400,000 files and a 25,000-deep tree, in make torture only.
. "$(dirname "$0")/../lib.sh"
LONG=${OUTDIR_LONG:-0}

U_TAG=${KART_TEST_USER_TAG:-}o27
U_ALICE=${U_TAG}alice U_BOB=${U_TAG}bob G_KART=${U_TAG}kart
U_IN="$U_ALICE $U_BOB"

result() {
	wait_until 30 test -e "$S/done/$1.json" || { echo "(no result for $1)"; return; }
	jq -r "$2" "$S/done/$1.json"
}

# Past the bytes, past the entries, deeper than the depth: the task sees
# ENOSPC (or its tree is not kept), its status is its own, and the
# result says what was lost. What is kept is the worker's, readable by
# its submitter and no one else, and not writable by them.
test_bounded_while_running() {
	shared_spool || return
	printf '[limits]\nartifacts_max = 1M\nartifacts_files = 100\nartifacts_depth = 4\n' >"$S/kart.conf"
	as "$U_ALICE" kart submit --name big -- sh -c \
		'stat -f -c %T $KART_OUTDIR; head -c 3000000 /dev/zero >$KART_OUTDIR/big; echo rc=$?' \
		>/dev/null || fail "submit big"
	as "$U_ALICE" kart submit --name many -- sh -c \
		'cd $KART_OUTDIR; i=0; while [ $i -lt 300 ]; do (: >f$i) 2>/dev/null || break; i=$((i+1)); done; echo made=$i' \
		>/dev/null || fail "submit many"
	as "$U_ALICE" kart submit --name deep -- sh -c 'mkdir -p $KART_OUTDIR/1/2/3/4/5/6 && echo ok' \
		>/dev/null || fail "submit deep"
	as "$U_ALICE" kart submit --name kept -- sh -c \
		'cd $KART_OUTDIR && mkdir -p d/e && echo secret >d/e/f && mkfifo pipe && ln -s /etc/passwd l' \
		>/dev/null || fail "submit kept"
	"$KART" -s "$S" worker --drain >>"$S.worker.log" 2>&1 || fail "worker: $(tail -3 "$S.worker.log")"
	local a=$U_ALICE
	# Bytes: ENOSPC inside, at the bound, while it ran.
	assert_eq ok "$(result "$a:big" .status)" "big: the task's own status"
	assert_eq "tmpfs rc=1" "$(tr '\n' ' ' <"$S/done/$a:big.stdout" | sed 's/ $//')" \
		"big: a tmpfs, and head failed"
	assert_match 'No space left' "$(cat "$S/done/$a:big.stderr")" "big: ENOSPC"
	assert_eq "null true 1048576" "$(result "$a:big" '"\(.artifacts.path) \(.artifacts.truncated) \(.artifacts.bytes)"')" \
		"big: nothing kept, said so"
	assert_match 'artifacts_max' "$(result "$a:big" .error)" "big: the error names the bound"
	# Entries.
	assert_eq made=100 "$(cat "$S/done/$a:many.stdout")" "many: the 101st entry failed"
	assert_eq "null true 100" "$(result "$a:many" '"\(.artifacts.path) \(.artifacts.truncated) \(.artifacts.files)"')" \
		"many: nothing kept, said so"
	assert_match 'artifacts_files' "$(result "$a:many" .error)" "many: the error names the bound"
	# Depth: found when it is copied.
	assert_eq "ok null true" "$(result "$a:deep" '"\(.status) \(.artifacts.path) \(.artifacts.truncated)"')" "deep"
	assert_match 'artifacts_depth' "$(result "$a:deep" .error)" "deep: the error names the bound"
	for id in big many deep; do assert_no_file "$S/done/$a:$id.out"; done
	# Kept: the worker's; alice reads it, cannot add to it; bob cannot read it.
	local o="$S/done/$a:kept.out"
	assert_eq "ok done/$a:kept.out true 1" \
		"$(result "$a:kept" '"\(.status) \(.artifacts.path) \(.artifacts.truncated) \(.artifacts.lost_files)"')" \
		"kept: kept, the FIFO not, and said so"
	assert_match '^root [0-7][0-7]0$' "$(stat -c '%U %a' "$o")" "kept: the worker's, nothing for others"
	assert_eq "root root" "$(stat -c %U "$o/d/e/f") $(stat -c %U "$o/d")" "kept: every entry the worker's"
	assert_eq secret "$(as "$U_ALICE" cat "$o/d/e/f")" "kept: alice reads it"
	assert_eq /etc/passwd "$(readlink "$o/l")" "kept: the link as it was"
	assert_no_file "$o/pipe"
	as "$U_ALICE" sh -c "echo x >$o/new" 2>/dev/null && fail "alice added a file to her result's artifacts"
	as "$U_ALICE" sh -c "echo x >>$o/d/e/f" 2>/dev/null && fail "alice changed an artifact"
	as "$U_ALICE" mkfifo "$o/d/fifo" 2>/dev/null && fail "alice made a FIFO in her artifacts"
	as "$U_BOB" cat "$o/d/e/f" 2>/dev/null && fail "bob read alice's artifacts"
	assert_eq "" "$(find "$S/cur" -name '.*.out')" "no \$KART_OUTDIR left in cur/"
	assert_eq "" "$(grep -c ' kart-out ' /proc/self/mountinfo | grep -v '^0$')" "no tmpfs left on the host"
}

# alice_tree NAME N MAX: a fresh shared spool, artifacts_files = MAX, a
# worker w1, and alice's task NAME that makes N files in $KART_OUTDIR.
alice_tree() {
	shared_spool || return
	printf '[limits]\nartifacts_files = %s\n' "$3" >"$S/kart.conf"
	start_worker "$S" --id w1
	as "$U_ALICE" kart submit --name "$1" -- sh -c "cd \$KART_OUTDIR && seq $2 | xargs touch" \
		>/dev/null || fail "submit $1"
}

# copy_began TIMEOUT NAME: the mover is at work on alice's NAME (the
# claim's .NAME.out fills) within TIMEOUT seconds.
copy_began() { wait_until "$1" sh -c "ls -A $S/cur/w1/.$U_ALICE:$2.out 2>/dev/null | grep -q ."; }

# A full $KART_OUTDIR takes a while to copy (thousands of files); bob's
# result, finished meanwhile, is not held up behind it.
test_copy_holds_up_no_other_result() {
	alice_tree tree 8000 20000 || return
	copy_began 30 tree || { fail "alice's copy never began"; stop_worker "$WPID"; return; }
	as "$U_BOB" kart submit --name quick -- echo hi >/dev/null || fail "submit quick"
	wait_until 30 test -e "$S/done/$U_BOB:quick.json" || fail "bob's result never came"
	[ -e "$S/done/$U_ALICE:tree.json" ] && fail "alice's copy ended before bob's result: no evidence either way"
	assert_eq ok "$(result "$U_BOB:quick" .status)" "bob's task"
	assert_eq "ok 8000" "$(result "$U_ALICE:tree" '"\(.status) \(.artifacts.files)"')" "alice's tree kept whole"
	assert_eq 8000 "$(find "$S/done/$U_ALICE:tree.out" -type f | wc -l)" "alice's files"
	# Each tmpfs was detached from the holder's namespace once used.
	local p n=0
	for p in $(pgrep -P "$WPID"); do
		grep -q ' kart-out ' "/proc/$p/mountinfo" 2>/dev/null && n=$((n + 1))
	done
	assert_eq 0 "$n" "processes of the worker's that still see a \$KART_OUTDIR tmpfs"
	stop_worker "$WPID"
}

# kart gc --older-than removes a result's tree; killed half-way (strace
# kills it at its 300th unlink), the next kart gc finishes it, whatever
# its age, and leaves nothing.
test_gc_finishes_a_removal_cut_short() {
	command -v strace >/dev/null || { skip "strace is missing"; return; }
	local s; s=$(mkspool)
	printf '#!/bin/sh\ncd $KART_OUTDIR && mkdir d && cd d && seq 2000 | xargs touch\n' >"$s/new/t"
	printf '[limits]\nartifacts_files = 5000\n' >"$s/kart.conf"
	drain "$s"
	assert_eq 2000 "$(find "$s/done/t.out" -type f | wc -l)" "the tree is there"
	strace -f -o /dev/null -e inject=unlinkat:signal=KILL:when=300 "$KART" -s "$s" gc --older-than 0s \
		>/dev/null 2>&1
	assert_no_file "$s/done/t.json"
	assert_file "$s/done/.rm-t.out"
	"$KART" -s "$s" gc || fail "the next gc failed"
	assert_eq "" "$(ls -A "$s/done" | grep -v '^\.empty$')" "nothing left in done/"
}

# A 25,000-deep chain of directories, one process (a shell loop forks
# a mkdir per level); prints how deep it got before ENOSPC.
DEEP='import os
os.chdir(os.environ["KART_OUTDIR"])
n = 0
try:
    while n < 25000:
        os.mkdir("d")
        os.chdir("d")
        n += 1
except OSError:
    pass
print(n)'

# bob_meanwhile PREFIX N: bob's tasks PREFIX1..PREFIXN, one at a time,
# each result within 30 s while alice's are under way. Sets WORST, the
# slowest in ms, and MAX_FDS, the most descriptors the worker held.
bob_meanwhile() {
	local i t0 t1 fds
	WORST=0 MAX_FDS=0
	for i in $(seq 1 "$2"); do
		t0=$(date +%s%N)
		as "$U_BOB" kart submit --name "$1$i" -- true >/dev/null || fail "submit $1$i"
		wait_until 30 test -e "$S/done/$U_BOB:$1$i.json" || fail "bob's $1$i never came"
		t1=$(( ($(date +%s%N) - t0) / 1000000 ))
		[ "$t1" -gt "$WORST" ] && WORST=$t1
		fds=$(ls /proc/"$WPID"/fd | wc -l)
		[ "$fds" -gt "$MAX_FDS" ] && MAX_FDS=$fds
	done
}

# The issue's sizes, under the default bounds: 400,000 files and a
# 25,000-deep tree each stop at artifacts_files (ENOSPC inside), the
# worker's descriptors stay few, bob's results meanwhile come within
# seconds, and kart gc leaves nothing.
long_sizes_bounded() {
	shared_spool || return
	start_worker "$S" --id w1
	as "$U_ALICE" kart submit --name wide -- sh -c \
		'cd $KART_OUTDIR && seq 400000 | xargs touch 2>/dev/null; ls | wc -l' >/dev/null || fail "submit wide"
	as "$U_ALICE" kart submit --name deep -- python3 -c "$DEEP" >/dev/null || fail "submit deep"
	local worst max_fds
	bob_meanwhile q 10
	worst=$WORST max_fds=$MAX_FDS
	wait_until 1200 test -e "$S/done/$U_ALICE:wide.json" -a -e "$S/done/$U_ALICE:deep.json" ||
		fail "alice's results never came"
	assert_eq "ok 10000" "$(result "$U_ALICE:wide" '"\(.status) \(.artifacts.files)"')" "wide: stopped at the bound"
	assert_eq 10000 "$(cat "$S/done/$U_ALICE:wide.stdout")" "wide: what the task saw"
	assert_match artifacts_files "$(result "$U_ALICE:deep" .error)" "deep: stopped at the bound"
	assert_eq 10000 "$(cat "$S/done/$U_ALICE:deep.stdout")" "deep: 10,000 levels, then ENOSPC"
	echo "    bob's slowest result: ${worst} ms; the worker's descriptors at most $max_fds"
	[ "$worst" -lt 5000 ] || fail "bob waited ${worst} ms"
	[ "$max_fds" -lt 200 ] || fail "the worker held $max_fds descriptors"
	stop_worker "$WPID"
	"$KART" -s "$S" gc --older-than 0s || fail "gc"
	assert_eq "" "$(ls -A "$S/done" | grep -v '^\.empty$')" "gc left nothing in done/"
	assert_eq "" "$(find "$S/cur" -mindepth 2 -name '.*')" "nothing left in cur/"
}

# With bounds raised to the issue's sizes, the copy is the mover's: a
# 100,000-file tree is kept whole while bob's results come within
# seconds; a 25,000-deep one is not kept (artifacts_depth), and neither
# exhausts the worker's descriptors.
long_copy_off_the_commit_thread() {
	alice_tree wide 100000 400000 || return
	as "$U_ALICE" kart submit --name deep -- python3 -c "$DEEP" >/dev/null || fail "submit deep"
	copy_began 120 wide || fail "alice's copy never began"
	local worst max_fds
	bob_meanwhile c 5
	worst=$WORST max_fds=$MAX_FDS
	[ -e "$S/done/$U_ALICE:wide.json" ] && fail "the copy ended before bob's results: no evidence"
	echo "    bob's slowest result during a 100,000-file copy: ${worst} ms; descriptors at most $max_fds"
	[ "$worst" -lt 5000 ] || fail "bob waited ${worst} ms"
	wait_until 1200 test -e "$S/done/$U_ALICE:wide.json" -a -e "$S/done/$U_ALICE:deep.json" ||
		fail "alice's results never came"
	assert_eq "ok 100000" "$(result "$U_ALICE:wide" '"\(.status) \(.artifacts.files)"')" "wide: kept whole"
	assert_eq "ok null true" "$(result "$U_ALICE:deep" '"\(.status) \(.artifacts.path) \(.artifacts.truncated)"')" \
		"deep: not kept"
	assert_eq 25000 "$(cat "$S/done/$U_ALICE:deep.stdout")" "deep: 25,000 levels made"
	assert_match artifacts_depth "$(result "$U_ALICE:deep" .error)" "deep: the error names the bound"
	stop_worker "$WPID"
	"$KART" -s "$S" gc --older-than 0s || fail "gc"
	assert_eq "" "$(ls -A "$S/done" | grep -v '^\.empty$')" "gc left nothing in done/"
}

# Cases in make torture only, never an empty pass in make check.
if [ "$LONG" = 1 ]; then
	test_long_sizes_bounded() { long_sizes_bounded; }
	test_long_copy_off_the_commit_thread() { long_copy_off_the_commit_thread; }
fi

run_tests
