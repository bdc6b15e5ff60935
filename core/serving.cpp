// Serving-layout helpers that are not attention itself: writing new K/V rows into their cache
// positions (paged or packed) and the exact merge of partial (out, lse) results.
#include <cmath>
#include <cstring>

#include "attention.hpp"

namespace attn {
namespace core {

void kv_append(const Params &p, const Tensors &t, const float *new_k, const float *new_v) {
    const Shape &s = p.shape;
    for (size_t b = 0; b < s.batch; ++b) {
        const size_t n = query_len(p, t, b);
        const size_t first = t.cu_q ? static_cast<size_t>(t.cu_q[b]) : b * s.seq_q;
        const size_t pos0 = key_len(p, t, b) - n; // checked by the caller: n <= key_len
        for (size_t kvh = 0; kvh < s.heads_kv; ++kvh) {
            const KvRows kr = kv_rows(p, t, false, b, kvh), vr = kv_rows(p, t, true, b, kvh);
            for (size_t x = 0; x < n; ++x) {
                const size_t tok = first + x;
                std::memcpy(const_cast<float *>(kr.at(pos0 + x)),
                            new_k + (tok * s.heads_kv + kvh) * s.head_dim,
                            s.head_dim * sizeof(float));
                std::memcpy(const_cast<float *>(vr.at(pos0 + x)),
                            new_v + (tok * s.heads_kv + kvh) * s.head_dim_v,
                            s.head_dim_v * sizeof(float));
            }
        }
    }
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
