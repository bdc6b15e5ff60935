// avx2 kernels: attn::core::avx2, compiled with this ISA's flags only (see CMakeLists.txt).
// Blocking: 2 query vectors x 6 key rows (Q.K^T) and 2 x 6 head_dim values (P.V) of
// accumulators in registers; 96 keys per tile so the score tile stays in L1.
#define ATTN_ISA_NS avx2
#define ATTN_XSIMD_ARCH xsimd::fma3<xsimd::avx2>
#define ATTN_KERNEL_FN kernel_avx2
#define ATTN_ISA_ENUM Isa::Avx2
#define ATTN_ISA_NAME "avx2"
#define ATTN_NV 2
#define ATTN_KT 6
#define ATTN_DT 6
#define ATTN_BK 96
#include "kernel_xsimd.inc"
