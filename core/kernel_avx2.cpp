// avx2 kernels: attn::core::avx2, compiled with -mavx2 -mfma only (see CMakeLists.txt).
// Blocking: 2 query vectors (16 rows) x 6 key rows (Q.K^T) and 2 x 6 head_dim values (P.V) of
// accumulators: 12 of the 16 ymm registers. 96 keys per tile; 4-wide P.V blocks and 48/64-key
// tiles measured no faster (within 3%) at head_dim 64 and 128.
#define ATTN_ISA_NS avx2
#define ATTN_XSIMD_ARCH xsimd::fma3<xsimd::avx2>
#define ATTN_KERNEL_FN kernel_avx2
#define ATTN_NV 2
#define ATTN_KT 6
#define ATTN_DT 6
#define ATTN_BK 96
#define ATTN_TRANSPOSE_AVX2
#include "kernel_xsimd.inc"
