# pg_inbox: PGXS build of the extension, and the project's entry points.
#   make            build the extension (and the receiver, when present)
#   make install    install the extension into the server's directories
#   make run        private cluster + extension + pg_cron + receiver (scripts/run.sh)
#   make test       every suite against a throwaway cluster (scripts/test.sh)
#   make bench      benchmarks (scripts/bench.sh)
#   make format     clang-format the C++ of the extension (format-check: only check)

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
SHLIB_LINK += -lstdc++

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The LLVM bitcode (JIT inlining) build runs clang on C++ without our flags.
COMPILE.cxx.bc += $(PG_CXXFLAGS)

# `make` builds the receiver too (CMake, into build/).
all: receiver
.PHONY: receiver
receiver:
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build -j2 | grep -v "^\[" || true

# Rebuilt whenever its parts change, including when one is removed (FORCE),
# but rewritten only when the result differs, so installs stay incremental.
$(DATA_built): $(sort $(wildcard sql/src/*.sql)) FORCE
	@cat $(filter-out FORCE,$^) > $@.tmp
	@cmp -s $@.tmp $@ && rm $@.tmp || mv $@.tmp $@
.PHONY: FORCE
FORCE:

extension/*.o: $(wildcard extension/*.hpp)

.PHONY: run test bench
run:
	bash scripts/run.sh
test:
	bash scripts/test.sh
bench:
	bash scripts/bench.sh

# C++ style (.clang-format); `make test` runs format-check.
FORMAT_FILES = $(sort $(wildcard extension/*.cpp extension/*.hpp test/selftest/*.cpp))
.PHONY: format format-check
format:
	clang-format -i $(FORMAT_FILES)
format-check:
	clang-format --dry-run --Werror $(FORMAT_FILES)

.PHONY: stop
stop:  # ends what `INBOX_RUN_DETACH=1 make run` left running
	-@[ -f .local/receiver.pid ] && kill $$(cat .local/receiver.pid); rm -f .local/receiver.pid
	-@[ -f .local/cluster-dir ] && bash scripts/cluster.sh stop $$(cat .local/cluster-dir)
