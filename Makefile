# Convenience entry points; the build itself is CMake.
#   make demo      build and run the demo (builds an MLP program, saves it,
#                  inspects and runs the archive with the tpexport command)
#   make test      build and run every test, plain and under ASan+UBSan, and the
#                  Python package's tests (test-python)
#   make valgrind  run every test under valgrind (leak check)
#   make test-python  build the Python package (python/) into a venv under
#                  $(PY_VENV) and run its pytest suite (needs PyPI for the
#                  build backend, numpy, pytest, tensorplay and ray[data]; the
#                  Ray test starts a local cluster)
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
PYTHON ?= python3
PY_VENV ?= build-py/venv

.PHONY: all deps build demo test test-plain test-asan test-python valgrind clean

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

test-python:
	@TP_EXTRA_PKGS="python3-dev python3-venv" sh tools/install-deps.sh
	$(PYTHON) -m venv $(PY_VENV)
	CMAKE_BUILD_PARALLEL_LEVEL=$(JOBS) $(PY_VENV)/bin/python -m pip install -q \
	  --config-settings=cmake.define.TP_WERROR=ON "./python[ray]" pytest numpy tensorplay
	cd python/tests && $(CURDIR)/$(PY_VENV)/bin/python -m pytest -q -p no:cacheprovider .

test: test-plain test-asan test-python

valgrind: build
	@TP_EXTRA_PKGS=valgrind sh tools/install-deps.sh
	sh tools/valgrind-tests.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(PY_VENV) python/build
