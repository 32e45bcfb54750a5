#!/bin/bash
# Hostile input battery: every kind of entry an attacker (or an accident)
# can put in new/, against a live worker. Each must get a `rejected` result
# with a reason, except where the contract says otherwise:
#   - a file owned by another user runs, as that user (root worker);
#   - a setuid file runs like any file of its owner: the bit has no effect
#     (the task is executed under no_new_privs, as the owner's uid);
#   - a name starting with '.' is ignored, never looked at.
# A canary file is watched with inotify (IN_OPEN, IN_ACCESS, IN_MODIFY)
# for the whole run: a symlink, a hard link and a RENAME_EXCHANGE race all
# point at it, and it must never be opened. The worker must never block: a
# plain task queued after the hostile entries finishes within 30 s.
# Prints: "M hostile inputs rejected with reasons, R race rounds, canary opened 0 times".
#   HOSTILE_RACE   RENAME_EXCHANGE rounds (default 500)
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kart=${KART:-$root/${KART_B:-build}/kart}
rounds=${HOSTILE_RACE:-500}
work=$(mktemp -d "${TMPDIR:-/tmp}/kart-hostile.XXXXXX")
chmod 755 "$work"
s=$work/spool
wpid='' watch=''
cleanup() {
	[ -n "$wpid" ] && kill -9 "$wpid" 2>/dev/null
	[ -n "$watch" ] && kill "$watch" 2>/dev/null
	wait 2>/dev/null
	[ "${HOSTILE_KEEP:-0}" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT
unset KART_SPOOL
bad=0
no() { echo "FAIL: $*" >&2; bad=$((bad + 1)); }
[ "$(id -u)" = 0 ] || { echo "hostile.sh: needs root (other users' files, device nodes)" >&2; exit 77; }
"$kart" -s "$s" init || exit 1
# Root puts every entry in new/, other users' files included (a new/
# that others may write takes only root's and its owner's files: that is
# tests/blackbox/users.sh), and the worker runs with backend none for
# speed: that needs the policy's deliberate allowance.
printf '[sandbox]\nallow_root = yes\nallow_unsandboxed = yes\n' >"$s/kart.conf"
chmod 1777 "$s/tmp"

# The canary: were it ever run, it would leave $work/PWNED.
canary=$work/canary
printf '#!/bin/sh\ntouch %s/PWNED\n' "$work" >"$canary"; chmod 755 "$canary"
python3 - "$canary" "$work/opens" "$work/watching" <<'PY' &
import ctypes, os, select, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_CLOEXEC)
IN_ACCESS, IN_MODIFY, IN_OPEN = 0x1, 0x2, 0x20
if fd < 0 or libc.inotify_add_watch(fd, sys.argv[1].encode(), IN_ACCESS | IN_MODIFY | IN_OPEN) < 0:
    sys.exit("inotify: %s" % os.strerror(ctypes.get_errno()))
open(sys.argv[3], "w").close()
n = 0
while True:
    r, _, _ = select.select([fd], [], [], 0.2)
    if r:
        n += len(os.read(fd, 65536)) // 16  # each event here has no name: 16 bytes
    with open(sys.argv[2], "w") as f:
        f.write("%d\n" % n)
PY
watch=$!
for ((i = 0; i < 50; i++)); do [ -e "$work/watching" ] && break; sleep 0.1; done
[ -e "$work/watching" ] || { echo "the inotify watcher did not start" >&2; exit 1; }

KART_LANDLOCK=off KART_BACKEND=none "$kart" -s "$s" worker --id hw --slots 8 >>"$work/worker.log" 2>&1 &
wpid=$!
sleep 0.3

# name -> expected reason (regex on .error); "RUN:<uid>" = runs as that uid.
declare -A want
nobody=$(id -u nobody)
ln -s "$canary" "$s/new/symlink";                  want[symlink]='symbolic link'
ln -s /nonexistent "$s/new/dangling";              want[dangling]='symbolic link'
ln "$canary" "$s/new/hardlink";                    want[hardlink]='hard link'
mkfifo "$s/new/fifo";                              want[fifo]='FIFO'
mknod "$s/new/chardev" c 1 3;                      want[chardev]='device'
mknod "$s/new/blockdev" b 7 200 2>/dev/null &&     want[blockdev]='device'
python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$s/new/socket"
want[socket]='socket'
mkdir "$s/new/directory";                          want[directory]='directory'
truncate -s 1G "$s/new/gigabyte";                  want[gigabyte]='bytes'
nl=$'new\nline'; printf 'echo x\n' >"$s/new/$nl";  want[$nl]='name'
bad8=$(printf 'bad\xff\xfe'); printf 'echo x\n' >"$s/new/$bad8"; want[$bad8]='name'
long=$(printf 'L%.0s' {1..255}); printf 'echo x\n' >"$s/new/$long"; want[$long]='name|long'
ctl=$(printf 'ctl\033[2J'); printf 'echo x\n' >"$s/new/$ctl"; want[$ctl]='name'
printf '#!/bin/sh\n#kart: bogus=1\n' >"$s/new/baddirective"; want[baddirective]='bogus'
printf '#!/bin/sh\n#kart: timeout=99999h\n' >"$s/new/toolong"; want[toolong]='timeout'
# Runs, as its owner.
# (Owner and mode set in tmp/ first: the live worker would race a chown in new/.)
printf '#!/bin/sh\nid -u\n' >"$s/tmp/others"; chown nobody "$s/tmp/others"; mv "$s/tmp/others" "$s/new/"
want[others]="RUN:$nobody"
printf '#!/bin/sh\nid -u\n' >"$s/tmp/setuid"; chown nobody "$s/tmp/setuid"; chmod 4755 "$s/tmp/setuid"
mv "$s/tmp/setuid" "$s/new/"
want[setuid]="RUN:$nobody"
# Ignored: dot names ('..'-like included) are never looked at.
printf 'touch %s/PWNED\n' "$work" >"$s/new/..evil"; printf 'echo x\n' >"$s/new/..."

# RENAME_EXCHANGE race: a queued file is swapped for a symlink to the canary
# just after it lands in new/. The worker sees one or the other, never the
# canary through the link. The regular file has a bad directive, so both
# outcomes are a cheap `rejected`, and the reason says which one was seen.
python3 - "$s" "$canary" "$rounds" <<'PY'
import ctypes, os, random, sys, time
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
s, canary, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(rounds):
    t, l, n = "%s/tmp/r%d" % (s, i), "%s/tmp/l%d" % (s, i), "%s/new/race%d" % (s, i)
    with open(t, "w") as f:
        f.write("#!/bin/sh\n#kart: racebogus=1\ntouch PWNED\n")
    os.symlink(canary, l)
    os.rename(t, n)
    time.sleep(random.random() * 0.003)  # sometimes inside the worker's look
    if libc.renameat2(AT_FDCWD, n.encode(), AT_FDCWD, l.encode(), RENAME_EXCHANGE) == 0:
        os.unlink(l)  # now the regular file
    else:
        os.unlink(l)  # the worker claimed the file first: nothing swapped
PY
echo "queued in $SECONDS s" >&2
printf '#!/bin/sh\necho after\n' >"$s/tmp/after"; mv "$s/tmp/after" "$s/new/after"
for ((i = 0; i < 600; i++)); do [ -e "$s/done/after.json" ] && break; sleep 0.05; done
[ -e "$s/done/after.json" ] || no "a plain task queued after the hostile entries did not finish within 30 s: the worker blocked"
# The race entries queued before `after` may still be finishing.
for ((i = 0; i < 1200; i++)); do
	# (new/ keeps its two dot files; cur/hw/ is the live worker's own.)
	[ "$( (find "$s/new" -mindepth 1 -maxdepth 1 ! -name '.*'; find "$s/cur" -mindepth 2 -maxdepth 2 ! -name '.*') | wc -l)" -eq 0 ] && break
	sleep 0.05
done
sleep 0.3
kill -0 "$wpid" || no "the worker died: $(tail -n 3 "$work/worker.log")"
kill -TERM "$wpid"; wait "$wpid"; wpid=''

echo "drained in $SECONDS s" >&2
rejected=0
# name (with invalid UTF-8 as U+FFFD), status, error, stdout
results=$work/results.tsv
find "$s/done" -maxdepth 1 -name '*.json' ! -name '.*' -print0 | xargs -0 cat |
	jq -r '[(.name_hex // (.name | @base64)), .status, (.error // "-"), (.stdout.path // "-")] | @tsv' >"$results"
for name in "${!want[@]}"; do
	key=$(printf '%s' "$name" | base64 -w0)
	if ! iconv -f UTF-8 -t UTF-8 <<<"$name" >/dev/null 2>&1; then key=$(printf '%s' "$name" | od -An -tx1 | tr -d ' \n'); fi
	line=$(awk -F'\t' -v k="$key" '$1 == k' "$results")
	c=$(grep -c . <<<"$line")
	[ "$c" -eq 1 ] || { no "$(printf %q "$name"): $c results"; continue; }
	IFS=$'\t' read -r _ st er out <<<"$line"
	case ${want[$name]} in
	RUN:*)
		[ "$st" = ok ] || no "$name: status $st ($er), expected to run"
		[ "$(cat "$s/$out")" = "${want[$name]#RUN:}" ] || no "$name: ran as uid $(cat "$s/$out"), expected ${want[$name]#RUN:}"
		;;
	*)
		[ "$st" = rejected ] || no "$(printf %q "$name"): status $st, expected rejected"
		[[ $er =~ ${want[$name]} ]] || no "$(printf %q "$name"): error '$er' does not match /${want[$name]}/"
		rejected=$((rejected + 1))
		;;
	esac
done
# The race: exactly one result each, rejected with the reason of what was seen.
race_sym=$(jq -r 'select(.name | test("^race[0-9]+$")) | .error' "$s"/done/*.json | grep -c 'symbolic link')
race_bogus=$(jq -r 'select(.name | test("^race[0-9]+$")) | .error' "$s"/done/*.json | grep -c 'racebogus')
race_all=$(jq -r 'select(.name | test("^race[0-9]+$")) | .name' "$s"/done/*.json | sort | uniq | wc -l)
race_res=$(jq -r 'select(.name | test("^race[0-9]+$")) | .name' "$s"/done/*.json | wc -l)
[ "$race_all" -eq "$rounds" ] || no "race: $race_all of $rounds names have a result"
[ "$race_res" -eq "$rounds" ] || no "race: $race_res results for $rounds names"
[ $((race_sym + race_bogus)) -eq "$rounds" ] || no "race: $((rounds - race_sym - race_bogus)) results with another reason"
rejected=$((rejected + race_sym + race_bogus))
# Every result valid JSON (one jq for all: as many objects as files).
nj=$(find "$s/done" -maxdepth 1 -name '*.json' ! -name '.*' | wc -l)
pj=$(find "$s/done" -maxdepth 1 -name '*.json' ! -name '.*' -print0 | xargs -0 cat | jq -n '[inputs | objects] | length' 2>/dev/null)
[ "$nj" = "$pj" ] || no "invalid JSON among the results: $nj files, ${pj:-no} objects parsed"
[ -e "$s/new/..evil" ] && [ -e "$s/new/..." ] || no "a dot name was touched"
[ -e "$work/PWNED" ] && no "something ran the canary or a dot file"
sleep 0.3
opens=$(cat "$work/opens")
[ "$opens" -eq 0 ] || no "the canary was opened or read $opens times"
[ "$(cat "$canary" | wc -l)" -eq 2 ] || no "the canary changed"
echo "race: $race_sym rounds saw the symlink, $race_bogus the file" >&2
echo "$rejected hostile inputs rejected with reasons, $rounds race rounds, canary opened $opens times, $bad failures"
[ "$bad" -eq 0 ]
