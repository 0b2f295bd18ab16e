/*
 * cpu.c - CPU capability detection for kernel variants (run.h).
 *
 * Levels come from cpuid feature bits plus the OS's XSAVE state (xgetbv),
 * never from vendor or model numbers: machines of one kind come with Intel
 * or AMD processors, with or without AVX-512. The effective level is the
 * supported one, capped by tp_set_cpu_level or, when that is TP_CPU_AUTO,
 * by the TP_CPU_LEVEL environment variable (read once). Also the size
 * above which outputs are streamed past the cache (cpu.h).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <unistd.h>

#include "../ops/ops_impl.h"
#include "cpu.h"
#include "tpexport/run.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
static unsigned long long read_xcr0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}
static bool g_f16c;
static tp_cpu_level detect(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return TP_CPU_SCALAR;
    g_f16c = (c & (1u << 29)) && (c & (1u << 27)) && (c & (1u << 28)) && (read_xcr0() & 0x6) == 0x6; /* F16C, AVX state */
    bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28);
    if (!osxsave || !avx) return TP_CPU_SCALAR;
    unsigned long long xcr0 = read_xcr0();
    if ((xcr0 & 0x6) != 0x6) return TP_CPU_SCALAR; /* XMM and YMM state */
    if (__get_cpuid_max(0, NULL) < 7) return TP_CPU_SCALAR;
    __cpuid_count(7, 0, a, b, c, d);
    bool avx2 = b & (1u << 5);
    bool avx512 = (b & (1u << 16)) && (b & (1u << 17)) && (b & (1u << 30)) && (b & (1u << 31)); /* F DQ BW VL */
    bool zmm_state = (xcr0 & 0xe6) == 0xe6;                                                  /* opmask, ZMM */
    if (avx512 && zmm_state && fma && avx2) return TP_CPU_AVX512;
    if (avx2 && fma) return TP_CPU_AVX2;
    return TP_CPU_SCALAR;
}
#else
static const bool g_f16c = false;
static tp_cpu_level detect(void) { return TP_CPU_SCALAR; }
#endif

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static tp_cpu_level g_supported = TP_CPU_SCALAR;
static tp_cpu_level g_env = TP_CPU_AUTO;
static atomic_int g_cap = TP_CPU_AUTO;

static tp_cpu_level parse_level(const char *s) {
    if (!s) return TP_CPU_AUTO;
    if (strcmp(s, "reference") == 0) return TP_CPU_REFERENCE;
    if (strcmp(s, "scalar") == 0) return TP_CPU_SCALAR;
    if (strcmp(s, "avx2") == 0) return TP_CPU_AVX2;
    if (strcmp(s, "avx512") == 0) return TP_CPU_AVX512;
    return TP_CPU_AUTO;
}

static int64_t g_stream_min = (int64_t)32 << 20;

static void init_once(void) {
    g_supported = detect();
    g_env = parse_level(getenv("TP_CPU_LEVEL"));
#ifdef _SC_LEVEL3_CACHE_SIZE
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (llc > 0) g_stream_min = llc;
#endif
    const char *e = getenv("TP_STREAM_MIN_BYTES");
    if (e && *e) {
        char *end;
        long long v = strtoll(e, &end, 10);
        if (*end == '\0' && v >= 0) g_stream_min = v;
    }
}

int64_t tp__stream_min_bytes(void) {
    pthread_once(&g_once, init_once);
    return g_stream_min;
}

bool tp__cpu_has_f16c(void) {
    pthread_once(&g_once, init_once);
    return g_f16c;
}

tp_cpu_level tp_cpu_level_supported(void) {
    pthread_once(&g_once, init_once);
    return g_supported;
}

void tp_set_cpu_level(tp_cpu_level level) {
    if (level < TP_CPU_AUTO || level > TP_CPU_AVX512) level = TP_CPU_AUTO;
    atomic_store(&g_cap, (int)level);
}

tp_cpu_level tp__cpu_level_resolve(tp_cpu_level requested) {
    if (tp__ops_reference_forced()) return TP_CPU_REFERENCE;
    tp_cpu_level best = tp_cpu_level_supported();
    tp_cpu_level cap = requested;
    if (cap == TP_CPU_AUTO) cap = (tp_cpu_level)atomic_load(&g_cap);
    if (cap == TP_CPU_AUTO) cap = g_env;
    if (cap == TP_CPU_AUTO || cap > best) return best;
    return cap;
}

tp_cpu_level tp_cpu_level_effective(void) { return tp__cpu_level_resolve(TP_CPU_AUTO); }

const char *tp_cpu_level_name(tp_cpu_level level) {
    switch (level) {
    case TP_CPU_AUTO: return "auto";
    case TP_CPU_REFERENCE: return "reference";
    case TP_CPU_SCALAR: return "scalar";
    case TP_CPU_AVX2: return "avx2";
    case TP_CPU_AVX512: return "avx512";
    }
    return "?";
}
