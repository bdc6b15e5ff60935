// libattn core: problem description and entry points. No C API types appear here; capi/ maps
// its descriptor onto these structs. Everything in namespace attn::core is internal (hidden).
#pragma once

#include <cstddef>
#include <cstdint>

namespace attn {
namespace core {

enum class Causal : int { None = 0, TopLeft = 1, BottomRight = 2 };

// The diagonal the sliding window and ALiBi measure from (ATTN_PARAM_DIAGONAL): the causal
// rule's, or top-left / bottom-right whatever the causal rule.
enum class Diagonal : int { Causal = 0, TopLeft = 1, BottomRight = 2 };

// Kernel families, ordered from weakest to strongest. Avx512Fp16 runs the avx512 kernels and
// adds the fp16 fast path (ATTN_PARAM_COMPUTE = FP16, core/kernels/avx512fp16.cpp).
enum class Isa : int { Scalar = 0, Sse2 = 1, Avx2 = 2, Avx512 = 3, Avx512Fp16 = 4 };
constexpr int kIsaCount = 5;
const char *isa_name(Isa isa);
bool isa_from_name(const char *name, Isa *out);
// Every name isa_from_name takes, weakest first, comma-separated ("scalar, sse2, ..."): the one
// list messages quote, built from the same table as isa_name.
const char *isa_names();

// Storage type of Q, K or V. 16-bit values are widened to fp32 on load; int8 values are
// symmetric with one fp32 scale per (token, KV head): the value is float(q) * scale, rounded to
// fp32. Everything is computed in fp32 on the widened values.
enum class DType : int { F32 = 0, F16 = 1, BF16 = 2, I8 = 3 };
inline size_t dtype_bytes(DType t) {
    return t == DType::F32 ? 4 : t == DType::I8 ? 1 : 2;
}

// Element strides of one [batch][heads][seq][head_dim] operand; head_dim is contiguous. In a
// varlen call `batch` of Q and OUT (and of K and V without paging) is unused: sequence b starts
// at token cu_seqlens[b] of a token-major pack. With a paged cache `batch` of K and V is the
// page stride and `row` the token stride inside a page.
struct Layout {
    size_t batch = 0, head = 0, row = 0;
};

// q: [batch][heads_q][seq_q][head_dim], k: [batch][heads_kv][seq_k][head_dim],
// v: [batch][heads_kv][seq_k][head_dim_v], out: [batch][heads_q][seq_q][head_dim_v]
struct Shape {
    size_t batch = 0, heads_q = 0, heads_kv = 0, seq_q = 0, seq_k = 0, head_dim = 0, head_dim_v = 0;
};

// What the weights entry point writes (attn_weights_mode): probabilities, or the scores at a
// stage of the score pipeline.
enum class WeightsMode : int { Softmax = 0, Scores = 1, Masked = 2, Capped = 3, Softcapped = 4 };

// Where the ALiBi slopes come from (ATTN_PARAM_ALIBI): none, the caller's operand (Tensors::alibi),
// or the standard slopes of heads_q heads, which core supplies for the call (prepare_alibi).
enum class Alibi : int { None = 0, Operand = 1, Standard = 2 };

struct Params {
    Shape shape;
    Layout q, k, v, out;
    Layout bias; // [batch][heads_q][seq_q][seq_k]: batch, head, row (= query) strides
    float scale = 1.0f;
    Causal causal = Causal::None;
    long long window_left = -1, window_right = -1; // -1 = unbounded
    Diagonal diagonal = Diagonal::Causal;          // of the window and ALiBi
    Alibi alibi = Alibi::None;
    bool alibi_symmetric = false;           // -slope |diag(i) - j| instead of -slope (diag(i) - j)
    size_t alibi_batch = 0, alibi_head = 1; // slope of (b, h) at alibi[b * batch + h * head]
    float softcap = 0.0f;                   // 0 = off
    bool bias_first = false;                // bias before softcap (ONNX order)
    bool plus_one = false;                  // sink logit 0 for every head
    WeightsMode weights_mode = WeightsMode::Softmax;
    // Serving layouts (attn_param VARLEN, PAGE_SIZE, MAX_PAGES, BATCH_INVARIANT).
    bool varlen = false;    // Q/OUT (and K/V unless paged) packed by cu_seqlens
    size_t page_size = 0;   // 0 = contiguous K/V; else K/V are pages of this many tokens
    size_t max_pages = 0;   // columns of the block table
    size_t total_q = 0;     // varlen: cu_seqlens_q[batch] of this call (set per call)
    bool invariant = false; // reduction order over keys depends on key positions only
    // Storage types (attn_args setters), and the strides of the int8 scales of K and V
    // ([batch][heads_kv][seq_k] with the same meaning as k's strides, head_dim = 1).
    DType q_type = DType::F32, k_type = DType::F32, v_type = DType::F32;
    Layout ks, vs;
    // ATTN_PARAM_COMPUTE = FP16: the fp16 fast path where it applies (else exact).
    bool fp16 = false;
};

// Raw operands of one call. key_valid: [batch][seq_k], allowed: [seq_q][seq_k]; bytes, nonzero =
// true; either may be null (= all true). lse and weights may be null when not wanted.
//   bias:        [batch][heads_q][seq_q][seq_k] (Params::bias strides), null = none
//   alibi:       [batch][heads_q] slopes (Params::alibi_batch / alibi_head strides), null = none;
//                with Alibi::Standard the entry points point it at core's own slopes
//   sinks:       [heads_q] sink logits, null = none (Params::plus_one supplies zeros)
//   query_valid: [batch][seq_q] bytes, null = all real
//   seq_lens_k:  [batch] keys of each batch entry (each <= seq_k), null = seq_k
//   key_mass:    [batch][heads_q][seq_k] output, null = not wanted
struct Tensors {
    // q is float when q_type is F32, else 16-bit (q16); k and v point at elements of k_type /
    // v_type; k_scale / v_scale are the int8 scales (null unless I8).
    const float *q = nullptr;
    const uint16_t *q16 = nullptr;
    const void *k = nullptr, *v = nullptr;
    const float *k_scale = nullptr, *v_scale = nullptr;
    const uint8_t *key_valid = nullptr, *allowed = nullptr;
    float *out = nullptr, *lse = nullptr, *weights = nullptr;
    const float *bias = nullptr, *alibi = nullptr, *sinks = nullptr;
    const uint8_t *query_valid = nullptr;
    const int32_t *seq_lens_k = nullptr;
    float *key_mass = nullptr;
    // Serving layouts: cu_q / cu_k [batch + 1] prefix sums (varlen), block_table
    // [batch][max_pages] page ids (paged K/V).
    const int32_t *cu_q = nullptr, *cu_k = nullptr, *block_table = nullptr;
    // Backward: dout like out (read), gradients in the layouts of q, k, v, bias; dsinks
    // [heads_q]. Any gradient may be null (not wanted).
    const float *dout = nullptr;
    float *dq = nullptr, *dk = nullptr, *dv = nullptr, *dbias = nullptr, *dsinks = nullptr;
    // Set by the scheduler: qmap[b * seq_q + n] = n-th real query of batch b (null = identity).
    const uint32_t *qmap = nullptr;
    // Set by the scheduler for a copy of scattered K / V rows (kv_pack.hpp): the rows of (batch
    // entry b, KV head h) start at k_heads[b * heads_kv + h], the layout's `row` apart, and
    // int8 rows' scales at k_scale_heads[b * heads_kv + h], one per row (null = the operands).
    const void *const *k_heads = nullptr, *const *v_heads = nullptr;
    const float *const *k_scale_heads = nullptr, *const *v_scale_heads = nullptr;
};

} // namespace core
} // namespace attn

// Addressing of every operand in the dense, strided, varlen and paged layouts (key_len,
// query_len, q_index, out_index, lse_index, KvRows) and the strided views capi/ checks with.
#define ATTN_CORE_PARAMS_DEFINED
#include "layout.hpp"

namespace attn {
namespace core {

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

// Kernel selection: best ISA the CPU supports, capped by ATTN_ISA or set_isa_cap().
Isa active_isa();
bool isa_supported(Isa isa);
void set_isa_cap(Isa cap);
void reset_isa_cap();

} // namespace core
} // namespace attn
