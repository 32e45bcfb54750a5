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

tmp=$(mktemp "$spool/tmp/sh.XXXXXXXXXX")
trap 'rm -f "$tmp"' EXIT
trap 'exit 1' INT TERM HUP
chmod 0640 "$tmp"
cat >"$tmp"
sync "$tmp" # fsync: the task is on disk before it can be seen in new/

id=$name
n=1
while :; do
	# A worker runs this name, or done/ has it: its result would get
	# another id (kart submit skips these names too).
	running=
	for w in "$spool"/cur/*/; do
		if [ -e "$w$id" ]; then running=y; fi
	done
	if [ -z "$running" ] && [ ! -e "$spool/done/$id.json" ] && [ ! -e "$spool/done/$id.task" ]; then
		mv -n "$tmp" "$spool/new/$id" 2>/dev/null || true
		[ -e "$tmp" ] || break # moved: queued
	fi
	n=$((n + 1))
	[ $n -lt 1000 ] || { echo "kart-submit.sh: no free name for $name" >&2; exit 1; }
	id=$name.$n
done
trap - EXIT
sync "$spool/new"
printf '%s\n' "$id"
