# kart doctor probes the host for real and fails when the policy's needs
# cannot be met.
. "$(dirname "$0")/../lib.sh"

test_doctor_reports_this_host() {
	local s j; s=$(mkspool)
	j=$("$KART" -s "$s" doctor --json) || fail "doctor exited $? on a host that has everything"
	assert_eq true "$(jq -r .bwrap.works <<<"$j")" "bwrap runs a trivial sandbox"
	assert_eq true "$(jq -r .user_namespaces.unprivileged <<<"$j")" "unprivileged user namespaces (probed as nobody)"
	assert_eq null "$(jq -r .user_namespaces.fix <<<"$j")" "no fix needed"
	if [ -n "${KART_VALGRIND:-}" ]; then
		# valgrind 3.19 has no landlock_create_ruleset (ENOSYS, "unhandled
		# syscall 444"): under it the probe finds none.
		assert_eq unsupported "$(jq -r .landlock_abi <<<"$j")" "Landlock ABI under valgrind"
	else
		assert_match '^[0-9]+$' "$(jq -r .landlock_abi <<<"$j")" "Landlock ABI"
	fi
	assert_eq true "$(jq -r .seccomp <<<"$j")" seccomp
	assert_match '^[0-9]+$' "$(jq -r .inotify.max_queued_events <<<"$j")" "inotify limits"
	assert_eq true "$(jq -r .spool.rename_noreplace <<<"$j")" "RENAME_NOREPLACE on the spool's filesystem"
	assert_eq true "$(jq -r .spool.xattr <<<"$j")" "user xattrs on the spool's filesystem"
	assert_eq true "$(jq -r .ok <<<"$j")" ok
}

test_doctor_fails_when_bwrap_is_missing() {
	local s rc; s=$(mkspool)
	KART_BWRAP=/nonexistent/bwrap "$KART" -s "$s" doctor --json >"$T_ROOT/d.json"; rc=$?
	assert_eq 1 "$rc" "exit status without bwrap"
	assert_eq false "$(jq -r .bwrap.works "$T_ROOT/d.json")" "bwrap.works"
	KART_BACKEND=none KART_BWRAP=/nonexistent/bwrap "$KART" -s "$s" doctor >/dev/null; rc=$?
	assert_eq 0 "$rc" "backend none does not need bwrap"
}

run_tests
