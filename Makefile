# Kartikeya - one plain GNU Makefile.
#   make            build kart and kart-launch
#   make check      unit tests (cmocka) and black-box tests on real spools
#   make demo       a spool, a worker, a few tasks, their results
#   make install    PREFIX (/usr/local) and DESTDIR honoured
# Every target that needs libraries or tools first runs contrib/install-deps
# when something is missing.

PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
LIBEXECDIR ?= $(PREFIX)/libexec/kart
DESTDIR ?=

CC ?= cc
PKGS = jansson
CFLAGS ?= -O2 -g
WARN = -std=gnu11 -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-format-nonliteral \
       -Werror=implicit-function-declaration -Werror=vla -Werror=return-type \
       -Werror=incompatible-pointer-types -Wstrict-prototypes -Wmissing-prototypes \
       -Wno-missing-field-initializers
# Recursive: expanded in recipes, after `deps` has installed what was missing.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS))
PKG_LIBS = $(shell pkg-config --libs $(PKGS))
ALL_CFLAGS = $(WARN) $(CFLAGS) -D_FORTIFY_SOURCE=2 -fstack-protector-strong \
	     -I$(B) $(PKG_CFLAGS)

B = build
LIB_SRC = src/util.c src/task.c src/policy.c src/result.c src/spool.c src/sandbox.c \
	  src/run.c src/worker.c src/query.c src/cgroup.c
CMD_SRC = src/main.c src/cmd_init.c src/cmd_submit.c src/cmd_worker.c src/cmd_status.c \
	  src/cmd_wait.c src/cmd_cat.c src/cmd_cancel.c src/cmd_doctor.c
LIB_OBJ = $(LIB_SRC:src/%.c=$(B)/%.o)
CMD_OBJ = $(CMD_SRC:src/%.c=$(B)/%.o)
UNIT_SRC = $(wildcard tests/unit/test_*.c)
UNIT_BIN = $(UNIT_SRC:tests/unit/%.c=$(B)/%)

all: deps $(B)/kart $(B)/kart-launch

deps:
	@pkg-config --exists jansson libcap libseccomp cmocka 2>/dev/null && \
	 command -v bwrap >/dev/null && command -v jq >/dev/null && \
	 command -v strace >/dev/null || ./contrib/install-deps

$(B):
	@mkdir -p $(B)

$(B)/%.o: src/%.c src/*.h | $(B)
	$(CC) $(ALL_CFLAGS) -c -o $@ $<

# Where the installed kart finds its launcher; rewritten only when it
# changes, so `make install PREFIX=...` rebuilds what depends on it.
$(B)/config.h: FORCE | $(B)
	@printf '#define LIBEXECDIR "%s"\n' '$(LIBEXECDIR)' >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@
$(B)/policy.o: $(B)/config.h

$(B)/kart: $(LIB_OBJ) $(CMD_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(PKG_LIBS)

# The launcher runs inside every sandbox: libc only.
$(B)/kart-launch: src/launch.c | $(B)
	$(CC) $(WARN) $(CFLAGS) -o $@ $<

$(B)/test_%: tests/unit/test_%.c $(LIB_OBJ) | $(B)
	$(CC) $(ALL_CFLAGS) -Isrc $(shell pkg-config --cflags cmocka) -o $@ $< $(LIB_OBJ) \
		$(PKG_LIBS) $(shell pkg-config --libs cmocka)

check: all $(UNIT_BIN)
	@KART_B=$(B) ./tests/run $(UNIT_BIN)

demo: all
	@./tests/demo

install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBEXECDIR)
	install -m 0755 $(B)/kart $(DESTDIR)$(BINDIR)/kart
	install -m 0755 $(B)/kart-launch $(DESTDIR)$(LIBEXECDIR)/kart-launch

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/kart $(DESTDIR)$(LIBEXECDIR)/kart-launch
	-rmdir $(DESTDIR)$(LIBEXECDIR)

clean:
	rm -rf $(B)

FORCE:
.PHONY: all deps check demo install uninstall clean FORCE
