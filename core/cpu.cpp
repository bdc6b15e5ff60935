// CPU detection: which instruction sets this CPU and operating system support (cpuid, and the OS
// support that xgetbv reports), read once. The ISA choice built on it is dispatch.cpp's.
#include "cpu.hpp"

#include "kernel.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace attn {
namespace core {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// The size of the level-1 data cache from the deterministic cache parameters of `leaf` (4 on
// Intel, 0x8000001D on AMD: the same layout), 0 if the leaf lists none.
unsigned long l1d_of_leaf(unsigned leaf) {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (__get_cpuid_max(leaf & 0x80000000u, nullptr) < leaf) return 0;
    for (unsigned sub = 0; sub < 16; ++sub) {
        __cpuid_count(leaf, sub, a, b, c, d);
        const unsigned type = a & 31u, level = (a >> 5) & 7u;
        if (type == 0) break;        // no more caches
        if (type == 1 && level == 1) // data cache, level 1: ways x partitions x line x sets
            return static_cast<unsigned long>((b >> 22) + 1) * (((b >> 12) & 1023u) + 1) *
                   ((b & 4095u) + 1) * (c + 1ul);
    }
    return 0;
}
#endif

CpuFeatures detect() {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    // __builtin_cpu_supports (libgcc / compiler-rt) reads cpuid and reports an AVX or AVX-512
    // feature only when xgetbv says the OS saves its registers.
    __builtin_cpu_init();
    f.sse2 = __builtin_cpu_supports("sse2");
    f.avx2 = __builtin_cpu_supports("avx2");
    f.fma = __builtin_cpu_supports("fma");
    f.avx512f = __builtin_cpu_supports("avx512f");
    f.avx512bw = __builtin_cpu_supports("avx512bw");
    f.avx512dq = __builtin_cpu_supports("avx512dq");
    f.avx512cd = __builtin_cpu_supports("avx512cd");
    f.avx512vl = __builtin_cpu_supports("avx512vl");
    // Two bits clang 14's __builtin_cpu_supports does not know, read from cpuid directly. Both
    // use state the checks above already required of the OS: F16C (leaf 1, ecx bit 29) the YMM
    // state of AVX2, AVX512-FP16 (leaf 7 subleaf 0, edx bit 23) the ZMM state of AVX512F.
    unsigned a = 0, b = 0, c = 0, d = 0;
    f.f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
    a = b = c = d = 0;
    f.avx512fp16 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 23) & 1u) != 0;
    unsigned long l1d = l1d_of_leaf(4);
    if (!l1d) l1d = l1d_of_leaf(0x8000001Du);
    if (l1d >= 4096 && l1d <= (1ul << 22)) f.l1d_bytes = l1d; // else the default
#endif
    return f;
}

} // namespace

const CpuFeatures &cpu_features() {
    static const CpuFeatures f = detect();
    return f;
}

size_t decode_prefetch_bytes() {
    static const size_t bytes = cpu_features().l1d_bytes / 8;
    return bytes;
}

} // namespace core
} // namespace attn
