# SPDX-License-Identifier: MIT
# Thin wrapper around CMake.  `make` builds, `make test` runs the suite, `make check` is what
# CI runs (warnings as errors, then the whole suite again under ASan+UBSan), `make demo` runs
# the main job on bundled data.
PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
BENCH_SIZES ?= 100M 1G

.PHONY: all build test check asan demo install uninstall clean format bench fuzz golden

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DGM_SANITIZE=ON -DGM_WERROR=ON \
	  -DCMAKE_C_COMPILER=$${CC:-cc}
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS) -LE no-asan

check:
	cmake -S . -B build-ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGM_WERROR=ON
	cmake --build build-ci -j $(JOBS)
	cd build-ci && ctest --output-on-failure -j $(JOBS)
	$(MAKE) asan

# Rewrite the CLI and measure goldens (tests/cli/*/, tests/measure/*/) and the man page from
# the current build; review the result with `git diff` before committing it.
golden: build
	cd $(BUILD) && GM_UPDATE_GOLDEN=1 ctest -j $(JOBS) -R '^(cli|measure)/' --output-on-failure
	sh scripts/gen-man.sh $(BUILD)/gpumem > docs/gpumem.1

demo: build
	sh scripts/demo.sh $(BUILD)/gpumem

bench: build
	sh bench/snapshot.sh $(BUILD)/gpumem $(BUILD)/bench $(BENCH_SIZES)
	python3 bench/python_snapshot.py $(BUILD) $(BENCH_SIZES)
	sh bench/validation.sh $(BUILD)/gpumem

fuzz:
	cmake -S . -B build-fuzz -DCMAKE_C_COMPILER=clang -DGM_FUZZ=ON -DGM_SANITIZE=ON
	cmake --build build-fuzz -j $(JOBS) --target fuzzers
	@echo "fuzzers in build-fuzz/tests/: run e.g. build-fuzz/tests/fuzz_pickle tests/fuzz/corpus/pickle -max_total_time=60"

install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)

uninstall:
	@test -f $(BUILD)/install_manifest.txt || { echo "nothing installed from $(BUILD)"; exit 1; }
	xargs -r rm -f < $(BUILD)/install_manifest.txt

format:
	find src cli include tests python -name '*.[ch]' -not -path '*/corpus/*' -not -path '*/node_modules/*' | xargs clang-format -i

clean:
	rm -rf $(BUILD) build-asan build-ci build-fuzz
