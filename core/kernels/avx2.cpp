// avx2 kernels: attn::core::avx2, compiled with -mavx2 -mfma only (see CMakeLists.txt).
// Blocking: 4 query vectors (32 rows) x 3 key rows (Q.K^T) and 4 x 3 head_dim values (P.V) of
// accumulators: 12 of the 16 ymm registers, 4 row vectors loaded and 3 values broadcast per 12
// FMAs (2 x 6 needed 2 loads and 6 broadcasts). Against 2 x 6, AMD Zen 3, n 2048, 1 thread,
// A/B in both orders: d128 0.96-0.98x the time, d64 0.95-0.98x, causal included; 3 x 4 measured
// no better. 96 keys per tile; 4-wide P.V blocks and 48/64-key tiles measured no faster (within
// 3%) at head_dim 64 and 128. The one-vector (decode-sized) kernel keeps 6 x 6: with one query
// vector, 3 keys would leave 3 accumulators for the FMA latency. The middle kernel keeps 2 x 6
// (64-row items) for calls of at most 64 query rows per KV head (with 4 x 3 their 128-row items
// computed up to 8x the lanes: n 16 took 1.6x the time) and for the backward (4 x 3 took
// 1.02-1.04x its time).
#define ATTN_ISA_NS avx2
#define ATTN_XSIMD_ARCH xsimd::fma3<xsimd::avx2>
#define ATTN_KERNEL_FN kernel_avx2
#define ATTN_NV 4
#define ATTN_KT 3
#define ATTN_DT 3
#define ATTN_NARROW_KT 6
#define ATTN_NARROW_DT 6
#define ATTN_MID_NV 2
#define ATTN_MID_KT 6
#define ATTN_MID_DT 6
#define ATTN_BK 96
#define ATTN_TRANSPOSE_AVX2
#include "xsimd-inl.h"
