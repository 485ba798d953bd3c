# SPDX-License-Identifier: MIT
# Thin wrapper around CMake.  `make` builds, `make test` runs the suite, `make check` is what
# CI runs (warnings as errors, then the whole suite again under ASan+UBSan, then the commands
# that read files in threads under ThreadSanitizer), `make demo` runs the main job on bundled
# data.
PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
BENCH_SIZES ?= 100M 1G

.PHONY: all build test check asan tsan demo install uninstall clean format bench fuzz fuzz-run golden dist deb

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# ctest, then how many tests were skipped and why (scripts/skipped.py), failing or not
CTEST = ctest --output-on-failure -j $(JOBS) --output-junit junit.xml
SKIPPED = rc=$$?; python3 $(CURDIR)/scripts/skipped.py

test: build
	cd $(BUILD) && $(CTEST); $(SKIPPED) junit.xml; exit $$rc

asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DGM_SANITIZE=ON -DGM_WERROR=ON \
	  -DCMAKE_C_COMPILER=$${CC:-cc}
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 $(CTEST) -LE no-asan; \
	  $(SKIPPED) junit.xml; exit $$rc

# ThreadSanitizer on the commands that read files in threads and on the unit tests of the
# load's worker (tests/cmake/threads.cmake): only those are built.
tsan:
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGM_TSAN=ON -DGM_WERROR=ON \
	  -DCMAKE_C_COMPILER=$${CC:-cc}
	cmake --build build-tsan -j $(JOBS) --target gpumem test_snapshot test_analysis
	cd build-tsan && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --output-on-failure -L threads

check:
	cmake -S . -B build-ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGM_WERROR=ON
	cmake --build build-ci -j $(JOBS)
	cd build-ci && $(CTEST); $(SKIPPED) junit.xml; exit $$rc
	$(MAKE) asan
	$(MAKE) tsan

# Rewrite the CLI and measure goldens (tests/cli/*/, tests/measure/*/), the man page and the
# outputs shown in README.md and docs/*.md (tests/docs/run_examples.py --update; with the
# third-party files when they are found) from the current build; review with `git diff`.
golden: build
	cd $(BUILD) && GM_UPDATE_GOLDEN=1 ctest -j $(JOBS) -R '^(cli|measure)/' --output-on-failure
	sh scripts/gen-man.sh $(BUILD)/gpumem > docs/gpumem.1
	cmake --build $(BUILD) --target docs_golden

demo: build
	sh scripts/demo.sh $(BUILD)/gpumem

# every benchmark runs and prints its figures; the target fails at the end if one missed a goal
bench: build
	@st=0; \
	python3 bench/estimate_bench.py $(BUILD)/gpumem $(BUILD)/bench || st=1; \
	sh bench/snapshot.sh $(BUILD)/gpumem $(BUILD)/bench $(BENCH_SIZES) || st=1; \
	sh bench/validation.sh $(BUILD)/gpumem || st=1; \
	sh bench/account.sh $(BUILD) || st=1; \
	sh bench/ranks.sh $(BUILD)/gpumem || st=1; \
	exit $$st

fuzz:
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGM_FUZZ=ON -DGM_SANITIZE=ON
	cmake --build build-fuzz -j $(JOBS) --target fuzzers
	@echo "fuzzers in build-fuzz/tests/: run e.g. build-fuzz/tests/fuzz_pickle tests/fuzz/corpus/pickle -max_total_time=60"

# Every libFuzzer target for FUZZ_SECONDS (30) each from its corpus, with its exec count;
# skipped (saying why) without clang/libFuzzer.  About 9 minutes for the 16 targets.
FUZZ_SECONDS ?= 30
fuzz-run:
	FUZZ_SECONDS=$(FUZZ_SECONDS) JOBS=$(JOBS) sh scripts/fuzz-run.sh

# The source tarball build/gpumem-VERSION.tar.gz: every file of the checkout that git does not
# ignore (python/gpumem_build.py, which pip's sdist uses too).
dist:
	python3 python/gpumem_build.py sdist $(BUILD)

# The Debian package build-deb/package/gpumem_VERSION_ARCH.deb (CPack: the command, the
# library, headers, gpumem.pc, the man page, the completions), from a release build for /usr.
deb:
	cmake -S . -B build-deb -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
	  -DGM_BUILD_TESTS=OFF -DGM_PYTHON=OFF
	cmake --build build-deb -j $(JOBS)
	cd build-deb && cpack -G DEB
	@ls build-deb/package/*.deb

install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

uninstall:
	@test -f $(BUILD)/install_manifest.txt || { echo "nothing installed from $(BUILD)"; exit 1; }
	xargs -r rm -f < $(BUILD)/install_manifest.txt

format:
	find src cli include tests python -name '*.[ch]' -not -path '*/corpus/*' -not -path '*/node_modules/*' | xargs clang-format -i

clean:
	rm -rf $(BUILD) build-asan build-ci build-fuzz build-deb
