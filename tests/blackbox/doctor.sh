# kart doctor probes the host for real and fails when the policy's needs
# cannot be met.
. "$(dirname "$0")/../lib.sh"

test_doctor_reports_this_host() {
	local s j; s=$(mkspool)
	j=$("$KART" -s "$s" doctor --json) || fail "doctor exited $? on a host that has everything"
	assert_eq true "$(jq -r .bwrap.works <<<"$j")" "bwrap runs a trivial sandbox"
	# The user-namespace probe from the same kart run natively under make
	# check-valgrind (KART_NATIVE): under valgrind 3.19 the probe's
	# unshare(CLONE_NEWUSER) fails whatever the host allows.
	local ju=$j
	[ -n "${KART_VALGRIND:-}" ] && ju=$("$KART_NATIVE" -s "$s" doctor --json)
	assert_eq true "$(jq -r .user_namespaces.unprivileged <<<"$ju")" "unprivileged user namespaces (probed as nobody)"
	assert_eq null "$(jq -r .user_namespaces.fix <<<"$ju")" "no fix needed"
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
	assert_eq "0x$(stat -f -c %t "$s")" "$(jq -r .spool.fs_magic <<<"$j")" "the spool's filesystem type"
	assert_eq "null null" "$(jq -r '"\(.spool.error) \(.spool.warning)"' <<<"$j")" "no error, no warning about it"
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

# The host as doctor sees it, changed by a preloaded shim: fstatfs(2)
# reports another type (DOCTOR_FS_MAGIC), renameat2(2) refuses
# RENAME_NOREPLACE (DOCTOR_NO_NOREPLACE) as a filesystem without it does,
# unshare(CLONE_NEWUSER) fails (DOCTOR_NO_USERNS), and the AppArmor
# sysctl of Ubuntu 23.10+ reads from the file DOCTOR_AA_RESTRICT.
fs_shim() {
	[ -e "$T_ROOT/fsshim.so" ] && return
	command -v cc >/dev/null || { skip "no C compiler for the filesystem shim"; return 1; }
	cat >"$T_ROOT/fsshim.c" <<'EOT'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <string.h>
#include <sys/vfs.h>
int openat(int dfd, const char *path, int flags, ...)
{
	int (*real)(int, const char *, int, ...) = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
	int mode = 0;
	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = va_arg(ap, int);
		va_end(ap);
	}
	const char *aa = getenv("DOCTOR_AA_RESTRICT");
	if (aa && strcmp(path, "/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 0)
		path = aa;
	return real(dfd, path, flags, mode);
}
int unshare(int f)
{
	int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "unshare");
	if ((f & CLONE_NEWUSER) && getenv("DOCTOR_NO_USERNS")) {
		errno = EPERM;
		return -1;
	}
	return real(f);
}
int fstatfs(int fd, struct statfs *b)
{
	int (*real)(int, struct statfs *) = (int (*)(int, struct statfs *))dlsym(RTLD_NEXT, "fstatfs");
	int r = real(fd, b);
	const char *m = getenv("DOCTOR_FS_MAGIC");
	if (r == 0 && m)
		b->f_type = (__fsword_t)strtoul(m, NULL, 0);
	return r;
}
int renameat2(int a, const char *b, int c, const char *d, unsigned f)
{
	int (*real)(int, const char *, int, const char *, unsigned) =
		(int (*)(int, const char *, int, const char *, unsigned))dlsym(RTLD_NEXT, "renameat2");
	if ((f & RENAME_NOREPLACE) && getenv("DOCTOR_NO_NOREPLACE")) {
		errno = EINVAL;
		return -1;
	}
	return real(a, b, c, d, f);
}
EOT
	cc -shared -fPIC -o "$T_ROOT/fsshim.so" "$T_ROOT/fsshim.c" -ldl ||
		{ fail "cannot build the filesystem shim"; return 1; }
}

test_doctor_refuses_a_network_spool() {
	fs_shim || return
	local s rc m; s=$(mkspool)
	for m in 0x6969:NFS 0xFE534D42:SMB 0xFF534D42:CIFS; do
		DOCTOR_FS_MAGIC=${m%%:*} LD_PRELOAD=$T_ROOT/fsshim.so KART_BACKEND=none \
			"$KART" -s "$s" doctor --json >"$T_ROOT/d.json" 2>"$T_ROOT/d.err"; rc=$?
		assert_eq 1 "$rc" "${m#*:}: doctor's exit status"
		assert_eq false "$(jq -r .ok "$T_ROOT/d.json")" "${m#*:}: .ok"
		assert_match "on ${m#*:}, a network filesystem: refused" "$(jq -r .spool.error "$T_ROOT/d.json")" "${m#*:}: .spool.error"
	done
	assert_eq nfs "$(DOCTOR_FS_MAGIC=0x6969 LD_PRELOAD=$T_ROOT/fsshim.so KART_BACKEND=none "$KART" -s "$s" doctor --json 2>/dev/null | jq -r .spool.fs)" ".spool.fs on NFS"
}

test_doctor_warns_without_rename_noreplace() {
	fs_shim || return
	local s rc; s=$(mkspool)
	DOCTOR_NO_NOREPLACE=1 LD_PRELOAD=$T_ROOT/fsshim.so KART_BACKEND=none \
		"$KART" -s "$s" doctor --json >"$T_ROOT/d.json" 2>"$T_ROOT/d.err"; rc=$?
	assert_eq 0 "$rc" "a warning, not a refusal: doctor's exit status"
	assert_eq true "$(jq -r .ok "$T_ROOT/d.json")" ".ok"
	assert_eq false "$(jq -r .spool.rename_noreplace "$T_ROOT/d.json")" ".spool.rename_noreplace"
	assert_match 'no RENAME_NOREPLACE' "$(jq -r .spool.warning "$T_ROOT/d.json")" ".spool.warning"
	assert_match '^kart doctor: warning: no RENAME_NOREPLACE' "$(cat "$T_ROOT/d.err")" "the warning on stderr"
	assert_eq 0 "$(find "$s/tmp" -name '.doctor.*' | wc -l)" "the probe's files are gone"
}

# Ubuntu 24.04: unprivileged user namespaces restricted by AppArmor.
# doctor names the restriction and its fix; with the sysctl at 0 the
# failure has another cause, and the fix says something else.
test_doctor_apparmor_userns_fix() {
	fs_shim || return
	local s j; s=$(mkspool)
	echo 1 >"$T_ROOT/aa1"; echo 0 >"$T_ROOT/aa0"
	j=$(DOCTOR_NO_USERNS=1 DOCTOR_AA_RESTRICT=$T_ROOT/aa1 LD_PRELOAD=$T_ROOT/fsshim.so \
		KART_BACKEND=none "$KART" -s "$s" doctor --json)
	assert_eq false "$(jq -r .user_namespaces.unprivileged <<<"$j")" "user namespaces (made to fail)"
	assert_eq true "$(jq -r .user_namespaces.apparmor_restrict <<<"$j")" ".apparmor_restrict"
	assert_match 'AppArmor restricts unprivileged user namespaces' "$(jq -r .user_namespaces.fix <<<"$j")" "the fix names AppArmor"
	assert_match 'apparmor_restrict_unprivileged_userns=0' "$(jq -r .user_namespaces.fix <<<"$j")" "and the sysctl"
	j=$(DOCTOR_NO_USERNS=1 DOCTOR_AA_RESTRICT=$T_ROOT/aa0 LD_PRELOAD=$T_ROOT/fsshim.so \
		KART_BACKEND=none "$KART" -s "$s" doctor --json)
	assert_eq false "$(jq -r .user_namespaces.apparmor_restrict <<<"$j")" ".apparmor_restrict at 0"
	local fix; fix=$(jq -r .user_namespaces.fix <<<"$j")
	[ "$fix" != null ] && ! [[ $fix =~ AppArmor ]] || fail "fix without the AppArmor restriction: '$fix'"
}

run_tests
