# genie: the C++/CUDA libraries are built by CMake into $(BUILD_DIR); the
# PostgreSQL module is built by PGXS from extension/'s sources (one folder
# per concern, see docs/LAYOUT.md) and links them.
#
# Targets: all (default), install, installcheck (the pgTAP suites against a
# running server: PGHOST, PGPORT, PGUSER, PGDATABASE as for psql), demo,
# test, deps (installs the build and test dependencies with apt), deb (the
# Debian package postgresql-15-genie, into dist/), clean.
# Only demo, test and deps install packages.

PG_CONFIG ?= $(firstword $(wildcard /usr/lib/postgresql/15/bin/pg_config) pg_config)
BUILD_DIR ?= build
GENIE_WITH_CUDA ?= AUTO
CMAKE_BUILD_TYPE ?= Release
JOBS ?= $(shell nproc 2>/dev/null || echo 2)

MODULE_big = genie
EXTENSION_DIRS = extension extension/profile extension/storage extension/service extension/types \
	extension/types/rows extension/types/documents extension/search extension/am extension/functions extension/worker
OBJS = $(patsubst %.c,%.o,$(foreach d,$(EXTENSION_DIRS),$(wildcard $(d)/*.c)))
MODULEDIR = extension
DATA = sql/genie.control $(wildcard sql/genie--*.sql)
PGFILEDESC = "genie - similarity search by match count on the GPU and CPU"
PG_CPPFLAGS = -I$(CURDIR)/capi/include -I$(CURDIR)/core/include -I$(CURDIR)/extension -Wextra -Wno-unused-parameter \
	-Wno-missing-field-initializers -Wno-sign-compare

# PGXS knows no header dependencies: every object depends on every header it
# may include, so a changed struct never leaves a stale object behind.
$(OBJS): $(foreach d,$(EXTENSION_DIRS),$(wildcard $(d)/*.h)) $(wildcard capi/include/genie/*.h) core/include/genie/types.h

.DEFAULT_GOAL := all
.PHONY: demo test genie-libs deps deb image

demo:
	scripts/demo

test:
	scripts/run-tests

deps:
	scripts/install-deps

# dpkg-buildpackage builds in this tree and starts with debian/rules clean,
# which runs make clean: the build directory goes.  The package files go to
# dist/ (dpkg-buildpackage writes them to the parent directory).
# The CPU-only container image genie-cpu (docker/Dockerfile with CUDA=0);
# scripts/test-image builds and tests it.
image:
	BUILD_ONLY=1 scripts/test-image

deb:
	dpkg-buildpackage -us -uc -b
	mkdir -p dist
	v=$$(dpkg-parsechangelog -S Version); \
	for f in ../postgresql-*-genie*_$${v}_*.deb ../genie_$${v}_*.buildinfo ../genie_$${v}_*.changes; do \
	  [ ! -e "$$f" ] || mv "$$f" dist/; done
	ls dist/

PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)

ifeq ($(wildcard $(PGXS)),)
# PostgreSQL 15's server development files are not installed: say how to
# get them rather than installing packages behind the caller's back.
all install installcheck:
	@echo "genie: PostgreSQL 15's server development files (pg_config --pgxs) were not found." >&2
	@echo "genie: run 'make deps' (apt-get install postgresql-server-dev-15 ...), or set PG_CONFIG." >&2
	@exit 1

clean:
	rm -rf $(BUILD_DIR) $(foreach d,$(EXTENSION_DIRS),$(d)/*.o $(d)/*.bc) genie.so
else

ifeq ($(filter clean demo test deps deb image,$(MAKECMDGOALS)),)
# Written by CMake: GENIE_LINK_LIBS (the static libraries, CUDA runtime
# included) and GENIE_WITH_CUDA.
-include $(BUILD_DIR)/genie-link.mk
$(BUILD_DIR)/genie-link.mk: CMakeLists.txt
	cmake -S $(CURDIR) -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(CMAKE_BUILD_TYPE) \
		-DGENIE_WITH_CUDA=$(GENIE_WITH_CUDA)
endif

SHLIB_LINK = $(GENIE_LINK_LIBS)
EXTRA_CLEAN = $(BUILD_DIR)
# genie's SQL suites are pgTAP, run by pg_prove: installcheck is ours
NO_INSTALLCHECK = 1

include $(PGXS)

# The pgTAP suites against the running server that PGHOST/PGPORT name, with
# genie installed there (make install).  They run in a database of their
# own, made afresh (as contrib's contrib_regression), so a database where
# genie is already created is left alone; each suite creates the extension
# in a transaction and rolls it back.  PGTAP_SUITES: some suites only.
REGRESS_DB ?= genie_regression
PGTAP_SUITES ?= regress/pgtap/*.sql
installcheck:
	dropdb --if-exists $(REGRESS_DB)
	createdb $(REGRESS_DB)
	pg_prove --failures -d $(REGRESS_DB) $(PROVE_FLAGS) $(PGTAP_SUITES)

genie-libs: $(BUILD_DIR)/genie-link.mk
	env -u MAKEFLAGS -u MFLAGS cmake --build $(BUILD_DIR) -j$(JOBS) --target genie_capi

$(shlib): genie-libs
endif
