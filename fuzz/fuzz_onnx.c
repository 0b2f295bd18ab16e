/*
 * fuzz_onnx.c - libFuzzer target for the ONNX reader and importer
 * (src/onnx/). Loads the input as a model (no folder: external data is
 * refused) with the default limits and report_all, so every node mapper
 * sees hostile attributes and shapes; a model that imports is printed and
 * freed. The input is also read as a TensorProto. Any crash, sanitizer
 * report or leak is a bug. Seeds: the .onnx files in tests/fixtures/onnx and the
 * model.onnx / *.pb files of /usr/share/libonnx-testdata/data.
 *
 * Build and run: see fuzz/README.md (target fuzz_onnx).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tpexport/onnx.h"
#include "tpexport/tpexport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tp_onnx_options opts = {0};
    opts.report_all = true;
    tp_program *p = NULL;
    tp_onnx_report report;
    if (tp_onnx_load_buffer(data, size, NULL, &opts, &p, &report) == TP_OK) {
        char *text = NULL;
        if (tp_program_to_string(p, &text) == TP_OK) tp_free(text);
        tp_program_free(p);
    }
    tp_onnx_report_clear(&report);
    tp_tensor *t = NULL;
    if (tp_onnx_load_tensor_buffer(data, size, &t) == TP_OK) tp_tensor_free(t);
    return 0;
}
