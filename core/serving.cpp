// Serving-layout helpers that are not attention itself: writing new K/V rows into their cache
// positions (paged or packed) and the exact merge of partial (out, lse) results.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "attention.hpp"

namespace attn {
namespace core {

void kv_append(const Params &p, const Tensors &t, const float *new_k, const float *new_v) {
    const NewRows nk{new_k, DType::F32, nullptr}, nv{new_v, DType::F32, nullptr};
    kv_append(p, t, nk, nv);
}

namespace {

// Writes one new row of `dim` values into key position j of the cache rows r: copied when the
// new row has the cache's type, else converted from fp32 (round to nearest even) or quantized
// (int8 row and its scale; the caller checked that every such row is finite).
void put_row(const KvRows &r, size_t j, const NewRows &src, size_t row, size_t dim) {
    size_t d, sc;
    r.locate(j, &d, &sc);
    unsigned char *dst = const_cast<unsigned char *>(r.base) + d * r.elem;
    const unsigned char *from = static_cast<const unsigned char *>(src.data);
    if (src.type == r.type) {
        std::memcpy(dst, from + row * dim * r.elem, dim * r.elem);
        if (r.type == DType::I8) const_cast<float *>(r.scale)[sc] = src.scale[row];
        return;
    }
    const float *x = reinterpret_cast<const float *>(from) + row * dim; // fp32 new rows
    switch (r.type) {
    case DType::F16:
        f32_to_f16(x, reinterpret_cast<uint16_t *>(dst), dim);
        break;
    case DType::BF16:
        f32_to_bf16(x, reinterpret_cast<uint16_t *>(dst), dim);
        break;
    case DType::I8:
        quantize_i8(x, 1, dim, reinterpret_cast<int8_t *>(dst), const_cast<float *>(r.scale) + sc);
        break;
    case DType::E4M3:
    case DType::E5M2: // with the cache's scale of the row (read, not written)
        quantize_fp8(x, 1, dim, r.type, r.scale[sc], dst);
        break;
    default:
        std::memcpy(dst, x, dim * sizeof(float));
        break;
    }
}

} // namespace

void kv_append(const Params &p, const Tensors &t, const NewRows &new_k, const NewRows &new_v) {
    const Shape &s = p.shape;
    for (size_t b = 0; b < s.batch; ++b) {
        const size_t n = query_len(p, t, b);
        const size_t first = t.cu_q ? static_cast<size_t>(t.cu_q[b]) : b * s.seq_q;
        const size_t pos0 = key_len(p, t, b) - n; // checked by the caller: n <= key_len
        for (size_t kvh = 0; kvh < s.heads_kv; ++kvh) {
            const KvRows kr = kv_rows(p, t, false, b, kvh), vr = kv_rows(p, t, true, b, kvh);
            for (size_t x = 0; x < n; ++x) {
                const size_t row = (first + x) * s.heads_kv + kvh; // [tokens][heads_kv]
                put_row(kr, pos0 + x, new_k, row, s.head_dim);
                put_row(vr, pos0 + x, new_v, row, s.head_dim_v);
            }
        }
    }
}

size_t kv_append_bad_scale(const Params &p, const Tensors &t, bool value, float *scale) {
    const Shape &s = p.shape;
    for (size_t b = 0; b < s.batch; ++b) {
        const size_t n = query_len(p, t, b);
        const size_t first = t.cu_q ? static_cast<size_t>(t.cu_q[b]) : b * s.seq_q;
        const size_t pos0 = key_len(p, t, b) - n;
        for (size_t kvh = 0; kvh < s.heads_kv; ++kvh) {
            const KvRows r = kv_rows(p, t, value, b, kvh);
            for (size_t x = 0; x < n; ++x) {
                size_t d, sc;
                r.locate(pos0 + x, &d, &sc);
                const float v = r.scale[sc];
                if (!(v > 0.0f && v <= 3.40282347e38f)) {
                    *scale = v;
                    return (first + x) * s.heads_kv + kvh;
                }
            }
        }
    }
    return SIZE_MAX;
}

void merge_into(const Params &p, const Tensors &acc, const float *part_out, const float *part_lse) {
    const Shape &s = p.shape;
    const size_t dv = s.head_dim_v;
    for (size_t b = 0; b < s.batch; ++b) {
        const size_t nq = query_len(p, acc, b);
        for (size_t h = 0; h < s.heads_q; ++h)
            for (size_t i = 0; i < nq; ++i) {
                const size_t oi = out_index(p, acc, b, h, i), li = lse_index(p, acc, b, h, i);
                float *o = acc.out + oi;
                const float *po = part_out + oi;
                const float la = acc.lse[li], lb = part_lse[li];
                const float m = la > lb ? la : lb;
                if (std::isnan(la) || std::isnan(lb)) { // propagate, never hide
                    for (size_t dd = 0; dd < dv; ++dd) o[dd] = NAN;
                    acc.lse[li] = NAN;
                    continue;
                }
                if (m == -INFINITY) { // no part saw a key
                    for (size_t dd = 0; dd < dv; ++dd) o[dd] = 0.0f;
                    acc.lse[li] = -INFINITY;
                    continue;
                }
                const float wa = std::exp(la - m), wb = std::exp(lb - m);
                const float sum = wa + wb;
                const float fa = wa / sum, fb = wb / sum;
                for (size_t dd = 0; dd < dv; ++dd) {
                    // a part with weight 0 contributes nothing, even if its row is garbage
                    const float xa = fa != 0.0f ? fa * o[dd] : 0.0f;
                    const float xb = fb != 0.0f ? fb * po[dd] : 0.0f;
                    o[dd] = xa + xb;
                }
                acc.lse[li] = m + std::log(sum);
            }
    }
}

} // namespace core
} // namespace attn
