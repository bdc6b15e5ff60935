// libattn core: problem description and entry points. No C API types appear here; capi/ maps
// its descriptor onto these structs. Everything in namespace attn::core is internal (hidden).
#pragma once

#include <cstddef>
#include <cstdint>

namespace attn {
namespace core {

enum class Causal : int { None = 0, TopLeft = 1, BottomRight = 2 };

// Kernel families, ordered from weakest to strongest.
enum class Isa : int { Scalar = 0, Sse2 = 1, Avx2 = 2, Avx512 = 3 };
constexpr int kIsaCount = 4;
const char *isa_name(Isa isa);
bool isa_from_name(const char *name, Isa *out);

// Element strides of one [batch][heads][seq][head_dim] operand; head_dim is contiguous.
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

struct Params {
    Shape shape;
    Layout q, k, v, out;
    Layout bias; // [batch][heads_q][seq_q][seq_k]: batch, head, row (= query) strides
    float scale = 1.0f;
    Causal causal = Causal::None;
    long long window_left = -1, window_right = -1; // -1 = unbounded
    float softcap = 0.0f;                          // 0 = off
    bool bias_first = false;                       // bias before softcap (ONNX order)
    bool plus_one = false;                         // sink logit 0 for every head
    WeightsMode weights_mode = WeightsMode::Softmax;
};

// Raw operands of one call. key_valid: [batch][seq_k], allowed: [seq_q][seq_k]; bytes, nonzero =
// true; either may be null (= all true). lse and weights may be null when not wanted.
//   bias:        [batch][heads_q][seq_q][seq_k] (Params::bias strides), null = none
//   alibi:       [heads_q] slopes, null = none
//   sinks:       [heads_q] sink logits, null = none (Params::plus_one supplies zeros)
//   query_valid: [batch][seq_q] bytes, null = all real
//   seq_lens_k:  [batch] keys of each batch entry (each <= seq_k), null = seq_k
//   key_mass:    [batch][heads_q][seq_k] output, null = not wanted
struct Tensors {
    const float *q = nullptr, *k = nullptr, *v = nullptr;
    const uint8_t *key_valid = nullptr, *allowed = nullptr;
    float *out = nullptr, *lse = nullptr, *weights = nullptr;
    const float *bias = nullptr, *alibi = nullptr, *sinks = nullptr;
    const uint8_t *query_valid = nullptr;
    const int32_t *seq_lens_k = nullptr;
    float *key_mass = nullptr;
    // Set by the scheduler: qmap[b * seq_q + n] = n-th real query of batch b (null = identity).
    const uint32_t *qmap = nullptr;
};

// Keys of batch entry b (keys at or past it are padding).
inline size_t key_len(const Params &p, const Tensors &t, size_t b) {
    return t.seq_lens_k ? static_cast<size_t>(t.seq_lens_k[b]) : p.shape.seq_k;
}

// diag(i) = i + diag_offset: the causal diagonal of batch entry b ("key j visible to query i iff
// j <= diag(i)" under a causal rule; the sliding window is centred on it too).
inline long long diag_offset(const Params &p, const Tensors &t, size_t b) {
    return p.causal == Causal::BottomRight
               ? static_cast<long long>(key_len(p, t, b)) - static_cast<long long>(p.shape.seq_q)
               : 0;
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

// The standard ALiBi slopes of n heads (Press et al. 2022; BLOOM's rule for n not a power of 2).
void alibi_standard_slopes(size_t n, float *slopes);

// Kernel selection: best ISA the CPU supports, capped by ATTN_ISA or set_isa_cap().
Isa active_isa();
bool isa_supported(Isa isa);
void set_isa_cap(Isa cap);
void reset_isa_cap();

} // namespace core
} // namespace attn
