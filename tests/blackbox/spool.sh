# The maildir protocol from the outside: the three ways in, hostile
# entries, half-written files, name reuse, directives and the result.
. "$(dirname "$0")/../lib.sh"

task_ok() { printf '#!/bin/sh\necho "%s"\n' "${1:-hello}"; }

test_three_ways_in() {
	local s; s=$(mkspool)
	local id1; id1=$(task_ok one | "$KART" -s "$s" submit -) || fail "submit -"
	task_ok two >"$T_ROOT/two.sh"
	cp "$T_ROOT/two.sh" "$s/new/copied"
	task_ok three >"$s/tmp/x.$$"
	mv "$s/tmp/x.$$" "$s/new/renamed"
	drain "$s"
	for id in "$id1" copied renamed; do
		assert_eq ok "$(field "$s" "$id" .status)" "$id status"
		assert_eq 0 "$(field "$s" "$id" .exit_code)" "$id exit_code"
		assert_eq "$id" "$(field "$s" "$id" .id)" "$id id"
	done
	assert_eq one "$("$KART" -s "$s" cat "$id1")" "stdout of submitted"
	assert_eq two "$(cat "$s/done/copied.stdout")" "stdout of copied"
	assert_eq three "$(cat "$s/done/renamed.stdout")" "stdout of renamed"
	assert_eq "" "$(ls -A "$s/new" "$s/tmp" | grep -v '^/\|^$')" "new/ and tmp/ empty"
}

# The maildir way with link() instead of rename(): staged and fsynced in
# tmp/, linked into new/, the tmp/ name removed. Once the second link is
# gone the file is an ordinary task.
test_link_into_new() {
	local s; s=$(mkspool)
	task_ok linked >"$s/tmp/stage.$$"
	sync "$s/tmp/stage.$$"
	ln "$s/tmp/stage.$$" "$s/new/linked" || { fail "link into new/"; return; }
	rm "$s/tmp/stage.$$"
	sync "$s/new"
	drain "$s"
	assert_eq ok "$(field "$s" linked .status)" "status of a linked task ($(field "$s" linked .error))"
	assert_eq linked "$(cat "$s/done/linked.stdout")" "stdout of the linked task"
	assert_eq "" "$(ls -A "$s/new" "$s/tmp" | grep -v '^/\|^$')" "new/ and tmp/ empty"
}

# link() publishes under a running worker: the file has two links until
# the writer removes its tmp/ name, and the worker waits for that, however
# long it takes, instead of taking the file for a hostile hard link.
test_link_publish_live_worker() {
	local s i; s=$(mkspool)
	KART_BACKEND=none start_worker "$s"
	for i in $(seq 1 60); do
		task_ok "l$i" >"$s/tmp/stage.$i"
		ln "$s/tmp/stage.$i" "$s/new/l$i" && rm "$s/tmp/stage.$i"
	done
	task_ok held >"$s/tmp/stage.held"
	ln "$s/tmp/stage.held" "$s/new/held"
	results_at_least() { [ "$(find "$s/done" -name 'l*.json' | wc -l)" -ge 60 ]; }
	wait_until 30 results_at_least || fail "fewer than 60 results"
	local n f=() # (their statuses by one jq, not one each)
	for i in $(seq 1 60); do [ -e "$s/done/l$i.json" ] && f+=("$s/done/l$i.json"); done
	n=$(jq -r .status "${f[@]}" | sort | uniq -c | xargs)
	assert_eq "60 ok" "$n" "statuses of 60 link()+unlink() publishes"
	sleep 2
	assert_no_file "$s/done/held.json"
	assert_file "$s/new/held"
	rm "$s/tmp/stage.held"
	wait_until 20 test -e "$s/done/held.json" || fail "held never ran after its tmp/ name went"
	assert_eq ok "$(field "$s" held .status 2>/dev/null)" "held, once its tmp/ name is gone"
	# A second link from outside tmp/ is still a hostile hard link.
	task_ok other >"$T_ROOT/other"
	ln "$T_ROOT/other" "$s/new/other"
	wait_until 20 test -e "$s/done/other.json" || fail "no result for other"
	assert_eq rejected "$(field "$s" other .status 2>/dev/null)" "a hard link from outside tmp/"
	stop_worker "$WPID"
}

# The spool's format version (spool-layout README §0): kart
# init writes SPOOL/format; a spool without it is format 1 and kart init
# adds it; a worker and every verb that writes refuse a format they do
# not know (or a file that is no version), saying which and what to do,
# and leave the spool as it was; a reader still reads.
test_format_version() {
	local s v; s=$(mkspool)
	assert_eq "1" "$(cat "$s/format" 2>/dev/null)" "kart init writes format 1"
	task_ok done1 | "$KART" -s "$s" submit --name done1 - >/dev/null || fail "submit on format 1"
	drain "$s"
	rm "$s/format" # a spool made before the file: format 1
	task_ok old | "$KART" -s "$s" submit --name old - >/dev/null || fail "submit on a spool without format"
	run_cmd -s "$s" init
	assert_eq "0 1" "$RC $(cat "$s/format" 2>/dev/null)" "kart init on it adds the file ($ERR)"
	for v in 2 abc; do
		echo "$v" >"$s/format"
		run_cmd -s "$s" worker --drain
		assert_eq 1 "$RC" "worker on format '$v'"
		case $v in
		2) assert_match "spool of format 2 .*knows format 1 alone.*use a kart that knows format 2" "$ERR" "the worker says why" ;;
		*) assert_match "format: not a format version" "$ERR" "the worker says why" ;;
		esac
		run_cmd -s "$s" submit --name new -- true
		assert_eq 1 "$RC" "submit on format '$v' ($ERR)"
		run_cmd -s "$s" hold old
		assert_eq 1 "$RC" "hold on format '$v' ($ERR)"
		run_cmd -s "$s" cancel old
		assert_eq 1 "$RC" "cancel on format '$v' ($ERR)"
		run_cmd -s "$s" gc
		assert_eq 1 "$RC" "gc on format '$v' ($ERR)"
		run_cmd -s "$s" init
		assert_eq 1 "$RC" "init on format '$v' ($ERR)"
		assert_eq "$v" "$(cat "$s/format")" "init leaves another format's file alone"
		run_cmd -s "$s" status done1
		assert_match "^done1	ok" "$OUT" "status still reads a format-$v spool ($ERR)"
	done
	assert_file "$s/new/old"
	assert_no_file "$s/new/new"
	assert_no_file "$s/done/old.json"
	echo 1 >"$s/format"
	drain "$s"
	assert_eq ok "$(field "$s" old .status 2>/dev/null)" "format 1 again: it runs"
}

# kart init refuses a spool on NFS or SMB. The statfs() answer is faked by
# a preloaded shim (this host has no NFS client); a local path still works.
test_init_refuses_network_fs() {
	command -v cc >/dev/null || { skip "no C compiler to build the statfs shim"; return; }
	local shim=$T_ROOT/fakefs.so
	cat >"$T_ROOT/fakefs.c" <<'EOC'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
/* statfs() of a path under $FAKEFS_UNDER reports f_type $FAKEFS_MAGIC. */
static void fake(const char *p, struct statfs *b)
{
	const char *u = getenv("FAKEFS_UNDER"), *m = getenv("FAKEFS_MAGIC");
	if (u && m && strncmp(p, u, strlen(u)) == 0)
		b->f_type = (__fsword_t)strtoul(m, NULL, 0);
}
int statfs(const char *p, struct statfs *b)
{
	int (*real)(const char *, struct statfs *) = (int (*)(const char *, struct statfs *))dlsym(RTLD_NEXT, "statfs");
	int r = real(p, b);
	if (r == 0)
		fake(p, b);
	return r;
}
int statfs64(const char *p, struct statfs64 *b)
{
	int (*real)(const char *, struct statfs64 *) = (int (*)(const char *, struct statfs64 *))dlsym(RTLD_NEXT, "statfs64");
	int r = real(p, b);
	if (r == 0)
		fake(p, (struct statfs *)b);
	return r;
}
EOC
	cc -shared -fPIC -o "$shim" "$T_ROOT/fakefs.c" -ldl || { fail "cannot build the statfs shim"; return; }
	local magic fs d
	for fs in nfs:0x6969 smb2:0xFE534D42 cifs:0xFF534D42; do
		magic=${fs#*:}
		d=$T_ROOT/net-$magic
		OUT=$(LD_PRELOAD=$shim FAKEFS_UNDER=$d FAKEFS_MAGIC=$magic "$KART" -s "$d" init 2>&1); RC=$?
		assert_eq 1 "$RC" "kart init on ${fs%%:*}: exit status ($OUT)"
		assert_match "network filesystem" "$OUT" "kart init on ${fs%%:*}: the reason"
		for sub in tmp new cur done; do
			assert_no_file "$d/$sub"
		done
	done
	# The shim itself does not break a local spool.
	d=$T_ROOT/local-spool
	OUT=$(LD_PRELOAD=$shim FAKEFS_UNDER=$T_ROOT/net- FAKEFS_MAGIC=0x6969 "$KART" -s "$d" init 2>&1); RC=$?
	assert_eq 0 "$RC" "kart init on a local filesystem, shim loaded ($OUT)"
	[ -d "$d/new" ] || fail "kart init on a local filesystem made no new/"
}

# Every unit of the duration and size directives, as the result reports
# what was applied.
test_directive_units() {
	[ "$(id -u)" = 0 ] || { skip "memory limits need root or a delegated cgroup"; return; }
	local s; s=$(mkspool)
	local spec id
	for spec in t90:timeout=90 t90s:timeout=90s t5m:timeout=5m t2h:timeout=2h \
		mK:memory=262144K mM:memory=256M mG:memory=2G mbare:memory=268435456 \
		p64:pids=64 c05:cpu=0.5 o2K:output=2K; do
		id=${spec%%:*}
		printf '#!/bin/sh\n#kart: %s\nhead -c 3000 /dev/zero | tr "\\0" x\n' "${spec#*:}" >"$s/new/$id"
	done
	drain "$s"
	for id in t90 t90s t5m t2h mK mM mG mbare p64 c05 o2K; do
		assert_eq ok "$(field "$s" $id .status)" "$id status ($(field "$s" $id .error))"
	done
	assert_eq 90 "$(field "$s" t90 .limits.timeout_s)" "timeout=90"
	assert_eq 90 "$(field "$s" t90s .limits.timeout_s)" "timeout=90s"
	assert_eq 300 "$(field "$s" t5m .limits.timeout_s)" "timeout=5m"
	assert_eq 7200 "$(field "$s" t2h .limits.timeout_s)" "timeout=2h"
	assert_eq 268435456 "$(field "$s" mK .limits.memory_bytes)" "memory=262144K"
	assert_eq 268435456 "$(field "$s" mM .limits.memory_bytes)" "memory=256M"
	assert_eq 2147483648 "$(field "$s" mG .limits.memory_bytes)" "memory=2G"
	assert_eq 268435456 "$(field "$s" mbare .limits.memory_bytes)" "memory= bare bytes"
	assert_eq 64 "$(field "$s" p64 .limits.pids)" "pids=64"
	assert_eq 0.5 "$(field "$s" c05 .limits.cpu)" "cpu=0.5"
	assert_eq "2048 true" "$(field "$s" o2K '"\(.stdout.bytes) \(.stdout.truncated)"')" "output=2K"
	assert_eq "3000 false" "$(field "$s" t90 '"\(.stdout.bytes) \(.stdout.truncated)"')" "default output cap"
}

test_result_has_every_field() {
	local s; s=$(mkspool)
	printf '#!/bin/sh\n#kart: timeout=30s\necho out; echo err >&2; exit 4\n' >"$s/new/t"
	drain "$s"
	local j=$s/done/t.json
	jq -e . "$j" >/dev/null || fail "result is not valid JSON"
	local f
	for f in id name status exit_code signal error refusal worker lane attempt submitted_at \
		started_at finished_at wait_ms duration_ms stdout stderr limits usage sandbox submitter; do
		jq -e "has(\"$f\")" "$j" >/dev/null || fail "result lacks $f"
	done
	assert_eq failed "$(jq -r .status "$j")" status
	assert_eq 4 "$(jq -r .exit_code "$j")" exit_code
	assert_eq null "$(jq -r .signal "$j")" signal
	assert_eq null "$(jq -r .error "$j")" "error of a failed task"
	assert_eq null "$(jq -r .refusal "$j")" "refusal of a failed task"
	assert_eq fast "$(jq -r .lane "$j")" lane
	assert_eq 1 "$(jq -r .attempt "$j")" attempt
	assert_eq 30 "$(jq -r .limits.timeout_s "$j")" limits.timeout_s
	assert_eq "done/t.stdout" "$(jq -r .stdout.path "$j")" stdout.path
	assert_eq 4 "$(jq -r .stdout.bytes "$j")" stdout.bytes
	assert_eq false "$(jq -r .stdout.truncated "$j")" stdout.truncated
	assert_eq "err" "$(cat "$s/$(jq -r .stderr.path "$j")")" stderr
	assert_eq bwrap "$(jq -r .sandbox.backend "$j")" sandbox.backend
	assert_eq false "$(jq -r .sandbox.network "$j")" sandbox.network
	assert_eq "$(id -u)" "$(jq -r .submitter.uid "$j")" submitter.uid
	assert_eq "$(id -un)" "$(jq -r .submitter.user "$j")" submitter.user
	local ts='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$'
	assert_match "$ts" "$(jq -r .submitted_at "$j")" submitted_at
	assert_match "$ts" "$(jq -r .started_at "$j")" started_at
	assert_match "$ts" "$(jq -r .finished_at "$j")" finished_at
	jq -e '.wait_ms >= 0 and .duration_ms >= 0' "$j" >/dev/null || fail "wait_ms/duration_ms"
	jq -e '.usage | has("cpu_user_ms") and has("cpu_system_ms") and has("memory_peak_bytes")' \
		"$j" >/dev/null || fail usage
}

# Readers ignore fields they do not know: a result with extra fields, at
# the top and inside the objects, reads as before in status, wait and cat.
test_readers_ignore_unknown_fields() {
	local s; s=$(mkspool)
	printf '#!/bin/sh\necho said; exit 3\n' >"$s/new/future"
	drain "$s"
	local j=$s/done/future.json
	jq -c '{aa_first: [1, {"x": null}]} + . + {zz_last: {"nested": true}, stdout: (.stdout + {sha256: "0"}), usage: (.usage + {io_bytes: 7})}' \
		"$j" >"$s/done/.future.tmp" && mv "$s/done/.future.tmp" "$j" || { fail "cannot rewrite the result"; return; }
	assert_eq '[1,{"x":null}] true' "$(jq -c '.aa_first, .zz_last.nested' "$j" | paste -sd ' ')" "the extra fields are there"
	run_cmd -s "$s" status future
	assert_eq 0 "$RC" "status: exit status ($ERR)"
	assert_match "^future	failed	3" "$OUT" "status"
	run_cmd -s "$s" status --json future
	assert_eq "failed 3" "$(jq -r '.[0] | "\(.state) \(.exit_code)"' <<<"$OUT")" "status --json"
	run_cmd -s "$s" wait --timeout 5 future
	assert_eq 3 "$RC" "wait: the task's own exit code ($ERR)"
	run_cmd -s "$s" cat future
	assert_eq "0:said" "$RC:$OUT" "cat"
}

test_shebang_honoured() {
	local s; s=$(mkspool)
	printf '#!/usr/bin/env perl\nprint "perl ", 6*7, "\\n";\n' >"$s/new/pl"
	printf 'echo "no shebang: $0"\n' >"$s/new/plain"
	printf '#!/usr/bin/nonexistent\necho x\n' >"$s/new/missing"
	drain "$s"
	assert_eq "perl 42" "$(cat "$s/done/pl.stdout")" "#! perl"
	assert_eq ok "$(field "$s" plain .status)" "no #! runs under /bin/sh"
	assert_match "^no shebang: " "$(cat "$s/done/plain.stdout")" "sh output"
	assert_eq failed "$(field "$s" missing .status)" "missing interpreter"
	assert_eq 127 "$(field "$s" missing .exit_code)" "missing interpreter exit code"
}

test_timeout_kills_the_tree() {
	local s; s=$(mkspool)
	# A duration of its own: other tests (or other runs) may sleep 30 too.
	local d="30.$$$RANDOM"
	printf '#!/bin/sh\n#kart: timeout=1s\n(sleep %s &) ; sleep %s\n' "$d" "$d" >"$s/new/slow"
	local t0=$SECONDS
	drain "$s"
	assert_eq timeout "$(field "$s" slow .status)" status
	# SIGTERM first (the kill grace): sh dies of it, and its tree with it.
	assert_eq SIGTERM "$(field "$s" slow .signal)" signal
	assert_match "timeout" "$(field "$s" slow .error)" error
	[ $((SECONDS - t0)) -lt "$(slow 15)" ] || fail "timeout took $((SECONDS - t0))s"
	pgrep -f "sleep $d" >/dev/null && fail "a process of the timed-out task survived"
	true
}

# Every hostile entry kind gets `rejected`, and what it points at is untouched.
test_hostile_entries() {
	local s; s=$(mkspool)
	local victim=$T_ROOT/victim
	printf 'precious\n' >"$victim"; chmod 644 "$victim"
	local before; before=$(stat -c '%s %Y %a %h' "$victim")
	ln -s "$victim" "$s/new/symlink"
	ln -s /nonexistent "$s/new/dangling"
	ln "$victim" "$s/new/hardlink"
	mkfifo "$s/new/fifo"
	mknod "$s/new/device" c 1 3 2>/dev/null || skip "cannot mknod here" || true
	mkdir "$s/new/directory"; echo keep >"$s/new/directory/inner"
	head -c $((17 * 1024 * 1024)) /dev/zero >"$s/new/oversized"
	printf 'echo x\n' >"$s/new/$(printf 'bad\001name')"
	printf 'echo x\n' >"$s/new/$(printf 'latin1\xe9')"
	printf 'echo x\n' >"$s/new/.hidden"
	drain "$s"
	local id
	for id in symlink dangling hardlink fifo directory oversized; do
		assert_eq rejected "$(field "$s" "$id" .status)" "$id status"
		assert_ne null "$(field "$s" "$id" .error)" "$id error"
	done
	[ -e "$s/done/device.json" ] && assert_eq rejected "$(field "$s" device .status)" device
	assert_match "symbolic link" "$(field "$s" symlink .error)" "symlink error"
	assert_match "hard link" "$(field "$s" hardlink .error)" "hardlink error"
	assert_match "FIFO" "$(field "$s" fifo .error)" "fifo error"
	assert_match "directory" "$(field "$s" directory .error)" "directory error"
	assert_match "bytes" "$(field "$s" oversized .error)" "oversized error"
	# Undecodable names: rejected under a safe id, the exact bytes kept.
	local n; n=$(grep -l '"rejected"' "$s"/done/*.json | xargs jq -r 'select(.name_hex != null) | .name_hex' | sort | tr '\n' ' ')
	assert_eq "6c6174696e31e9 " "$n" "name_hex of the undecodable name"
	n=$(cat "$s"/done/*.json | jq -r 'select(.name == "bad\u0001name") | .status')
	assert_eq rejected "$n" "a control character in the name: rejected, name kept exactly"
	local f
	for f in "$s"/done/*.json; do jq -e . "$f" >/dev/null || fail "invalid JSON: $f"; done
	# The targets are untouched; the hard link's other name still holds it.
	assert_eq "$before" "$(stat -c '%s %Y %a %h' "$victim")" "victim metadata (nlink back to 1)"
	assert_eq precious "$(cat "$victim")" "victim content"
	assert_eq keep "$(cat "$s"/done/directory*.rejected/inner)" "directory kept, not followed"
	assert_file "$s/new/.hidden"
	assert_eq ".hidden" "$(ls -A "$s/new")" "only the dot file is left in new/"
}

# A writer that has the file open in new/ is waited for, however slow.
test_slow_writer_in_new() {
	local s; s=$(mkspool)
	start_worker "$s" --slots 2
	(
		exec 3>"$s/new/slowpoke"
		printf '#!/bin/sh\necho first\n' >&3
		sleep 2
		printf 'echo second\n' >&3
	)&
	local wpid=$!
	sleep 1
	assert_no_file "$s/done/slowpoke.json"
	wait "$wpid"
	wait_until 20 test -e "$s/done/slowpoke.json" || fail "slow file never ran"
	assert_eq "first
second" "$(cat "$s/done/slowpoke.stdout")" "ran whole, not half"
	kill "$WPID"; wait "$WPID"
}

# A worker started while a cp is under way does not run the half file.
test_worker_starts_during_write() {
	local s; s=$(mkspool)
	(
		exec 3>"$s/new/midway"
		printf '#!/bin/sh\necho part1\n' >&3
		sleep 3
		printf 'echo part2\n' >&3
	)&
	local wpid=$!
	sleep 0.5
	start_worker "$s"
	sleep 1
	assert_no_file "$s/done/midway.json"
	wait "$wpid"
	wait_until 20 test -e "$s/done/midway.json" || fail "never ran"
	assert_eq "part1
part2" "$(cat "$s/done/midway.stdout")" "whole file ran"
	kill "$WPID"; wait "$WPID"
}

# A stream the run wrote nothing to costs no inode: the result's file is a
# link to done/.empty. One with output has a file of its own. A running
# task that has written nothing yet has nothing to cat.
test_empty_outputs_share_one_file() {
	local s; s=$(mkspool)
	printf '#!/bin/sh\ntrue\n' >"$s/new/quiet1"
	printf '#!/bin/sh\ntrue\n' >"$s/new/quiet2"
	printf '#!/bin/sh\necho said\n' >"$s/new/loud"
	KART_BACKEND=none drain "$s"
	local e; e=$(stat -c %i "$s/done/.empty") || { fail "no done/.empty"; return; }
	assert_eq "$e $e $e" "$(stat -c %i "$s/done/quiet1.stdout" "$s/done/quiet1.stderr" "$s/done/quiet2.stdout" | xargs)" \
		"empty outputs are links to done/.empty"
	assert_eq 0 "$(stat -c %s "$s/done/.empty")" "size of done/.empty"
	assert_eq done/quiet1.stdout "$(field "$s" quiet1 .stdout.path)" "path of an empty stdout"
	assert_eq 0 "$(field "$s" quiet1 .stdout.bytes)" "bytes of an empty stdout"
	assert_eq said "$("$KART" -s "$s" cat loud)" "a stream with output"
	[ "$(stat -c %i "$s/done/loud.stdout")" != "$e" ] || fail "loud.stdout is the shared empty file"
	assert_eq "$e" "$(stat -c %i "$s/done/loud.stderr")" "loud's empty stderr"
	printf '#!/bin/sh\nsleep 5\n' >"$s/new/sleeper"
	KART_BACKEND=none start_worker "$s"
	wait_until 10 is_running "$s" sleeper || { fail "sleeper never ran"; return; }
	run_cmd -s "$s" cat sleeper
	assert_eq "0:" "$RC:$OUT" "kart cat of a running task with no output yet"
	stop_worker "$WPID"
}

test_name_reuse_never_overwrites() {
	local s; s=$(mkspool)
	task_ok first >"$s/new/job"
	drain "$s"
	task_ok second >"$s/new/job"
	drain "$s"
	task_ok third >"$s/new/job"
	drain "$s"
	assert_eq first "$(cat "$s/done/job.stdout")" "first result kept"
	assert_eq second "$(cat "$s/done/job.2.stdout")" "second under job.2"
	assert_eq third "$(cat "$s/done/job.3.stdout")" "third under job.3"
	assert_eq job "$(field "$s" job.2 .name)" "name keeps the submitted name"
	assert_eq job.3 "$(field "$s" job.3 .id)" "id"
	# kart submit picks a free id itself and prints it.
	local id; id=$(task_ok fourth | "$KART" -s "$s" submit --name job -)
	assert_eq job.4 "$id" "submit's id for a reused name"
	drain "$s"
	assert_eq job "$(field "$s" job.4 .name)" "name of submitted reuse"
}

# A name submitted many times: ids NAME, NAME.2, ... in order, and the
# free one found in a few looks, not one per id already taken (the 201st
# of 200 in new/ and done/ makes fewer than a look's worth per taken id;
# one by one it made several each). A gap kart gc left is passed over.
test_ids_of_one_name_found_in_a_few_looks() {
	command -v strace >/dev/null || { skip "strace is missing"; return; }
	local s i ids=; s=$(mkspool)
	for i in $(seq 100); do "$KART" -s "$s" submit --no-cwd -- true 2>/dev/null; done >"$s.ids"
	drain "$s" --slots 3
	for i in $(seq 100); do "$KART" -s "$s" submit --no-cwd -- true 2>/dev/null; done >>"$s.ids"
	for i in $(seq 200); do ids+="true${ids:+.$i}"$'\n'; done
	assert_eq "$(printf 'true\n'; seq 2 200 | sed 's/^/true./')" "$(cat "$s.ids")" "the ids, in order"
	strace -f -qq -c -o "$s.sc" "$KART" -s "$s" submit --no-cwd -- true >"$s.id201" 2>/dev/null
	assert_eq true.201 "$(cat "$s.id201")" "the 201st"
	local n; n=$(awk '$NF == "newfstatat" { print $4 }' "$s.sc")
	[ "${n:-0}" -lt 150 ] || fail "the 201st submit of one name looked $n times"
	# A result gone from the middle (as kart gc takes an old one): passed over.
	rm "$s/done/true.50".*
	assert_eq true.202 "$("$KART" -s "$s" submit --no-cwd -- true 2>/dev/null)" "past the gap"
}

# Reservations, the worker's side (spool-layout README §5, WORKER §6).
# The race of issue 29 made to happen: A, submitted with a reservation,
# is claimed and held; B is copied into the freed new/X with none and
# finishes first on another worker. B must not take X: A gets the id it
# was promised, B the next.
test_reservation_outlives_the_claim() {
	local s gate=$T_ROOT/gate.resv a; s=$(mkspool)
	a=$(printf '#!/bin/sh\nwhile [ ! -e %s ]; do sleep 0.05; done\necho A\n' "$gate" |
		"$KART" -s "$s" submit --name X -) || fail "submit A"
	assert_eq X "$a" "A's id"
	[ -L "$s/ids/X" ] || fail "no reservation ids/X"
	assert_eq "$(stat -c %i "$s/new/X")" "$(readlink "$s/ids/X")" "ids/X names A's inode"
	KART_BACKEND=none start_worker "$s" --id w0
	local w0=$WPID
	wait_until 20 test -e "$s/cur/w0/X" || fail "A never claimed"
	task_ok B >"$s/new/X" # a plain cp into the name A left
	KART_BACKEND=none start_worker "$s" --id w1
	local w1=$WPID
	wait_until 20 test -e "$s/done/X.2.json" || fail "B never finished"
	assert_no_file "$s/done/X.json"
	touch "$gate"
	wait_until 20 test -e "$s/done/X.json" || fail "A never finished"
	assert_eq "A" "$(cat "$s/done/X.stdout" 2>/dev/null)" "done/X is A's, the id it was promised"
	assert_eq "B" "$(cat "$s/done/X.2.stdout" 2>/dev/null)" "done/X.2 is B's"
	assert_eq "X X" "$(field "$s" X .name) $(field "$s" X.2 .name)" "names"
	stop_worker "$w0"
	stop_worker "$w1"
	assert_eq "" "$(ls -A "$s/ids")" "the reservation went with its result"
}

# A re-queue that found new/NAME taken puts a task back as NAME.2: its
# reservation is still NAME's, and the worker finds it. A reservation
# names an inode and its owner: another file, or another owner's link,
# does not get the id; nor does a hostile entry.
test_reservation_found_and_never_given_away() {
	local s; s=$(mkspool)
	local r; r=$(task_ok reserved | "$KART" -s "$s" submit --name R -) || fail "submit R"
	assert_eq R "$r" "R's id"
	mv "$s/new/R" "$s/new/R.2" # as a re-queue does when new/R is taken
	task_ok copied >"$s/new/R"
	# Z: a link to the right inode, made by someone else.
	task_ok zed >"$s/new/Z"
	ln -s "$(stat -c %i "$s/new/Z")" "$s/ids/Z" && chown -h nobody "$s/ids/Z"
	# H: a hostile entry, under a name someone holds.
	ln -s /etc/passwd "$s/new/H"
	ln -s 1 "$s/ids/H"
	drain "$s"
	assert_eq "reserved" "$(cat "$s/done/R.stdout" 2>/dev/null)" "R.2 in new/ finished as R"
	assert_eq "copied" "$(cat "$s/done/R.2.stdout" 2>/dev/null)" "the copy, without one, as R.2"
	assert_eq "R.2" "$(field "$s" R.2 .id 2>/dev/null)" "its id"
	assert_eq "zed" "$(cat "$s/done/Z.2.stdout" 2>/dev/null)" "another owner's link: Z.2"
	assert_no_file "$s/done/Z.json"
	assert_eq rejected "$(field "$s" H.2 .status 2>/dev/null)" "the hostile entry: H.2"
	assert_no_file "$s/done/H.json"
	assert_eq "H Z" "$(ls "$s/ids" | xargs)" "only the others' reservations are left"
}

# An id is a task name: at most 200 bytes (spool-layout README §2). A
# taken name of 200 bytes has no next id (NAME.2 would be 202): kart
# submit says so and publishes nothing, rather than a name a worker
# rejects; one of 198 bytes still gets NAME.2.
test_long_taken_name() {
	local s n198 n200; s=$(mkspool)
	n200=$(head -c 200 /dev/zero | tr '\0' a)
	n198=$(head -c 198 /dev/zero | tr '\0' b)
	run_cmd -s "$s" submit --no-cwd --name "$n200" -- true
	assert_eq "0 $n200" "$RC $OUT" "the first, 200 bytes"
	run_cmd -s "$s" submit --no-cwd --name "$n200" -- true
	assert_eq 1 "$RC" "the second, whose next id would be 202 bytes"
	assert_match "no id of at most 200 bytes is free for the name a+ .*give a shorter --name" "$ERR" "its error"
	assert_eq "" "$(ls -A "$s/tmp")" "nothing left in tmp/"
	assert_eq "$n200" "$(ls "$s/ids")" "no reservation but the first's"
	assert_eq "$n200" "$(ls "$s/new")" "nothing published but the first"
	run_cmd -s "$s" submit --no-cwd --name "$n198" -- true
	run_cmd -s "$s" submit --no-cwd --name "$n198" -- true
	assert_eq "0 $n198.2" "$RC $OUT" "198 bytes taken: NAME.2 (200 bytes)"
	drain "$s"
	assert_eq "ok ok ok" "$(field "$s" "$n200" .status) $(field "$s" "$n198" .status) $(field "$s" "$n198.2" .status)" "all ran"
}

# The state of a reserved id is its file's, whatever its name (spool-
# layout README §7): R, re-queued as R.2 because a scheduled copy sat at new/R,
# is queued, then running as R.2, then finished; kart status R never
# says the copy's "scheduled".
test_status_follows_the_reservation() {
	local s gate=$T_ROOT/gate.st nb; s=$(mkspool)
	printf '#!/bin/sh\nwhile [ ! -e %s ]; do sleep 0.05; done\necho R\n' "$gate" |
		"$KART" -s "$s" submit --name R - >/dev/null || fail "submit R"
	mv "$s/new/R" "$s/new/R.2" # as a re-queue does when new/R is taken
	nb=$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)
	printf '#!/bin/sh\n#kart: not_before=%s\necho copy\n' "$nb" >"$s/new/R"
	chmod 600 "$s/new/R"
	assert_match "^R	queued" "$("$KART" -s "$s" status R)" "R, queued as R.2"
	KART_BACKEND=none start_worker "$s" --id ws
	wait_until 20 test -e "$s/cur/ws/R.2" || fail "R.2 never claimed"
	assert_match "^R	running	ws" "$("$KART" -s "$s" status R)" "R, running as R.2"
	touch "$gate"
	wait_until 20 test -e "$s/done/R.json" || fail "R never finished"
	stop_worker "$WPID"
	assert_match "^R	ok" "$("$KART" -s "$s" status R)" "R, finished"
	assert_eq R "$(cat "$s/done/R.stdout" 2>/dev/null)" "done/R is the reserved task's"
}

# The commands act on a reserved id's own file, whatever its name
# (spool-layout README §7, §8): R, re-queued as R.2 beside another file at
# new/R, is held, released, edited, paused, resumed and cancelled as R.2;
# the file at new/R is never touched, and the reservation follows the edit.
test_control_follows_the_reservation() {
	local s gate=$T_ROOT/gate.ct nb copy; s=$(mkspool)
	printf '#!/bin/sh\nwhile [ ! -e %s ]; do sleep 0.05; done\necho R\n' "$gate" |
		"$KART" -s "$s" submit --name R - >/dev/null || fail "submit R"
	mv "$s/new/R" "$s/new/R.2" # as a re-queue does when new/R is taken
	nb=$(date -u -d '+1 day' +%Y-%m-%dT%H:%M:%SZ)
	printf '#!/bin/sh\n#kart: not_before=%s\necho copy\n' "$nb" >"$s/new/R"
	chmod 600 "$s/new/R"
	copy=$(stat -c %i "$s/new/R")
	run_cmd -s "$s" hold R
	assert_eq 0 "$RC" "kart hold R ($OUT $ERR)"
	[ -e "$s/new/.held.R.2" ] || fail "R.2 not held: $(ls -a "$s/new" | tr '\n' ' ')"
	[ ! -e "$s/new/.held.R" ] || fail "the other file was held"
	run_cmd -s "$s" release R
	assert_eq 0 "$RC" "kart release R ($OUT $ERR)"
	[ -e "$s/new/R.2" ] || fail "R.2 not released: $(ls -a "$s/new" | tr '\n' ' ')"
	run_cmd -s "$s" edit R --set timeout=5m
	assert_eq 0 "$RC" "kart edit R ($OUT $ERR)"
	grep -q 'timeout=5m' "$s/new/R.2" || fail "R.2 not edited"
	! grep -q 'timeout=' "$s/new/R" || fail "the other file was edited"
	assert_eq "$(stat -c %i "$s/new/R.2")" "$(readlink "$s/ids/R")" "ids/R names the edited file"
	start_worker "$s" --id wc
	wait_until 20 test -e "$s/cur/wc/R.2" || fail "R.2 never claimed"
	run_cmd -s "$s" pause R
	assert_eq 0 "$RC" "kart pause R ($OUT $ERR)"
	[ -e "$s/cur/wc/.R.2.paused" ] || fail "R.2 not paused"
	run_cmd -s "$s" resume R
	assert_eq 0 "$RC" "kart resume R ($OUT $ERR)"
	run_cmd -s "$s" cancel R
	assert_eq 0 "$RC" "kart cancel R ($OUT $ERR)"
	assert_eq cancelled "$(field "$s" R .status)" "R's result"
	assert_eq "$copy" "$(stat -c %i "$s/new/R" 2>/dev/null)" "the other file, still queued"
	[ ! -e "$s/done/R.2.json" ] || fail "a result R.2: $(cat "$s/done/R.2.json")"
	# R is finished: the file at new/R is another task (it would finish
	# as R.2), and no verb of R's takes it.
	run_cmd -s "$s" hold R
	assert_match "already finished" "$OUT" "kart hold of a finished R ($ERR)"
	run_cmd -s "$s" cancel R
	assert_match "already finished" "$OUT" "kart cancel of a finished R ($ERR)"
	assert_eq "$copy" "$(stat -c %i "$s/new/R" 2>/dev/null)" "the other file, still queued, not held"
	stop_worker "$WPID"
}

# kart gc and reservations: one whose result exists goes at once; one as
# old as the tmp/ age goes if its task is nowhere, stays while its task
# is queued; a young one stays.
test_reservation_gc() {
	local s; s=$(mkspool)
	task_ok d | "$KART" -s "$s" submit --name D - >/dev/null || fail "submit D"
	drain "$s"
	ln -s "$(stat -c %i "$s/done/D.task")" "$s/ids/D" # a worker killed before its unlink
	task_ok q | "$KART" -s "$s" submit --name Q - >/dev/null || fail "submit Q" # queued
	ln -s 4242424242 "$s/ids/dead"                # its client died before it published
	ln -s 4242424243 "$s/ids/young"
	touch -h -d '2 days ago' "$s/ids/Q" "$s/ids/dead"
	run_cmd -s "$s" gc -v
	assert_eq 0 "$RC" "gc ($ERR)"
	assert_eq "Q young" "$(ls "$s/ids" | xargs)" "what gc kept"
	assert_match "ids/D" "$OUT" "gc says what it removed"
	run_cmd -s "$s" gc --tmp-age 0s
	assert_eq "Q" "$(ls "$s/ids" | xargs)" "--tmp-age: the young one too, never a queued task's"
	drain "$s"
	assert_eq q "$(cat "$s/done/Q.stdout" 2>/dev/null)" "Q kept its id"
	assert_eq "" "$(ls -A "$s/ids")" "Q's reservation went with its result"
}

# kill -9 of a client at each of its steps: what it leaves never takes
# another's id, and gc clears it. strace kills kart submit at its
# symlink (the reservation), its fsync of ids/, and its publish.
test_reservation_client_killed() {
	command -v strace >/dev/null || { skip "strace is not installed"; return; }
	local s sc i id; s=$(mkspool)
	# fsync 2 is that of ids/ (1: the task file's, 3: new/'s).
	for sc in symlinkat:1 fsync:2 renameat2:1; do
		{ strace -o /dev/null -e trace="${sc%%:*}" -e inject="${sc%%:*}:signal=KILL:when=${sc#*:}" \
			"$KART" -s "$s" submit --name K -- echo killed >/dev/null 2>&1; } 2>/dev/null &&
			fail "kart submit lived through a SIGKILL at $sc"
	done
	assert_ne "" "$(ls -A "$s/ids")" "the killed clients left reservations"
	id=$(task_ok whole | "$KART" -s "$s" submit --name K -) || fail "submit after the kills"
	drain "$s"
	assert_eq whole "$(cat "$s/done/$id.stdout" 2>/dev/null)" "the id printed ($id) is its own result's"
	for i in "$s"/done/K*.json; do
		[ "$(jq -r .id "$i")" = "$id" ] || assert_eq killed "$(cat "${i%.json}.stdout")" "$i"
	done
	run_cmd -s "$s" gc --tmp-age 0s
	assert_eq "" "$(ls -A "$s/ids" "$s/tmp" | grep -v '^/\|^$')" "gc cleared what the killed clients left"
	id=$(task_ok again | "$KART" -s "$s" submit --name K -) || fail "submit after gc"
	drain "$s"
	assert_eq again "$(cat "$s/done/$id.stdout" 2>/dev/null)" "after gc ($id)"
}

test_bad_directives_rejected() {
	local s; s=$(mkspool)
	printf '#!/bin/sh\n#kart: timeout=soon\necho x\n' >"$s/new/badtime"
	printf '#!/bin/sh\n# kart: frobnicate=1\necho x\n' >"$s/new/unknown"
	printf '#!/bin/sh\n#kart: lane=slow\necho x\n' >"$s/new/badlane"
	printf '#!/bin/sh\n#kart: cpu=4096\necho x\n' >"$s/new/overcpu"
	printf '#!/bin/sh\n#kart: memory=64T\necho x\n' >"$s/new/overmem"
	printf '#!/bin/sh\n# allow_net\necho x\n' >"$s/new/wantsnet"
	printf '#!/bin/sh\necho x\n#kart: bogus\n' >"$s/new/late"
	drain "$s"
	assert_eq rejected "$(field "$s" badtime .status)" badtime
	assert_match "line 2: timeout=soon" "$(field "$s" badtime .error)" "badtime error names the line"
	assert_match "line 2: unknown directive item 'frobnicate=1'" "$(field "$s" unknown .error)" unknown
	assert_eq rejected "$(field "$s" badlane .status)" badlane
	assert_match "ceiling" "$(field "$s" overcpu .error)" "cpu above ceiling"
	assert_match "ceiling" "$(field "$s" overmem .error)" "memory above ceiling"
	assert_eq rejected "$(field "$s" wantsnet .status)" "net without a grant"
	assert_match "no network to uid" "$(field "$s" wantsnet .error)" "net error"
	assert_eq ok "$(field "$s" late .status)" "directives after the leading block are ignored"
	assert_eq null "$(field "$s" wantsnet .started_at)" "rejected never started"
}

# A sandbox that cannot be built: `refused`, refusal sandbox_setup_failed,
# and the task's own code never ran.
test_refused_when_sandbox_cannot_be_built() {
	local s; s=$(mkspool)
	printf '#!/bin/sh\necho ran\n' >"$s/new/nosandbox"
	KART_BWRAP=/nonexistent/bwrap drain "$s"
	assert_eq refused "$(field "$s" nosandbox .status)" status
	assert_eq sandbox_setup_failed "$(field "$s" nosandbox .refusal)" refusal
	assert_match "sandbox could not be built" "$(field "$s" nosandbox .error)" error
	assert_eq null "$(field "$s" nosandbox .exit_code)" exit_code
	[ "$("$KART" -s "$s" cat nosandbox)" = ran ] && fail "the task ran without its sandbox"
	true
}

test_sandbox_basics() {
	have_bwrap || { skip "bwrap cannot build a sandbox here"; return; }
	local s; s=$(mkspool)
	cat >"$s/new/probe" <<'EOT'
#!/bin/sh
echo "cwd=$(pwd)"
echo "files=$(ls -A | wc -l)"
touch ./mine && echo "cwd_writable=yes"
touch /etc/x 2>/dev/null && echo "etc_writable=yes" || echo "etc_writable=no"
touch /usr/x 2>/dev/null && echo "usr_writable=yes" || echo "usr_writable=no"
echo "env=$(env | cut -d= -f1 | sort | tr '\n' ' ')"
echo "pid=$$"
ls "$KART_SPOOL_CANARY" >/dev/null 2>&1 && echo "spool_visible=yes" || echo "spool_visible=no"
(exec 3<>/dev/tcp/127.0.0.1/9) 2>/dev/null
getent hosts localhost >/dev/null; echo done
EOT
	KART_SECRET_CANARY=leak drain "$s"
	local out; out=$(cat "$s/done/probe.stdout")
	assert_match "cwd=/work" "$out" cwd
	assert_match "files=0" "$out" "fresh empty work dir"
	assert_match "cwd_writable=yes" "$out" "work dir writable"
	assert_match "etc_writable=no" "$out" "/etc read-only"
	assert_match "usr_writable=no" "$out" "/usr read-only"
	assert_match "env=HOME KART_ATTEMPT KART_OUTDIR KART_TASK_ID LANG PATH PWD TMPDIR " "$out" "environment cleared"
	[[ $out == *CANARY* ]] && fail "worker environment leaked into the task"
	assert_match "pid=[0-9]$" "$(grep pid= <<<"$out")" "own PID namespace (small pid)"
	[ -e "$s/done/probe.json" ] && [ -z "$(ls -A "$s/cur" 2>/dev/null)" ] || fail "cur/ not clean"
}

# The work directory (and backend none's private $TMPDIR) is gone when
# the task ends, whatever the outcome, while the worker goes on: the
# claim directory keeps its lock and at most emptied spares, and the next
# task starts in an empty directory.
test_work_dir_gone_whatever_the_outcome() {
	local be s wid id e
	for be in bwrap none; do
		[ "$be" = bwrap ] && { have_bwrap || { skip "bwrap cannot build a sandbox here"; return; }; }
		s=$(mkspool)
		local fill='echo a >./f; mkdir -p d/e; echo c >d/e/h; echo b >"$TMPDIR/g"'
		printf '#!/bin/sh\n%s\n' "$fill" >"$s/new/ok"
		printf '#!/bin/sh\n%s\nexit 3\n' "$fill" >"$s/new/failed"
		printf '#!/bin/sh\n#kart: timeout=1s\n%s\nsleep 30\n' "$fill" >"$s/new/slow"
		printf '#!/bin/sh\n%s\nsleep 60\n' "$fill" >"$s/new/cancelme"
		KART_BACKEND=$be start_worker "$s" --slots 4
		wait_until 20 is_running "$s" cancelme || fail "$be: cancelme never ran"
		sleep 0.3
		"$KART" -s "$s" cancel cancelme >/dev/null || fail "$be: kart cancel"
		for id in ok failed slow cancelme; do
			wait_until 30 test -e "$s/done/$id.json" || fail "$be: no result for $id"
		done
		assert_eq "ok failed timeout cancelled" \
			"$(for id in ok failed slow cancelme; do field "$s" "$id" .status; done | xargs)" \
			"$be: the outcomes"
		wid=$(ls "$s/cur")
		# While the worker runs: nothing of the four runs is left.
		for e in $(ls -A "$s/cur/$wid"); do
			case $e in
			.lock | .enforced) ;; # the worker's own: its lock, what it can hold
			.spare.*) assert_eq "" "$(ls -A "$s/cur/$wid/$e")" "$be: $e is empty" ;;
			*) fail "$be: left in the claim directory: $e" ;;
			esac
		done
		printf '#!/bin/sh\nls -A . "$TMPDIR" | grep -v ":$" | grep -c . || true\n' >"$s/new/next"
		wait_until 30 test -e "$s/done/next.json" || fail "$be: no result for next"
		assert_eq 0 "$(cat "$s/done/next.stdout")" "$be: the next task's work dir and \$TMPDIR are empty"
		stop_worker "$WPID"
	done
}

# $KART_OUTDIR is kept beside the result up to the policy's artifacts_max;
# over it, none of it is kept and the result says so.
test_artifacts_capped_by_policy() {
	local s; s=$(mkspool)
	printf '[limits]\nartifacts_max = 1M\n' >"$s/kart.conf"
	printf '#!/bin/sh\nmkdir $KART_OUTDIR/d\nhead -c 300000 /dev/urandom >$KART_OUTDIR/d/small\n' >"$s/new/small"
	printf '#!/bin/sh\nhead -c 3000000 /dev/urandom >$KART_OUTDIR/big\necho done\n' >"$s/new/big"
	printf '#!/bin/sh\nfor i in 1 2 3 4 5; do head -c 300000 /dev/urandom >$KART_OUTDIR/part$i; done\n' >"$s/new/parts"
	printf '#!/bin/sh\necho nothing kept\n' >"$s/new/none"
	drain "$s"
	assert_eq ok "$(field "$s" small .status)" "small: status"
	assert_eq done/small.out "$(field "$s" small .artifacts.path)" "small: kept"
	assert_eq false "$(field "$s" small .artifacts.truncated)" "small: not truncated"
	local b; b=$(field "$s" small .artifacts.bytes)
	[ "$b" -ge 300000 ] && [ "$b" -le 1048576 ] || fail "small: bytes $b"
	assert_eq 300000 "$(stat -c %s "$s/done/small.out/d/small")" "small: the file itself"
	assert_eq ok "$(field "$s" big .status)" "big: the task's own status stands"
	assert_eq null "$(field "$s" big .artifacts.path)" "big: not kept"
	assert_eq true "$(field "$s" big .artifacts.truncated)" "big: said so"
	b=$(field "$s" big .artifacts.bytes)
	[ "$b" -ge 1048576 ] || fail "big: bytes $b should reach the cap"
	assert_no_file "$s/done/big.out"
	assert_eq null "$(field "$s" parts .artifacts.path)" "parts: five files, together over the cap"
	assert_no_file "$s/done/parts.out"
	assert_eq null "$(field "$s" none .artifacts)" "nothing in \$KART_OUTDIR: null"
	assert_eq "" "$(find "$s/cur" -name '.*.out')" "no \$KART_OUTDIR left in cur/"
}

# A worker that dies between moving a result's tree to done/ID.out and
# writing done/ID.json (spool-layout APPENDIX §3, "Finish, a task file")
# leaves its claim in cur/W/ (linked as done/ID.task) and the tree. Its
# recovery runs the task again: the result is the repeat's, with the
# repeat's tree, not a worker retrying "Directory not empty" for ever.
test_dead_finish_tree_gives_way_to_the_repeat() {
	local s first second; s=$(mkspool)
	printf '#!/bin/sh\nhead -c 8 /dev/urandom | od -An -tx1 >$KART_OUTDIR/o\n' >"$s/new/t1"
	drain "$s"
	assert_eq ok "$(field "$s" t1 .status)" "first run"
	first=$(cat "$s/done/t1.out/o")
	# The dead worker's state, as a kill between the two steps leaves it.
	mkdir "$s/cur/dead" && : >"$s/cur/dead/.lock" && ln "$s/done/t1.task" "$s/cur/dead/t1" &&
		rm "$s/done/t1.json" || fail "making the dead finish"
	drain "$s"
	assert_eq ok "$(field "$s" t1 .status)" "the repeat's result"
	assert_eq done/t1.out "$(field "$s" t1 .artifacts.path)" "its tree kept"
	second=$(cat "$s/done/t1.out/o")
	[ -n "$second" ] && [ "$second" != "$first" ] || fail "done/t1.out is the dead finish's: $second"
	assert_eq "" "$(find "$s/cur" "$s/new" -mindepth 1 -not -name .lock)" "nothing left to run"
	assert_eq "" "$(find "$s/done" -maxdepth 1 -name '.rm-*')" "the old tree removed"
}

test_network_only_when_granted() {
	have_bwrap || { skip "bwrap cannot build a sandbox here"; return; }
	local s; s=$(mkspool)
	local script='#!/bin/sh
ip=$(cat /proc/net/dev | grep -c :)
echo "interfaces=$ip"'
	printf '%s\n' "$script" >"$s/new/nonet"
	printf '#!/bin/sh\n#kart: net\n%s\n' "${script#*
}" >"$s/new/withnet"
	KART_NET_UIDS=$(id -u) drain "$s"
	assert_eq "interfaces=1" "$(cat "$s/done/nonet.stdout")" "only loopback (down) without net"
	assert_eq true "$(field "$s" withnet .sandbox.network)" "network granted"
	[ "$(cut -d= -f2 "$s/done/withnet.stdout")" -gt 1 ] || fail "net task sees host interfaces"
}

# A kart.conf that exists but cannot be read (a directory, a symlink,
# a file the worker's user may not read) stops the worker and kart doctor:
# no fall-back to the defaults, and no task runs.
test_unreadable_policy_stops_worker() {
	local s; s=$(mkspool)
	printf '#!/bin/sh\necho ran\n' >"$s/new/t"
	local how out rc
	for how in directory symlink unreadable; do
		rm -rf "$s/kart.conf"
		local as=()
		case $how in
		directory) mkdir "$s/kart.conf" ;;
		symlink) printf '[worker]\nslots = 1\n' >"$T_ROOT/real.conf"
			ln -s "$T_ROOT/real.conf" "$s/kart.conf" ;;
		unreadable)
			[ "$(id -u)" = 0 ] && command -v setpriv >/dev/null || continue
			printf '[worker]\nslots = 1\n' >"$s/kart.conf"
			chmod 600 "$s/kart.conf"
			chmod 755 "$T_ROOT" "$s"
			chown -R nobody "$s/new" "$s/cur" "$s/done" "$s/tmp"
			as=(setpriv --reuid=nobody --regid=nogroup --clear-groups --) ;;
		esac
		out=$(timeout 10 "${as[@]}" "$KART" -s "$s" worker --drain 2>&1); rc=$?
		assert_eq 1 "$rc" "$how: the worker stops"
		assert_match "kart.conf: cannot read" "$out" "$how: the error names the file"
		out=$(timeout 10 "${as[@]}" "$KART" -s "$s" doctor 2>&1); rc=$?
		assert_ne 0 "$rc" "$how: kart doctor fails"
		assert_match "kart.conf: cannot read" "$out" "$how: kart doctor says why"
		assert_file "$s/new/t"
		assert_no_file "$s/done/t.json"
	done
}

# A kart.conf larger than the 1M the worker reads is an error, not a
# policy cut short: here the grant at its end would be lost unseen.
test_oversized_policy_stops_worker() {
	local s; s=$(mkspool)
	{
		printf '[network]\n'
		head -c 1100000 /dev/zero | tr '\0' '#' | fold -w 99
		printf '\nallow_uids = %s\n' "$(id -u)"
	} >"$s/kart.conf"
	printf '#!/bin/sh\n#kart: net\necho ran\n' >"$s/new/t"
	local out rc
	out=$(timeout 10 "$KART" -s "$s" worker --drain 2>&1); rc=$?
	assert_eq 1 "$rc" "the worker stops"
	assert_match "kart.conf: larger than 1M" "$out" "the error says why"
	assert_file "$s/new/t"
	assert_no_file "$s/done/t.json"
	# Cut to size, the same grant works.
	printf '[network]\nallow_uids = %s\n' "$(id -u)" >"$s/kart.conf"
	drain "$s"
	assert_eq ok "$(field "$s" t .status)" "the net task, once the policy is read whole"
}

test_policy_file_and_sighup() {
	local s; s=$(mkspool)
	printf '[worker]\nslots = 2\n[limits]\ntimeout_max = 1h\nbogus = 1\n' >"$s/kart.conf"
	local out rc
	out=$(timeout 10 "$KART" -s "$s" worker --drain 2>&1); rc=$?
	assert_eq 1 "$rc" "a bad kart.conf stops the worker"
	assert_match "kart.conf line 5: unknown key 'bogus'" "$out" "error names the line"
	printf '[limits]\ntimeout_max = 1m\n' >"$s/kart.conf"
	printf '#!/bin/sh\n#kart: timeout=2m\necho x\n' >"$s/new/long"
	drain "$s"
	assert_eq rejected "$(field "$s" long .status)" "above kart.conf's ceiling"
	assert_match "ceiling of 60s" "$(field "$s" long .error)" "names the ceiling"
	# SIGHUP: grant network to us, and a net task is accepted.
	start_worker "$s"
	printf '#!/bin/sh\n#kart: net\necho x\n' >"$s/new/net1"
	wait_until 20 test -e "$s/done/net1.json" || fail "net1 no result"
	assert_eq rejected "$(field "$s" net1 .status)" "no grant before SIGHUP"
	printf '[network]\nallow_uids = %s\n' "$(id -u)" >"$s/kart.conf"
	kill -HUP "$WPID"
	wait_until 10 grep -q "policy reloaded" "$s.worker.log" || fail "no reload logged"
	printf '#!/bin/sh\n#kart: net\necho x\n' >"$s/new/net2"
	wait_until 20 test -e "$s/done/net2.json" || fail "net2 no result"
	assert_eq ok "$(field "$s" net2 .status)" "granted after SIGHUP"
	# A broken file on SIGHUP: the worker says so and keeps the last good policy.
	printf '[network\n' >"$s/kart.conf"
	kill -HUP "$WPID"
	wait_until 10 grep -q "NOT reloaded.*line 1" "$s.worker.log" || fail "bad reload not reported"
	kill -0 "$WPID" || fail "worker died on a bad reload"
	kill "$WPID"; wait "$WPID"
}

run_tests
