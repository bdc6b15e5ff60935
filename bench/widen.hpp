// The widening limit of decode: register-only loops that do the decode kernel's arithmetic per
// byte of K/V cache with no memory traffic (core/kernels/decode-inl.h's instruction mix, not its
// code). One translation unit per ISA, each compiled with that ISA's flags only; call a loop only
// when the CPU supports its ISA (available_widen_loops).
//
// Per vector of cache elements a loop loads it from a 12 KiB L1-resident buffer, widens it to
// fp32 (f16: F16C / AVX-512 vcvtph2ps, SSE2: the exact integer conversion; bf16: a 16-bit shift;
// int8: sign-extend + convert) and does `group` multiply-adds with it (one per query row of the
// KV head, as Q.K^T and P.V do); an int8 row's scale costs one multiply per query row per row.
// Accumulators: G x U (G = group, U keys at a time) with enough independent chains to hide the
// FMA latency: 12-16 on AVX-512 (the decode kernel's 4 rows x 4 keys), 12 on AVX2 where the 16
// registers hold them (the kernel's int8 4 x 3) and 8 at 8 rows; SSE2 has no FMA (a multiply
// and an add: 8 chains hide the add's latency).
//
// The figure is "GB/s of cache bytes" a core can widen and multiply: if it is below the read
// bandwidth, decode over that storage type is bound by its arithmetic, not by memory.
#pragma once

#include <cstddef>
#include <vector>

namespace attn_bench {

// K/V storage types, in the order of the library's setters (attn_args_set_f32 / _f16 / _bf16 /
// _i8).
enum Store : int { F32 = 0, F16 = 1, BF16 = 2, I8 = 3 };
extern const char *const kStoreName[4];     // "f32", "f16", "bf16", "int8"
extern const size_t kStoreBytes[4];         // bytes per element
constexpr size_t kWidenBufferBytes = 12288; // the L1-resident buffer of cache bytes

// One pass over `rows` rows of d elements of storage s (kv; 64-byte aligned; rows a multiple of
// 24, d a multiple of 16: 12 KiB of rows of 64-512 bytes are), against q: [group][d] fp32, int8
// rows scaled by scale[rows]; repeated `passes` times. group is 1, 2, 4 or 8. Returns a checksum.
using WidenFn = float (*)(int s, int group, const void *kv, size_t d, size_t rows,
                          const float *scale, const float *q, size_t passes);

float widen_sse2(int s, int group, const void *kv, size_t d, size_t rows, const float *scale,
                 const float *q, size_t passes);
float widen_avx2(int s, int group, const void *kv, size_t d, size_t rows, const float *scale,
                 const float *q, size_t passes);
float widen_avx512(int s, int group, const void *kv, size_t d, size_t rows, const float *scale,
                   const float *q, size_t passes);

struct WidenLoop {
    const char *isa; // "avx512", "avx2", "sse2"
    WidenFn fn;
};

// The loops this CPU can run, widest first (AVX2's needs FMA and F16C too).
std::vector<WidenLoop> available_widen_loops();

// The loop of the library's kernel `isa` (attn_isa(): "avx512fp16" and "avx512" -> avx512,
// "avx2", "sse2"), or null (the scalar kernel, or a loop this CPU cannot run).
const WidenLoop *widen_loop_for(const char *isa);

// The loop's checksum over one pass of random finite values of storage s (negative, subnormal
// and large ones among them) against a float64 sum of the same products: |difference| / sum of
// |products|. A loop that widens wrongly or skips work shows here.
double widen_check(const WidenLoop &loop, int s, int group, size_t d);

// GB/s of cache bytes of the loop on one thread: the best of 3 runs of *passes passes each;
// when *passes is 0, it is first set to the passes that take about `seconds`.
double widen_gbs(const WidenLoop &loop, int s, int group, size_t d, double seconds, size_t *passes);

} // namespace attn_bench
