// avx512 kernels: attn::core::avx512, compiled with this ISA's flags only (see CMakeLists.txt).
// Blocking (measured on the dev machine, 1 thread, n = 2048, head_dim 64 and 128): 2 query vectors
// (32 rows) x 8 key rows of Q.K^T accumulators and 2 x 8 head_dim values of P.V accumulators (16
// zmm each, leaving room for the operands); 64 keys per tile, so the K or V tile (64 x 128 floats =
// 32 KiB), the P tile (8 KiB) and a block of the output accumulator fit the 48 KiB L1 together.
// 12 x 12 blocks with 96-key tiles were ~15% slower (the V tile spilled out of L1), 3 query vectors
// ~8% slower.
#define ATTN_ISA_NS avx512
#define ATTN_XSIMD_ARCH xsimd::avx512bw
#define ATTN_KERNEL_FN kernel_avx512
#define ATTN_NV 2
#define ATTN_KT 8
#define ATTN_DT 8
#define ATTN_BK 64
#define ATTN_TRANSPOSE_AVX512
#include "xsimd-inl.h"
