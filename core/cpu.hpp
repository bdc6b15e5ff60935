// What this CPU and its operating system support, read once per process. Nothing here knows the
// kernels: dispatch.cpp maps these features to the ISA a call runs.
#pragma once

namespace attn {
namespace core {

// Each flag is true only when the CPU has the instructions AND the operating system saves the
// registers they use (XCR0 via xgetbv: the YMM state for AVX2, the opmask and ZMM state for
// AVX-512). All false off x86.
struct CpuFeatures {
    bool sse2 = false;
    bool avx2 = false, fma = false, f16c = false;
    bool avx512f = false, avx512bw = false, avx512dq = false, avx512cd = false, avx512vl = false;
    bool avx512fp16 = false; // AVX512-FP16 (Sapphire Rapids and later)
    // The L1 data cache of a core in bytes (cpuid's cache parameters), 32 KiB where unreported.
    unsigned long l1d_bytes = 32768;
};

const CpuFeatures &cpu_features();

} // namespace core
} // namespace attn
