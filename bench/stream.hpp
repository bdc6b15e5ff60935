// Streaming read loops, one translation unit per ISA (each compiled with that ISA's flags only;
// call a loop only when the CPU supports its ISA), and the harness that times them.
//
// Each loop sums n floats (x 64-byte aligned, n a multiple of kStreamBlock) with independent
// accumulators, so that the adds never wait on each other and only the memory limits the speed:
//   sse2    8 accumulators of 4 floats (xmm), 2 cache lines per iteration
//           x16: 16 accumulators, 4 lines; 2s: two streams (the two halves side by side)
//   avx2    8 accumulators of 8 floats (ymm), 4 cache lines per iteration
//           x12: 12 accumulators, 6 lines; 2s: two streams
//   avx512  4 accumulators of 16 floats (zmm), 4 cache lines per iteration
//           x8: 8 accumulators, 8 lines; 2s: two streams of 4 lines each
// The variants are there because the fastest read depends on the CPU: more lines in flight per
// iteration, or two streams for the hardware prefetcher to follow, can win where the core's
// fill buffers or the prefetcher are the limit rather than the DRAM.
// The result is a checksum (so the reads cannot be removed).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace attn_bench {

constexpr size_t kStreamBlock = 64; // floats: every loop's length must be a multiple of this

float stream_sum_sse2(const float *x, size_t n);
float stream_sum_sse2_x16(const float *x, size_t n);
float stream_sum_sse2_2s(const float *x, size_t n);
float stream_sum_avx2(const float *x, size_t n);
float stream_sum_avx2_x12(const float *x, size_t n);
float stream_sum_avx2_2s(const float *x, size_t n);
float stream_sum_avx512(const float *x, size_t n);
float stream_sum_avx512_x8(const float *x, size_t n);
float stream_sum_avx512_2s(const float *x, size_t n);

struct StreamLoop {
    const char *isa;  // "avx512", "avx2", "sse2"
    const char *what; // e.g. "4 x zmm accumulators"
    float (*fn)(const float *, size_t);
};

// The loops this CPU can run, widest ISA first; each ISA's plain loop first among its own.
std::vector<StreamLoop> available_stream_loops();

// The loop's sum of a small array whose lengths exercise its tails (a few lengths, multiples of
// kStreamBlock), against the exact sum: the largest |difference|. A loop that skips or repeats
// lines shows here.
double stream_check(const StreamLoop &loop);

// Best GB/s of `reps` passes, each reading x[0, n) once split evenly over `threads` threads
// (each on its own part; time from a common start signal to the last join).
double stream_read_gbs(const StreamLoop &loop, const float *x, size_t n, int threads, int reps);

} // namespace attn_bench
