// libattn core: the problem description of one call. Params holds what the descriptor
// configures (shape, strides, masks, variants, layout mode, storage types), Tensors the operands
// of the call. No C API types appear here; capi/ maps its descriptor onto these structs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace attn {
namespace core {

enum class Causal : int { None = 0, TopLeft = 1, BottomRight = 2 };

// The diagonal the sliding window and ALiBi measure from (ATTN_PARAM_DIAGONAL): the causal
// rule's, or top-left / bottom-right whatever the causal rule.
enum class Diagonal : int { Causal = 0, TopLeft = 1, BottomRight = 2 };

// Storage type of Q, K or V. 16-bit values are widened to fp32 on load; int8 values are
// symmetric with one fp32 scale per (token, KV head): the value is float(q) * scale, rounded to
// fp32. fp8 values (OCP E4M3 "fn": bias 7, no infinities, S.1111.111 NaN, max 448; E5M2: bias
// 15, IEEE-like, the upper byte of a binary16) are exact in fp32 and take a scale the same way
// (one per tensor or per head through zero scale strides, 1 when none is bound). Everything is
// computed in fp32 on the widened values.
enum class DType : int { F32 = 0, F16 = 1, BF16 = 2, I8 = 3, E4M3 = 4, E5M2 = 5 };
inline constexpr size_t dtype_bytes(DType t) {
    return t == DType::F32 ? 4 : t == DType::F16 || t == DType::BF16 ? 2 : 1;
}
// Whether a stored value is float(code) * scale (its K / V scale operand): int8 and fp8.
inline constexpr bool has_scale(DType t) {
    return t == DType::I8 || t == DType::E4M3 || t == DType::E5M2;
}
inline constexpr bool is_fp8(DType t) {
    return t == DType::E4M3 || t == DType::E5M2;
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

// ATTN_PARAM_COMPUTE, value for value.
enum class Compute : int { Exact = 0, Fp16 = 1, Int8 = 2, Bf16 = 3 };

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
    // ATTN_PARAM_COMPUTE: the arithmetic asked for. Fp16: the fp16 fast path where it applies;
    // Int8: Q.K^T in integers on the row blocks (kernels/int8-inl.h) where it applies; Bf16
    // (and every mode where it does not apply): exact.
    Compute compute = Compute::Exact;
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
    // q_scale: [heads_q], null = none. Q's values of head h are q * q_scale[h], each rounded to
    // fp32 (q_in in kernels/convert-inl.h), before anything else is done with them.
    const float *q_scale = nullptr;
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
    // Set by the scheduler when the call computes Q.K^T in integers (Compute::Int8): K of (b,
    // kvh) minus its channel mean over the real keys (kq_mean[(b * heads_kv + kvh) * head_dim +
    // c]), quantized per key: key j's codes at kq + ((b * heads_kv + kvh) * seq_k + j) * kq_row,
    // pairs of int16 (|code| <= 127, the even channel in the low half) in int32 words, its scale
    // at kq_scale[(b * heads_kv + kvh) * seq_k + j] (value = code * scale + mean).
    const int32_t *kq = nullptr;
    const float *kq_scale = nullptr, *kq_mean = nullptr;
    size_t kq_row = 0;
    // ... and V (null: P.V in fp32), per tile of keys [t kBK, (t + 1) kBK) (the tiles then start
    // there, as under batch invariance): the codes of its non-padding keys 2 x and 2 x + 1 in
    // channel c paired at vq[((b * heads_kv + kvh) * vq_tiles + t) * vq_tile + c * pairs + x]
    // (pairs = (kBK + 1) / 2), the channel's step / 8191 at vq_scale[((b * heads_kv + kvh) *
    // vq_tiles + t) * head_dim_v + c].
    const int32_t *vq = nullptr;
    const float *vq_scale = nullptr;
    size_t vq_tiles = 0, vq_tile = 0;
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
