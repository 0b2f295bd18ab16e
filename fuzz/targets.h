/*
 * targets.h - the bodies of the archive, program-document, ONNX and .npy
 * fuzz targets, shared by the libFuzzer executables (fuzz_archive.c,
 * fuzz_program_json.c, fuzz_onnx.c, fuzz_npy.c) and by
 * tests/test_fuzz_corpus.c, which replays the seed corpora and every crash
 * found without clang.
 *
 * Each function takes any bytes, must return 0 and must never crash, leak
 * or trip a sanitizer; a broken invariant ends in __builtin_trap().
 */
#ifndef TP_FUZZ_TARGETS_H
#define TP_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

/* Calling a program that loaded (archive and ONNX targets): when every user
 * input has an example input and state plus examples hold at most 100,000
 * elements, the program is called on its examples through a run context
 * (tp_run_call, cancelled after 10,000 steps) and, unless that was
 * cancelled, with tp_program_call; single allocations above 64 MiB are
 * refused meanwhile (an allocation hook, the default restored after). Each
 * call must return TP_OK or an error with a message. */

/* tp_archive_load_buffer and tp_archive_verify_buffer on the input (they
 * must agree on whether it is valid); a loaded archive is saved again and
 * must load back with the same programs, and each program is called as
 * above. An input starting "TPFZ\n" is a text form of an archive
 * ("@@ member\n" + bytes per member, see targets.c), zipped first so that
 * mutations get past the CRCs. */
int tp_fuzz_archive(const uint8_t *data, size_t size);
/* The input as a program document (stop-at-first and verify mode, which
 * must agree), as a weights index (every accepted entry must make a
 * tensor from a payload of the declared size) and as tensorplay's example
 * pickle (an accepted pickle must round-trip through the writer). */
int tp_fuzz_program_json(const uint8_t *data, size_t size);
/* tp_onnx_load_buffer (no folder: external data is refused; report_all,
 * so every node mapper sees hostile attributes and shapes): a model that
 * imports is printed and called as above on its examples (zero-filled
 * tensors of the static input shapes; a dynamic input has none, so the
 * model is not called). The input is also read as a TensorProto. */
int tp_fuzz_onnx(const uint8_t *data, size_t size);
/* tp_npy_load_buffer; a loaded array is saved and must load back equal. */
int tp_fuzz_npy(const uint8_t *data, size_t size);

#endif
