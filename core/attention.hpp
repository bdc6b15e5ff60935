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

// q: [batch][heads_q][seq_q][head_dim], k/v: [batch][heads_kv][seq_k][head_dim]
struct Shape {
    size_t batch = 0, heads_q = 0, heads_kv = 0, seq_q = 0, seq_k = 0, head_dim = 0;
};

struct Params {
    Shape shape;
    Layout q, k, v, out;
    float scale = 1.0f;
    Causal causal = Causal::None;
};

// Raw operands of one call. key_valid: [batch][seq_k], allowed: [seq_q][seq_k]; bytes, nonzero =
// true; either may be null (= all true). lse and weights may be null when not wanted.
struct Tensors {
    const float *q = nullptr, *k = nullptr, *v = nullptr;
    const uint8_t *key_valid = nullptr, *allowed = nullptr;
    float *out = nullptr, *lse = nullptr, *weights = nullptr;
};

// Offset added to i in the causal rule "key j visible to query i iff j <= i + offset".
inline long long causal_offset(const Params &p) {
    return p.causal == Causal::BottomRight
               ? static_cast<long long>(p.shape.seq_k) - static_cast<long long>(p.shape.seq_q)
               : 0;
}

// Entry points. They throw std::bad_alloc when scratch cannot be allocated; nothing else.
void forward(const Params &p, const Tensors &t);
void weights(const Params &p, const Tensors &t);

// Kernel selection: best ISA the CPU supports, capped by ATTN_ISA or set_isa_cap().
Isa active_isa();
bool isa_supported(Isa isa);
void set_isa_cap(Isa cap);
void reset_isa_cap();

} // namespace core
} // namespace attn
