#!/bin/sh
# kart-submit.sh - submit a task to a Kartikeya spool the maildir way, in
# POSIX sh plus three GNU coreutils behaviours (coreutils >= 8.24):
# `mktemp` (O_EXCL), `sync FILE` (fsync of that file) and `mv -n`, which is
# renameat2(RENAME_NOREPLACE) in coreutils 9: a queued task of the same
# name is never replaced.
#
#   kart-submit.sh SPOOL [NAME] < task        prints the id
#
# 1. pick the id as kart submit does: the first of NAME, NAME.2, ...
#    absent from new/, every cur/*/ and done/; if it is not NAME, the task
#    gets `#kart: name=NAME` after its #! line (the value %XX-escaped,
#    spool-layout/README.md section 3.1), so its result keeps NAME;
# 2. write the task into SPOOL/tmp/ under a fresh name, fsync it;
# 3. mv -n it into SPOOL/new/ID (the next id if one is taken meanwhile);
# 4. fsync SPOOL/new/.
# On a shared spool (new/ not ours alone, drop/ present) steps 3 and 4 use
# our own drop directory SPOOL/drop/USER/ (0700), and the id is USER:NAME
# (spool-layout/README.md, "Shared spools").
# Without NAME a unique one is made: seconds.pid.random.host.
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: kart-submit.sh SPOOL [NAME] < task" >&2
	exit 2
fi
spool=$1
name=${2:-}
if [ -z "$name" ]; then
	rnd=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
	name=$(date +%s).$$.$rnd.$(uname -n | tr '/:' '__')
fi
case $name in
.* | */* | '') echo "kart-submit.sh: not a task name: $name" >&2; exit 2 ;;
esac
# Control bytes are no part of a name (spool-layout section 2).
if [ -n "$(printf '%s' "$name" | tr -d '\040-\176\200-\377')" ]; then
	echo "kart-submit.sh: not a task name: a control character" >&2
	exit 2
fi

# Where to publish: new/, or our own drop directory.
into=$spool/new prefix=
me=$(id -u)
if [ -d "$spool/drop" ] && ! { [ "$(stat -c %u "$spool/new")" = "$me" ] &&
	[ "$(stat -c %A "$spool/new" | cut -c6,9)" = -- ]; }; then
	user=$(id -un 2>/dev/null) || user=$me
	into=$spool/drop/$user prefix=$user:
	tries=0
	while :; do
		mkdir -m 0700 "$into" 2>/dev/null || true
		if [ -d "$into" ] && [ ! -L "$into" ] && [ "$(stat -c %u "$into")" = "$me" ]; then
			chmod 0700 "$into" # writable by us alone, or nothing in it runs
			break
		fi
		tries=$((tries + 1)) # a squat under our name: a worker moves it away
		[ $tries -lt 50 ] || { echo "kart-submit.sh: $into is not ours (is a worker running?)" >&2; exit 1; }
		sleep 0.1
	done
fi

# taken ID: our drop directory, new/, a worker's cur/, or done/ has it
# (kart submit's check, in the order tasks move), under our prefix.
taken() {
	[ -n "$prefix" ] && { [ -e "$into/$1" ] || [ -L "$into/$1" ]; } && return 0
	[ -e "$spool/new/$prefix$1" ] || [ -L "$spool/new/$prefix$1" ] && return 0
	for w in "$spool"/cur/*/; do
		if [ -e "$w$prefix$1" ] || [ -L "$w$prefix$1" ]; then return 0; fi
	done
	[ -e "$spool/done/$prefix$1.json" ] || [ -e "$spool/done/$prefix$1.task" ]
}
id=$name
n=1
while taken "$id"; do
	n=$((n + 1))
	[ $n -lt 1000 ] || { echo "kart-submit.sh: no free name for $name" >&2; exit 1; }
	id=$name.$n
done

tmp=$(mktemp "$spool/tmp/sh.XXXXXXXXXX")
body=
trap 'rm -f "$tmp" ${body:+"$body"}' EXIT
trap 'exit 1' INT TERM HUP
chmod 0600 "$tmp"
cat >"$tmp"
if [ "$prefix$id" != "$name" ]; then
	# %XX for '%', space, '#' (a name holds no other byte to escape).
	enc=$(printf '%s' "$name" | sed 's/%/%25/g; s/ /%20/g; s/#/%23/g')
	body=$(mktemp "$spool/tmp/sh.XXXXXXXXXX")
	if [ "$(head -c 2 "$tmp")" = '#!' ]; then
		first=$(head -n 1 "$tmp"; echo x)
		first=${first%x}
		case $first in *'
') printf '%s' "$first" ;; *) printf '%s\n' "$first" ;; esac >"$body"
		printf '#kart: name=%s\n' "$enc" >>"$body"
		tail -n +2 "$tmp" >>"$body"
	else
		printf '#kart: name=%s\n' "$enc" >"$body"
		cat "$tmp" >>"$body"
	fi
	chmod 0600 "$body"
	mv -f "$body" "$tmp"
fi
sync "$tmp" # fsync: the task is on disk before it can be seen in new/

while :; do
	if ! taken "$id"; then
		mv -n "$tmp" "$into/$id" 2>/dev/null || true
		[ -e "$tmp" ] || break # moved: queued
	fi
	n=$((n + 1))
	[ $n -lt 1000 ] || { echo "kart-submit.sh: no free name for $name" >&2; exit 1; }
	id=$name.$n
done
trap - EXIT
sync "$into"
printf '%s%s\n' "$prefix" "$id"
