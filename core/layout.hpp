// Geometry of the operands in the dense, strided, varlen and paged layouts, in one place:
//  - the kernels' addressing: where query i, key j and their outputs live (key_len, query_len,
//    q_index, out_index, lse_index, KvRows / kv_rows);
//  - the checks' geometry: the view each strided operand (Q, K, V, OUT, BIAS, the int8 scales)
//    is read through, the elements it spans, its default strides, with which capi/ sizes and
//    checks buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "params.hpp"

namespace attn {
namespace core {

// Keys of batch entry b (keys at or past it are padding).
inline size_t key_len(const Params &p, const Tensors &t, size_t b) {
    if (t.seq_lens_k) return static_cast<size_t>(t.seq_lens_k[b]);
    if (t.cu_k) return static_cast<size_t>(t.cu_k[b + 1] - t.cu_k[b]);
    return p.shape.seq_k;
}

// Query positions of batch entry b (a varlen sequence's length, else seq_q).
inline size_t query_len(const Params &p, const Tensors &t, size_t b) {
    return t.cu_q ? static_cast<size_t>(t.cu_q[b + 1] - t.cu_q[b]) : p.shape.seq_q;
}

// Element offsets of query i of head h in Q and OUT, and the LSE index.
inline size_t q_index(const Params &p, const Tensors &t, size_t b, size_t h, size_t i) {
    return t.cu_q ? (static_cast<size_t>(t.cu_q[b]) + i) * p.q.row + h * p.q.head
                  : b * p.q.batch + h * p.q.head + i * p.q.row;
}
inline size_t out_index(const Params &p, const Tensors &t, size_t b, size_t h, size_t i) {
    return t.cu_q ? (static_cast<size_t>(t.cu_q[b]) + i) * p.out.row + h * p.out.head
                  : b * p.out.batch + h * p.out.head + i * p.out.row;
}
// LSE: [batch][heads_q][seq_q], or FlashAttention's varlen [heads_q][total_q].
inline size_t lse_index(const Params &p, const Tensors &t, size_t b, size_t h, size_t i) {
    return t.cu_q ? h * p.total_q + static_cast<size_t>(t.cu_q[b]) + i
                  : (b * p.shape.heads_q + h) * p.shape.seq_q + i;
}

// The K or V rows of one (batch entry, KV head): contiguous, packed (varlen) or paged, of any
// storage type (int8 rows also locate their scale).
struct KvRows {
    const unsigned char *base = nullptr; // key 0 (dense) or the pool's KV head (paged)
    DType type = DType::F32;
    size_t elem = 4;                // bytes per element
    size_t row = 0;                 // token stride (elements)
    const int32_t *pages = nullptr; // block-table row of the batch entry (paged), else null
    size_t page_size = 0, page_stride = 0;
    unsigned page_shift = 0;      // page_size = 2^page_shift when it is a power of two, else 0
    const float *scale = nullptr; // int8: the scale of key 0 / the pool's KV head
    size_t srow = 0, spage = 0;   // int8: token and page strides of the scales
    // Element offsets of key j in the data and in the scales.
    __attribute__((always_inline)) void locate(size_t j, size_t *d, size_t *s) const {
        if (!pages) {
            *d = j * row;
            *s = j * srow;
            return;
        }
        const size_t t = slot_of(j);
        const size_t id = static_cast<size_t>(pages[page_of(j)]);
        *d = id * page_stride + t * row;
        *s = id * spage + t * srow;
    }
    // Whether keys j and j + n - 1 (n >= 1) lie in one page (always, dense): the rows between
    // them are then `row` elements apart.
    bool same_page(size_t j, size_t n) const { return !pages || page_of(j) == page_of(j + n - 1); }
    // Page (block-table slot) and token within it of key j: a shift and a mask for the usual
    // power-of-two pages (a division costs more than the row's arithmetic in a decode step).
    size_t page_of(size_t j) const { return page_shift ? j >> page_shift : j / page_size; }
    // Keys j, j + 1, ... in j's page (dense: no end).
    size_t run_from(size_t j) const { return pages ? page_size - slot_of(j) : ~size_t(0); }
    size_t slot_of(size_t j) const { return page_shift ? j & (page_size - 1) : j % page_size; }
    size_t offset(size_t j) const {
        if (!pages) return j * row;
        return static_cast<size_t>(pages[page_of(j)]) * page_stride + slot_of(j) * row;
    }
    const unsigned char *raw(size_t j) const { return base + offset(j) * elem; }
    // Key j's row as floats: only for F32 storage.
    const float *at(size_t j) const { return reinterpret_cast<const float *>(base) + offset(j); }
};

inline KvRows kv_rows(const Params &p, const Tensors &t, bool value, size_t b, size_t kvh) {
    const Layout &lay = value ? p.v : p.k;
    const Layout &sl = value ? p.vs : p.ks;
    KvRows r;
    r.type = value ? p.v_type : p.k_type;
    r.elem = dtype_bytes(r.type);
    const unsigned char *data = static_cast<const unsigned char *>(value ? t.v : t.k);
    const float *scale = has_scale(r.type) ? (value ? t.v_scale : t.k_scale) : nullptr;
    r.row = lay.row;
    r.srow = sl.row;
    if (const void *const *heads = value ? t.v_heads : t.k_heads) { // a copy (kv_pack.hpp)
        const size_t pair = b * p.shape.heads_kv + kvh;
        r.base = static_cast<const unsigned char *>(heads[pair]);
        if (scale) {
            r.scale = (value ? t.v_scale_heads : t.k_scale_heads)[pair];
            r.srow = 1;
        }
        return r;
    }
    size_t off = 0, soff = 0;
    if (t.block_table) {
        off = kvh * lay.head;
        soff = kvh * sl.head;
        r.pages = t.block_table + b * p.max_pages;
        r.page_size = p.page_size;
        r.page_stride = lay.batch;
        r.spage = sl.batch;
        if (p.page_size > 1 && (p.page_size & (p.page_size - 1)) == 0)
            while ((size_t(1) << r.page_shift) < p.page_size) ++r.page_shift;
    } else if (t.cu_k) {
        off = static_cast<size_t>(t.cu_k[b]) * lay.row + kvh * lay.head;
        soff = static_cast<size_t>(t.cu_k[b]) * sl.row + kvh * sl.head;
    } else {
        off = b * lay.batch + kvh * lay.head;
        soff = b * sl.batch + kvh * sl.head;
    }
    r.base = data ? data + off * r.elem : nullptr;
    r.scale = scale ? scale + soff : nullptr;
    return r;
}

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
