// Register-only floating-point peak loops, one translation unit per ISA (each compiled with that
// ISA's flags only; call a loop only when the CPU supports its ISA).
//
// Each loop runs `iters` iterations of kAccumulators independent chains acc = acc * a + b on full
// vector registers and returns a checksum (so the work cannot be removed). With a = 0.999999 and
// b small every chain converges to a finite value: no overflow, no denormals.
//   AVX-512: 16 chains of vfmadd on zmm (16 lanes): 16 * 16 * 2 = 512 flops per iteration.
//     Enough chains: FMA latency 4 cycles x 2 FMA ports = 8 in flight needed; 16 leave margin.
//   AVX2:    12 chains of vfmadd on ymm (8 lanes):  12 * 8 * 2 = 192 flops per iteration
//     (16 ymm registers: 12 accumulators + 2 constants).
//   SSE2:    12 chains of mulps + addps on xmm (4 lanes, no FMA in SSE2): 12 * 4 * 2 = 96 flops
//     per iteration. This is the peak an SSE2 kernel (mul then add) can reach.
#pragma once

#include <algorithm>

#include "timing.hpp"

namespace attn_bench {

constexpr double kFlopsPerIterAvx512 = 16.0 * 16.0 * 2.0;
constexpr double kFlopsPerIterAvx2 = 12.0 * 8.0 * 2.0;
constexpr double kFlopsPerIterSse2 = 12.0 * 4.0 * 2.0;
constexpr double kFlopsPerIterAvx512Fp16 = 16.0 * 32.0 * 2.0; // peak_avx512fp16.cpp

float peak_loop_avx512(long iters);
float peak_loop_avx2(long iters);
float peak_loop_sse2(long iters);
float peak_loop_avx512fp16(long iters); // only where the compiler has -mavx512fp16

// Register-only integer and bf16 dot-product loops (the units of ATTN_COMPUTE_INT8 / BF16), one
// translation unit per instruction set, each compiled with its flags only. Ops count 2 per
// multiply-add, as flops do. Each chain is acc = acc + unit(acc, y): the unit's result feeds its
// own chain, so no two chains share a product the compiler could compute once.
//   pmaddwd + paddd ymm (AVX2), 10 chains:           10 * 16 * 2 =  320 ops per iteration
//     (10: 12 accumulators and their products left GCC short of the 16 ymm registers)
//   vpmaddwd + vpaddd zmm (AVX-512BW), 16 chains:    16 * 32 * 2 = 1024
//   vpdpbusd zmm (AVX512-VNNI, u8 x s8), 16 chains:  16 * 64 * 2 = 2048
//   vdpbf16ps zmm (AVX512-BF16), 16 chains:          16 * 32 * 2 = 1024
constexpr double kOpsPerIterMaddAvx2 = 10.0 * 16.0 * 2.0;
constexpr double kOpsPerIterMaddAvx512 = 16.0 * 32.0 * 2.0;
constexpr double kOpsPerIterVnniAvx512 = 16.0 * 64.0 * 2.0;
constexpr double kOpsPerIterBf16Avx512 = 16.0 * 32.0 * 2.0;
float peak_loop_madd_avx2(long iters);
float peak_loop_madd_avx512(long iters);
float peak_loop_vnni_avx512(long iters); // only where the compiler has -mavx512vnni
float peak_loop_bf16_avx512(long iters); // only where the compiler has -mavx512bf16

// GFLOP/s of one thread running `loop`: the best of 5 runs of 2e7 iterations.
template <class F> double peak_gflops(F loop, double flops_per_iter) {
    const long iters = 20000000;
    double best = 1e30;
    volatile float sink = 0;
    for (int r = 0; r < 5; ++r) {
        const double t0 = now();
        sink = sink + loop(iters);
        best = std::min(best, now() - t0);
    }
    return flops_per_iter * static_cast<double>(iters) / best / 1e9;
}

} // namespace attn_bench
