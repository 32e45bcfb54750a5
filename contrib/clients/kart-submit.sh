#!/bin/sh
# kart-submit.sh - submit a task to a Kartikeya spool the maildir way, in
# POSIX sh plus three GNU coreutils behaviours (coreutils >= 8.24):
# `mktemp` (O_EXCL), `sync FILE` (fsync of that file) and `mv -n`, which is
# renameat2(RENAME_NOREPLACE) in coreutils 9: a queued task of the same
# name is never replaced.
#
#   kart-submit.sh SPOOL [NAME] < task        prints the id
#
# 1. write the task into SPOOL/tmp/ under a fresh name, fsync it;
# 2. mv -n it into SPOOL/new/NAME (NAME.2, NAME.3... if taken);
# 3. fsync SPOOL/new/.
# On a shared spool (new/ not ours alone, drop/ present) steps 2 and 3 use
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

# Where to publish: new/, or our own drop directory.
into=$spool/new prefix=
me=$(id -u)
if [ -d "$spool/drop" ] && ! { [ "$(stat -c %u "$spool/new")" = "$me" ] &&
	[ "$(stat -c %A "$spool/new" | cut -c6,9)" = -- ]; }; then
	user=$(id -un 2>/dev/null) || user=$me
	into=$spool/drop/$user prefix=$user:
	n=0
	while :; do
		mkdir -m 0700 "$into" 2>/dev/null || true
		if [ -d "$into" ] && [ ! -L "$into" ] && [ "$(stat -c %u "$into")" = "$me" ]; then
			chmod 0700 "$into" # writable by us alone, or nothing in it runs
			break
		fi
		n=$((n + 1)) # a squat under our name: a worker moves it away
		[ $n -lt 50 ] || { echo "kart-submit.sh: $into is not ours (is a worker running?)" >&2; exit 1; }
		sleep 0.1
	done
fi

tmp=$(mktemp "$spool/tmp/sh.XXXXXXXXXX")
trap 'rm -f "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
chmod 0600 "$tmp"
cat >"$tmp"
sync "$tmp" # fsync: the task is on disk before it can be seen in new/

id=$name
n=1
while :; do
	# A worker runs this name, or done/ has it: its result would get
	# another id (kart submit skips these names too).
	running=
	for w in "$spool"/cur/*/; do
		if [ -e "$w$prefix$id" ]; then running=y; fi
	done
	if [ -n "$prefix" ] && { [ -e "$into/$id" ] || [ -e "$spool/new/$prefix$id" ]; }; then
		running=y
	fi
	if [ -z "$running" ] && [ ! -e "$spool/done/$prefix$id.json" ] && [ ! -e "$spool/done/$prefix$id.task" ]; then
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
