/*
 * fuzz_onnx.c - libFuzzer entry for tp_fuzz_onnx (fuzz/targets.c, where the
 * body lives so that tests/test_fuzz_corpus.c replays the same code).
 * Build and run: see fuzz/README.md.
 */
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return tp_fuzz_onnx(data, size); }
