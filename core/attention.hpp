// libattn core: entry points, ISA selection and the per-row rules the kernels share. The problem
// description (Params, Tensors) is params.hpp, the operands' geometry layout.hpp. No C API types
// appear here; capi/ maps its descriptor onto these structs. Everything in namespace attn::core is
// internal (hidden).
#pragma once

#include <cstddef>
#include <cstdint>

#include "layout.hpp" // addressing of every operand in the dense, strided, varlen and paged layouts
#include "params.hpp" // Params, Tensors

namespace attn {
namespace core {

// Kernel families, ordered from weakest to strongest. Avx512Fp16 runs the avx512 kernels and
// adds the fp16 fast path (ATTN_PARAM_COMPUTE = FP16, core/kernels/avx512fp16.cpp).
enum class Isa : int { Scalar = 0, Sse2 = 1, Avx2 = 2, Avx512 = 3, Avx512Fp16 = 4 };
constexpr int kIsaCount = 5;
const char *isa_name(Isa isa);
bool isa_from_name(const char *name, Isa *out);
// Every name isa_from_name takes, weakest first, comma-separated ("scalar, sse2, ..."): the one
// list messages quote, built from the same table as isa_name.
const char *isa_names();
// The unit ATTN_PARAM_COMPUTE = `mode` runs its products on with the kernels of `isa`
// (attn_compute_unit): a mode that runs as exact there names the exact unit.
const char *compute_unit(Compute mode, Isa isa);

// The diagonals of batch entry b as offsets from the query index: the causal rule's ("key j
// visible to query i iff j <= i + causal" under a causal rule) and diag(i) = i + window, the one
// the sliding window and ALiBi measure from (the causal rule's unless ATTN_PARAM_DIAGONAL says
// otherwise).
struct Diags {
    long long causal = 0, window = 0;
};
inline Diags diag_offsets(const Params &p, const Tensors &t, size_t b) {
    const long long br =
        static_cast<long long>(key_len(p, t, b)) - static_cast<long long>(query_len(p, t, b));
    Diags d;
    d.causal = p.causal == Causal::BottomRight ? br : 0;
    d.window = p.diagonal == Diagonal::Causal        ? d.causal
               : p.diagonal == Diagonal::BottomRight ? br
                                                     : 0;
    return d;
}

// Clips the key range [*lo, *hi) to the keys the causal rule and the sliding window leave to
// query i: j <= i + d.causal when causal, and diag - window_left <= j <= diag + window_right
// with diag = i + d.window. May leave *lo >= *hi (nothing visible).
inline void clip_to_visible(const Params &p, long long i, const Diags &d, long long *lo,
                            long long *hi) {
    const long long diag = i + d.window;
    if (p.causal != Causal::None && i + d.causal + 1 < *hi) *hi = i + d.causal + 1;
    if (p.window_right >= 0 && diag + p.window_right + 1 < *hi) *hi = diag + p.window_right + 1;
    if (p.window_left >= 0 && diag - p.window_left > *lo) *lo = diag - p.window_left;
}

// The ALiBi slope of query head h of batch entry (varlen / paged: sequence) b.
inline float alibi_slope(const Params &p, const Tensors &t, size_t b, size_t h) {
    return t.alibi[b * p.alibi_batch + h * p.alibi_head];
}

// The sink logit of query head h, or false when there is none.
inline bool sink_of(const Params &p, const Tensors &t, size_t h, float *sink) {
    if (t.sinks) {
        *sink = t.sinks[h];
        return true;
    }
    if (p.plus_one) {
        *sink = 0.0f;
        return true;
    }
    return false;
}

// The scale is folded into q when that cannot overflow (|scale| <= 1); otherwise the scores are
// multiplied by it after Q.K^T, so scale * (q.k) is exact to rounding whenever it is finite.
inline bool fold_scale(const Params &p) {
    return p.scale <= 1.0f && p.scale >= -1.0f;
}

// Entry points. They throw std::bad_alloc when scratch cannot be allocated; nothing else.
void forward(const Params &p, const Tensors &t);
void weights(const Params &p, const Tensors &t);
// Gradients of the forward (t.lse and t.out from it, t.dout given). Bit-identical for any thread
// count.
void backward(const Params &p, const Tensors &t);

// Writes the new K/V rows (token-major [tokens][heads_kv][head_dim(_v)]) into t.k / t.v (the
// caller's writable caches) at positions key_len(b) - query_len(b) + x. Arguments checked.
void kv_append(const Params &p, const Tensors &t, const float *new_k, const float *new_v);
// New K or V rows for kv_append into a cache of any storage type (p.k_type / p.v_type, int8
// scales t.k_scale / t.v_scale, written): data is token-major [tokens][heads_kv][dim] of `type`,
// either fp32 (converted to the cache's type, round to nearest even, or quantized as
// quantize_i8 does; every row finite when the cache is int8) or the cache's own type (copied;
// int8 rows with their scales [tokens][heads_kv] in `scale`).
struct NewRows {
    const void *data = nullptr;
    DType type = DType::F32;
    const float *scale = nullptr;
};
void kv_append(const Params &p, const Tensors &t, const NewRows &new_k, const NewRows &new_v);

// acc.out / acc.lse <- exact merge with the part (same layouts as acc's OUT and LSE).
void merge_into(const Params &p, const Tensors &acc, const float *part_out, const float *part_lse);

// Array conversions (round to nearest even; NaN stays NaN) and the symmetric int8 quantizer:
// per row of `dim` values scale = max|x| / 127, q = round(x / scale). quantize_i8 returns the
// first row holding a non-finite value (rows before it are written), or `rows`.
void f16_to_f32(const uint16_t *src, float *dst, size_t n);
void bf16_to_f32(const uint16_t *src, float *dst, size_t n);
void f32_to_f16(const float *src, uint16_t *dst, size_t n);
void f32_to_bf16(const float *src, uint16_t *dst, size_t n);
size_t quantize_i8(const float *src, size_t rows, size_t dim, int8_t *dst, float *scales);
// fp8 (type E4M3 / E5M2) with one scale: code = x / scale rounded to nearest even, saturating;
// returns as quantize_i8 (a non-finite quotient's row). fp8_to_f32: value * scale, exact widening.
size_t quantize_fp8(const float *src, size_t rows, size_t dim, DType type, float scale,
                    uint8_t *dst);
void fp8_to_f32(const uint8_t *src, size_t n, DType type, float scale, float *dst);
// The first new row (in the [tokens][heads_kv] order of NEW_K / NEW_V) that kv_append would
// quantize into an fp8 cache (K, or V when `value`) with a scale that is not finite and > 0, or
// SIZE_MAX; *scale gets that scale.
size_t kv_append_bad_scale(const Params &p, const Tensors &t, bool value, float *scale);

// Kernel selection: best ISA the CPU supports, capped by ATTN_ISA or set_isa_cap().
Isa active_isa();
bool isa_supported(Isa isa);
void set_isa_cap(Isa cap);
void reset_isa_cap();

} // namespace core
} // namespace attn
