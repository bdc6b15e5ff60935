// avx512 kernels: attn::core::avx512, compiled with this ISA's flags only (see CMakeLists.txt).
// Blocking: 2 query vectors x 12 key rows (Q.K^T) and 2 x 12 head_dim values (P.V) of
// accumulators in registers; 96 keys per tile so the score tile stays in L1.
#define ATTN_ISA_NS avx512
#define ATTN_XSIMD_ARCH xsimd::avx512bw
#define ATTN_KERNEL_FN kernel_avx512
#define ATTN_ISA_ENUM Isa::Avx512
#define ATTN_ISA_NAME "avx512"
#define ATTN_NV 2
#define ATTN_KT 12
#define ATTN_DT 12
#define ATTN_BK 96
#include "kernel_xsimd.inc"
