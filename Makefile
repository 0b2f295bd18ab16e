# Convenience entry points; the build itself is CMake.
#   make demo      build and run the demo (builds an MLP program, saves it,
#                  inspects and runs the archive with the tpexport command)
#   make test      build and run every test, plain and under ASan+UBSan
#   make valgrind  run every test under valgrind (leak check)
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan

.PHONY: all deps build demo test test-plain test-asan valgrind clean

all: build

deps:
	@sh tools/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTP_WERROR=ON > /dev/null
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	./$(BUILD)/tpexport_demo $(BUILD)/mlp.pt2
	./$(BUILD)/tpexport inspect $(BUILD)/mlp.pt2
	./$(BUILD)/tpexport run $(BUILD)/mlp.pt2

test-plain: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTP_SANITIZE=ON -DTP_WERROR=ON > /dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

test: test-plain test-asan

valgrind: build
	@TP_EXTRA_PKGS=valgrind sh tools/install-deps.sh
	sh tools/valgrind-tests.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
