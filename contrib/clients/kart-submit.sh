#!/bin/sh
# kart-submit.sh - submit a task to a Kartikeya spool the maildir way, in
# POSIX sh plus three GNU coreutils behaviours (coreutils >= 8.24):
# `mktemp` (O_EXCL), `sync FILE` (fsync of that file) and `mv -n`, which is
# renameat2(RENAME_NOREPLACE) in coreutils 9: a queued task of the same
# name is never replaced.
#
#   kart-submit.sh [-C DIR] [--bind PATH] [--ro PATH] [-e NAME[=VALUE]]
#                  SPOOL [NAME] < task        prints the id
#
# The task's files and environment as kart submit takes them (kart-task(5)
# cwd=, bind=, ro=, env=; each path made absolute and resolved here): -C
# DIR, --bind PATH, --ro PATH, -e NAME=VALUE (or -e NAME: the value from
# ours). Unlike kart submit, no cwd= unless asked: without one the task
# runs in a private /work, discarded at its end. The directives go after
# the file's own.
#
# 1. make the task's file in SPOOL/tmp/ under a fresh name (mktemp); its
#    inode number is INO;
# 2. for ID = NAME, NAME.2, ...: reserve ID with `ln -sT INO SPOOL/ids/ID`
#    (symlink(2): it fails when anyone holds ID); then if new/ (held
#    too), a worker's cur/ or done/ (.task, .json, .attempts) has ID,
#    remove the reservation and take the next ID (spool-layout README §5);
# 3. write the task into the file, with `#kart: name=NAME` after its #!
#    line (the value %XX-escaped, section 3) when ID is not NAME, so
#    that its result keeps NAME; fsync it, and fsync SPOOL/ids/;
# 4. mv -n it into SPOOL/new/ID; if a task copied in took that name
#    meanwhile, remove the reservation and go back to 2;
# 5. fsync SPOOL/new/. The id printed is the id of the result.
# On a shared spool (new/ not ours alone, drop/ present) steps 4 and 5 use
# our own drop directory SPOOL/drop/USER/ (0700), and the id is USER:NAME
# (spool-layout README §6).
# Without NAME a unique one is made: seconds.pid.random.host.
set -eu

usage() {
	echo "usage: kart-submit.sh [-C DIR] [--bind PATH] [--ro PATH] [-e NAME[=VALUE]] SPOOL [NAME] < task" >&2
	exit 2
}
# pct VALUE: a directive value, escaped (spool-layout section 3.1): %XX for
# '%', '#', space, the other bytes below 0x21, and 0x7f.
pct() {
	printf '%s' "$1" | od -An -v -tx1 | LC_ALL=C awk '
		BEGIN { for (i = 0; i < 256; i++) { h = sprintf("%02x", i); n[h] = i; c[h] = sprintf("%c", i) } }
		{ for (f = 1; f <= NF; f++) { v = n[$f]
			if (v <= 32 || v == 35 || v == 37 || v == 127) printf "%%%02X", v; else printf "%s", c[$f] } }'
}
# The directives of the options, one line each: added after the task's
# own (its leading comment block), as kart submit adds its options.
add=
path_line() { # KEY PATH
	real=$(realpath -e -- "$2") || { echo "kart-submit.sh: --$1 $2: no such file or directory" >&2; exit 1; }
	add="$add#kart: $1=$(pct "$real")
"
}
while [ $# -gt 0 ]; do
	case $1 in
	--) shift; break ;;
	-C | --cwd | --bind | --ro | -e | --env)
		[ $# -ge 2 ] || usage
		case $1 in
		-C | --cwd) path_line cwd "$2" ;;
		--bind) path_line bind "$2" ;;
		--ro) path_line ro "$2" ;;
		*)
			k=${2%%=*}
			case $k in '' | [0-9]* | *[!A-Za-z0-9_]*) echo "kart-submit.sh: -e $k: not a variable name" >&2; exit 2 ;; esac
			if [ "$k" = "$2" ]; then
				eval "[ -n \"\${$k+x}\" ]" || { echo "kart-submit.sh: -e $k: give NAME=VALUE, or NAME of a variable that is set" >&2; exit 2; }
				eval "v=\$$k"
			else
				v=${2#*=}
			fi
			add="$add#kart: env=$k=$(pct "$v")
"
			;;
		esac
		shift 2 ;;
	-?*) echo "kart-submit.sh: unknown option $1" >&2; usage ;;
	*) break ;;
	esac
done
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	usage
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
# Control bytes are no part of a name (spool-layout README §2).
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

# taken ID: our drop directory (and a drop on its way into new/), new/
# (held too), a worker's cur/, or done/ has it (kart submit's check, in
# the order tasks move: spool-layout README sections 5 and 6), under our
# prefix.
taken() {
	[ -n "$prefix" ] && { [ -e "$into/$1" ] || [ -L "$into/$1" ] ||
		[ -e "$spool/new/.hoist.$(id -u).$prefix$1" ]; } && return 0
	for t_name in "$prefix$1" ".held.$prefix$1"; do
		[ -e "$spool/new/$t_name" ] || [ -L "$spool/new/$t_name" ] && return 0
	done
	for w in "$spool"/cur/*/; do
		if [ -e "$w$prefix$1" ] || [ -L "$w$prefix$1" ]; then return 0; fi
	done
	[ -e "$spool/done/$prefix$1.json" ] || [ -e "$spool/done/$prefix$1.task" ] ||
		[ -e "$spool/done/$prefix$1.attempts" ]
}
# The task as read, kept aside: the file published is written from it
# once its id is known.
src=$(mktemp "$spool/tmp/sh.XXXXXXXXXX")
tmp=
rid=
trap 'rm -f "$src" ${tmp:+"$tmp"} ${rid:+"$spool/ids/$rid"}' EXIT
trap 'exit 1' INT TERM HUP
chmod 0600 "$src"
if [ -n "$add" ]; then
	# At the end of the leading comment block (lines of '#', none empty).
	KART_ADD=$add awk 'BEGIN { h = 1 }
		h && ($0 == "" || substr($0, 1, 1) != "#") { printf "%s", ENVIRON["KART_ADD"]; h = 0 }
		{ print }
		END { if (h) printf "%s", ENVIRON["KART_ADD"] }' >"$src"
else
	cat >"$src"
fi
tmp=$(mktemp "$spool/tmp/sh.XXXXXXXXXX")
chmod 0600 "$tmp"
ino=$(stat -c %i "$tmp")

# ids/: the reservations. A spool made before it has none: made where we
# may; where we may not write it, no reservation (and no final id).
[ -d "$spool/ids" ] || mkdir -m 0755 "$spool/ids" 2>/dev/null || true
reserve=
[ -d "$spool/ids" ] && [ -w "$spool/ids" ] && reserve=1

# write: the file, from the task kept aside, with name= when the id is
# not the name; `>` keeps the file (the inode the reservation names).
written=
write() {
	want=plain
	[ "$prefix$id" != "$name" ] && want=named
	[ "$written" = "$want" ] && return 0
	if [ $want = plain ]; then
		cat "$src" >"$tmp"
	else
		# %XX for '%', space, '#' (a name holds no other byte to escape).
		enc=$(printf '%s' "$name" | sed 's/%/%25/g; s/ /%20/g; s/#/%23/g')
		if [ "$(head -c 2 "$src")" = '#!' ]; then
			first=$(head -n 1 "$src"; echo x)
			first=${first%x}
			{
				case $first in *'
') printf '%s' "$first" ;; *) printf '%s\n' "$first" ;; esac
				printf '#kart: name=%s\n' "$enc"
				tail -n +2 "$src"
			} >"$tmp"
		else
			{ printf '#kart: name=%s\n' "$enc"; cat "$src"; } >"$tmp"
		fi
	fi
	sync "$tmp" # fsync: the task is on disk before it can be seen in new/
	written=$want
}

id=$name
n=1
while :; do
	if [ $n -gt 1 ]; then id=$name.$n; fi
	n=$((n + 1))
	[ $n -lt 1000 ] || { echo "kart-submit.sh: no free name for $name" >&2; exit 1; }
	rid=
	if [ -n "$reserve" ]; then
		# An id seen taken needs no reservation (a name reused many
		# times would cost two commands an id); the look after it counts.
		if taken "$id"; then continue; fi
		if ! err=$(LC_ALL=C ln -sT "$ino" "$spool/ids/$prefix$id" 2>&1); then
			# Held (it may be gone by now: the next id is as good).
			case $err in *'File exists'*) continue ;; esac
			echo "kart-submit.sh: cannot reserve $spool/ids/$prefix$id: $err" >&2
			exit 1
		fi
		rid=$prefix$id
	fi
	# After the reservation: a finisher links done/ID.task, then looks
	# at ids/, so one of the two sees the other.
	if taken "$id"; then
		[ -n "$rid" ] && rm -f "$spool/ids/$rid"
		rid=
		continue
	fi
	write
	[ -n "$rid" ] && sync "$spool/ids"
	mv -n "$tmp" "$into/$id" 2>/dev/null || true
	[ -e "$tmp" ] || break # moved: queued
	# A task copied in under that name meanwhile keeps it.
	[ -n "$rid" ] && rm -f "$spool/ids/$rid"
	rid=
done
rid= # queued: the worker removes the reservation with the result
tmp=
sync "$into"
printf '%s%s\n' "$prefix" "$id"
