/*
 * test_threads.c - one loaded program shared by several threads: calls of a
 * program without mutations may run concurrently (the program, its graph
 * and its weights are only read) and give the same results as a single
 * thread.
 */
#include <pthread.h>

#include "program_examples.h"
#include "tpexport/archive.h"

enum { N_THREADS = 4, N_CALLS = 200 };

typedef struct job {
    tp_program *program;
    int index;
    int failures;
} job;

static void *worker(void *arg) {
    job *j = arg;
    for (int k = 0; k < N_CALLS; k++) {
        /* each thread its own input: x = (index + k) * ones */
        tp_tensor *x = NULL;
        if (tp_tensor_zeros(TP_FLOAT32, 2, (int64_t[]){2, 3}, &x) != TP_OK) {
            j->failures++;
            continue;
        }
        float v = (float)(j->index + k);
        tp_tensor_fill(x, v);
        tp_value in = tp_value_tensor(x), out = tp_value_none();
        if (tp_program_call(j->program, &in, 1, NULL, &out) != TP_OK || out.kind != TP_VAL_TENSOR) {
            j->failures++;
        } else {
            /* W = [I3; 1 1 1], b = [0 0 0 -10]: relu([v, v, v, 3v - 10]) */
            float want[4] = {v, v, v, 3 * v - 10 > 0 ? 3 * v - 10 : 0};
            for (int i = 0; i < 8; i++)
                if (tp_tensor_item_f64(out.u.tensor, i) != want[i % 4]) {
                    j->failures++;
                    break;
                }
        }
        tp_value_clear(&out);
        tp_value_clear(&in);
    }
    return NULL;
}

static void run_threads(tp_program *p) {
    pthread_t th[N_THREADS];
    job jobs[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) {
        jobs[i] = (job){p, i, 0};
        CHECK(pthread_create(&th[i], NULL, worker, &jobs[i]) == 0);
    }
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(th[i], NULL);
        CHECK_MSG(jobs[i].failures == 0, "thread %d: %d failed calls", i, jobs[i].failures);
    }
}

TEST(test_shared_program) {
    tp_program *p = make_mlp();
    run_threads(p);
    tp_program_free(p);
}

TEST(test_shared_loaded_program) {
    /* the same through an archive: weights borrowed from the archive image */
    tp_program *p = make_mlp();
    tp_archive_entry e = {"mlp", p};
    void *data = NULL;
    size_t size = 0;
    CHECK_OK(tp_archive_save_buffer(&e, 1, NULL, 0, &data, &size));
    tp_archive *a = NULL;
    CHECK_OK(tp_archive_load_buffer(data, size, NULL, &a));
    tp_free(data);
    if (a) run_threads(tp_archive_program(a, 0));
    tp_archive_free(a);
    tp_program_free(p);
}

TEST_MAIN(T(test_shared_program), T(test_shared_loaded_program))
