// Geometry of the strided operands (Q, K, V, OUT, BIAS and the int8 scales of K and V) in the
// dense, strided, varlen and paged layouts: the view each is read through, the elements it
// spans, its default strides. capi/ sizes and checks buffers with it.
#pragma once

#include <cstddef>

#include "attention.hpp"

namespace attn {
namespace core {

// The operands with strides (Params::q, k, v, out, bias, ks, vs).
enum class Strided : int { Q, K, V, Out, Bias, KScale, VScale };

// The strides of `which` in p.
const Layout &layout_in(const Params &p, Strided which);
Layout &layout_in(Params &p, Strided which);

// A strided operand as a [c0][c1][c2][dim] view with strides s0, s1, s2 (dim contiguous):
// dense [batch][heads][seq]; varlen a token pack [1][heads][batch * max_len] (an upper bound,
// the real total comes with each call); a paged K/V (or scales) one page [1][heads_kv][page_size].
struct View {
    size_t c0, s0, c1, s1, c2, s2, dim;
};
View view_of(const Shape &s, const Params &mode, Strided which, const Layout &lay);

// Elements spanned by a strided [c0][c1][c2][dim] view; false when it (or its size in floats'
// bytes) overflows size_t.
bool span_of(size_t c0, size_t s0, size_t c1, size_t s1, size_t c2, size_t s2, size_t dim,
             size_t *out);
// True when no two rows of a [c0][c1][c2][dim] view overlap: sorted by stride, every stride
// clears the extent of everything inside it (ignoring dimensions of size 1). The view's span
// must not overflow (span_of).
bool rows_disjoint(size_t c0, size_t s0, size_t c1, size_t s1, size_t c2, size_t s2, size_t dim);
bool rows_disjoint(const View &v);

// The buffer length of `which` with strides lay under the shape and layout mode; false on
// overflow.
bool strided_len(const Shape &s, const Params &mode, Strided which, const Layout &lay, size_t *out);
// Elements a varlen pack of `tokens` rows spans in the token view v (0 for an empty pack).
size_t pack_len(const View &v, size_t tokens);
// OUT's strides nest: no two output rows overlap.
bool out_nests(const Shape &s, const Params &mode, const Layout &lay);

// Contiguous default strides of `which`: BHSD; token-major [tokens][heads][dim] in varlen mode;
// token-major pages [page_size][heads_kv][dim] with a paged cache.
Layout default_layout(const Shape &s, const Params &mode, Strided which);

} // namespace core
} // namespace attn
