# pg_inbox: PGXS build of the extension, and the project's entry points.
#   make                 the extension, and the receiver when its build dependencies are
#                        present (otherwise it says which are missing and skips it)
#   make extension       the extension only (what PGXN-style installs need)
#   make install         install the extension into the server's directories
#   make installcheck    the pgTAP suite against an installed server (PGHOST, PGPORT, ...)
#   make receiver        build/inbox-receiver (CMake); fails loudly on any error
#   make install-receiver  cmake --install build --prefix $(PREFIX) (default /usr/local)
#   make run / stop      private cluster + extension + pg_cron + receiver (scripts/run.sh)
#   make test            every suite against a throwaway cluster (scripts/test.sh)
#   make bench           benchmarks (scripts/bench.sh)
#   make format          clang-format the C++ of the extension (format-check: only check)

EXTENSION = pg_inbox
EXTVERSION = 0.2.0

MODULE_big = pg_inbox
OBJS = $(patsubst %.cpp,%.o,$(sort $(wildcard extension/*.cpp)))

# The install script of the current version is assembled from sql/src/ in
# name order. Released versions are frozen files (sql/pg_inbox--0.1.0.sql),
# and every release ships one upgrade script from the one before it, so
# `ALTER EXTENSION pg_inbox UPDATE` walks any installed version forward.
DATA_built = sql/$(EXTENSION)--$(EXTVERSION).sql
DATA = $(filter-out $(DATA_built),$(wildcard sql/$(EXTENSION)--*.sql))
EXTRA_CLEAN = $(DATA_built)

PG_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-register -Wno-missing-field-initializers \
              -Wno-unused-parameter -fno-omit-frame-pointer
# libcrypto: the lease token's MD5 and the delivery log's SHA-256
# (extension/digests.hpp); libpq-dev, which postgresql-server-dev depends on,
# brings its headers.
SHLIB_LINK += -lstdc++ -lcrypto

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The LLVM bitcode (JIT inlining) build runs clang on C++ without our flags.
COMPILE.cxx.bc += $(PG_CXXFLAGS)

# `make extension`: PGXS's `all` without the receiver (see below).
.PHONY: extension
extension: all

# The receiver (CMake, into build/). It is not needed to install the
# extension, so `make install` and `make extension` never run CMake. Plain
# `make` builds it when CMake can configure it, and otherwise shows CMake's
# reason (a missing package, usually) and goes on without it; once
# configured, any build error fails `make`. `make receiver` always fails loudly.
# RECEIVER_TESTS=ON also builds its tests (make test does; make run does not).
RECEIVER_TESTS ?= OFF
PREFIX ?= /usr/local
CONFIGURE_RECEIVER = cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DINBOX_RECEIVER_TESTS=$(RECEIVER_TESTS)

# Only a plain `make` (or `make all`) brings the receiver along.
ifeq ($(filter-out all,$(MAKECMDGOALS)),)
all: receiver-if-present
endif
.PHONY: receiver receiver-if-present install-receiver
receiver-if-present:
	@if ! command -v cmake >/dev/null; then \
	  echo "make: skipping the receiver: cmake is not installed (Debian: scripts/deps.sh lists its packages)"; \
	elif ! out=$$($(CONFIGURE_RECEIVER) 2>&1); then \
	  echo "$$out"; \
	  echo "make: skipping the receiver: CMake cannot configure it (above). The extension is built;"; \
	  echo "  make receiver builds the receiver once its packages are installed (Debian: scripts/deps.sh lists them)."; \
	else $(MAKE) --no-print-directory receiver; fi
receiver:
	@echo "building the receiver into build/ (1-2 min when cold)"
	$(CONFIGURE_RECEIVER)
	cmake --build build -j2 -- --no-print-directory
install-receiver:
	@test -x build/inbox-receiver || { echo "make install-receiver: build/inbox-receiver is not built: make receiver first" >&2; exit 1; }
	DESTDIR=$(DESTDIR) cmake --install build --prefix $(PREFIX)
	@test -x "$(DESTDIR)$(PREFIX)/bin/inbox-receiver" || { echo "make install-receiver: cmake --install put no bin/inbox-receiver under $(DESTDIR)$(PREFIX)" >&2; exit 1; }

# Rebuilt whenever its parts change, including when one is removed (FORCE),
# but rewritten only when the result differs, so installs stay incremental.
$(DATA_built): $(sort $(wildcard sql/src/*.sql)) FORCE
	@cat $(filter-out FORCE,$^) > $@.tmp
	@cmp -s $@.tmp $@ && rm $@.tmp || mv $@.tmp $@
.PHONY: FORCE
FORCE:

extension/*.o: $(wildcard extension/*.hpp)

# PGXS defines installcheck (pg_regress when REGRESS is set); ours adds the
# pgTAP suite to it (scripts/installcheck.sh).
installcheck: installcheck-pgtap
.PHONY: installcheck-pgtap
installcheck-pgtap:
	bash scripts/installcheck.sh

.PHONY: run test bench fuzz
run:
	bash scripts/run.sh
test:
	bash scripts/test.sh
bench:
	bash scripts/bench.sh
fuzz:  # the receiver's parsers under libFuzzer, FUZZ_SECONDS in all (default 300)
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

# C++ style (.clang-format); `make test` runs format-check.
FORMAT_FILES = $(sort $(wildcard extension/*.cpp extension/*.hpp test/selftest/*.cpp))
.PHONY: format format-check
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

.PHONY: stop
stop:  # ends what `make run` started from this checkout (foreground or detached)
	@bash scripts/stop.sh
