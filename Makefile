# Set-up is part of every target: Debian packages with apt-get, Python packages with pip into
# $(VENV) exactly as pinned in $(LOCK), an incremental editable build. Each step is skipped when
# already done.
SHELL := /bin/bash
.DEFAULT_GOAL := test

VENV      ?= .venv
PY        := $(VENV)/bin/python
PIP       := $(PY) -m pip --disable-pip-version-check
BUILD_DIR := build/dev
DEB_PKGS  := g++ pkg-config libboost-graph-dev libhowardhinnant-date-dev libfmt-dev \
             libxxhash-dev libgtest-dev tzdata postgresql iproute2 openjdk-17-jre-headless maven \
             debootstrap
# The Iceberg runtime for the Spark engine (PySpark 4.1, Scala 2.13), fetched once from Maven
# Central into build/jars (never committed); nothing downloads when Spark starts.
ICEBERG_ARTIFACT := org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0
ICEBERG_JAR      := build/jars/iceberg-spark-runtime-4.1_2.13-1.12.0.jar
# The Apache Kafka broker the Kafka replay tests start (KRaft, one node): kafka_2.13 and its
# runtime dependencies, copied once from Maven Central into build/kafka by a generated pom.
KAFKA_VERSION := 4.4.0
KAFKA_JARS    := build/kafka/.fetched-$(KAFKA_VERSION)
INSTALLED := $(VENV)/.installed
# The pinned development environment (every extra, Python 3.10-3.13): `make lock` refreshes it.
LOCK      ?= requirements/dev.lock
DEPS_OK   := $(VENV)/.deps
SOURCES   := $(shell find cpp python -type f -not -name '*.pyc' -not -path '*/__pycache__/*' 2>/dev/null)
DEMO_ARGS ?=

.PHONY: demo test setup apt bench clean lock test-latest test-oldest notebook

demo: setup
	$(VENV)/bin/backfill demo $(DEMO_ARGS)

# chroot-bg first: the clean Debian root of test_wheel.py downloads while set-up and tests run.
# Then make lint (see Formatters and linters below): ruff and clang-format first, so a style
# failure shows in seconds; clang-tidy (minutes on a fresh clone, seconds once its stamps exist)
# in the background while the tests run, like the sanitizers, waited for at the end.
# LINT=0 skips both: test-latest and test-oldest change the dependencies, not the sources, and
# their ruff (newest, or the oldest allowed) need not agree with the pinned one the tree follows.
LINT ?= 1
test: apt chroot-bg $(if $(filter 0,$(LINT)),,lint-style) setup dist-wheel
	@$(TIDY_BG_START)
	@$(SANITIZE_BG_START)
	@echo "== GoogleTest (ctest) =="
	ctest --test-dir $(BUILD_DIR) --output-on-failure -j2
	@echo "== import layers (lint-imports; contracts in pyproject.toml) =="
	$(VENV)/bin/lint-imports --no-cache
	@echo "== pytest =="
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist loadgroup --durations=25
	@$(SANITIZE_BG_WAIT)
	@$(TIDY_BG_WAIT)

# The shop notebook is committed executed (people read it on a forge before they run it): this
# re-executes it in place; the file changes only when its outputs do (tests/python/cli/test_demo.py
# fails when the committed outputs are stale, ids and times aside).
notebook: setup
	$(PY) tools/run_notebook.py

bench: setup
	for b in benchmarks/*_bench.py; do $(PY) $$b || exit 1; done

setup: apt $(INSTALLED) $(ICEBERG_JAR) $(KAFKA_JARS)

$(KAFKA_JARS):
	mkdir -p build/kafka/pom
	printf '%s\n' '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>' \
	  '<groupId>local.backfill</groupId><artifactId>kafka-broker</artifactId><version>1</version>' \
	  '<dependencies><dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>' \
	  '<version>$(KAFKA_VERSION)</version></dependency></dependencies></project>' > build/kafka/pom/pom.xml
	mvn -q -f build/kafka/pom/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
	  -DoutputDirectory=$(CURDIR)/build/kafka/libs
	touch $@

$(ICEBERG_JAR):
	mkdir -p $(dir $@)
	mvn -q dependency:copy -Dartifact=$(ICEBERG_ARTIFACT) -DoutputDirectory=$(dir $@)

# $(call apt_ensure,PKGS): apt-get installs those of PKGS that are missing. dpkg-query is fast,
# so a set-up machine pays nothing; apt-get update runs only when something is missing.
apt_ensure = missing=$$(for p in $(1); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install $$missing"; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

apt:
	@$(call apt_ensure,$(DEB_PKGS))

$(PY):
	python3 -m venv $(VENV)

# Third-party Python packages, exactly the versions of $(LOCK) (every extra and the set-up's own
# tools: requirements/tools.in), reinstalled only when the lock changes. --no-deps: the lock is the
# whole environment, so pip resolves nothing; `pip check` proves it is consistent. A hashed lock
# puts pip in hash-checking mode. An sdist in it (pyspark) is built with build isolation, in a
# fresh environment with a current setuptools, never with whatever the venv happens to hold.
$(DEPS_OK): $(LOCK) | $(PY)
	$(PIP) install -q --no-deps -r $(LOCK)
	$(PIP) check
	touch $@

# Our package: an editable install whose CMake build directory is kept, so a rebuild is incremental.
$(INSTALLED): $(DEPS_OK) pyproject.toml CMakeLists.txt $(SOURCES) $(wildcard tests/cpp/*.cpp)
	$(PIP) install -q --no-build-isolation --no-deps -e . -Cbuild-dir=$(BUILD_DIR) \
	  -Ccmake.define.BACKFILL_BUILD_TESTS=ON
	touch $@

clean:
	rm -rf build $(VENV) .venv-latest .venv-oldest

# ---- Pinned dependencies -------------------------------------------------------------------------
# requirements/dev.lock pins every package of the development environment (all extras and the
# set-up's tools) with hashes, for Python 3.10-3.13 (uv's universal resolution): what `make test`
# and CI install. pyproject.toml keeps ranges for users; two more runs test both ends of them:
#   make lock          re-resolve both locks to today's releases (uv pip compile)
#   make test-latest   `make test` in .venv-latest with the newest release of everything allowed,
#                      resolved now: a breaking release is found here, not by a newcomer
#   make test-oldest   `make test` in .venv-oldest with each direct dependency at its lower bound
#                      (requirements/oldest.lock, Python 3.11: uv's lowest-direct resolution)
UV         = $(VENV)/bin/uv
LOCK_ARGS := --all-extras pyproject.toml requirements/tools.in
PY_MINOR   = $$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')

lock: $(DEPS_OK)
	$(UV) pip compile -q --upgrade --universal --python-version 3.10 --generate-hashes \
	  $(LOCK_ARGS) -o requirements/dev.lock
	$(UV) pip compile -q --upgrade --python-version 3.11 --resolution lowest-direct \
	  $(LOCK_ARGS) -o requirements/oldest.lock
	@echo "requirements/dev.lock and requirements/oldest.lock re-resolved; review git diff requirements/"

test-latest: $(DEPS_OK)
	mkdir -p build/latest
	$(UV) pip compile -q --upgrade --no-cache --python-version $(PY_MINOR) $(LOCK_ARGS) \
	  -o build/latest/latest.lock
	$(MAKE) --no-print-directory test VENV=.venv-latest LOCK=build/latest/latest.lock \
	  BUILD_DIR=build/latest/cmake SANITIZE=0 LINT=0

test-oldest:
	$(MAKE) --no-print-directory test VENV=.venv-oldest LOCK=requirements/oldest.lock \
	  BUILD_DIR=build/oldest/cmake SANITIZE=0 LINT=0

# ---- Sanitizers and fuzzing (issue 19) ----
# One clang build in $(SAN_DIR): the lint, the core and the GoogleTest suite with ASan + UBSan
# (any report aborts: -fno-sanitize-recover=all) and the fuzzer's coverage instrumentation, plus
# one libFuzzer target per parser of user text or bytes (tests/fuzz). -O1 with line tables only:
# the cheapest build whose reports still name file and line. No Python module is built here.
#   make sanitize          the GoogleTest suite under ASan + UBSan
#   make fuzz              every fuzz target for FUZZ_SECONDS (60) each, FUZZ_JOBS (2) at a time
#   make fuzz FUZZ_TARGETS=arrow_fuzz FUZZ_SECONDS=600      one target, longer
# `make test` runs both (fuzzing 20 s per target) in the background, niced, while ctest and
# pytest run, and fails at the end if either found anything; its log is $(SAN_DIR)/ci.log.
# Seeds are committed in tests/fuzz/corpus/<target>/ (keep them small); what a run learns goes
# to $(SAN_DIR)/corpus/<target>/, crashes to $(SAN_DIR)/crashes/ (then: a regression test).
.PHONY: sanitize sanitize-build fuzz sanitize-ci
SAN_DIR      := build/sanitize
SAN_PKGS     := clang libclang-rt-dev
# C++ targets (tests/fuzz/*.cpp) and one Python target (atheris: durations and run windows).
FUZZ_TARGETS ?= arrow_fuzz lint_fuzz instant_fuzz zone_fuzz select_fuzz duration_fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS    ?= 2
SAN_ENV      := ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

sanitize-build: apt
	@command -v clang++ >/dev/null || { echo "make sanitize needs clang (apt-get install $(SAN_PKGS))"; exit 1; }
	@[ -f $(SAN_DIR)/build.ninja ] || cmake -S . -B $(SAN_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DCMAKE_CXX_COMPILER=clang++ \
	  -DBACKFILL_SANITIZE=ON -DBACKFILL_BUILD_FUZZ=ON -DBACKFILL_BUILD_TESTS=ON >/dev/null
	cmake --build $(SAN_DIR) -j2 --target backfill_tests fuzz_targets

sanitize: sanitize-build
	@echo "== GoogleTest under ASan + UBSan =="
	$(SAN_ENV) $(SAN_DIR)/backfill_tests --gtest_brief=1

# Each target runs FUZZ_SECONDS from its seeds, FUZZ_JOBS at a time; fails on any finding.
fuzz: setup sanitize-build
	@echo "== libFuzzer: $(FUZZ_TARGETS), $(FUZZ_SECONDS) s each, $(FUZZ_JOBS) at a time =="
	PYTHON=$(PY) tests/fuzz/run_fuzz.sh $(SAN_DIR) $(FUZZ_SECONDS) $(FUZZ_JOBS) $(FUZZ_TARGETS)

# What `make test` runs: the sanitized unit tests, then every fuzz target for 20 s.
sanitize-ci:
	$(MAKE) --no-print-directory sanitize
	$(MAKE) --no-print-directory fuzz FUZZ_SECONDS=20

# `make test` starts sanitize-ci in the background (niced: ctest and pytest keep the CPU first;
# the fuzzers run for a fixed wall time however much CPU they get) and waits for it at the end.
# Both lines test for clang the same way, so with no clang neither does anything; SANITIZE=0 skips
# both (test-latest and test-oldest: the C++ does not depend on the Python packages they change).
SANITIZE ?= 1
SANITIZE_BG_START = if [ "$(SANITIZE)" != 0 ] && command -v clang++ >/dev/null 2>&1; then mkdir -p $(SAN_DIR); \
	  rm -f $(SAN_DIR)/ci.rc; echo "== sanitizers + fuzzing: started in the background, log $(SAN_DIR)/ci.log =="; \
	  ( nice -n 10 $(MAKE) --no-print-directory sanitize-ci; echo $$? > $(SAN_DIR)/ci.rc ) \
	    > $(SAN_DIR)/ci.log 2>&1 < /dev/null & fi
SANITIZE_BG_WAIT = if [ "$(SANITIZE)" != 0 ] && command -v clang++ >/dev/null 2>&1; then \
	  echo "== sanitizers + fuzzing (make sanitize-ci; waiting for it) =="; \
	  for i in $$(seq 1800); do [ -f $(SAN_DIR)/ci.rc ] && break; sleep 1; done; \
	  grep -E '^\[  (PASSED|FAILED) |_fuzz: ' $(SAN_DIR)/ci.log || true; \
	  if [ "$$(cat $(SAN_DIR)/ci.rc 2>/dev/null)" != 0 ]; then tail -60 $(SAN_DIR)/ci.log; \
	    echo "sanitizers or fuzzing FAILED (log $(SAN_DIR)/ci.log)"; exit 1; fi; fi
DEB_PKGS += $(SAN_PKGS)

# ---- Packaging (issue 20) ------------------------------------------------------------------------
# `make wheel`: the sdist and an auditwheel-repaired manylinux wheel in dist/. The wheel is built
# from the editable install's CMake build dir ($(BUILD_DIR)), so nothing compiles twice; fmt is
# grafted into the wheel by auditwheel (Debian has no static libfmt), xxHash is inlined, Boost.Graph
# and date.h are header-only, and time zones are read by our own TZif reader (see README: Install).
# `make wheel-check`: the wheel in a clean Debian root (debootstrap, cached in build/chroot) and the
# sdist compiled in a fresh venv. `make test` runs the first of the two (test_wheel.py).
.PHONY: wheel dist-wheel wheel-check chroot-bg
DIST        := dist
# The lowest tag this build allows (Debian 12's toolchain uses glibc symbols up to 2.34), named
# rather than left to auditwheel's default, which older auditwheels set to manylinux_2_5.
WHEEL_PLAT  := manylinux_2_34_x86_64
# This venv's tag (cp311): dist-wheel replaces its own wheel only, leaving make wheels' others.
PY_TAG       = $$($(PY) -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
CHROOT      := build/chroot/bookworm

wheel: dist-wheel
	$(PY) -m build --sdist --no-isolation --outdir $(DIST) . >/dev/null
	@ls $(DIST)

# The repaired wheel alone: what `make test` needs (the sdist is for wheel-check and PyPI).
dist-wheel: setup
	@echo "== wheel (from $(BUILD_DIR): no second compile), auditwheel repair =="
	rm -rf build/wheel-raw
	rm -f $(DIST)/backfill-*-$(PY_TAG)-$(PY_TAG)-*.whl
	$(PIP) wheel -q --no-deps --no-build-isolation -w build/wheel-raw . -Cbuild-dir=$(BUILD_DIR) \
	  -Ccmake.define.BACKFILL_BUILD_TESTS=ON
	PATH="$(abspath $(VENV))/bin:$$PATH" $(VENV)/bin/auditwheel repair --plat $(WHEEL_PLAT) \
	  -w $(DIST) build/wheel-raw/backfill-*.whl
	$(VENV)/bin/auditwheel show $(DIST)/backfill-*-$(PY_TAG)-$(PY_TAG)-*manylinux*.whl

# Starts making the chroot (and its wheelhouse) in the background, as root only; quick once made.
# test_wheel.py waits for it (a lock) and skips, with the log's reason, when it cannot be made.
chroot-bg:
	@if [ "$$(id -u)" = 0 ]; then mkdir -p build/chroot; \
	  echo "(the clean Debian root $(CHROOT) is made in the background; log build/chroot/bg.log)"; \
	  (tests/wheel/make_chroot.sh $(CHROOT) > build/chroot/bg.log 2>&1 &); fi

wheel-check: wheel
	tests/wheel/make_chroot.sh $(CHROOT)
	BACKFILL_SDIST_CHECK=1 $(PY) -m pytest -q -p no:cacheprovider -rs tests/python/package/test_wheel.py \
	  tests/python/package/test_packaging.py

# ---- Wheels for every supported Python (issue 27) ---------------------------------------------
# `make wheels`: the auditwheel-repaired manylinux wheel for cp310, cp311, cp312 and cp313 in
# dist/ (tools/build_wheels.sh: per Python a tool venv build/pyenvs/cpXY with the build tools from
# PyPI and a CMake build dir build/wheel-cpXY, so a rebuild is incremental; one ccache for the C++
# core they share), then each wheel proven in a fresh venv of its own Python by nox (noxfile.py,
# sessions wheel-3.10 .. wheel-3.13: the installed `backfill demo` and the core tests against the
# installed wheel). Interpreters: pythonX.Y on PATH, else pyenv's. Figures: build/wheels.tsv,
# build/wheel-tests.tsv. `make wheels-extras`: which extras install, wheels only, on which Python
# (build/extras-by-python.tsv; the table in README: Install).
.PHONY: wheels wheels-extras
NOX := $(VENV)/bin/nox

wheels: apt $(DEPS_OK)
	tools/build_wheels.sh
	$(NOX) -s wheel

wheels-extras: apt $(DEPS_OK)
	tools/build_wheels.sh
	$(NOX) -s extras

# ---- Formatters and linters (issue 28) -----------------------------------------------------------
# `make lint`: ruff (format check + lint; config in pyproject.toml) over the Python tree,
# clang-format (.clang-format) over every C++ file, clang-tidy (.clang-tidy) over cpp/src and
# cpp/bindings with the dev build's compile database. .pre-commit-config.yaml runs the same tools
# at the same versions on each commit; `make lint` calls them directly (no pre-commit, no network).
# clang-tidy is the slow one (~8 CPU-seconds a source, ~40 a binding: pybind11's headers; minutes
# for all of them): it runs 2 at a time and is incremental, a stamp per source in $(TIDY_DIR)
# (its output) remade when the source, a header of ours it includes, .clang-tidy or CMakeLists.txt
# (the compile flags) changes. `make test` runs lint-style first and lint-tidy in the background.
.PHONY: lint lint-apt lint-style lint-tidy
LINT_PKGS   := clang-format clang-tidy
CXX_FILES   := $(shell find cpp tests/cpp tests/fuzz -type f \( -name '*.cpp' -o -name '*.hpp' \) 2>/dev/null)
TIDY_SRCS   := $(shell find cpp/src cpp/bindings -type f -name '*.cpp' 2>/dev/null)
TIDY_DIR    := build/tidy
TIDY_STAMPS := $(TIDY_SRCS:%.cpp=$(TIDY_DIR)/%.ok)

lint: lint-style lint-tidy

lint-apt:
	@$(call apt_ensure,$(LINT_PKGS))

lint-style: lint-apt $(DEPS_OK)
	@echo "== ruff format --check, ruff check, clang-format =="
	$(VENV)/bin/ruff format --check --quiet .
	$(VENV)/bin/ruff check --quiet .
	clang-format --dry-run -Werror $(CXX_FILES)

# The compile database comes with the editable build ($(INSTALLED); CMAKE_EXPORT_COMPILE_COMMANDS
# is on in CMakeLists.txt).
lint-tidy: lint-apt $(INSTALLED)
	@echo "== clang-tidy (cpp/src, cpp/bindings; incremental, stamps in $(TIDY_DIR)) =="
	@$(PY) tools/tidy_deps.py $(BUILD_DIR) $(TIDY_DIR)
	@$(MAKE) --no-print-directory -j2 $(TIDY_STAMPS)

$(TIDY_DIR)/%.ok: %.cpp .clang-tidy cpp/bindings/.clang-tidy CMakeLists.txt
	@mkdir -p $(dir $@)
	@echo "clang-tidy $<"
	@clang-tidy -p $(BUILD_DIR) --quiet --warnings-as-errors='*' $< > $@.log 2>&1 \
	  || { cat $@.log; rm -f $@.log; exit 1; }
	@mv $@.log $@

# Each stamp's headers (tools/tidy_deps.py writes them from the dev build's ninja deps).
-include $(TIDY_STAMPS:.ok=.d)

# `make test` runs lint-tidy in the background (niced, as the sanitizers) and waits at the end.
TIDY_BG_START = if [ "$(LINT)" != 0 ]; then mkdir -p $(TIDY_DIR); rm -f $(TIDY_DIR)/bg.rc; \
	  echo "== clang-tidy: started in the background, log $(TIDY_DIR)/bg.log =="; \
	  ( nice -n 10 $(MAKE) --no-print-directory lint-tidy; \
	    echo $$? > $(TIDY_DIR)/bg.rc ) > $(TIDY_DIR)/bg.log 2>&1 < /dev/null & fi
TIDY_BG_WAIT = if [ "$(LINT)" != 0 ]; then echo "== clang-tidy (make lint-tidy; waiting for it) =="; \
	  for i in $$(seq 1800); do [ -f $(TIDY_DIR)/bg.rc ] && break; sleep 1; done; \
	  if [ "$$(cat $(TIDY_DIR)/bg.rc 2>/dev/null)" != 0 ]; then tail -60 $(TIDY_DIR)/bg.log; \
	    echo "clang-tidy FAILED (log $(TIDY_DIR)/bg.log)"; exit 1; fi; fi
