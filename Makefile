# Thin wrapper over CMake; docs/building.md has the details.
#
#   make run [ARGS="-c keel.conf"]   install the build and run packages, build keel
#                                    and its modules in build-run/ (no tests), run
#                                    it and print the URLs it serves
#   make test                        install the test packages too, build everything
#                                    in build/, run every test
#   make asan / make test-asan       the same in build-asan/ with ASan + UBSan
#   make format / make format-check  clang-format the sources
#   make win / make test-win         cross-build for Windows (mingw-w64) in
#                                    build-win/; test-win also runs the
#                                    Windows tests under Wine (docs/windows.md)
#   make clean
#
# Warnings are errors when WERROR=ON, which is the default when the CI
# environment variable is set (CI=true in .ci/run), OFF otherwise so a newer
# compiler's new warning does not stop a local build. Override either way:
#   make test WERROR=ON
# Extra CMake arguments: make build CMAKE_ARGS="-DKEEL_BUILD_PLUGINS=OFF"

BUILD_DIR      ?= build
RUN_BUILD_DIR  ?= build-run
ASAN_BUILD_DIR ?= build-asan
WIN_BUILD_DIR  ?= build-win
CMAKE          ?= cmake
CTEST          ?= ctest
CLANG_FORMAT   ?= clang-format
JOBS           ?= 2
TEST_TIMEOUT   ?= 300
CMAKE_ARGS     ?=
ARGS           ?=

ifneq ($(strip $(CI)),)
WERROR ?= ON
else
WERROR ?= OFF
endif

# Ninja when available, only for a build directory not yet configured (a
# directory keeps the generator it was created with).
NINJA := $(shell command -v ninja 2>/dev/null)
define configure
	@if [ ! -f $(1)/CMakeCache.txt ] && [ -n "$(NINJA)" ]; then gen="-G Ninja"; else gen=""; fi; \
	echo "$(CMAKE) -S . -B $(1) $$gen -DKEEL_WERROR=$(WERROR) $(2) $(CMAKE_ARGS)"; \
	$(CMAKE) -S . -B $(1) $$gen -DKEEL_WERROR=$(WERROR) $(2) $(CMAKE_ARGS)
endef

# Sanitizer settings for test-asan: stop at the first error, with a stack.
ASAN_ENV := ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
            LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# ctest: fail (rather than pass) when no test was found at all.
CTEST_FLAGS = --output-on-failure -j$(JOBS) --timeout $(TEST_TIMEOUT) --no-tests=error

FORMAT_DIRS := core include modules plugins tests examples

.PHONY: all deps deps-run build build-run run test asan test-asan win test-win format format-check clean

all: build

# The package lists are in cmake/packages.txt: `run` installs the build and
# run lists, `test` adds the test and browser lists.
deps:
	@sh cmake/install-deps.sh test

deps-run:
	@sh cmake/install-deps.sh run

build: deps
	$(call configure,$(BUILD_DIR),)
	$(CMAKE) --build $(BUILD_DIR) --parallel

# keel, libkeel, the modules, plugins and examples (examples/chat's module
# among them), without the tests (nor Criterion): a directory of its own,
# so that build/ keeps its tests.
build-run: deps-run
	$(call configure,$(RUN_BUILD_DIR),-DKEEL_BUILD_TESTS=OFF)
	$(CMAKE) --build $(RUN_BUILD_DIR) --parallel

run: build-run
	@bash cmake/run-keel.sh $(if $(filter /%,$(RUN_BUILD_DIR)),,./)$(RUN_BUILD_DIR)/keel $(ARGS)

test: build
	cd $(BUILD_DIR) && $(CTEST) $(CTEST_FLAGS)

asan: deps
	$(call configure,$(ASAN_BUILD_DIR),-DKEEL_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug)
	$(CMAKE) --build $(ASAN_BUILD_DIR) --parallel

test-asan: asan
	cd $(ASAN_BUILD_DIR) && $(ASAN_ENV) $(CTEST) $(CTEST_FLAGS)

# Windows: cmake/windows/build-and-test.sh installs what it needs (mingw-w64,
# Wine), builds the dependencies once (cached in ~/.cache/keel-win-deps) and
# configures $(WIN_BUILD_DIR) with warnings as errors unless WERROR is given
# on the command line.
WIN_ENV = KEEL_WIN_BUILD_DIR=$(WIN_BUILD_DIR) \
          $(if $(filter command line,$(origin WERROR)),KEEL_WERROR=$(WERROR))

win:
	$(WIN_ENV) bash cmake/windows/build-and-test.sh --build-only

test-win:
	$(WIN_ENV) bash cmake/windows/build-and-test.sh

# Every .c/.h/.cpp we own; tests/abi/ holds frozen copies of released headers,
# which must stay byte-for-byte as released.
FORMAT_FILES = $(shell find $(FORMAT_DIRS) -path tests/abi -prune -o \
                 -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \) -print 2>/dev/null)

format:
	@test -n "$(FORMAT_FILES)" || { echo "nothing to format"; exit 0; }; \
	$(CLANG_FORMAT) -i $(FORMAT_FILES)

format-check:
	@test -n "$(FORMAT_FILES)" || { echo "nothing to check"; exit 0; }; \
	$(CLANG_FORMAT) --dry-run -Werror $(FORMAT_FILES)

clean:
	rm -rf $(BUILD_DIR) $(RUN_BUILD_DIR) $(ASAN_BUILD_DIR) $(WIN_BUILD_DIR)
