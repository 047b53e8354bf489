# Thin wrapper over CMake, as in neovim: `make run`, `make test`.
BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
PREFIX     ?= /usr/local

.PHONY: all setup setup-test build run test test-asan bench fuzz stress install clean

all: build

# What the demo and the README's examples need; the tests need more
# (Check, clang's runtimes, PostgreSQL, Chromium, Node.js: scripts/setup).
setup:
	@scripts/setup

setup-test:
	@scripts/setup --test

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)

build: setup $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/run-demo $(BUILD)

# Configures again: what setup-test added (Check, node) turns tests on in a
# build first made by `make run`.
test: setup-test $(BUILD)/CMakeCache.txt
	cmake -S . -B $(BUILD) $(CMAKE_ARGS)
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-asan

test-asan: setup-test
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DAP_SANITIZE=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

# autopartd under a kill -9 loop, mutated requests and a 32-client soak for
# STRESS_MINUTES minutes in all; prints what it counted (not part of CI).
stress: build
	scripts/stress --build $(BUILD) --minutes $${STRESS_MINUTES:-3}

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

bench: build
	@scripts/run-bench $(BUILD)

fuzz: setup-test
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAP_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	bench/fuzz $(FUZZ_BUILD) $${FUZZ_SECONDS:-60}

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
