# Kartikeya - one plain GNU Makefile.
#   make            build kart, kart-launch, kart-sync and kart-llm
#   make check      unit tests (cmocka) and black-box tests on real spools,
#                   then the v2 tier (make check-v2: the cgroup tests in QEMU)
#   make check-asan      the same tests on an ASan+UBSan build (build-asan/)
#   make check-valgrind  the same with every kart under valgrind (build-valgrind/)
#   make demo       a spool, a worker, a few tasks, their results
#   make install    PREFIX (/usr/local) and DESTDIR honoured
#   make deps       install the Debian packages that are missing (apt-get)
# Installing is asked for, never a side effect: make and make install only
# say what is missing and that `make deps` installs it. make check, demo,
# torture, fuzz, bench and check-valgrind install first (a fresh clone
# needs two commands), then build and run in a new make, which looks for
# the libraries only once they are there.

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBEXECDIR ?= $(PREFIX)/libexec/kart
MANDIR ?= $(PREFIX)/share/man
DOCDIR ?= $(PREFIX)/share/doc/kart
SYSTEMDSYSTEMUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSTEMDUSERUNITDIR ?= $(PREFIX)/lib/systemd/user
TMPFILESDIR ?= $(PREFIX)/lib/tmpfiles.d
SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR ?= $(PREFIX)/share/zsh/site-functions
DESTDIR ?=

CC ?= cc
# Optional: the sync verbs' databases, each built in when pkg-config finds
# it (override with HAVE_SQLITE= HAVE_PQ= for a core-only build); plain
# make says when one is missing (contrib/install-deps --check).
HAVE_SQLITE := $(shell pkg-config --exists sqlite3 2>/dev/null && echo 1)
HAVE_PQ := $(shell pkg-config --exists libpq 2>/dev/null && echo 1)
CORE_PKGS = jansson libseccomp libcap
PKGS = $(CORE_PKGS) $(if $(HAVE_SQLITE),sqlite3) $(if $(HAVE_PQ),libpq)
CFLAGS ?= -O2 -g
# The launcher runs inside the sandbox, under the task's rlimits: check-asan
# builds it without sanitizers.
LAUNCH_CFLAGS = $(CFLAGS)
WARN = -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-format-nonliteral \
       -Werror=implicit-function-declaration -Werror=vla -Werror=return-type \
       -Werror=incompatible-pointer-types -Wstrict-prototypes -Wmissing-prototypes \
       -Wno-missing-field-initializers
# Recursive: expanded in recipes.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS))
CORE_LIBS = $(shell pkg-config --libs $(CORE_PKGS))
ALL_CFLAGS = $(WARN) $(CFLAGS) -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
	     -I$(B) $(INC) $(PKG_CFLAGS) $(if $(HAVE_SQLITE),-DHAVE_SQLITE) $(if $(HAVE_PQ),-DHAVE_PQ)

B = build
# src/ by layer, as git keeps its verbs in builtin/: cmd/ (the verbs),
# worker/, backend/ (where a task runs: one interface, one file per
# backend), spool/ (the on-disk protocol), sandbox/, policy/, sync/ and
# lib/ (generic pieces). Objects go flat into $(B)/; every folder is on the
# include path, so a file names a header by its name alone.
SRC_DIRS = cmd worker backend sync spool sandbox policy lib
vpath %.c $(addprefix src/,$(SRC_DIRS))
INC = $(addprefix -iquote src/,$(SRC_DIRS))
# The sources are found, not listed: a new file in a folder is built
# without a Makefile edit (and branches adding files do not collide here).
# kart: every .c of the library folders and cmd/, but kart-launch's own
# main (it is a program of its own, below), the sync verbs and kart top.
LIB_DIRS = worker backend spool sandbox policy lib
LIB_SRC = $(filter-out launch.c launch_job.c,$(notdir $(wildcard $(LIB_DIRS:%=src/%/*.c))))
# kart-sync: the same program with the sync verbs, which link libsqlite3
# and libpq; kart runs it for them (24 fewer libraries to load per kart).
SYNC_CMD = cmd_sync.c cmd_feed.c
SYNC_SRC = $(notdir $(wildcard src/sync/*.c)) $(SYNC_CMD)
CMD_SRC = $(filter-out main.c $(SYNC_CMD) $(TOP_SRC),$(notdir $(wildcard src/cmd/*.c)))
# kart-top: the same program with kart top, which links ncurses.
TOP_SRC = cmd_top.c
TOP_LIBS = $(shell pkg-config --libs ncursesw)
LIB_OBJ = $(LIB_SRC:%.c=$(B)/%.o)
CMD_OBJ = $(CMD_SRC:%.c=$(B)/%.o)
SYNC_OBJ = $(SYNC_SRC:%.c=$(B)/%.o)
UNIT_SRC = $(wildcard tests/unit/test_*.c)
UNIT_BIN = $(UNIT_SRC:tests/unit/%.c=$(B)/%)

all: $(B)/kart $(B)/kart-launch $(B)/kart-sync $(B)/kart-top $(B)/kart-llm $(B)/kart-credfwd

# Installs what is missing, with apt-get: only when asked (make deps), or
# by the targets below that need it to run at all.
deps:
	@./contrib/install-deps

# Says what is missing and how to get it; fails only when the build itself
# cannot be done (a library kart links). Before anything is compiled.
depcheck:
	@./contrib/install-deps --check

# check, demo, torture, fuzz, bench and check-valgrind: install first,
# then build and run in a new make (run-TARGET below), whose pkg-config
# calls are made when it reads this file, after the install: a fresh
# machine's first make check builds with what it has just installed.
INSTALLING = check check-v2 demo torture fuzz bench bench-container bench-slurm check-valgrind
$(INSTALLING): deps
	@$(MAKE) --no-print-directory run-$@

$(B):
	@mkdir -p $(B)

# -MMD -MP: each object depends on the headers it includes, and no more
# (the .d files beside the objects); a header change rebuilds its users.
DEPFLAGS = -MMD -MP
$(B)/%.o: %.c $(B)/features.stamp | $(B)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -c -o $@ $<
-include $(wildcard $(B)/*.d)

# The optional parts built in, rewritten only when they change: every
# object is rebuilt then, or a build would keep objects made without them.
$(B)/features.stamp: FORCE depcheck | $(B)
	@printf '/* built with:%s%s */\n' '$(if $(HAVE_SQLITE), sqlite3)' '$(if $(HAVE_PQ), libpq)' >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

# Where the installed kart finds its launcher; rewritten only when it
# changes, so `make install PREFIX=...` rebuilds what depends on it.
$(B)/config.h: FORCE | $(B)
	@printf '#define LIBEXECDIR "%s"\n' '$(LIBEXECDIR)' >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(B)/policy.o: $(B)/config.h

# kart is exec'd once for every `kart submit` (and every other verb):
# jansson, libseccomp and libcap are linked in from their archives (which
# their -dev packages ship), which spares each run the dynamic loader's
# open, mappings and relocations of three libraries (docs/PERFORMANCE.md).
# KART_LIBS_SHARED=1 links them as shared libraries instead, as does a
# system without the three archives.
KART_ARCHIVES := $(foreach l,jansson seccomp cap,$(filter /%,$(shell $(CC) -print-file-name=lib$(l).a)))
KART_LIBS = $(if $(or $(KART_LIBS_SHARED),$(filter-out 3,$(words $(KART_ARCHIVES)))),$(CORE_LIBS),-Wl,-Bstatic $(CORE_LIBS) -Wl,-Bdynamic)
$(B)/kart: $(LIB_OBJ) $(CMD_OBJ) $(B)/main.o
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(KART_LIBS)

$(B)/main-sync.o: main.c $(B)/features.stamp | $(B)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -DKART_SYNC_BIN -c -o $@ $<

$(B)/kart-sync: $(LIB_OBJ) $(CMD_OBJ) $(SYNC_OBJ) $(B)/main-sync.o
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(PKG_LIBS)

$(B)/main-top.o: main.c $(B)/features.stamp | $(B)
	$(CC) $(ALL_CFLAGS) $(DEPFLAGS) -DKART_TOP_BIN -c -o $@ $<

$(B)/cmd_top.o: cmd_top.c $(B)/features.stamp | $(B)
	$(CC) $(ALL_CFLAGS) $(shell pkg-config --cflags ncursesw) $(DEPFLAGS) -c -o $@ $<

$(B)/kart-top: $(LIB_OBJ) $(CMD_OBJ) $(B)/cmd_top.o $(B)/main-top.o
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(CORE_LIBS) $(TOP_LIBS)

# The launcher runs inside every sandbox, once per task: libc only, and
# linked statically, which saves the dynamic loader's work on every run
# (0.46 -> 0.30 ms of CPU per exec here; docs/PERFORMANCE.md, "A static
# launcher") and needs
# nothing of the sandbox's /usr.
LAUNCH_LDFLAGS = -static
LAUNCH_SRC = src/sandbox/launch.c src/sandbox/launch_job.c src/sandbox/confine.c \
	src/sandbox/landlock.c src/sandbox/proctree.c
$(B)/kart-launch: $(LAUNCH_SRC) src/sandbox/confine.h src/sandbox/landlock.h src/sandbox/launch_job.h \
		src/sandbox/proctree.h src/sandbox/sandbox.h src/lib/util.h | $(B) depcheck
	$(CC) $(WARN) $(INC) $(LAUNCH_CFLAGS) $(LAUNCH_LDFLAGS) -o $@ $(LAUNCH_SRC)

# The runner of the llm task kind: Python 3, standard library only (see
# docs/SECURITY.md, "kart-llm: Python, not C"). Beside kart, where find_libexec finds it.
$(B)/kart-llm: src/sandbox/kart-llm.py | $(B)
	install -m 0755 $< $@

# The worker's credential forwarder (credfwd.h), beside kart like kart-llm.
$(B)/kart-credfwd: src/sandbox/kart-credfwd.py | $(B)
	install -m 0755 $< $@

$(B)/test_%: tests/unit/test_%.c tests/unit/unit.h $(LIB_OBJ) | $(B)
	$(CC) $(ALL_CFLAGS) $(shell pkg-config --cflags cmocka) -o $@ $< $(LIB_OBJ) \
		$(PKG_LIBS) $(shell pkg-config --libs cmocka)

# Two black-box scripts at a time (tests/run, KART_TEST_JOBS): most of a
# script's time is waiting; KART_TEST_JOBS=1 runs them one by one.
run-check: all $(UNIT_BIN)
	@KART_B=$(B) KART_TEST_JOBS=$${KART_TEST_JOBS:-2} ./tests/run $(UNIT_BIN)

# The v2 tier alone (make check runs it after the black-box scripts): the
# cgroup cases in a QEMU guest that is a pure cgroup v2 host, tests/vm/.
run-check-v2: all
	@KART_B=$(B) KART_TEST_ONLY=v2 ./tests/run

run-demo: all
	@./tests/demo

# The long reliability runs (make check runs short ones): crash-point
# sweep, chaos, faults, hostile input, same-name ids. Figures: docs/RELIABILITY.md.
run-torture: all
	@KART=$(abspath $(B))/kart SWEEP_MAX=$${SWEEP_MAX:-80} ./tests/torture/crash-sweep.sh
	@KART=$(abspath $(B))/kart CHAOS_N=$${CHAOS_N:-2000} ./tests/torture/chaos.sh
	@KART_B=$(abspath $(B)) ./tests/torture/faults.sh
	@KART=$(abspath $(B))/kart HOSTILE_RACE=$${HOSTILE_RACE:-5000} ./tests/torture/hostile.sh
	@KART_B=$(abspath $(B)) ./tests/torture/outdir.sh
	@KART_B=$(abspath $(B)) ./tests/torture/ids.sh
	@# a hostile member writing everything she can, at length (make check: 25 s, a chain of 300)
	@r=$$(mktemp) && KART_TEST_RESULTS=$$r KART_B=$(B) MEMBERS_ROUNDS=$${MEMBERS_ROUNDS:-30} \
		MEMBERS_SECONDS=$${MEMBERS_SECONDS:-300} MEMBERS_CHAIN=$${MEMBERS_CHAIN:-20000} \
		KART_TEST_CASE=member_writes_everything bash tests/blackbox/hostile.sh && \
		! grep -q '^FAIL' $$r; s=$$?; rm -f $$r; exit $$s
	@KART_B=$(abspath $(B)) ./tests/torture/deps.sh
	@# the worker killed at each call of its Slurm thread around sbatch;
	@# Slurm's own time limit (a minute at least); a second node in the
	@# QEMU guest of tests/vm, kart's tasks on both and one stopped mid-run
	@# (software emulation: minutes, and at make check's load the guest's
	@# node once took no task in 300 s, hence here)
	@r=$$(mktemp) && KART_TEST_RESULTS=$$r KART_B=$(B) S_SWEEP=1 S_LONG=1 KART_TEST_SLURM_VM=1 \
		KART_TEST_CASE="slurm_backend_sweep slurm_harness slurm_second_node slurm_second_node_kart" bash tests/blackbox/slurm.sh && \
		! grep -q '^FAIL' $$r; s=$$?; rm -f $$r; exit $$s
	@# kart hold racing three workers at the issue's size (make check: 30 tasks)
	@r=$$(mktemp) && KART_TEST_RESULTS=$$r KART_B=$(B) HOLD_RACE_N=$${HOLD_RACE_N:-200} \
		KART_TEST_CASE=hold_races_workers bash tests/blackbox/control.sh && \
		! grep -q '^FAIL' $$r; s=$$?; rm -f $$r; exit $$s

# libFuzzer targets (clang) on the checked-in seed corpus, long run.
run-fuzz:
	@FUZZ_B=$(abspath $(B))/fuzz FUZZ_SECONDS=$${FUZZ_SECONDS:-300} ./tests/fuzz/run.sh

# The whole suite (unit and black-box) on an ASan+UBSan build in build-asan/.
# Leak checking is off: the worker and the commands keep their state until
# exit on purpose (check-valgrind counts definite leaks); an allocation too
# big returns NULL, as malloc does, so that the allocators' out-of-memory
# path is what is tested; every other ASan or UBSan report fails the run. Each sanitized process halts on its first
# report and writes it to build-asan/sanitizer-logs/, scanned at the end
# (tests/asan/scan): a test that swallows stderr cannot hide one. The
# runtimes are linked statically: with GCC's shared libubsan next to
# libasan, UBSan ignores log_path and reports only on stderr.
ASAN_B = build-asan
ASAN_LOGS = $(abspath $(ASAN_B))/sanitizer-logs
ASAN_CFLAGS = -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=undefined -static-libasan -static-libubsan
check-asan:
	@rm -rf $(ASAN_LOGS) && mkdir -p $(ASAN_LOGS) && chmod 1777 $(ASAN_LOGS)
	@ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:abort_on_error=0:halt_on_error=1:log_path=$(ASAN_LOGS)/asan \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(ASAN_LOGS)/ubsan \
	KART_TEST_EXCLUDE="$${KART_TEST_EXCLUDE:-} v2" \
	$(MAKE) --no-print-directory B=$(ASAN_B) LAUNCH_CFLAGS="-O2 -g" CFLAGS="$(ASAN_CFLAGS)" check; \
	rc=$$?; ./tests/asan/scan $(ASAN_LOGS) && exit $$rc

# The unit and black-box tests with every kart process (the commands and the
# worker, not what they exec: bwrap, kart-launch, tasks) under valgrind
# memcheck, from a -O1 -g build in build-valgrind/. Fails on any valgrind
# error (definite leaks included) and on any failed test; the time bounds of
# the tests are multiplied (KART_TEST_SLOW). See tests/valgrind/check.
# test_seccomp is left out: it loads the filter in a forked child, which
# under valgrind is still valgrind's own process (and valgrind 3.19 has no
# seccomp(2)); the worker builds the same filter under valgrind anyway.
VG_B = build-valgrind
VG_UNIT = $(filter-out $(VG_B)/test_seccomp,$(UNIT_SRC:tests/unit/%.c=$(VG_B)/%))
run-check-valgrind:
	@$(MAKE) --no-print-directory B=$(VG_B) CFLAGS="-O1 -g" all $(VG_UNIT)
	@./tests/valgrind/check $(VG_B) $(VG_UNIT)

# Kartikeya against nq, task-spooler, GNU parallel and the bare bwrap
# floor, in one run: bench/out/results.md and throughput.png; then the
# container backend (container.md), dependencies (deps.md) and backend
# slurm against Slurm alone (slurm.md).
run-bench: all
	@./bench/install-peers
	@KART=$(abspath $(B))/kart ./bench/run
	@KART=$(abspath $(B))/kart ./bench/container
	@KART=$(abspath $(B))/kart ./bench/deps
	@KART=$(abspath $(B))/kart ./bench/slurm

# Backend container against bwrap, in one run (a dockerd of its own):
# bench/out/container.md.
run-bench-container: all
	@KART=$(abspath $(B))/kart ./bench/container

# Backend slurm against sbatch and a job array, in turns, on a test
# cluster of its own (tests/slurm-lib.sh): bench/out/slurm.md.
run-bench-slurm: all
	@KART=$(abspath $(B))/kart ./bench/slurm

# What make install puts where, besides the two programs (see below).
MAN1 = docs/kart.1
MAN5 = docs/kart.conf.5 docs/kart-spool.5 docs/kart-task.5
MAN8 = docs/kart-worker.8
UNITS = kart-worker@.service kart-gc@.service kart-gc@.timer
USER_UNITS = kart-worker.service
DOCS = contrib/kart.conf.example
EXAMPLES = contrib/cron/kart-consume contrib/clients/kart_submit.py contrib/clients/kart-submit.sh \
	contrib/clients/kart_submit.mjs
# The systemd units name the installed kart: @BINDIR@ is replaced.

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(MANDIR)/man1 \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(DOCDIR) \
		$(DESTDIR)$(SYSTEMDSYSTEMUNITDIR) $(DESTDIR)$(SYSTEMDUSERUNITDIR) \
		$(DESTDIR)$(TMPFILESDIR) $(DESTDIR)$(SYSUSERSDIR) $(DESTDIR)$(BASHCOMPDIR) \
		$(DESTDIR)$(ZSHCOMPDIR)
	install -m 0755 $(B)/kart $(DESTDIR)$(BINDIR)/kart
	install -m 0755 $(B)/kart-launch $(DESTDIR)$(LIBEXECDIR)/kart-launch
	install -m 0755 $(B)/kart-sync $(DESTDIR)$(LIBEXECDIR)/kart-sync
	install -m 0755 $(B)/kart-top $(DESTDIR)$(LIBEXECDIR)/kart-top
	install -m 0755 $(B)/kart-llm $(DESTDIR)$(LIBEXECDIR)/kart-llm
	install -m 0755 $(B)/kart-credfwd $(DESTDIR)$(LIBEXECDIR)/kart-credfwd
	install -m 0644 $(MAN1) $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 $(MAN5) $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 $(MAN8) $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 $(DOCS) $(DESTDIR)$(DOCDIR)/
	install -m 0755 $(EXAMPLES) $(DESTDIR)$(DOCDIR)/
	for u in $(UNITS); do sed 's|@BINDIR@|$(BINDIR)|g' contrib/systemd/$$u \
		>$(DESTDIR)$(SYSTEMDSYSTEMUNITDIR)/$$u && chmod 0644 $(DESTDIR)$(SYSTEMDSYSTEMUNITDIR)/$$u || exit 1; done
	for u in $(USER_UNITS); do sed 's|@BINDIR@|$(BINDIR)|g' contrib/systemd/$$u \
		>$(DESTDIR)$(SYSTEMDUSERUNITDIR)/$$u && chmod 0644 $(DESTDIR)$(SYSTEMDUSERUNITDIR)/$$u || exit 1; done
	install -m 0644 contrib/systemd/kart.tmpfiles $(DESTDIR)$(TMPFILESDIR)/kart.conf
	install -m 0644 contrib/systemd/kart.sysusers $(DESTDIR)$(SYSUSERSDIR)/kart.conf
	install -m 0644 contrib/completions/kart.bash $(DESTDIR)$(BASHCOMPDIR)/kart
	install -m 0644 contrib/completions/_kart $(DESTDIR)$(ZSHCOMPDIR)/_kart

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/kart $(DESTDIR)$(LIBEXECDIR)/kart-launch \
	      $(DESTDIR)$(LIBEXECDIR)/kart-sync $(DESTDIR)$(LIBEXECDIR)/kart-top \
	      $(DESTDIR)$(LIBEXECDIR)/kart-llm \
	      $(DESTDIR)$(LIBEXECDIR)/kart-credfwd
	rm -f $(addprefix $(DESTDIR)$(MANDIR)/man1/,$(notdir $(MAN1))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man5/,$(notdir $(MAN5))) \
		$(addprefix $(DESTDIR)$(MANDIR)/man8/,$(notdir $(MAN8))) \
		$(addprefix $(DESTDIR)$(DOCDIR)/,$(notdir $(DOCS) $(EXAMPLES))) \
		$(addprefix $(DESTDIR)$(SYSTEMDSYSTEMUNITDIR)/,$(UNITS)) \
		$(addprefix $(DESTDIR)$(SYSTEMDUSERUNITDIR)/,$(USER_UNITS)) \
		$(DESTDIR)$(TMPFILESDIR)/kart.conf $(DESTDIR)$(SYSUSERSDIR)/kart.conf \
		$(DESTDIR)$(BASHCOMPDIR)/kart $(DESTDIR)$(ZSHCOMPDIR)/_kart
	-rmdir $(DESTDIR)$(LIBEXECDIR) $(DESTDIR)$(DOCDIR) 2>/dev/null

clean:
	rm -rf $(B)

# The library's sources, for scripts that build them otherwise (the fuzzers).
lib-sources:
	@echo $(LIB_SRC)

FORCE:
.PHONY: lib-sources all deps depcheck $(INSTALLING) $(INSTALLING:%=run-%) check-asan install uninstall clean FORCE
