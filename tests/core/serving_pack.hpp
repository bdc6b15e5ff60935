// The serving test pack: a batch of sequences laid out as one call of the serving layouts
// (varlen Q with packed or paged K/V, dense Q with paged K/V), the descriptor and arguments that
// bind it, and its check against ref::compute_v (float64) run on each sequence alone. Shared by
// the test_serving_*.cpp files (one executable each, so that ctest runs them in parallel).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attn.h"
#include "reference.hpp"

namespace serving_test {

inline const float kNaN = std::numeric_limits<float>::quiet_NaN();
inline const float kSentinel = 777.0f;

// The ISAs this CPU supports, among those the kernels are built for.
std::vector<std::string> isas();

size_t pick(std::mt19937 &g, size_t lo, size_t hi);
float uni(std::mt19937 &g, float lo, float hi);

// Layout of a call: 0 = varlen Q + packed K/V (cu_seqlens_k), 1 = varlen Q + paged K/V,
// 2 = dense Q + paged K/V.
enum Mode { kVarlen = 0, kVarlenPaged = 1, kDensePaged = 2 };

struct Pack {
    Mode mode = kVarlen;
    size_t batch = 1, hq = 1, hkv = 1, d = 1, dv = 1, max_q = 1, max_k = 1;
    int causal = 0;
    long long wl = -1, wr = -1;
    float softcap = 0.0f;
    int alibi = 0;
    int diagonal = 0, alibi_form = 0; // attn_diagonal, attn_alibi_form
    size_t slopes_batch = 0;          // slopes [batch][hq] with this batch stride (0: [hq])
    bool plus_one = false, invariant = false;
    size_t page = 0, max_pages_param = 0, max_pages = 0, num_pages = 0;
    bool head_major = false;
    size_t kv_row_pad = 0; // extra floats per packed K/V token row (mode 0)
    // K/V storage: 0 fp32, 1 f16, 2 bf16, 3 int8, 4 fp8 E4M3 with one scale per tensor, 5 fp8
    // E5M2 with one scale per KV head (see round_kv)
    int store = 0;
    int compute = 0;                           // ATTN_PARAM_COMPUTE
    mutable std::vector<uint16_t> k16, v16;    // the 16-bit K/V of the call
    mutable std::vector<int8_t> k8, v8;        // the int8 K/V of the call (paged pools)
    mutable std::vector<uint8_t> kf8, vf8;     // the fp8 K/V of the call
    mutable std::vector<float> kscale, vscale; // and their scales, one per pool row
    std::vector<size_t> lq, lk;
    // per-sequence dense data: q[b] [hq][lq][d], k[b]/v[b] [hkv][lk][d/dv]
    std::vector<std::vector<float>> qs, ks, vs;
    std::vector<float> sinks, slopes;
    // the call's buffers
    std::vector<float> q, k, v;
    std::vector<int32_t> cu_q, cu_k, table, seq_lens;
    size_t total_q = 0, total_k = 0;

    bool paged() const { return mode != kVarlen; }
    bool varlen() const { return mode != kDensePaged; }
    size_t kv_row(size_t dim) const { return hkv * dim + kv_row_pad; }
    // element offset of key j (head h) of sequence b in the K (dim = d) or V (dim = dv) buffer
    size_t kv_at(size_t b, size_t h, size_t j, size_t dim) const {
        if (!paged()) return (cu_k[b] + j) * kv_row(dim) + h * dim;
        const size_t pg = static_cast<size_t>(table[b * max_pages + j / page]), t = j % page;
        return head_major ? pg * hkv * page * dim + h * page * dim + t * dim
                          : pg * page * hkv * dim + t * hkv * dim + h * dim;
    }
    size_t q_at(size_t b, size_t h, size_t i) const {
        return varlen() ? (cu_q[b] + i) * hq * d + h * d : ((b * hq + h) * max_q + i) * d;
    }
    size_t out_at(size_t b, size_t h, size_t i) const {
        return varlen() ? (cu_q[b] + i) * hq * dv + h * dv : ((b * hq + h) * max_q + i) * dv;
    }
    size_t lse_at(size_t b, size_t h, size_t i) const {
        return varlen() ? h * total_q + cu_q[b] + i : (b * hq + h) * max_q + i;
    }
    size_t out_len() const { return varlen() ? total_q * hq * dv : batch * hq * max_q * dv; }
    size_t lse_len() const { return varlen() ? total_q * hq : batch * hq * max_q; }
};

// Lays the per-sequence data out in the call's buffers (cu arrays, pages, pools).
void build(Pack &c, std::mt19937 &g);
// Random per-sequence Q, K and V for the pack's lengths.
void fill_sequences(Pack &c, std::mt19937 &g);
// A random pack of the layout `mode`: sizes, masks, softcap, ALiBi, sinks, pages, row padding.
Pack random_pack(std::mt19937 &g, Mode mode);
// A small pack of 3 sequences (q lengths {2, 0, 3} or 2 each, k lengths {5, 9, 3}, pages of 4).
Pack small_pack(Mode mode);

attn_desc *make_desc(const Pack &c);
// Symmetric int8 rows of `dim` with one scale each (attn_quantize_i8); a row holding a
// non-finite value (the pool's unused slots) becomes zeros with a NaN scale, so a read of it
// would show.
void quantize_rows(const std::vector<float> &x, size_t dim, std::vector<int8_t> &q,
                   std::vector<float> &scale);
// The scales of an fp8 K (or V, when `value`): [1] (store 4) or [hkv] (store 5).
std::vector<float> fp8_scales(const Pack &c, bool value);
// Binds the pack's inputs (not OUT / LSE).
attn_args *make_args(const Pack &c);
// Rounds every sequence's K and V to the values of c.store (f16 or bf16; int8: each row of
// head_dim quantized and widened back, so that the call's own quantization of the pool rows
// finds the same int8 values, its scales within an ulp), so that the float64 reference sees
// what the cache holds.
void round_kv(Pack &c);

struct Run {
    std::vector<float> out, lse, w;
};

// One forward call of the pack (and ATTN_OP_WEIGHTS when `weights`), on the current ISA.
Run run(const Pack &c, bool weights = false);
// Worst relative error of every sequence against ref::compute_v on that sequence alone; hidden
// weights (when computed) exactly +0, and so are the padded columns past a sequence's keys.
double check(const Pack &c, const Run &r, const std::string &what);
// The worst (sequence, query head) of the run's outputs against ref::compute_v on that sequence
// alone: the smallest cosine similarity and the largest relative L1 (sum |o - ref| / sum |ref|).
ref::Closeness check_close(const Pack &c, const Run &r);
// Out and lse of two runs, bit for bit.
void check_same_bits(const Run &a, const Run &b);
// The pack on 1 thread, checked bit for bit against 2 threads (the ISA set by the caller).
Run run_on_1_and_2_threads(const Pack &c);

} // namespace serving_test
