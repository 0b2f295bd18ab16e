/*
 * test_tp_surface.c - every function tensorplay's export can record has a
 * mapping, or a reason it has none.
 *
 * fixtures/tensorplay_surface.json (made from the installed package by
 * fixtures/gen_tp_surface.py) lists tensorplay.nn.functional's functions,
 * the _operator functions traced Python operators record, the Tensor
 * methods that are operations, and the tensorplay.functional functions a
 * trace records under their own name. Each must be known to the archive reader's
 * op table (src/archive/op_map.c; an nn.functional function may be recorded
 * as the tensorplay.functional function of the same name, which is what
 * tensorplay does for most of them) or be listed in
 * fixtures/tensorplay_surface_gaps.txt as "<kind> <name>  <reason>" (kind:
 * F, op, method or TF). A listed entry that has a mapping is an error too, so
 * the list stays true. The test prints the coverage.
 *
 *   test_tp_surface            check
 *   test_tp_surface --gaps     print a gaps list for the unmapped entries
 */
#include <jansson.h>

#include "archive/serde.h"
#include "test_util.h"

typedef struct gap {
    char kind[8], name[128];
    bool seen;
} gap;

static gap g_gaps[4096];
static int g_n_gaps;

static bool read_gaps(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot read %s\n", path);
        return false;
    }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (g_n_gaps == (int)TP_ARRAY_LEN(g_gaps)) break;
        gap *g = &g_gaps[g_n_gaps];
        char reason[400] = "";
        if (sscanf(line, "%7s %127s %399[^\n]", g->kind, g->name, reason) != 3) {
            fprintf(stderr, "%s: a line without kind, name and reason: %s", path, line);
            fclose(f);
            return false;
        }
        g_n_gaps++;
    }
    fclose(f);
    return true;
}

static gap *find_gap(const char *kind, const char *name) {
    for (int i = 0; i < g_n_gaps; i++)
        if (!strcmp(g_gaps[i].kind, kind) && !strcmp(g_gaps[i].name, name)) return &g_gaps[i];
    return NULL;
}

/* nn.functional functions tensorplay records under another name. */
static const char *const g_recorded_as[][2] = {{"logsigmoid", "log_sigmoid"}};

static bool mapped(const char *kind, const char *name) {
    if (!strcmp(kind, "F")) {
        for (size_t i = 0; i < TP_ARRAY_LEN(g_recorded_as); i++)
            if (!strcmp(name, g_recorded_as[i][0])) name = g_recorded_as[i][1];
        return tp__serde_find_function("tensorplay.nn.functional", name) ||
               tp__serde_find_function("tensorplay.functional", name);
    }
    if (!strcmp(kind, "op")) return tp__serde_find_function("_operator", name) != NULL;
    if (!strcmp(kind, "TF")) return tp__serde_find_function("tensorplay.functional", name) != NULL;
    return tp__serde_find_method(name) != NULL;
}

int main(int argc, char **argv) {
    bool print_gaps = argc > 1 && !strcmp(argv[1], "--gaps");
    tp_ops_init();
    json_error_t err;
    json_t *doc = json_load_file("fixtures/tensorplay_surface.json", 0, &err);
    if (!doc) {
        fprintf(stderr, "cannot read fixtures/tensorplay_surface.json: %s\n", err.text);
        return 1;
    }
    if (!read_gaps("fixtures/tensorplay_surface_gaps.txt") && !print_gaps) return 1;
    static const struct {
        const char *key, *kind;
    } lists[] = {{"nn_functional", "F"}, {"operator", "op"}, {"methods", "method"}, {"functional", "TF"}};
    int failed = 0, total = 0, n_mapped = 0;
    for (size_t l = 0; l < TP_ARRAY_LEN(lists); l++) {
        const json_t *arr = json_object_get(doc, lists[l].key);
        int lt = 0, lm = 0;
        for (size_t i = 0; i < json_array_size(arr); i++) {
            const char *name = json_string_value(json_array_get(arr, i));
            if (!name) continue;
            bool m = mapped(lists[l].kind, name);
            gap *g = find_gap(lists[l].kind, name);
            if (g) g->seen = true;
            lt++;
            lm += m;
            if (print_gaps) {
                if (!m) printf("%s %s  %s\n", lists[l].kind, name, g ? "(listed)" : "not yet supported");
                continue;
            }
            if (!m && !g) {
                fprintf(stderr, "  %s %s: no mapping and no line in tensorplay_surface_gaps.txt\n", lists[l].kind, name);
                failed++;
            } else if (m && g) {
                fprintf(stderr, "  %s %s: mapped now; remove its line from tensorplay_surface_gaps.txt\n",
                        lists[l].kind, name);
                failed++;
            }
        }
        printf("%-14s %3d of %3d mapped\n", lists[l].key, lm, lt);
        total += lt;
        n_mapped += lm;
    }
    for (int i = 0; i < g_n_gaps && !print_gaps; i++)
        if (!g_gaps[i].seen) {
            fprintf(stderr, "  %s %s: listed in tensorplay_surface_gaps.txt but not in the surface\n", g_gaps[i].kind,
                    g_gaps[i].name);
            failed++;
        }
    printf("tensorplay %s: %d of %d mapped, %d gaps listed, %d problems\n",
           json_string_value(json_object_get(doc, "tensorplay")), n_mapped, total, g_n_gaps, failed);
    json_decref(doc);
    return print_gaps ? 0 : failed != 0 || total == 0;
}
