// Geometry of the strided operands: see layout.hpp.
#include "attention.hpp"

namespace attn {
namespace core {
namespace {

bool mul_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
bool add_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

bool is_query_side(Strided w) {
    return w == Strided::Q || w == Strided::Out;
}

// Elements of one row of `which`: 1 for the int8 scales, head_dim_v for V and OUT.
size_t row_dim(const Shape &s, Strided which) {
    if (which == Strided::KScale || which == Strided::VScale) return 1;
    return which == Strided::V || which == Strided::Out ? s.head_dim_v : s.head_dim;
}

} // namespace

namespace {
// The strides of `which` in p, for a const or a mutable Params alike.
template <class P> auto &layout_of(P &p, Strided which) {
    switch (which) {
    case Strided::Q:
        return p.q;
    case Strided::K:
        return p.k;
    case Strided::V:
        return p.v;
    case Strided::Out:
        return p.out;
    case Strided::Bias:
        return p.bias;
    case Strided::KScale:
        return p.ks;
    default:
        return p.vs;
    }
}
} // namespace

const Layout &layout_in(const Params &p, Strided which) {
    return layout_of(p, which);
}
Layout &layout_in(Params &p, Strided which) {
    return layout_of(p, which);
}

View view_of(const Shape &s, const Params &mode, Strided which, const Layout &lay) {
    if (which == Strided::Bias)
        return View{s.batch, lay.batch, s.heads_q, lay.head, s.seq_q, lay.row, s.seq_k};
    const bool is_q = is_query_side(which);
    const size_t heads = is_q ? s.heads_q : s.heads_kv, seq = is_q ? s.seq_q : s.seq_k;
    const size_t dim = row_dim(s, which);
    if (!is_q && mode.page_size) return View{1, 0, heads, lay.head, mode.page_size, lay.row, dim};
    if (mode.varlen) return View{1, 0, heads, lay.head, s.batch * seq, lay.row, dim};
    return View{s.batch, lay.batch, heads, lay.head, seq, lay.row, dim};
}

bool span_of(size_t c0, size_t s0, size_t c1, size_t s1, size_t c2, size_t s2, size_t dim,
             size_t *out) {
    size_t a, b, c, x;
    if (!mul_ok(c0 - 1, s0, &a) || !mul_ok(c1 - 1, s1, &b) || !mul_ok(c2 - 1, s2, &c)) return false;
    if (!add_ok(a, b, &x) || !add_ok(x, c, &x) || !add_ok(x, dim, &x)) return false;
    size_t bytes;
    if (!mul_ok(x, sizeof(float), &bytes)) return false;
    *out = x;
    return true;
}

bool rows_disjoint(size_t c0, size_t s0, size_t c1, size_t s1, size_t c2, size_t s2, size_t dim) {
    size_t cs[3] = {c0, c1, c2}, ss[3] = {s0, s1, s2};
    for (int a = 0; a < 3; ++a)
        for (int b = a + 1; b < 3; ++b)
            if (ss[b] < ss[a]) {
                size_t t = ss[a];
                ss[a] = ss[b];
                ss[b] = t;
                t = cs[a];
                cs[a] = cs[b];
                cs[b] = t;
            }
    size_t extent = dim;
    for (int a = 0; a < 3; ++a) {
        if (cs[a] == 1) continue;
        if (ss[a] < extent) return false;
        extent = (cs[a] - 1) * ss[a] + extent; // no overflow: checked by span_of
    }
    return true;
}
bool rows_disjoint(const View &v) {
    return rows_disjoint(v.c0, v.s0, v.c1, v.s1, v.c2, v.s2, v.dim);
}

bool strided_len(const Shape &s, const Params &mode, Strided which, const Layout &lay,
                 size_t *out) {
    const View v = view_of(s, mode, which, lay);
    return span_of(v.c0, v.s0, v.c1, v.s1, v.c2, v.s2, v.dim, out);
}

size_t pack_len(const View &v, size_t tokens) {
    return tokens ? (tokens - 1) * v.s2 + (v.c1 - 1) * v.s1 + v.dim : 0;
}

bool out_nests(const Shape &s, const Params &mode, const Layout &lay) {
    return rows_disjoint(view_of(s, mode, Strided::Out, lay));
}

Layout default_layout(const Shape &s, const Params &mode, Strided which) {
    if (which == Strided::Bias)
        return Layout{s.heads_q * s.seq_q * s.seq_k, s.seq_q * s.seq_k, s.seq_k};
    const bool is_q = is_query_side(which);
    const size_t heads = is_q ? s.heads_q : s.heads_kv, seq = is_q ? s.seq_q : s.seq_k;
    const size_t dim = row_dim(s, which);
    if (!is_q && mode.page_size) return Layout{mode.page_size * heads * dim, dim, heads * dim};
    if (mode.varlen) return Layout{0, dim, heads * dim};
    return Layout{heads * seq * dim, seq * dim, dim};
}

} // namespace core
} // namespace attn
