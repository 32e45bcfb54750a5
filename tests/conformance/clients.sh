# tests/conformance/clients.sh - one adapter per client kart ships, so that
# the scenarios (tests/blackbox/conformance.sh) are written once, in terms
# of what any client does, and run against every one of them:
#   c_submit CLIENT SPOOL NAME <BODY    submit BODY as NAME; prints the id
#   c_wait CLIENT SPOOL ID SECONDS       the result's JSON on stdout; exits
#                                        non-zero when none came in time
#   c_status CLIENT SPOOL ID             queued, running, a final status, or
#                                        unknown
# The sh client only submits: waiting and status are kart's for it (any
# reader of done/ will do). Sourced after tests/lib.sh.
CONF_PY=$ROOT/contrib/clients/kart_submit.py
CONF_SH=$ROOT/contrib/clients/kart-submit.sh
CONF_NODE=$ROOT/contrib/clients/kart_submit.mjs

# The clients to run; node only where there is one (install-deps has it).
conf_clients() {
	local c="kart python sh"
	command -v node >/dev/null && c="$c node"
	echo "$c"
}

c_submit() { # CLIENT SPOOL NAME
	case $1 in
	kart) "$KART" -s "$2" submit --name "$3" - ;;
	python) python3 "$CONF_PY" "$2" - "$3" ;;
	sh) sh "$CONF_SH" "$2" "$3" ;;
	node) node "$CONF_NODE" "$2" - "$3" ;;
	*) echo "unknown client $1" >&2; return 2 ;;
	esac
}

# kart wait exits with the task's own code: the result is the file.
_kart_wait() { # SPOOL ID SECONDS
	timeout "$3" "$KART" -s "$1" wait "$2" >/dev/null 2>&1
	[ -e "$1/done/$2.json" ] && cat "$1/done/$2.json"
}

c_wait() { # CLIENT SPOOL ID SECONDS
	case $1 in
	kart | sh) _kart_wait "$2" "$3" "$4" ;;
	python) python3 "$CONF_PY" wait "$2" "$3" "$4" 2>/dev/null ;;
	node) node "$CONF_NODE" wait "$2" "$3" "$4" 2>/dev/null ;;
	esac
}

c_status() { # CLIENT SPOOL ID
	local out
	case $1 in
	kart | sh)
		out=$("$KART" -s "$2" status "$3" 2>/dev/null) || { echo unknown; return; }
		cut -f2 <<<"$out" ;;
	python) python3 "$CONF_PY" status "$2" "$3" ;;
	node) node "$CONF_NODE" status "$2" "$3" ;;
	esac
}
