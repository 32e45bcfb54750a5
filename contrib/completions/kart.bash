# bash completion for kart(1). Installed as
# $(PREFIX)/share/bash-completion/completions/kart.

# Ids in the spool: queued, running, finished (done/*.json).
_kart_ids()
{
	local spool=$1 what=$2 f
	[ -n "$spool" ] && [ -d "$spool" ] || return 0
	if [ "$what" != done ]; then
		for f in "$spool"/new/* "$spool"/cur/*/*; do
			[ -e "$f" ] && printf '%s\n' "${f##*/}"
		done
		for f in "$spool"/new/.held.*; do
			[ -e "$f" ] && printf '%s\n' "${f##*/.held.}"
		done
	fi
	for f in "$spool"/done/*.json; do
		[ -e "$f" ] || continue
		f=${f##*/}
		printf '%s\n' "${f%.json}"
	done
}

_kart()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local verbs="init submit worker status wait cat cancel hold release edit pause resume doctor setup-cgroup retry watch gc metrics top eff report sync feed"
	local spool=${KART_SPOOL:-} verb="" i
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		-s | --spool) spool=${COMP_WORDS[i + 1]}; ((i++)) ;;
		--spool=*) spool=${COMP_WORDS[i]#--spool=} ;;
		-*) ;;
		*) verb=${COMP_WORDS[i]}; break ;;
		esac
	done
	spool=${spool/#\~/$HOME}
	local IFS=$'\n'

	case $prev in
	-s | --spool)
		COMPREPLY=($(compgen -d -- "$cur")); return ;;
	--lane)
		COMPREPLY=($(compgen -W $'fast\nbatch' -- "$cur")); return ;;
	--log-format)
		COMPREPLY=($(compgen -W $'logfmt\njson\ntext' -- "$cur")); return ;;
	--sort)
		COMPREPLY=($(compgen -W $'time\nid' -- "$cur")); return ;;
	--log | --html)
		COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--textfile)
		COMPREPLY=($(compgen -d -- "$cur")); return ;;
	--state)
		COMPREPLY=($(compgen -W $'queued\nscheduled\nwaiting\nheld\nrunning\npaused\ndone\nok\nfailed\ntimeout\noom\nkilled\nrejected\nrefused\ncancelled\nlost\nskipped' -- "$cur"))
		return ;;
	--timeout | --older-than | --newer-than | --tmp-age | --memory | --pids | --cpu | \
	--priority | --name | --id | --slots | --batch-slots | --kind | -e | --env | --kill-grace | --label | --last | --set | \
	--at | --in | --retry-on | --retries | --retry-delay | --after | --after-any | --after-fail | \
	--shared | --hours | --lease)
		return ;;
	-C | --cwd)
		COMPREPLY=($(compgen -d -- "$cur")); return ;;
	--bind | --ro)
		COMPREPLY=($(compgen -f -- "$cur")); return ;;
	esac

	if [ -z "$verb" ]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W $'-s\n--spool\n--help\n--version' -- "$cur"))
		else
			COMPREPLY=($(compgen -W "${verbs// /$'\n'}" -- "$cur"))
		fi
		return
	fi

	# A verb's options, from its own --help (the table it parses them
	# with): never out of step with the kart on the PATH.
	local opts
	opts=$(kart "$verb" --help 2>/dev/null | sed -n 's/^  \(-[a-zA-Z], \)\{0,1\}\(--[a-z][a-z-]*\).*/\2/p')
	opts="$opts"$'\n--help'
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi
	case $verb in
	status | wait | cat | cancel | hold | release | edit | pause | resume | eff)
		COMPREPLY=($(compgen -W "$(_kart_ids "$spool" all)" -- "$cur")) ;;
	retry)
		COMPREPLY=($(compgen -W "$(_kart_ids "$spool" done)" -- "$cur")) ;;
	submit)
		COMPREPLY=($(compgen -f -- "$cur")) ;;
	sync | feed)
		[ "$prev" = "$verb" ] && COMPREPLY=($(compgen -W $'sqlite\npostgres' -- "$cur")) ;;
	esac
}
complete -F _kart kart
