// Streaming read loops, one translation unit per ISA (each compiled with that ISA's flags only;
// call a loop only when the CPU supports its ISA), and the harness that times them.
//
// Each loop sums n floats (x 64-byte aligned, n a multiple of kStreamBlock) with independent
// accumulators, so that the adds never wait on each other and only the memory limits the speed:
//   sse2    8 accumulators of 4 floats (xmm), 2 cache lines per iteration
//   avx2    8 accumulators of 8 floats (ymm), 4 cache lines per iteration
//   avx512  4 accumulators of 16 floats (zmm), 4 cache lines per iteration
// The result is a checksum (so the reads cannot be removed).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace attn_bench {

constexpr size_t kStreamBlock = 64; // floats: every loop's length must be a multiple of this

float stream_sum_sse2(const float *x, size_t n);
float stream_sum_avx2(const float *x, size_t n);
float stream_sum_avx512(const float *x, size_t n);

struct StreamLoop {
    const char *isa;  // "avx512", "avx2", "sse2"
    const char *what; // e.g. "4 x zmm accumulators"
    float (*fn)(const float *, size_t);
};

// The loops this CPU can run, widest first.
std::vector<StreamLoop> available_stream_loops();

// Best GB/s of `reps` passes, each reading x[0, n) once split evenly over `threads` threads
// (each on its own part; time from a common start signal to the last join).
double stream_read_gbs(const StreamLoop &loop, const float *x, size_t n, int threads, int reps);

} // namespace attn_bench
