/*
 * consumer.c - a program outside the tree using an installed tpexport:
 * loads an archive, calls its first program on the example inputs and
 * prints the outputs' shapes. tests/test_install.sh builds it against an
 * installed prefix with pkg-config and with find_package(tpexport).
 *
 *   cc consumer.c $(pkg-config --cflags --libs tpexport) -o consumer
 *   ./consumer model.pt2
 */
#include <stdio.h>
#include <string.h>

#include <tpexport/archive.h>
#include <tpexport/tpexport.h>

static void print_leaves(const tp_value *v) {
    if (v->kind == TP_VAL_TENSOR) {
        const tp_tensor *t = v->u.tensor;
        printf("output %s [", tp_dtype_name(tp_tensor_dtype(t)));
        for (int d = 0; d < tp_tensor_ndim(t); d++) printf(d ? ", %lld" : "%lld", (long long)tp_tensor_size(t, d));
        printf("]\n");
        return;
    }
    for (int i = 0; i < tp_value_len(v); i++) print_leaves(&v->u.seq.items[i]);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: consumer ARCHIVE\n");
        return 2;
    }
    if (strcmp(tp_version(), TP_VERSION_STRING) != 0) {
        fprintf(stderr, "consumer: compiled against %s, running with %s\n", TP_VERSION_STRING, tp_version());
        return 1;
    }
    tp_archive *a;
    if (tp_archive_load(argv[1], NULL, &a) != TP_OK) {
        fprintf(stderr, "consumer: %s\n", tp_last_error());
        return 1;
    }
    tp_value out;
    int rc = 0;
    if (tp_program_call(tp_archive_program(a, 0), NULL, 0, NULL, &out) != TP_OK) {
        fprintf(stderr, "consumer: %s\n", tp_last_error());
        rc = 1;
    } else {
        printf("tpexport %s: program '%s'\n", tp_version(), tp_archive_program_name(a, 0));
        print_leaves(&out);
        tp_value_clear(&out);
    }
    tp_archive_free(a);
    tp_shutdown();
    return rc;
}
