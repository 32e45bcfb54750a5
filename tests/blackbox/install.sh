# make install honours PREFIX and DESTDIR, and an installed kart finds its
# launcher in PREFIX/libexec/kart and runs a task with it.
. "$(dirname "$0")/../lib.sh"

test_install_prefix_and_destdir() {
	local b=$T_ROOT/build p=$T_ROOT/prefix d=$T_ROOT/dest
	make -s -C "$ROOT" B="$b" PREFIX="$p" install >/dev/null || { fail "make install"; return; }
	assert_file "$p/bin/kart"
	assert_file "$p/libexec/kart/kart-launch"
	make -s -C "$ROOT" B="$b" PREFIX=/usr DESTDIR="$d" install >/dev/null || fail "DESTDIR install"
	assert_file "$d/usr/bin/kart"
	assert_file "$d/usr/libexec/kart/kart-launch"
	local s; s=$(mkspool)
	printf '#!/bin/sh\necho installed\n' >"$s/new/t"
	timeout 60 "$p/bin/kart" -s "$s" worker --drain 2>/dev/null || fail "installed worker"
	assert_eq installed "$(cat "$s/done/t.stdout" 2>/dev/null)" "installed kart ran a task"
	make -s -C "$ROOT" B="$b" PREFIX=/usr DESTDIR="$d" uninstall >/dev/null || fail uninstall
	assert_no_file "$d/usr/bin/kart"
}

run_tests
