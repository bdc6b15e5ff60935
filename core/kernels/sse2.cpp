// sse2 kernels: attn::core::sse2, compiled with this ISA's flags only (see CMakeLists.txt).
// Blocking: 2 query vectors x 4 key rows (Q.K^T) and 2 x 4 head_dim values (P.V) of
// accumulators in registers; 64 keys per tile so the score tile stays in L1.
#define ATTN_ISA_NS sse2
#define ATTN_XSIMD_ARCH xsimd::sse2
#define ATTN_KERNEL_FN kernel_sse2
#define ATTN_NV 2
#define ATTN_KT 4
#define ATTN_DT 4
#define ATTN_BK 64
#include "xsimd-inl.h"
