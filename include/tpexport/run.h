/*
 * run.h - the execution engine: compiled plans, run contexts, threads.
 *
 * A program (program.h) is immutable and shared. Calling it goes through a
 * *plan*, built once per input-shape class and cached inside the program:
 * per node a prepared op (the kernel variant chosen for the dtypes, shapes
 * and CPU, its unboxed parameters, packed constant operands, workspace
 * size), the output metadata of every node, and a memory plan giving every
 * non-view intermediate an offset in one 64-byte aligned arena. Steady-state
 * calls never bind arguments, lint, or run shape rules: they compare the
 * inputs' metadata with the plan's key and run the steps.
 *
 * A *run context* (tp_run) holds everything one caller needs per call: the
 * arena, the tensors viewing it, thread settings and the profile hook. A
 * tp_run is used by one thread at a time; make one per thread (they are
 * cheap) to call one program from several threads. tp_run_execute with
 * tensor inputs allocates nothing once the run context has seen the input
 * shapes (counted through the allocation hook in tests): fast variants use
 * the planned arena and workspace, and reference kernels' temporaries come
 * from the run context's scratch, sized by the first call with those
 * shapes. A fast variant that declines a strided input gets a
 * contiguous copy of it made by a planned copy step.
 *
 * Plans are prepared for as many threads as the machine has cores; each
 * call then uses its run context's thread count (more than the cores gives
 * no more parallelism). Kernels split work so that results do not depend
 * on the thread count (GEMM: each output element is reduced in one order;
 * reductions: rows are never split).
 *
 * Mutating programs (buffer or user-input mutations, in-place ops on state)
 * serialise their calls on a per-program lock, so concurrent calls never
 * lose an update; programs without mutations run concurrently.
 *
 * tp_program_call (program.h) runs through the same engine with a run
 * context taken from a per-program pool.
 */
#ifndef TPEXPORT_RUN_H
#define TPEXPORT_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "program.h"
#include "status.h"
#include "tensor.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CPU capability levels for kernel variants. Variants are chosen at plan
 * time from cpuid (never the CPU model), capped by a run option, the
 * process-wide tp_set_cpu_level, or the environment variable TP_CPU_LEVEL
 * (reference | scalar | avx2 | avx512). */
typedef enum tp_cpu_level {
    TP_CPU_AUTO = -2,      /* the best the CPU supports (default) */
    TP_CPU_REFERENCE = -1, /* reference kernels only (the specification) */
    TP_CPU_SCALAR = 0,     /* fast variants in portable C */
    TP_CPU_AVX2 = 1,       /* AVX2 + FMA */
    TP_CPU_AVX512 = 2      /* AVX-512 F/DQ/BW/VL */
} tp_cpu_level;

/* The best level this CPU (and OS) supports. */
TP_API tp_cpu_level tp_cpu_level_supported(void);
/* Process-wide cap (TP_CPU_AUTO: none; the environment variable applies
 * then). Plans built afterwards use it; existing plans keep theirs. */
TP_API void tp_set_cpu_level(tp_cpu_level level);
/* The level new plans use when a run asks for TP_CPU_AUTO. */
TP_API tp_cpu_level tp_cpu_level_effective(void);
TP_API const char *tp_cpu_level_name(tp_cpu_level level); /* "avx2", ... */

/* Default thread count for runs that do not set one (initially 1; at most
 * 256). The library owns one thread pool; the calling thread participates,
 * so n threads means n - 1 pool workers. Workers sleep when idle. */
TP_API void tp_set_num_threads(int n);
TP_API int tp_get_num_threads(void);

/* One node's timing, given to the profile callback after the node ran. */
typedef struct tp_profile_event {
    const char *node;    /* node name (borrowed, valid during the callback) */
    const char *op;      /* op name */
    const char *variant; /* kernel variant: "avx512", "avx2", "scalar" (or a variant's own name, e.g.
                          * "avx512_bf16": bfloat16 products on vdpbf16ps), "reference", "view", "copy" */
    double ms;           /* wall time of the node */
    int threads;         /* threads that ran it */
    /* Steps of fast kernels run on several threads: the last thread's
     * finish minus the first one's, in ms, so the time at least one thread
     * sat idle waiting at the step's end (work split unevenly, or one core
     * slowed); 0 otherwise. */
    double spread_ms;
} tp_profile_event;
typedef void (*tp_profile_fn)(void *user, const tp_profile_event *event);

/* Messages of a run context (tp_run_options.log): DEBUG per-node kernel
 * choices (which nodes run the reference kernel), INFO each plan built
 * (steps, arena, packed bytes, time), WARN what costs speed (plan-cache
 * evictions, a program interpreted because it could not be planned). */
typedef enum tp_log_level { TP_LOG_DEBUG = 0, TP_LOG_INFO = 1, TP_LOG_WARN = 2 } tp_log_level;
/* message: borrowed, valid during the callback; called on the thread that
 * made the call. */
typedef void (*tp_log_fn)(void *user, tp_log_level level, const char *message);
/* Polled before each step of a call: return true to stop it. */
typedef bool (*tp_cancel_fn)(void *user);

/* Options of a run context. Initialise with tp_run_options_init so fields
 * added later get their defaults (struct_size tells the library which
 * fields a caller knows). */
typedef struct tp_run_options {
    size_t struct_size;     /* sizeof(tp_run_options) */
    int num_threads;        /* 0: tp_get_num_threads() at each call */
    tp_cpu_level cpu_level; /* TP_CPU_AUTO: tp_cpu_level_effective() */
    tp_profile_fn profile;  /* NULL: no profiling (no timing overhead) */
    void *profile_user;
    /* Cancellation: when cancel returns true the call stops before its
     * next step and returns TP_ERR_CANCELLED (outputs unspecified). A plan
     * that mutates state is polled only before its first step, so a call of
     * a mutating program either changes nothing or runs to the end. The
     * callback may read a flag another thread sets (use an atomic). */
    tp_cancel_fn cancel;    /* NULL: never cancelled */
    void *cancel_user;
    tp_log_fn log;          /* NULL: no messages */
    void *log_user;
    tp_log_level log_level; /* the least severe level passed to log */
} tp_run_options;
/* Inline, so struct_size is the size this caller was compiled with (a
 * newer library then reads only the fields the caller knows). */
static inline void tp_run_options_init(tp_run_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->struct_size = sizeof *opt;
    opt->cpu_level = TP_CPU_AUTO;
}

typedef struct tp_run tp_run;

/* A run context for program p (retained until tp_run_free). opt may be NULL
 * (defaults). Caller frees *out with tp_run_free. Errors: TP_ERR_NOMEM. */
TP_API tp_status tp_run_new(tp_program *p, const tp_run_options *opt, tp_run **out);
TP_API void tp_run_free(tp_run *r); /* NULL ok */
TP_API tp_program *tp_run_program(const tp_run *r);
/* Change the thread count of later calls (0: library default). */
TP_API void tp_run_set_num_threads(tp_run *r, int n);

/* Call the program with tensorplay's semantics, as tp_program_call does
 * (binding, input checks, mutation write-back, output tree), through this
 * run context. *out is owned by the caller. */
TP_API tp_status tp_run_call(tp_run *r, const tp_value *args, int n_args, const tp_value *kwargs, tp_value *out);

/* The allocation-free entry point, for programs whose user inputs are all
 * tensors and whose user outputs are all tensors. inputs: one tensor per
 * user input in signature order (borrowed for the call). outputs: NULL, or
 * n_outputs tensors (contiguous, of the output's dtype and shape) the
 * results are written into; with NULL the results stay in tensors owned by
 * the run context, read with tp_run_output until the next call. Mutations
 * are written back as tp_program_call does. The first call with a new input
 * shape class checks the inputs against the program's constraints and builds
 * (or finds) a plan; later calls with inputs of the same dtypes, shapes and
 * strides allocate nothing. Errors: those of tp_program_call;
 * TP_ERR_INVALID_ARG when inputs/outputs do not match, naming the index. */
TP_API tp_status tp_run_execute(tp_run *r, tp_tensor *const *inputs, int n_inputs, tp_tensor *const *outputs,
                                int n_outputs);
/* After tp_run_execute: the number of user outputs and output i (borrowed:
 * owned by the run context or the caller's tensor, valid until the next
 * call on r). NULL if out of range or before any call. */
TP_API int tp_run_num_outputs(const tp_run *r);
TP_API tp_tensor *tp_run_output(const tp_run *r, int i);

/* What the current plan of a run context looks like (after a call). */
typedef struct tp_run_stats {
    size_t arena_bytes;     /* planned activations + workspace, per run context */
    size_t workspace_bytes; /* the largest kernel workspace (inside the arena) */
    size_t packed_bytes;    /* prepared data (packed weights) of the plan, shared */
    int64_t n_steps;        /* steps run per call (views included) */
    int64_t n_fast;         /* steps running a fast kernel variant */
    int64_t n_reference;    /* steps running a reference kernel */
    int64_t n_fused;        /* steps absorbed into a producer's epilogue (not run, not counted in n_steps' work) */
    int64_t plans_built;    /* plans this run context built (cache misses) */
    int64_t calls;          /* calls made through this run context */
    tp_cpu_level cpu_level; /* the level the plan was built for */
    int64_t n_in_place;     /* steps whose output takes over a dying input's arena block (a summed residual,
                               an elementwise input) */
} tp_run_stats;
TP_API void tp_run_get_stats(const tp_run *r, tp_run_stats *out);

/* Drop every cached plan of p (they are rebuilt on the next call). Needed
 * only after writing into a parameter's or constant's data in place:
 * plans may hold packed copies of them. Graph, signature and state changes
 * through the program API invalidate plans themselves. */
TP_API void tp_program_invalidate_plans(tp_program *p);

#ifdef __cplusplus
}
#endif
#endif
