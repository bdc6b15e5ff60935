// Which kernel a call runs: the ISA names (what attn_set_isa and ATTN_ISA accept), the best ISA
// this CPU (cpu.hpp) and this build support, the process-wide cap (ATTN_ISA, attn_set_isa) and
// the kernel table of each ISA (kernel.hpp).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "attention.hpp"
#include "cpu.hpp"
#include "kernel.hpp"

namespace attn {
namespace core {
namespace {

const char *const kIsaNames[kIsaCount] = {"scalar", "sse2", "avx2", "avx512", "avx512fp16"};

Isa detect_best() {
    const CpuFeatures &f = cpu_features();
    if (f.avx512f && f.avx512bw && f.avx512dq && f.avx512cd)
        return f.avx512fp16 && f.avx512vl && fp16_kernel() ? Isa::Avx512Fp16 : Isa::Avx512;
    // the avx2 kernels also widen fp16 with F16C (every AVX2 CPU has it)
    if (f.avx2 && f.fma && f.f16c) return Isa::Avx2;
    if (f.sse2) return Isa::Sse2;
    return Isa::Scalar;
}

Isa best_isa() {
    static const Isa best = detect_best();
    return best;
}

// ATTN_ISA caps the kernel like attn_set_isa. A value that is not an ISA name (the names are
// exact, lower case, as attn_set_isa takes them) is ignored with a one-time warning on stderr.
int env_cap() {
    static const int cap = [] {
        Isa isa;
        const char *env = std::getenv("ATTN_ISA");
        if (!env || !*env) return kIsaCount - 1;
        if (isa_from_name(env, &isa)) return static_cast<int>(isa);
        std::fprintf(stderr, "libattn: ignoring ATTN_ISA=\"%.64s\": not one of %s\n", env,
                     isa_names());
        return kIsaCount - 1;
    }();
    return cap;
}

std::atomic<int> g_cap{-1}; // -1: use ATTN_ISA / best

const KernelInfo &kernel_for(Isa isa) {
    switch (isa) {
    case Isa::Avx512Fp16: // the avx512 kernels; the fp16 path is chosen per call (forward.cpp)
        return kernel_avx512fp16();
    case Isa::Avx512:
        return kernel_avx512();
    case Isa::Avx2:
        return kernel_avx2();
    case Isa::Sse2:
        return kernel_sse2();
    default:
        return kernel_scalar();
    }
}

} // namespace

const KernelInfo &kernel_avx512fp16() {
    static const KernelInfo info = [] {
        KernelInfo k = kernel_avx512();
        k.fp16 = fp16_kernel();
        return k;
    }();
    return info;
}

const char *isa_name(Isa isa) {
    const int x = static_cast<int>(isa);
    return x >= 0 && x < kIsaCount ? kIsaNames[x] : "unknown";
}

const char *compute_unit(Compute mode, Isa isa) {
    static const char *const exact[kIsaCount] = {"fp32 (scalar)", "fp32 mulps + addps (sse2)",
                                                 "fp32 vfmadd (avx2)", "fp32 vfmadd (avx512)",
                                                 "fp32 vfmadd (avx512)"};
    static const char *const int8[kIsaCount] = {
        "int16 pairs into int32 (scalar)", "int16 pmaddwd (sse2)", "int16 vpmaddwd (avx2)",
        "int16 vpmaddwd (avx512)", "int16 vpmaddwd (avx512)"};
    const int x = static_cast<int>(isa);
    if (x < 0 || x >= kIsaCount) return nullptr;
    switch (mode) {
    case Compute::Exact:
    case Compute::Bf16: // no bf16 kernel: exact
        return exact[x];
    case Compute::Fp16:
        return isa == Isa::Avx512Fp16 ? "fp16 vfmadd*ph (avx512fp16)" : exact[x];
    case Compute::Int8:
        return int8[x];
    }
    return nullptr;
}

const char *isa_names() {
    static const std::string list = [] {
        std::string s;
        for (int x = 0; x < kIsaCount; ++x) (s += x ? ", " : "") += kIsaNames[x];
        return s;
    }();
    return list.c_str();
}

bool isa_from_name(const char *name, Isa *out) {
    for (int x = 0; x < kIsaCount; ++x)
        if (name && std::strcmp(name, kIsaNames[x]) == 0) {
            *out = static_cast<Isa>(x);
            return true;
        }
    return false;
}

bool isa_supported(Isa isa) {
    return static_cast<int>(isa) <= static_cast<int>(best_isa());
}

Isa active_isa() {
    const int cap = g_cap.load();
    const int c = cap >= 0 ? cap : env_cap();
    const int best = static_cast<int>(best_isa());
    return static_cast<Isa>(c < best ? c : best);
}

void set_isa_cap(Isa cap) {
    g_cap.store(static_cast<int>(cap));
}
void reset_isa_cap() {
    g_cap.store(-1);
}

const KernelInfo &current_kernel() {
    return kernel_for(active_isa());
}

} // namespace core
} // namespace attn
