# make install honours PREFIX and DESTDIR, and an installed kart finds its
# launcher in PREFIX/libexec/kart and runs a task with it.
. "$(dirname "$0")/../lib.sh"

test_install_prefix_and_destdir() {
	local b=$T_ROOT/build p=$T_ROOT/prefix d=$T_ROOT/dest
	make -s -j"$(nproc)" -C "$ROOT" B="$b" PREFIX="$p" install >/dev/null || { fail "make install"; return; }
	assert_file "$p/bin/kart"
	assert_file "$p/libexec/kart/kart-launch"
	assert_file "$p/libexec/kart/kart-sync"
	assert_file "$p/libexec/kart/kart-llm"
	[ -x "$p/libexec/kart/kart-llm" ] || fail "kart-llm is not executable"
	[ -x "$p/libexec/kart/kart-credfwd" ] || fail "kart-credfwd is missing or not executable"
	make -s -j"$(nproc)" -C "$ROOT" B="$b" PREFIX=/usr DESTDIR="$d" install >/dev/null || fail "DESTDIR install"
	assert_file "$d/usr/bin/kart"
	assert_file "$d/usr/libexec/kart/kart-launch"
	local s; s=$(mkspool)
	printf '#!/bin/sh\necho installed\n' >"$s/new/t"
	timeout 60 "$p/bin/kart" -s "$s" worker --drain 2>/dev/null || fail "installed worker"
	assert_eq installed "$(cat "$s/done/t.stdout" 2>/dev/null)" "installed kart ran a task"
	# The sync verbs run the installed kart-sync (kart itself does not
	# link libsqlite3 or libpq).
	if "$p/bin/kart" --version | grep -q sync-sqlite; then
		"$p/bin/kart" -s "$s" sync sqlite "$T_ROOT/inst.db" >/dev/null 2>&1 || fail "installed kart sync"
		assert_eq 1 "$(sqlite3 "$T_ROOT/inst.db" 'select count(*) from tasks' 2>&1)" "rows mirrored by the installed kart-sync"
	fi
	# The llm kind's default runner is the installed kart-llm.
	printf '[kind.llm]\nnet = yes\n' >"$s/kart.conf"
	assert_eq "$p/libexec/kart/kart-llm" "$("$p/bin/kart" -s "$s" doctor --json | jq -r .policy.kinds.llm.runner)" \
		"the installed kart finds the installed kart-llm"
	rm -f "$s/kart.conf"
	ldd "$p/bin/kart" | grep -E 'libpq|libsqlite3' && fail "kart links the sync libraries"
	make -s -j"$(nproc)" -C "$ROOT" B="$b" PREFIX=/usr DESTDIR="$d" uninstall >/dev/null || fail uninstall
	assert_no_file "$d/usr/bin/kart"
	assert_no_file "$d/usr/libexec/kart/kart-sync"
	assert_no_file "$d/usr/libexec/kart/kart-llm"
	assert_no_file "$d/usr/libexec/kart/kart-credfwd"
}

# Everything else make install puts in place, and make uninstall takes
# away: man pages, systemd units (naming the installed kart), tmpfiles.d
# and sysusers.d, completions, the example kart.conf, cron recipe, clients.
test_install_everything_and_uninstall() {
	local b=$T_ROOT/build d=$T_ROOT/dest2 f
	make -s -j"$(nproc)" -C "$ROOT" B="$b" PREFIX=/opt/kart DESTDIR="$d" install >/dev/null || { fail "make install"; return; }
	local p=$d/opt/kart
	for f in share/man/man1/kart.1 share/man/man8/kart-worker.8 share/man/man5/kart.conf.5 \
		share/man/man5/kart-spool.5 share/man/man5/kart-task.5 \
		lib/systemd/system/kart-worker@.service lib/systemd/system/kart-gc@.service \
		lib/systemd/system/kart-gc@.timer lib/systemd/user/kart-worker.service \
		lib/tmpfiles.d/kart.conf lib/sysusers.d/kart.conf \
		share/bash-completion/completions/kart share/zsh/site-functions/_kart \
		share/doc/kart/kart.conf.example share/doc/kart/kart-consume \
		share/doc/kart/kart_submit.py share/doc/kart/kart-submit.sh share/doc/kart/kart_submit.mjs; do
		assert_file "$p/$f"
	done
	grep -q '^ExecStart=/opt/kart/bin/kart -s %f worker$' "$p/lib/systemd/system/kart-worker@.service" ||
		fail "the system unit does not name the installed kart"
	grep -q '^ExecStart=/opt/kart/bin/kart worker$' "$p/lib/systemd/user/kart-worker.service" ||
		fail "the user unit does not name the installed kart"
	grep -rq '@BINDIR@' "$p/lib/systemd" && fail "an installed unit still says @BINDIR@"
	[ -x "$p/share/doc/kart/kart-consume" ] || fail "kart-consume is not executable"
	# An installed man page renders.
	MANWIDTH=80 man -l "$p/share/man/man5/kart.conf.5" 2>/dev/null | grep -q '^NAME' ||
		fail "installed kart.conf(5) does not render"
	make -s -j"$(nproc)" -C "$ROOT" B="$b" PREFIX=/opt/kart DESTDIR="$d" uninstall >/dev/null || fail uninstall
	assert_eq "" "$(find "$d" -type f -o -type l)" "files left after make uninstall"
}

# Installing is asked for, never a side effect: on this machine with two
# packages gone (a dpkg-query that hides attr and libsqlite3-dev), make
# install says what is missing and that `make deps` installs it, and runs
# no apt-get; make deps runs it for those two.
test_make_installs_nothing_unasked() {
	local b=$T_ROOT/build sh=$T_ROOT/shim out
	mkdir -p "$sh"
	cat >"$sh/dpkg-query" <<'EOF'
#!/bin/sh
/usr/bin/dpkg-query "$@" | sed -E 's/^(attr|libsqlite3-dev) install ok installed$/\1 deinstall ok config-files/'
EOF
	cat >"$sh/apt-get" <<EOF
#!/bin/sh
echo "apt-get \$*" >>"$T_ROOT/apt.log"
EOF
	chmod +x "$sh/dpkg-query" "$sh/apt-get"
	out=$(PATH=$sh:$PATH make -s -j"$(nproc)" -C "$ROOT" B="$b" PREFIX="$T_ROOT/p3" install 2>&1 >/dev/null) ||
		{ fail "make install: $out"; return; }
	assert_match 'building without the optional parts of: libsqlite3-dev' "$out" "make names the missing library"
	assert_match 'also missing: attr' "$out" "make names the missing test package"
	assert_match '`make deps` installs them' "$out" "make says how to get them"
	assert_no_file "$T_ROOT/apt.log"
	PATH=$sh:$PATH make -s -j"$(nproc)" -C "$ROOT" deps >/dev/null 2>&1 || fail "make deps"
	assert_eq "apt-get install -y -qq --no-install-recommends attr libsqlite3-dev" \
		"$(grep install "$T_ROOT/apt.log" 2>&1)" "make deps installs what is missing"
}

run_tests
