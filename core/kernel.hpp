// The kernel table: the interface between the strategies (forward.cpp, weights.cpp, backward.cpp,
// baseline code) and the per-ISA kernels (core/kernels/*.cpp), one KernelInfo per ISA.
// Only plain structs and function pointers cross it: no xsimd type, no inline std:: template, so
// a wide ISA's code can never be picked by the linker for a baseline call (ODR safety).
#pragma once

#include "attention.hpp"

namespace attn {
namespace core {

// One unit of parallel work. The queries of kv head `kvh` form `heads_q / heads_kv` x seq_q rows,
// numbered r = i * group + g (query i of query head kvh * group + g): consecutive rows share a
// query position, so a causal tile boundary cuts few of them. An item covers rows [r0, r0 + rows)
// (rows <= lanes of the kernel) and keys [k_begin, k_end).
struct WorkItem {
    size_t b = 0, kvh = 0, r0 = 0, rows = 0, k_begin = 0, k_end = 0;
};

// Per-lane partial state of one item when keys are split across items (decode): running max m,
// sum l, visibility flag and unnormalised output o[head_dim_v_padded][lanes]. Merged exactly by the
// scheduler in a fixed order, so results do not depend on the thread count.
struct Partial {
    float *data = nullptr; // [3 + head_dim_v_padded][lanes]: m, l, vis, then o
};

// Decode items of one batch entry, row block and key range that share a pass over the key tiles
// (KernelInfo::forward_heads), at most this many KV heads at a time.
constexpr size_t kDecodeHeads = 8;
// Query rows per KV head up to which a row block takes the decode path (narrow kernels).
constexpr size_t kDecodeRowsMax = 4;
// Bytes of K rows (and as many of V rows) the decode path requests ahead of the key it computes:
// an eighth of the core's L1 data cache (cpuid, cpu.cpp), so that the rows requested ahead in
// both streams stay in L1 beside the tile's scratch until they are read (AMD Zen 3, 32 KiB:
// 4 KiB; 2, 4 and 8 KiB decoded at 0.60-0.64 of the read loop alike, 1 thread, d128 fp32).
size_t decode_prefetch_bytes();
// The largest head_dim of the integer products of ATTN_COMPUTE_INT8 (their int32 sums of
// 2047 * 1023 per element fit up to it; kernels/int8-inl.h); larger ones run exact.
constexpr size_t kInt8MaxDim = 1024;
// Head-major pages with at most this many bytes per KV head and page (K or V) take the
// page-major walk of forward_heads; larger ones read well head by head. AMD Zen 3, d128 fp32,
// page-major / head-by-head time: page 16 (8 KiB) 0.84-0.90, 32 0.97-0.98, 64 1.08-1.11, 128 1.22.
constexpr size_t kPageMajorBytes = 16384;

// Whether a paged call's K and V pages are head-major and small enough for the page-major walk.
inline bool page_major_pages(const Params &p) {
    const size_t kb = p.shape.head_dim * dtype_bytes(p.k_type);
    const size_t vb = p.shape.head_dim_v * dtype_bytes(p.v_type);
    return p.page_size && p.k.head > p.k.row && p.v.head > p.v.row &&
           p.page_size * (kb > vb ? kb : vb) <= kPageMajorBytes;
}

// The fp16 fast path (core/kernels/avx512fp16.cpp, AVX512-FP16; ATTN_PARAM_COMPUTE = FP16): one
// item = query head h of batch entry b, queries [q0, q0 + block_rows).
struct Fp16Kernel {
    size_t block_rows;
    // No fp16 value or partial sum of the call can overflow.
    bool (*in_range)(const Params &p, const Tensors &t);
    size_t (*scratch_bytes)(const Params &p);
    // Values of one (b, kvh)'s K in fp16 (tiles of keys, transposed).
    size_t (*k_elems)(const Params &p);
    // The rows of (b, kvh) in fp16 into dst: V (value true) as [key_len][head_dim_v], K as
    // k_elems(p) values.
    void (*convert_rows)(const Params &p, const Tensors &t, bool value, size_t b, size_t kvh,
                         uint16_t *dst);
    // k16: the converted K of every (b, kvh) at (b * heads_kv + kvh) * k_elems(p); v16 the
    // converted V at (b * heads_kv + kvh) * seq_k * head_dim_v, or null when V is stored in fp16
    // (read in place).
    void (*item)(const Params &p, const Tensors &t, size_t b, size_t h, size_t q0,
                 const uint16_t *k16, const uint16_t *v16, void *scratch);
};

struct KernelInfo {
    size_t lanes;     // rows per work item
    size_t dim_block; // head_dim_v rounding of the output accumulator
    // Bytes of scratch one thread needs for this problem (64-byte aligned base expected).
    size_t (*scratch_bytes)(const Params &p);
    // out/lse rows of the item (or `partial` when non-null).
    void (*forward)(const Params &p, const Tensors &t, const WorkItem &w, void *scratch,
                    const Partial *partial);
    // forward of n <= kDecodeHeads items that differ only in their KV head, with partials[x] for
    // ws[x] (or all null): decode items walk the key tiles once for all of them (a token-major
    // cache then streams its memory in order), with each item's results as forward gives them.
    void (*forward_heads)(const Params &p, const Tensors &t, const WorkItem *ws, size_t n,
                          void *scratch, const Partial *partials);
    // weights rows of the item (all keys).
    void (*weights)(const Params &p, const Tensors &t, const WorkItem &w, void *scratch);
    // key_mass rows of the KV head of the item (every row of it; t.lse holds the rows' lse).
    void (*mass)(const Params &p, const Tensors &t, const WorkItem &w, void *scratch);
    // Backward of one (batch entry b, KV head kvh) over the keys [k0, k1) (k0 a multiple of 128):
    // their dK, dV (and dBias) rows, and those keys' share of dQ for every query row of the KV
    // head, into t.dq, or when dq_part is non-null into dq_part[(g * seq_q + i) * head_dim]
    // (query i of the group's head g). The sink-logit gradient of each of its query heads goes
    // into dsink[group] (when non-null).
    size_t (*backward_scratch)(const Params &p);
    void (*backward)(const Params &p, const Tensors &t, size_t b, size_t kvh, size_t k0, size_t k1,
                     float *dq_part, void *scratch, float *dsink);
    // The same ISA with fewer query vectors per item (or null): used when a KV head has at most
    // `narrow->lanes` query rows (decode, small GQA groups, short prompts), so no lanes are
    // computed in vain. The chain ends at one query vector per item.
    const KernelInfo *narrow;
    // Array conversions (attn_convert_*, attn_quantize_i8), vectorised for the ISA.
    void (*f16_to_f32)(const uint16_t *src, float *dst, size_t n);
    void (*bf16_to_f32)(const uint16_t *src, float *dst, size_t n);
    void (*f32_to_f16)(const float *src, uint16_t *dst, size_t n);
    void (*f32_to_bf16)(const float *src, uint16_t *dst, size_t n);
    // Returns the first row with a non-finite value (nothing written from it on), or rows.
    size_t (*quantize_i8)(const float *src, size_t rows, size_t dim, int8_t *dst, float *scales);
    // fp8 (type E4M3 / E5M2) with one scale; returns as quantize_i8.
    size_t (*quantize_fp8)(const float *src, size_t rows, size_t dim, DType type, float scale,
                           uint8_t *dst);
    void (*fp8_to_f32)(const uint8_t *src, size_t n, DType type, float scale, float *dst);
    // Compute::Int8: K of (b, kvh) minus its channel mean over the real keys, quantized per key
    // (the layout of Tensors::kq: codes of key j at codes + j * kq_row, scale at scales[j], the
    // mean into mean[head_dim]); work holds 3 * head_dim floats. False when a real key holds a
    // non-finite value (the call then computes Q.K^T exactly).
    bool (*quantize_keys)(const Params &p, const Tensors &t, size_t b, size_t kvh, int32_t *codes,
                          size_t kq_row, float *scales, float *mean, float *work);
    // ... and V of (b, kvh) per tile of tile_keys keys (the layout of Tensors::vq, from this
    // (b, kvh)'s first tile); work holds 3 * head_dim_v floats. False when a real key's value is
    // not finite (the call then computes P.V in fp32).
    bool (*quantize_values)(const Params &p, const Tensors &t, size_t b, size_t kvh, int32_t *codes,
                            float *scales, float *work);
    size_t tile_keys; // keys per tile of the row blocks (kBK)
    // The fp16 fast path, or null: set in the avx512fp16 table only (and there null when the
    // compiler could not build it).
    const Fp16Kernel *fp16;
};

const KernelInfo &kernel_scalar();
const KernelInfo &kernel_sse2();
const KernelInfo &kernel_avx2();
const KernelInfo &kernel_avx512();
// The avx512 kernels plus the fp16 fast path (dispatch.cpp). Call it only on a CPU with
// AVX512-FP16.
const KernelInfo &kernel_avx512fp16();
// The fp16 path's table (core/kernels/avx512fp16.cpp), or null when this build lacks it.
const Fp16Kernel *fp16_kernel();

// The kernel calls use now: the best the CPU supports, capped by ATTN_ISA or attn_set_isa.
const KernelInfo &current_kernel();

} // namespace core
} // namespace attn
