/*
 * cpuid_mask.c - LD_PRELOAD shim that hides AVX-512 from every cpuid the
 * process executes, so one benchmark run on an AVX-512 machine times every
 * peer (onnxruntime's MLAS, PyTorch, oneDNN, tpexport) on its AVX2 + FMA
 * code paths, as on a machine of our kind without AVX-512.
 *
 *   gcc -O2 -shared -fPIC bench/cpuid_mask.c -o build-bench/cpuid_mask.so
 *   LD_PRELOAD=$PWD/build-bench/cpuid_mask.so CPUID_MASK=avx512 python ...
 *   (bench/run.sh --mask-avx512 does both)
 *
 * How: Linux's CPUID faulting (arch_prctl ARCH_SET_CPUID, flag cpuid_fault
 * in /proc/cpuinfo) turns each cpuid instruction into a SIGSEGV; the handler
 * runs the real cpuid with faulting briefly off, clears the AVX-512 feature
 * bits (leaf 7.0 EBX/ECX/EDX, leaf 7.1 EAX's AVX512_BF16) and steps over the
 * instruction. The setting is per thread, inherited by threads and children
 * created later, and reset by execve (the shim's constructor sets it again).
 * cpuid executed before the constructor (the dynamic loader's own feature
 * scan, which picks glibc's string functions) is not masked.
 *
 * A bench tool, not library code: if faulting cannot be enabled the shim
 * says so and exits, since a run that silently kept AVX-512 would mislabel
 * its numbers.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define ARCH_GET_CPUID 0x1011
#define ARCH_SET_CPUID 0x1012

static long set_cpuid(int enabled) { return syscall(SYS_arch_prctl, ARCH_SET_CPUID, enabled); }

static void mask(uint32_t leaf, uint32_t sub, uint32_t r[4]) {
    if (leaf == 7 && sub == 0) {
        /* EBX: F 16, DQ 17, IFMA 21, PF 26, ER 27, CD 28, BW 30, VL 31 */
        r[1] &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) |
                  (1u << 30) | (1u << 31));
        /* ECX: VBMI 1, VBMI2 6, VNNI 11, BITALG 12, VPOPCNTDQ 14 */
        r[2] &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
        /* EDX: 4VNNIW 2, 4FMAPS 3, VP2INTERSECT 8, FP16 23 */
        r[3] &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 23));
    } else if (leaf == 7 && sub == 1) {
        r[0] &= ~(1u << 5); /* AVX512_BF16 */
    } else if (leaf == 0x24) {
        r[0] = r[1] = r[2] = r[3] = 0; /* AVX10 */
    }
}

static void on_segv(int sig, siginfo_t *info, void *ctx) {
    ucontext_t *uc = ctx;
    greg_t *g = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)g[REG_RIP];
    (void)info;
    if (ip[0] != 0x0F || ip[1] != 0xA2) { /* a real fault: die as without us */
        signal(sig, SIG_DFL);
        return; /* the faulting instruction runs again and kills the process */
    }
    uint32_t leaf = (uint32_t)g[REG_RAX], sub = (uint32_t)g[REG_RCX], r[4];
    set_cpuid(1);
    __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
    set_cpuid(0);
    mask(leaf, sub, r);
    g[REG_RAX] = r[0];
    g[REG_RBX] = r[1];
    g[REG_RCX] = r[2];
    g[REG_RDX] = r[3];
    g[REG_RIP] += 2;
}

__attribute__((constructor)) static void cpuid_mask_init(void) {
    const char *what = getenv("CPUID_MASK");
    if (!what || strcmp(what, "avx512") != 0) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0 || set_cpuid(0) != 0) {
        fprintf(stderr, "cpuid_mask: cannot enable CPUID faulting (no cpuid_fault?); not running\n");
        _exit(99);
    }
}
