// Serving layouts through the C API: packed variable-length batches (cu_seqlens), paged K/V
// caches (block table, both page layouts), attn_kv_append, attn_merge and batch invariance, on
// every ISA this CPU supports. The reference is ref::compute_v (float64) run on each sequence
// alone, gathered into plain dense arrays by this file, so the packing logic is checked too.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attn.h"
#include "reference.hpp"

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kSentinel = 777.0f;

std::vector<std::string> isas() {
    std::vector<std::string> out;
    for (const char *name : {"scalar", "sse2", "avx2", "avx512"})
        if (attn_set_isa(name) == ATTN_OK) out.push_back(name);
    attn_set_isa(nullptr);
    return out;
}

size_t pick(std::mt19937 &g, size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(g);
}
float uni(std::mt19937 &g, float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(g);
}

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
    int store = 0;         // K/V storage: 0 fp32, 1 f16, 2 bf16, 3 int8 (see round_kv)
    mutable std::vector<uint16_t> k16, v16;    // the 16-bit K/V of the call
    mutable std::vector<int8_t> k8, v8;        // the int8 K/V of the call (paged pools)
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
void build(Pack &c, std::mt19937 &g) {
    const size_t B = c.batch;
    c.cu_q.assign(B + 1, 0);
    c.cu_k.assign(B + 1, 0);
    for (size_t b = 0; b < B; ++b) {
        c.cu_q[b + 1] = c.cu_q[b] + static_cast<int32_t>(c.lq[b]);
        c.cu_k[b + 1] = c.cu_k[b] + static_cast<int32_t>(c.lk[b]);
    }
    c.total_q = static_cast<size_t>(c.cu_q[B]);
    c.total_k = static_cast<size_t>(c.cu_k[B]);
    c.q.assign(c.varlen() ? std::max<size_t>(1, c.total_q) * c.hq * c.d : B * c.hq * c.max_q * c.d,
               kNaN);
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < c.hq; ++h)
            for (size_t i = 0; i < c.lq[b]; ++i)
                std::memcpy(&c.q[c.q_at(b, h, i)], &c.qs[b][(h * c.lq[b] + i) * c.d],
                            c.d * sizeof(float));
    if (c.paged()) {
        c.max_pages = c.max_pages_param ? c.max_pages_param : (c.max_k + c.page - 1) / c.page;
        size_t used = 0;
        for (size_t b = 0; b < B; ++b) used += (c.lk[b] + c.page - 1) / c.page;
        c.num_pages = used + pick(g, 0, 3);
        std::vector<int32_t> ids(std::max<size_t>(c.num_pages, 1));
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(), g);
        c.table.assign(B * c.max_pages, -1);
        size_t next = 0;
        for (size_t b = 0; b < B; ++b)
            for (size_t s = 0; s < (c.lk[b] + c.page - 1) / c.page; ++s)
                c.table[b * c.max_pages + s] = ids[next++];
        c.num_pages = std::max<size_t>(c.num_pages, 1);
        c.k.assign(c.num_pages * c.page * c.hkv * c.d, kNaN);
        c.v.assign(c.num_pages * c.page * c.hkv * c.dv, kNaN);
        c.seq_lens.assign(B, 0);
        for (size_t b = 0; b < B; ++b) c.seq_lens[b] = static_cast<int32_t>(c.lk[b]);
    } else {
        c.k.assign(std::max<size_t>(1, c.total_k) * c.kv_row(c.d), kNaN);
        c.v.assign(std::max<size_t>(1, c.total_k) * c.kv_row(c.dv), kNaN);
    }
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < c.hkv; ++h)
            for (size_t j = 0; j < c.lk[b]; ++j) {
                std::memcpy(&c.k[c.kv_at(b, h, j, c.d)], &c.ks[b][(h * c.lk[b] + j) * c.d],
                            c.d * sizeof(float));
                std::memcpy(&c.v[c.kv_at(b, h, j, c.dv)], &c.vs[b][(h * c.lk[b] + j) * c.dv],
                            c.dv * sizeof(float));
            }
}

void fill_sequences(Pack &c, std::mt19937 &g) {
    c.qs.assign(c.batch, {});
    c.ks.assign(c.batch, {});
    c.vs.assign(c.batch, {});
    for (size_t b = 0; b < c.batch; ++b) {
        c.qs[b].resize(c.hq * c.lq[b] * c.d);
        c.ks[b].resize(c.hkv * c.lk[b] * c.d);
        c.vs[b].resize(c.hkv * c.lk[b] * c.dv);
        for (float &x : c.qs[b]) x = uni(g, -1, 1);
        for (float &x : c.ks[b]) x = uni(g, -1, 1);
        for (float &x : c.vs[b]) x = uni(g, -2, 2);
    }
}

Pack random_pack(std::mt19937 &g, Mode mode) {
    Pack c;
    c.mode = mode;
    c.batch = pick(g, 1, 4);
    c.hkv = pick(g, 1, 3);
    c.hq = c.hkv * pick(g, 1, 3);
    c.d = pick(g, 0, 3) == 0 ? pick(g, 1, 9) : pick(g, 8, 72);
    c.dv = pick(g, 0, 2) == 0 ? pick(g, 1, 72) : c.d;
    c.causal = static_cast<int>(pick(g, 0, 2));
    if (pick(g, 0, 3) == 0) c.wl = static_cast<long long>(pick(g, 0, 20));
    if (pick(g, 0, 4) == 0) c.wr = static_cast<long long>(pick(g, 0, 20));
    if (pick(g, 0, 3) == 0) c.softcap = uni(g, 0.5f, 20.0f);
    c.alibi = pick(g, 0, 3) == 0 ? static_cast<int>(pick(g, 1, 2)) : 0;
    const size_t sink_kind = pick(g, 0, 4); // 0: sinks operand, 1: "+1", else none
    c.plus_one = sink_kind == 1;
    const bool chunked = pick(g, 0, 1) == 0; // chunked prefill + decode: lq <= lk
    const size_t sq = pick(g, 1, 24);        // dense Q: every sequence has seq_q queries
    c.lq.resize(c.batch);
    c.lk.resize(c.batch);
    for (size_t b = 0; b < c.batch; ++b) {
        if (mode == kDensePaged)
            c.lq[b] = sq;
        else
            c.lq[b] = pick(g, 0, 5) == 0 ? 0 : pick(g, 0, 1) ? 1 : pick(g, 1, 30);
        c.lk[b] = pick(g, 0, 7) == 0 ? 0 : pick(g, 1, 70);
        if (chunked && c.lk[b] < c.lq[b]) c.lk[b] = c.lq[b] + pick(g, 0, 40);
    }
    c.max_q = std::max<size_t>(1, *std::max_element(c.lq.begin(), c.lq.end()));
    c.max_k = std::max<size_t>(1, *std::max_element(c.lk.begin(), c.lk.end()));
    if (mode != kVarlen) {
        c.max_k += pick(g, 0, 5);
        const size_t r = pick(g, 0, 5);
        c.page = r == 0 ? 1 : r == 1 ? pick(g, 2, 7) : r == 2 ? 16 : r == 3 ? pick(g, 17, 300) : 32;
        c.head_major = pick(g, 0, 1) == 1;
        if (pick(g, 0, 3) == 0) c.max_pages_param = (c.max_k + c.page - 1) / c.page + pick(g, 1, 3);
    } else if (pick(g, 0, 3) == 0) {
        c.kv_row_pad = pick(g, 1, 5);
    }
    fill_sequences(c, g);
    if (sink_kind == 0) {
        c.sinks.resize(c.hq);
        for (float &x : c.sinks) x = uni(g, -3, 3);
    }
    if (c.alibi == 1) {
        c.slopes.resize(c.hq);
        for (float &x : c.slopes) x = uni(g, 0.01f, 0.5f);
    }
    build(c, g);
    return c;
}

attn_desc *make_desc(const Pack &c) {
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, c.batch, c.hq, c.hkv, c.max_q, c.max_k, c.d) == ATTN_OK);
    auto seti = [&](attn_param k, int64_t v) {
        REQUIRE_MESSAGE(attn_desc_set_int(d, k, v) == ATTN_OK, attn_last_error());
    };
    seti(ATTN_PARAM_CAUSAL, c.causal);
    seti(ATTN_PARAM_WINDOW_LEFT, c.wl);
    seti(ATTN_PARAM_WINDOW_RIGHT, c.wr);
    REQUIRE(attn_desc_set_float(d, ATTN_PARAM_SOFTCAP, static_cast<double>(c.softcap)) == ATTN_OK);
    seti(ATTN_PARAM_ALIBI, c.alibi);
    seti(ATTN_PARAM_DIAGONAL, c.diagonal);
    seti(ATTN_PARAM_ALIBI_FORM, c.alibi_form);
    if (c.slopes_batch)
        REQUIRE(attn_desc_set_strides(d, ATTN_ALIBI_SLOPES, c.slopes_batch, 1, 0) == ATTN_OK);
    seti(ATTN_PARAM_SOFTMAX_PLUS_ONE, c.plus_one);
    seti(ATTN_PARAM_HEAD_DIM_V, static_cast<int64_t>(c.dv));
    seti(ATTN_PARAM_VARLEN, c.varlen());
    seti(ATTN_PARAM_BATCH_INVARIANT, c.invariant);
    if (c.paged()) {
        seti(ATTN_PARAM_PAGE_SIZE, static_cast<int64_t>(c.page));
        if (c.max_pages_param) seti(ATTN_PARAM_MAX_PAGES, static_cast<int64_t>(c.max_pages_param));
        if (c.head_major) {
            REQUIRE(attn_desc_set_strides(d, ATTN_K, c.hkv * c.page * c.d, c.page * c.d, c.d) ==
                    ATTN_OK);
            REQUIRE(attn_desc_set_strides(d, ATTN_V, c.hkv * c.page * c.dv, c.page * c.dv, c.dv) ==
                    ATTN_OK);
            if (c.store == 3) // the scales in the same head-major page layout
                for (attn_operand w : {ATTN_K_SCALE, ATTN_V_SCALE})
                    REQUIRE(attn_desc_set_strides(d, w, c.hkv * c.page, c.page, 1) == ATTN_OK);
        }
    } else if (c.kv_row_pad) {
        REQUIRE(attn_desc_set_strides(d, ATTN_K, 0, c.d, c.kv_row(c.d)) == ATTN_OK);
        REQUIRE(attn_desc_set_strides(d, ATTN_V, 0, c.dv, c.kv_row(c.dv)) == ATTN_OK);
    }
    return d;
}

// Binds the pack's inputs (not OUT / LSE).
// Symmetric int8 rows of `dim` with one scale each (attn_quantize_i8); a row holding a
// non-finite value (the pool's unused slots) becomes zeros with a NaN scale, so a read of it
// would show.
void quantize_rows(const std::vector<float> &x, size_t dim, std::vector<int8_t> &q,
                   std::vector<float> &scale) {
    const size_t rows = x.size() / dim;
    q.assign(x.size(), 0);
    scale.assign(rows, kNaN);
    for (size_t r = 0; r < rows; ++r) {
        const float *row = x.data() + r * dim;
        if (!std::all_of(row, row + dim, [](float v) { return std::isfinite(v); })) continue;
        REQUIRE(attn_quantize_i8(row, 1, dim, q.data() + r * dim, &scale[r]) == ATTN_OK);
    }
}

attn_args *make_args(const Pack &c) {
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    REQUIRE(attn_args_set_f32(a, ATTN_Q, c.q.data(), c.q.size()) == ATTN_OK);
    if (c.store == 0) {
        REQUIRE(attn_args_set_f32(a, ATTN_K, c.k.data(), c.k.size()) == ATTN_OK);
        REQUIRE(attn_args_set_f32(a, ATTN_V, c.v.data(), c.v.size()) == ATTN_OK);
    } else if (c.store == 3) { // paged pools: one scale per row, rows in memory order
        REQUIRE(c.paged());
        quantize_rows(c.k, c.d, c.k8, c.kscale);
        quantize_rows(c.v, c.dv, c.v8, c.vscale);
        REQUIRE(attn_args_set_i8(a, ATTN_K, c.k8.data(), c.k8.size()) == ATTN_OK);
        REQUIRE(attn_args_set_i8(a, ATTN_V, c.v8.data(), c.v8.size()) == ATTN_OK);
        REQUIRE(attn_args_set_f32(a, ATTN_K_SCALE, c.kscale.data(), c.kscale.size()) == ATTN_OK);
        REQUIRE(attn_args_set_f32(a, ATTN_V_SCALE, c.vscale.data(), c.vscale.size()) == ATTN_OK);
    } else { // the values are representable (round_kv): the conversion is exact
        const auto conv = c.store == 1 ? attn_convert_f32_to_f16 : attn_convert_f32_to_bf16;
        const auto set = c.store == 1 ? attn_args_set_f16 : attn_args_set_bf16;
        c.k16.resize(c.k.size());
        c.v16.resize(c.v.size());
        REQUIRE(conv(c.k.data(), c.k16.data(), c.k.size()) == ATTN_OK);
        REQUIRE(conv(c.v.data(), c.v16.data(), c.v.size()) == ATTN_OK);
        REQUIRE(set(a, ATTN_K, c.k16.data(), c.k16.size()) == ATTN_OK);
        REQUIRE(set(a, ATTN_V, c.v16.data(), c.v16.size()) == ATTN_OK);
    }
    if (!c.sinks.empty())
        REQUIRE(attn_args_set_f32(a, ATTN_SINKS, c.sinks.data(), c.sinks.size()) == ATTN_OK);
    if (!c.slopes.empty())
        REQUIRE(attn_args_set_f32(a, ATTN_ALIBI_SLOPES, c.slopes.data(), c.slopes.size()) ==
                ATTN_OK);
    if (c.varlen())
        REQUIRE(attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, c.cu_q.data(), c.cu_q.size()) == ATTN_OK);
    if (c.paged()) {
        REQUIRE(attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size()) == ATTN_OK);
        REQUIRE(attn_args_set_i32(a, ATTN_SEQ_LENS_K, c.seq_lens.data(), c.seq_lens.size()) ==
                ATTN_OK);
    } else {
        REQUIRE(attn_args_set_i32(a, ATTN_CU_SEQLENS_K, c.cu_k.data(), c.cu_k.size()) == ATTN_OK);
    }
    return a;
}

struct Run {
    std::vector<float> out, lse, w;
};

Run run(const Pack &c, bool weights = false) {
    Run r;
    attn_desc *d = make_desc(c);
    attn_args *a = make_args(c);
    r.out.assign(std::max<size_t>(1, c.out_len()), kSentinel);
    r.lse.assign(std::max<size_t>(1, c.lse_len()), kSentinel);
    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, r.out.data(), r.out.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, r.lse.data(), r.lse.size()) == ATTN_OK);
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, attn_last_error());
    if (weights) {
        r.w.assign(attn_desc_required_len(d, ATTN_WEIGHTS), kSentinel);
        REQUIRE(attn_args_set_out_f32(a, ATTN_WEIGHTS, r.w.data(), r.w.size()) == ATTN_OK);
        REQUIRE_MESSAGE(attn_run(d, ATTN_OP_WEIGHTS, a) == ATTN_OK, attn_last_error());
    }
    attn_args_destroy(a);
    attn_desc_destroy(d);
    return r;
}

// Worst relative error of every sequence against ref::compute_v on that sequence alone; hidden
// weights (when computed) exactly +0, and so are the padded columns past a sequence's keys.
double check(const Pack &c, const Run &r, const std::string &what) {
    double worst = 0.0;
    for (size_t b = 0; b < c.batch; ++b) {
        if (c.lq[b] == 0) continue;
        ref::VProblem p;
        p.heads_q = c.hq;
        p.heads_kv = c.hkv;
        p.seq_q = c.lq[b];
        p.seq_k = std::max<size_t>(1, c.lk[b]);
        p.head_dim = c.d;
        p.head_dim_v = c.dv;
        p.causal = c.causal;
        p.window_left = c.wl;
        p.window_right = c.wr;
        p.softcap = c.softcap;
        p.alibi = c.alibi;
        p.diagonal = c.diagonal;
        p.alibi_form = c.alibi_form;
        p.plus_one = c.plus_one;
        p.set_default_strides();
        std::vector<float> kz(c.ks[b]), vz(c.vs[b]);
        kz.resize(std::max<size_t>(kz.size(), c.hkv * c.d), kNaN);
        vz.resize(std::max<size_t>(vz.size(), c.hkv * c.dv), kNaN);
        const int32_t len = static_cast<int32_t>(c.lk[b]);
        ref::VInputs in;
        in.q = c.qs[b].data();
        in.k = kz.data();
        in.v = vz.data();
        in.sinks = c.sinks.empty() ? nullptr : c.sinks.data();
        in.slopes = c.slopes.empty() ? nullptr : c.slopes.data() + b * c.slopes_batch;
        in.seq_lens_k = &len;
        const ref::VResult e = ref::compute_v(p, in);
        for (size_t h = 0; h < c.hq; ++h)
            for (size_t i = 0; i < c.lq[b]; ++i) {
                const size_t row = h * c.lq[b] + i;
                for (size_t x = 0; x < c.dv; ++x)
                    worst = std::max(
                        worst, ref::rel_err(r.out[c.out_at(b, h, i) + x], e.out[row * c.dv + x]));
                worst = std::max(worst, ref::rel_err(r.lse[c.lse_at(b, h, i)], e.lse[row]));
                if (r.w.empty()) continue;
                const float *wr = &r.w[((b * c.hq + h) * c.max_q + i) * c.max_k];
                for (size_t j = 0; j < c.max_k; ++j) {
                    const bool hidden = j >= c.lk[b] || e.hidden[row * p.seq_k + j];
                    if (hidden) {
                        if (wr[j] != 0.0f || std::signbit(wr[j])) {
                            FAIL_CHECK(what << ": hidden weight (" << b << "," << h << "," << i
                                            << "," << j << ") = " << wr[j]);
                            return 1e30;
                        }
                        continue;
                    }
                    worst = std::max(worst, ref::rel_err(wr[j], e.w[row * p.seq_k + j]));
                }
            }
    }
    return worst;
}

} // namespace

TEST_CASE("varlen and paged packs match the float64 reference on every ISA") {
    std::mt19937 g(20261201);
    const std::vector<std::string> names = isas();
    double worst = 0.0;
    size_t runs = 0;
    const int kPacks = 540;
    for (int n = 0; n < kPacks; ++n) {
        const Mode mode = static_cast<Mode>(n % 3);
        Pack c = random_pack(g, mode);
        c.invariant = n % 5 == 4;
        for (const std::string &isa : names) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Run r = run(c, mode == kDensePaged);
            const double e = check(c, r, "pack " + std::to_string(n) + " on " + isa);
            if (e > 1e-5)
                FAIL_CHECK("pack " << n << " mode " << mode << " on " << isa << ": rel err " << e
                                   << " (batch " << c.batch << ", heads " << c.hq << "/" << c.hkv
                                   << ", d " << c.d << "/" << c.dv << ", page " << c.page
                                   << ", causal " << c.causal << ")");
            worst = std::max(worst, e);
            ++runs;
        }
    }
    attn_set_isa(nullptr);
    MESSAGE(kPacks << " packs x " << names.size() << " ISAs = " << runs
                   << " runs, max relative error " << worst);
    CHECK(worst <= 1e-5);
}

TEST_CASE(
    "varlen and paged packs with the window / ALiBi diagonal, the ALiBi form and per-sequence "
    "slopes match the float64 reference on every ISA") {
    std::mt19937 g(20261206);
    const std::vector<std::string> names = isas();
    double worst = 0.0;
    size_t runs = 0, asym = 0, seqs = 0;
    const int kPacks = 240;
    for (int n = 0; n < kPacks; ++n) {
        const Mode mode = static_cast<Mode>(n % 3);
        Pack c = random_pack(g, mode);
        c.diagonal = static_cast<int>(pick(g, 0, 2));
        c.alibi_form = static_cast<int>(pick(g, 0, 1));
        if (pick(g, 0, 2) == 0) c.wl = static_cast<long long>(pick(g, 0, 20));
        if (pick(g, 0, 2) == 0) c.wr = static_cast<long long>(pick(g, 0, 20));
        c.alibi = pick(g, 0, 3) == 0 ? ATTN_ALIBI_STANDARD : ATTN_ALIBI_OPERAND;
        c.slopes.clear();
        c.slopes_batch = 0;
        if (c.alibi == ATTN_ALIBI_OPERAND) {
            if (pick(g, 0, 2) != 0) c.slopes_batch = c.hq + pick(g, 0, 2);
            c.slopes.resize((c.batch - 1) * c.slopes_batch + c.hq);
            for (float &x : c.slopes) x = uni(g, 0.01f, 0.5f);
        }
        c.invariant = n % 5 == 4;
        for (size_t b = 0; b < c.batch; ++b) {
            seqs += c.lq[b] > 0;
            asym += c.lq[b] > 0 && c.lq[b] != c.lk[b];
        }
        for (const std::string &isa : names) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Run r = run(c, mode == kDensePaged);
            const double e = check(c, r, "pack " + std::to_string(n) + " on " + isa);
            if (e > 1e-5)
                FAIL_CHECK("pack " << n << " mode " << mode << " on " << isa << ": rel err " << e
                                   << " (causal " << c.causal << ", diagonal " << c.diagonal
                                   << ", window " << c.wl << "," << c.wr << ", alibi " << c.alibi
                                   << ", form " << c.alibi_form << ", slopes_batch "
                                   << c.slopes_batch << ")");
            worst = std::max(worst, e);
            ++runs;
        }
    }
    attn_set_isa(nullptr);
    MESSAGE(kPacks << " packs x " << names.size() << " ISAs = " << runs << " runs (" << asym
                   << " of " << seqs << " sequences with len_q != len_k), max relative error "
                   << worst);
    CHECK(asym * 2 > seqs);
    CHECK(worst <= 1e-5);
}

namespace {

// Out and lse of two runs, bit for bit.
void check_same_bits(const Run &a, const Run &b) {
    CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4) == 0);
    CHECK(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4) == 0);
}

// The pack on 1 thread, checked bit for bit against 2 threads (the ISA set by the caller).
Run run_on_1_and_2_threads(const Pack &c) {
    REQUIRE(attn_set_num_threads(1) == ATTN_OK);
    const Run r1 = run(c);
    REQUIRE(attn_set_num_threads(2) == ATTN_OK);
    check_same_bits(r1, run(c));
    return r1;
}

} // namespace

TEST_CASE("varlen and paged results are bit-identical on 1 and 2 threads") {
    std::mt19937 g(7);
    for (int n = 0; n < 12; ++n) {
        Pack c = random_pack(g, static_cast<Mode>(n % 3));
        // large enough to be spread over the pool
        for (size_t b = 0; b < c.batch; ++b) {
            c.lk[b] = 300 + 97 * b;
            if (c.mode != kDensePaged) c.lq[b] = 1 + 41 * b;
        }
        c.max_q = *std::max_element(c.lq.begin(), c.lq.end());
        c.max_k = *std::max_element(c.lk.begin(), c.lk.end());
        if (c.max_pages_param) c.max_pages_param = (c.max_k + c.page - 1) / c.page + 1;
        fill_sequences(c, g);
        build(c, g);
        for (const std::string &isa : isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Run r1 = run_on_1_and_2_threads(c);
            CHECK(check(c, r1, "threads") <= 1e-5);
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}

// Rounds every sequence's K and V to the values of c.store (f16 or bf16; int8: each row of
// head_dim quantized and widened back, so that the call's own quantization of the pool rows
// finds the same int8 values, its scales within an ulp), so that the float64 reference sees
// what the cache holds.
void round_kv(Pack &c) {
    if (c.store == 0) return;
    if (c.store == 3) {
        for (auto *seqs : {&c.ks, &c.vs}) {
            const size_t dim = seqs == &c.ks ? c.d : c.dv;
            for (std::vector<float> &x : *seqs) {
                std::vector<int8_t> q;
                std::vector<float> scale;
                quantize_rows(x, dim, q, scale);
                for (size_t e = 0; e < x.size(); ++e)
                    x[e] = static_cast<float>(q[e]) * scale[e / dim];
            }
        }
        return;
    }
    const auto to = c.store == 1 ? attn_convert_f32_to_f16 : attn_convert_f32_to_bf16;
    const auto from = c.store == 1 ? attn_convert_f16_to_f32 : attn_convert_bf16_to_f32;
    for (auto *seqs : {&c.ks, &c.vs})
        for (std::vector<float> &x : *seqs) {
            std::vector<uint16_t> h(x.size());
            REQUIRE(to(x.data(), h.data(), x.size()) == ATTN_OK);
            REQUIRE(from(h.data(), x.data(), x.size()) == ATTN_OK);
        }
}

TEST_CASE("long decode: token-major K/V walk the heads together, with the per-head bits") {
    // >= 4096 keys make a decode call split its keys; token-major K/V (pages, or packed rows)
    // then run a batch entry's KV heads through one pass over the tiles (key-major, see
    // decode_qk_heads), head-major ones head by head. Both must give the same bits, and the
    // float64 answer; in fp32, f16, bf16 and int8.
    std::mt19937 g(41);
    const std::vector<std::string> names = isas();
    double worst = 0.0;
    size_t compared = 0;
    for (int n = 0; n < 10; ++n) {
        Pack c;
        c.mode = kDensePaged;
        c.batch = pick(g, 1, 2);
        c.hkv = n < 2 ? 9 : pick(g, 1, 8); // 9: more heads than one pass takes
        c.hq = c.hkv * (size_t(1) << pick(g, 0, 2));
        c.d = n % 2 ? 128 : pick(g, 16, 72);
        c.dv = pick(g, 0, 2) == 0 ? pick(g, 16, 72) : c.d;
        c.causal = static_cast<int>(pick(g, 0, 2));
        if (n % 4 == 1) c.wl = static_cast<long long>(pick(g, 100, 3000));
        if (n % 3 == 2) c.softcap = uni(g, 1.0f, 20.0f);
        const size_t sq = c.hq / c.hkv == 4 ? 1 : pick(g, 1, 2);
        c.lq.assign(c.batch, sq);
        c.lk.resize(c.batch);
        for (size_t b = 0; b < c.batch; ++b) c.lk[b] = pick(g, 4096, 6000);
        c.max_q = sq;
        c.max_k = *std::max_element(c.lk.begin(), c.lk.end()) + pick(g, 0, 3);
        c.page = n % 3 == 0 ? 16 : pick(g, 5, 64);
        c.store = n % 3 == 1 ? 1 : n % 5 == 2 ? 2 : n % 4 == 0 ? 3 : 0; // f16, bf16, int8, fp32
        fill_sequences(c, g);
        round_kv(c);
        Pack hm = c, packed = c;
        hm.head_major = true;
        packed.mode = kVarlenPaged; // varlen Q over the same token-major pages
        std::mt19937 g1(n), g2(n), g3(n);
        build(c, g1);
        build(hm, g2);
        build(packed, g3);
        for (const std::string &isa : names) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Run rt = run(c), rh = run(hm), rp = run(packed);
            bool same = true;
            for (size_t b = 0; b < c.batch; ++b)
                for (size_t h = 0; h < c.hq; ++h)
                    for (size_t i = 0; i < sq; ++i) {
                        same = same &&
                               std::memcmp(&rt.out[c.out_at(b, h, i)], &rh.out[hm.out_at(b, h, i)],
                                           c.dv * 4) == 0 &&
                               std::memcmp(&rt.out[c.out_at(b, h, i)],
                                           &rp.out[packed.out_at(b, h, i)], c.dv * 4) == 0 &&
                               rt.lse[c.lse_at(b, h, i)] == rh.lse[hm.lse_at(b, h, i)] &&
                               rt.lse[c.lse_at(b, h, i)] == rp.lse[packed.lse_at(b, h, i)];
                        ++compared;
                    }
            CHECK_MESSAGE(same, "case " << n << " on " << isa << ": heads " << c.hq << "/" << c.hkv
                                        << ", d " << c.d << "/" << c.dv << ", page " << c.page
                                        << ", K/V storage " << c.store);
            const double e = check(c, rt, "long decode");
            CHECK_MESSAGE(e <= 1e-5, "case " << n << " on " << isa << ": rel err " << e);
            worst = std::max(worst, e);
        }
    }
    attn_set_isa(nullptr);
    MESSAGE("long decode: " << compared << " rows token-major = head-major = varlen bits; max "
                            << "relative error " << worst);
}

TEST_CASE("a pack of {2048, 1536, 1024, 512} causal plans only its real tokens") {
    // Not a timing: the call must give each sequence exactly its single-sequence answer.
    std::mt19937 g(3);
    Pack c;
    c.mode = kVarlen;
    c.batch = 4;
    c.hq = 2;
    c.hkv = 1;
    c.d = c.dv = 16;
    c.causal = ATTN_CAUSAL_TOP_LEFT;
    c.lq = {2048, 1536, 1024, 512};
    c.lk = c.lq;
    c.max_q = c.max_k = 2048;
    c.sinks.clear();
    fill_sequences(c, g);
    build(c, g);
    const Run r = run(c);
    CHECK(check(c, r, "long pack") <= 1e-5);
}

TEST_CASE("varlen packs and token-major pages with >= 1024 query rows per KV head run on a copy "
          "of their K/V rows") {
    // Rows >= 1 KiB apart (a packed row of 263 values; a token-major page row of 2, 4 or 8 x 130
    // values of 4, 2 or 1 bytes): the call copies each KV head's rows once, as stored
    // (core/kv_pack.hpp). Head-major pages (rows 130 values apart) are read in place with the
    // same arithmetic: the token-major output has their bits. In fp32, f16, bf16 and int8 (with
    // its scales; pages only, and there only against head-major pages, whose int8 reads the
    // random packs check against the reference: 32 heads would take the float64 reference
    // seconds).
    for (const Mode mode : {kVarlen, kVarlenPaged})
        for (const int store : {0, 1, 2, 3}) {
            if (store == 3 && mode == kVarlen) continue;
            std::mt19937 g(11);
            Pack c;
            c.mode = mode;
            c.batch = 3;
            c.hkv = store == 3 ? 8 : store == 0 ? 2 : 4; // rows >= 1 KiB apart
            c.hq = 4 * c.hkv;
            c.d = c.dv = 130;
            c.causal = ATTN_CAUSAL_BOTTOM_RIGHT;
            c.lq = {300, 0, 500};
            c.lk = {350, 0, 600}; // paged: a prefill chunk after cached keys
            c.max_q = 500;
            c.max_k = 600;
            if (mode == kVarlen) c.kv_row_pad = 3;
            if (mode == kVarlenPaged) c.page = 16;
            c.store = store;
            fill_sequences(c, g);
            round_kv(c);
            std::mt19937 g2 = g; // for the same page ids
            build(c, g);
            Pack hm = c;
            if (mode == kVarlenPaged) {
                hm.head_major = true;
                build(hm, g2);
                REQUIRE(hm.table == c.table);
            }
            const std::string what = std::string(mode == kVarlen ? "varlen" : "paged") +
                                     " copy, storage " + std::to_string(store);
            // The copy is the same code on every ISA: the float64 reference once (on the widest
            // kernel), bits on the others; the scalar kernel, covered by the random packs, is
            // left out (this test took minutes under AddressSanitizer with it).
            const std::vector<std::string> names = isas();
            for (size_t x = names.size(); x-- > 0;) {
                if (names[x] == "scalar") continue;
                REQUIRE(attn_set_isa(names[x].c_str()) == ATTN_OK);
                const Run r1 = run_on_1_and_2_threads(c);
                if (store != 3 && x + 1 == names.size())
                    CHECK(check(c, r1, what + " on " + names[x]) <= 1e-5);
                if (mode == kVarlenPaged) check_same_bits(r1, run(hm));
            }
        }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}

namespace {

// attn_run's status and message for a pack whose operands were bent by `bend`.
struct Outcome {
    attn_status st;
    std::string msg;
};
template <class F> Outcome run_bent(const Pack &c0, F bend) {
    Pack c = c0;
    attn_desc *d = make_desc(c);
    attn_args *a = make_args(c);
    std::vector<float> out(std::max<size_t>(1, c.out_len())), lse(std::max<size_t>(1, c.lse_len()));
    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, lse.data(), lse.size()) == ATTN_OK);
    bend(c, d, a);
    Outcome o{attn_run(d, ATTN_OP_FORWARD, a), attn_last_error()};
    attn_args_destroy(a);
    attn_desc_destroy(d);
    return o;
}

Pack small_pack(Mode mode) {
    std::mt19937 g(11);
    Pack c;
    c.mode = mode;
    c.batch = 3;
    c.hq = 2;
    c.hkv = 1;
    c.d = c.dv = 4;
    c.lq = mode == kDensePaged ? std::vector<size_t>{2, 2, 2} : std::vector<size_t>{2, 0, 3};
    c.lk = {5, 9, 3};
    c.max_q = 3;
    c.max_k = 10;
    c.page = mode == kVarlen ? 0 : 4;
    fill_sequences(c, g);
    build(c, g);
    return c;
}

} // namespace

TEST_CASE("bad serving operands are refused, naming the sequence and the slot") {
    struct Case {
        Mode mode;
        const char *what;
        attn_status st;
        const char *msg;
        void (*bend)(Pack &, attn_desc *, attn_args *);
    };
    const Case cases[] = {
        {kVarlenPaged, "page id out of range", ATTN_ERR_INVALID_ARGUMENT,
         "block_table[1][2] (99) is not a page of the K/V buffers",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.table[1 * c.max_pages + 2] = 99;
             attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size());
         }},
        {kDensePaged, "-1 among the used slots", ATTN_ERR_INVALID_ARGUMENT,
         "block_table[0][1] is -1 (unused) but sequence 0 has 5 keys",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.table[0 * c.max_pages + 1] = -1;
             attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size());
         }},
        {kDensePaged, "negative page id", ATTN_ERR_INVALID_ARGUMENT,
         "block_table[2][0] (-7) is not a page",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.table[2 * c.max_pages + 0] = -7;
             attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size());
         }},
        {kVarlenPaged, "length beyond seq_k", ATTN_ERR_INVALID_ARGUMENT,
         "seq_lens_k[1] (11) is outside [0, seq_k = 10]",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.seq_lens[1] = 11;
             attn_args_set_i32(a, ATTN_SEQ_LENS_K, c.seq_lens.data(), c.seq_lens.size());
         }},
        {kVarlenPaged, "a short block table", ATTN_ERR_INVALID_ARGUMENT,
         "block_table has 8 elements, needs at least 9",
         [](Pack &c, attn_desc *, attn_args *a) {
             attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size() - 1);
         }},
        {kVarlenPaged, "a pool too short for its page ids", ATTN_ERR_INVALID_ARGUMENT,
         "is not a page of the K/V buffers, which hold 1 pages",
         [](Pack &c, attn_desc *, attn_args *a) {
             attn_args_set_f32(a, ATTN_K, c.k.data(), c.page * c.hkv * c.d);
         }},
        {kVarlen, "cu_seqlens_q not starting at 0", ATTN_ERR_INVALID_ARGUMENT,
         "cu_seqlens_q[0] (1) must be 0",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.cu_q[0] = 1;
             attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, c.cu_q.data(), c.cu_q.size());
         }},
        {kVarlen, "decreasing cu_seqlens_k", ATTN_ERR_INVALID_ARGUMENT,
         "cu_seqlens_k must not decrease: cu_seqlens_k[1] = 5 > cu_seqlens_k[2] = 4",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.cu_k[2] = 4;
             attn_args_set_i32(a, ATTN_CU_SEQLENS_K, c.cu_k.data(), c.cu_k.size());
         }},
        {kVarlen, "a sequence longer than max_seqlen_q", ATTN_ERR_INVALID_ARGUMENT,
         "cu_seqlens_q: sequence 2 has length 7, above seq_q = 3",
         [](Pack &c, attn_desc *, attn_args *a) {
             c.cu_q[3] = c.cu_q[2] + 7;
             attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, c.cu_q.data(), c.cu_q.size());
         }},
        {kVarlen, "Q shorter than the pack", ATTN_ERR_INVALID_ARGUMENT,
         "q has 19 elements, needs at least 40",
         [](Pack &c, attn_desc *, attn_args *a) { attn_args_set_f32(a, ATTN_Q, c.q.data(), 19); }},
        {kVarlen, "no cu_seqlens_k", ATTN_ERR_NULL_POINTER,
         "cu_seqlens_k is NULL but ATTN_PARAM_VARLEN is 1",
         [](Pack &, attn_desc *, attn_args *a) {
             attn_args_set_i32(a, ATTN_CU_SEQLENS_K, nullptr, 0);
         }},
        {kDensePaged, "no block table", ATTN_ERR_NULL_POINTER,
         "block_table is NULL but ATTN_PARAM_PAGE_SIZE is set",
         [](Pack &, attn_desc *, attn_args *a) {
             attn_args_set_i32(a, ATTN_BLOCK_TABLE, nullptr, 0);
         }},
        {kVarlen, "a bias in a varlen call", ATTN_ERR_UNSUPPORTED,
         "bias is not supported with ATTN_PARAM_VARLEN",
         [](Pack &c, attn_desc *, attn_args *a) {
             attn_args_set_f32(a, ATTN_BIAS, c.k.data(), c.k.size());
         }},
        {kVarlenPaged, "cu_seqlens_k with pages", ATTN_ERR_INVALID_ARGUMENT,
         "cu_seqlens_k is bound but a paged cache takes its key lengths from seq_lens_k",
         [](Pack &c, attn_desc *, attn_args *a) {
             attn_args_set_i32(a, ATTN_CU_SEQLENS_K, c.cu_k.data(), c.cu_k.size());
         }},
    };
    for (const Case &k : cases) {
        const Outcome o = run_bent(small_pack(k.mode), k.bend);
        CHECK_MESSAGE(o.st == k.st, k.what << ": " << o.msg);
        CHECK_MESSAGE(o.msg.find(k.msg) != std::string::npos, k.what << ": " << o.msg);
    }
    // cu_seqlens_q without varlen mode, through a dense descriptor
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, 1, 1, 1, 2, 2, 2) == ATTN_OK);
    std::vector<float> x(8, 0.0f), out(4);
    const int32_t cu[2] = {0, 2};
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    for (attn_operand w : {ATTN_Q, ATTN_K, ATTN_V}) attn_args_set_f32(a, w, x.data(), 4);
    attn_args_set_out_f32(a, ATTN_OUT, out.data(), 4);
    attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, cu, 2);
    CHECK(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(attn_last_error()).find("cu_seqlens_q is bound but ATTN_PARAM_VARLEN is 0") !=
          std::string::npos);
    attn_args_destroy(a);
    attn_desc_destroy(d);
}

TEST_CASE("attn_kv_append fills a paged cache that attention then reads") {
    std::mt19937 g(5);
    for (int layout = 0; layout < 4; ++layout) {
        const Mode mode = layout < 2 ? kVarlenPaged : kDensePaged;
        Pack c = random_pack(g, mode);
        c.head_major = layout % 2 == 1;
        c.page = layout == 0 ? 3 : 16;
        c.max_pages_param = 0;
        build(c, g);
        const Pack want = c; // the pool as build() wrote it
        // an empty pool with the same block table, then the tokens in two appends: a prefill
        // of all but the last lq tokens (as dense queries of length lk - lq), then the rest
        std::fill(c.k.begin(), c.k.end(), kNaN);
        std::fill(c.v.begin(), c.v.end(), kNaN);
        attn_desc *d = make_desc(c);
        for (int step = 0; step < 2; ++step) {
            std::vector<int32_t> lens(c.batch), cu(c.batch + 1, 0);
            std::vector<float> nk, nv;
            size_t per_seq = 0;
            for (size_t b = 0; b < c.batch; ++b) {
                const size_t tail = std::min(c.lq[b], c.lk[b]);
                const size_t from = step == 0 ? 0 : c.lk[b] - tail;
                const size_t to = step == 0 ? c.lk[b] - tail : c.lk[b];
                lens[b] = static_cast<int32_t>(to);
                cu[b + 1] = cu[b] + static_cast<int32_t>(to - from);
                per_seq = to - from;
                for (size_t j = from; j < to; ++j)
                    for (size_t h = 0; h < c.hkv; ++h) {
                        nk.insert(nk.end(), &c.ks[b][(h * c.lk[b] + j) * c.d],
                                  &c.ks[b][(h * c.lk[b] + j) * c.d] + c.d);
                        nv.insert(nv.end(), &c.vs[b][(h * c.lk[b] + j) * c.dv],
                                  &c.vs[b][(h * c.lk[b] + j) * c.dv] + c.dv);
                    }
            }
            {
                // a dense descriptor appends seq_q tokens per sequence and a varlen one at most
                // seq_q: the long, uneven prefill goes through a varlen descriptor with room
                bool even = true;
                for (size_t b = 0; b < c.batch; ++b)
                    even &= static_cast<size_t>(cu[b + 1] - cu[b]) == c.max_q;
                const bool fits = mode == kVarlenPaged ? step == 1 : even && per_seq == c.max_q;
                if (!fits) {
                    Pack cv = c;
                    cv.mode = kVarlenPaged;
                    cv.max_q = std::max<size_t>(1, c.max_k);
                    attn_desc *dv = make_desc(cv);
                    attn_args *a = nullptr;
                    REQUIRE(attn_args_create(&a) == ATTN_OK);
                    attn_args_set_f32(a, ATTN_NEW_K, nk.data(), nk.size());
                    attn_args_set_f32(a, ATTN_NEW_V, nv.data(), nv.size());
                    attn_args_set_i32(a, ATTN_SEQ_LENS_K, lens.data(), lens.size());
                    attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, cu.data(), cu.size());
                    attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size());
                    REQUIRE_MESSAGE(attn_kv_append(dv, a, c.k.data(), c.k.size(), c.v.data(),
                                                   c.v.size()) == ATTN_OK,
                                    attn_last_error());
                    attn_args_destroy(a);
                    attn_desc_destroy(dv);
                    continue;
                }
            }
            attn_args *a = nullptr;
            REQUIRE(attn_args_create(&a) == ATTN_OK);
            attn_args_set_f32(a, ATTN_NEW_K, nk.empty() ? nullptr : nk.data(), nk.size());
            attn_args_set_f32(a, ATTN_NEW_V, nv.empty() ? nullptr : nv.data(), nv.size());
            attn_args_set_i32(a, ATTN_SEQ_LENS_K, lens.data(), lens.size());
            if (mode == kVarlenPaged) attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, cu.data(), cu.size());
            attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size());
            const attn_status st =
                attn_kv_append(d, a, c.k.data(), c.k.size(), c.v.data(), c.v.size());
            REQUIRE_MESSAGE(st == ATTN_OK,
                            std::string(attn_last_error())); // also with nothing to append
            attn_args_destroy(a);
        }
        attn_desc_destroy(d);
        // every used position holds exactly what build() put there; the rest is untouched
        for (size_t x = 0; x < c.k.size(); ++x)
            CHECK(((std::isnan(c.k[x]) && std::isnan(want.k[x])) || c.k[x] == want.k[x]));
        for (size_t x = 0; x < c.v.size(); ++x)
            CHECK(((std::isnan(c.v[x]) && std::isnan(want.v[x])) || c.v[x] == want.v[x]));
        CHECK(check(c, run(c), "after append") <= 1e-5);
    }
}

TEST_CASE("attn_kv_append refuses what would write out of place") {
    Pack c = small_pack(kVarlenPaged);
    attn_desc *d = make_desc(c);
    std::vector<float> nk(c.total_q * c.hkv * c.d, 1.0f), nv(nk);
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    attn_args_set_f32(a, ATTN_NEW_K, nk.data(), nk.size());
    attn_args_set_f32(a, ATTN_NEW_V, nv.data(), nv.size());
    attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, c.cu_q.data(), c.cu_q.size());
    attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size());
    std::vector<int32_t> lens = {1, 9, 3}; // sequence 0 adds 2 tokens but would have 1 key
    attn_args_set_i32(a, ATTN_SEQ_LENS_K, lens.data(), lens.size());
    CHECK(attn_kv_append(d, a, c.k.data(), c.k.size(), c.v.data(), c.v.size()) ==
          ATTN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(attn_last_error()).find("seq_lens_k[0] (1) is less than the 2 new tokens") !=
          std::string::npos);
    lens = {5, 9, 3};
    attn_args_set_i32(a, ATTN_SEQ_LENS_K, lens.data(), lens.size());
    CHECK(attn_kv_append(d, a, c.k.data(), c.k.size(), c.k.data(), c.k.size()) ==
          ATTN_ERR_INVALID_ARGUMENT); // the same buffer twice
    CHECK(std::string(attn_last_error()).find("overlaps") != std::string::npos);
    CHECK(attn_kv_append(d, a, c.k.data(), c.k.size(), nullptr, 0) == ATTN_ERR_NULL_POINTER);
    CHECK(std::string(attn_last_error()).find("v_cache is NULL") != std::string::npos);
    std::vector<int32_t> bad = c.table;
    bad[2 * c.max_pages] = 1000;
    attn_args_set_i32(a, ATTN_BLOCK_TABLE, bad.data(), bad.size());
    CHECK(attn_kv_append(d, a, c.k.data(), c.k.size(), c.v.data(), c.v.size()) ==
          ATTN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(attn_last_error()).find("block_table[2][0] (1000)") != std::string::npos);
    attn_args_destroy(a);
    attn_desc_destroy(d);
}

namespace {

// One dense forward over keys [k0, k1) of a [B][H][S][D] problem (the K/V views start at k0).
void part_call(size_t B, size_t hq, size_t hkv, size_t sq, size_t sk, size_t D, size_t k0,
               size_t k1, const std::vector<float> &q, const std::vector<float> &k,
               const std::vector<float> &v, std::vector<float> &out, std::vector<float> &lse,
               bool invariant = false) {
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, B, hq, hkv, sq, k1 - k0, D) == ATTN_OK);
    REQUIRE(attn_desc_set_float(d, ATTN_PARAM_SCALE, 0.125) == ATTN_OK);
    attn_desc_set_int(d, ATTN_PARAM_BATCH_INVARIANT, invariant);
    REQUIRE(attn_desc_set_strides(d, ATTN_K, hkv * sk * D, sk * D, D) == ATTN_OK);
    REQUIRE(attn_desc_set_strides(d, ATTN_V, hkv * sk * D, sk * D, D) == ATTN_OK);
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    attn_args_set_f32(a, ATTN_Q, q.data(), q.size());
    attn_args_set_f32(a, ATTN_K, k.data() + k0 * D, k.size() - k0 * D);
    attn_args_set_f32(a, ATTN_V, v.data() + k0 * D, v.size() - k0 * D);
    out.assign(B * hq * sq * D, kSentinel);
    lse.assign(B * hq * sq, kSentinel);
    attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size());
    attn_args_set_out_f32(a, ATTN_LSE, lse.data(), lse.size());
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, attn_last_error());
    attn_args_destroy(a);
    attn_desc_destroy(d);
}

void merge(attn_desc *d, std::vector<float> &out, std::vector<float> &lse, std::vector<float> &pout,
           std::vector<float> &plse, const int32_t *cu = nullptr, size_t ncu = 0) {
    attn_args *acc = nullptr, *part = nullptr;
    REQUIRE(attn_args_create(&acc) == ATTN_OK);
    REQUIRE(attn_args_create(&part) == ATTN_OK);
    attn_args_set_out_f32(acc, ATTN_OUT, out.data(), out.size());
    attn_args_set_out_f32(acc, ATTN_LSE, lse.data(), lse.size());
    if (cu) attn_args_set_i32(acc, ATTN_CU_SEQLENS_Q, cu, ncu);
    attn_args_set_out_f32(part, ATTN_OUT, pout.data(), pout.size());
    attn_args_set_out_f32(part, ATTN_LSE, plse.data(), plse.size());
    REQUIRE_MESSAGE(attn_merge(d, acc, part) == ATTN_OK, attn_last_error());
    attn_args_destroy(acc);
    attn_args_destroy(part);
}

} // namespace

TEST_CASE("attn_merge of a key split equals one call over all keys") {
    std::mt19937 g(9);
    const size_t B = 2, hq = 4, hkv = 2, sq = 37, sk = 300, D = 32;
    std::vector<float> q(B * hq * sq * D), k(B * hkv * sk * D), v(k.size());
    for (float &x : q) x = uni(g, -2, 2);
    for (float &x : k) x = uni(g, -2, 2);
    for (float &x : v) x = uni(g, -2, 2);
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        std::vector<float> full, full_lse;
        part_call(B, hq, hkv, sq, sk, D, 0, sk, q, k, v, full, full_lse);
        attn_desc *md = nullptr;
        REQUIRE(attn_desc_create(&md, B, hq, hkv, sq, sk, D) == ATTN_OK);
        const size_t cuts[4] = {0, 17, 190, sk};
        std::vector<float> results[2];
        for (int rep = 0; rep < 2; ++rep) {
            std::vector<float> acc, acc_lse, po, pl;
            part_call(B, hq, hkv, sq, sk, D, cuts[0], cuts[1], q, k, v, acc, acc_lse);
            for (int p = 1; p < 3; ++p) {
                part_call(B, hq, hkv, sq, sk, D, cuts[p], cuts[p + 1], q, k, v, po, pl);
                merge(md, acc, acc_lse, po, pl);
            }
            double worst = 0;
            for (size_t x = 0; x < full.size(); ++x)
                worst = std::max(worst, ref::rel_err(acc[x], full[x]));
            for (size_t x = 0; x < full_lse.size(); ++x)
                worst = std::max(worst, ref::rel_err(acc_lse[x], full_lse[x]));
            CHECK_MESSAGE(worst <= 1e-6, isa << ": merged vs single call " << worst);
            acc.insert(acc.end(), acc_lse.begin(), acc_lse.end());
            results[rep] = acc;
        }
        CHECK(std::memcmp(results[0].data(), results[1].data(), results[0].size() * 4) == 0);
        // a part that saw no key (lse -inf, any out) contributes nothing; two such give zeros
        std::vector<float> acc = full, acc_lse = full_lse;
        std::vector<float> empty(full.size(), kNaN), empty_lse(full_lse.size(), -INFINITY);
        merge(md, acc, acc_lse, empty, empty_lse);
        CHECK(std::memcmp(acc.data(), full.data(), full.size() * 4) == 0);
        CHECK(std::memcmp(acc_lse.data(), full_lse.data(), full_lse.size() * 4) == 0);
        std::vector<float> z(full.size(), 5.0f), z_lse(full_lse.size(), -INFINITY);
        std::vector<float> e2 = empty, e2_lse = empty_lse;
        merge(md, z, z_lse, e2, e2_lse);
        CHECK(std::all_of(z.begin(), z.end(), [](float x) { return x == 0.0f; }));
        CHECK(std::all_of(z_lse.begin(), z_lse.end(), [](float x) { return x == -INFINITY; }));
        attn_desc_destroy(md);
    }
    attn_set_isa(nullptr);
}

TEST_CASE("attn_merge on a varlen pack, and its errors") {
    std::mt19937 g(13);
    Pack c;
    c.mode = kVarlen;
    c.batch = 3;
    c.hq = 4;
    c.hkv = 2;
    c.d = c.dv = 24;
    c.lq = {5, 0, 9};
    c.lk = {40, 7, 66};
    c.max_q = 9;
    c.max_k = 66;
    fill_sequences(c, g);
    build(c, g);
    const Run full = run(c);
    // the same pack split by keys: first halves, then second halves
    Pack a = c, b = c;
    for (size_t s = 0; s < c.batch; ++s) {
        const size_t h = c.lk[s] / 2;
        a.lk[s] = h;
        b.lk[s] = c.lk[s] - h;
        a.ks[s].clear();
        b.ks[s].clear();
        a.vs[s].clear();
        b.vs[s].clear();
        for (size_t kvh = 0; kvh < c.hkv; ++kvh) {
            const float *k0 = &c.ks[s][kvh * c.lk[s] * c.d], *v0 = &c.vs[s][kvh * c.lk[s] * c.dv];
            a.ks[s].insert(a.ks[s].end(), k0, k0 + h * c.d);
            b.ks[s].insert(b.ks[s].end(), k0 + h * c.d, k0 + c.lk[s] * c.d);
            a.vs[s].insert(a.vs[s].end(), v0, v0 + h * c.dv);
            b.vs[s].insert(b.vs[s].end(), v0 + h * c.dv, v0 + c.lk[s] * c.dv);
        }
    }
    build(a, g);
    build(b, g);
    Run ra = run(a), rb = run(b);
    attn_desc *d = make_desc(c);
    merge(d, ra.out, ra.lse, rb.out, rb.lse, c.cu_q.data(), c.cu_q.size());
    double worst = 0;
    for (size_t x = 0; x < c.out_len(); ++x)
        worst = std::max(worst, ref::rel_err(ra.out[x], full.out[x]));
    for (size_t x = 0; x < c.lse_len(); ++x)
        worst = std::max(worst, ref::rel_err(ra.lse[x], full.lse[x]));
    CHECK(worst <= 1e-6);
    // errors
    attn_args *acc = nullptr, *part = nullptr;
    REQUIRE(attn_args_create(&acc) == ATTN_OK);
    REQUIRE(attn_args_create(&part) == ATTN_OK);
    attn_args_set_out_f32(acc, ATTN_OUT, ra.out.data(), ra.out.size());
    attn_args_set_out_f32(acc, ATTN_LSE, ra.lse.data(), ra.lse.size());
    attn_args_set_out_f32(part, ATTN_OUT, rb.out.data(), rb.out.size());
    CHECK(attn_merge(d, acc, part) == ATTN_ERR_NULL_POINTER);
    CHECK(std::string(attn_last_error()).find("part's lse is NULL") != std::string::npos);
    attn_args_set_out_f32(part, ATTN_LSE, rb.lse.data(), rb.lse.size());
    CHECK(attn_merge(d, acc, part) == ATTN_ERR_NULL_POINTER);
    CHECK(std::string(attn_last_error()).find("acc's cu_seqlens_q is NULL") != std::string::npos);
    attn_args_set_i32(acc, ATTN_CU_SEQLENS_Q, c.cu_q.data(), c.cu_q.size());
    attn_args_set_out_f32(part, ATTN_LSE, rb.lse.data(), 3);
    CHECK(attn_merge(d, acc, part) == ATTN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(attn_last_error()).find("part's lse has 3 elements, needs at least 56") !=
          std::string::npos);
    attn_args_set_out_f32(part, ATTN_LSE, ra.lse.data(), ra.lse.size());
    CHECK(attn_merge(d, acc, part) == ATTN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(attn_last_error()).find("overlaps") != std::string::npos);
    attn_args_destroy(acc);
    attn_args_destroy(part);
    attn_desc_destroy(d);
}

// ---- Batch invariance -----------------------------------------------------------------------
namespace {

struct Seq {
    size_t n = 400, hq = 4, hkv = 2, d = 64;
    std::vector<float> q, k, v; // [h][n][d]
};

// Output rows [h][i][d] of the sequence, from the call layout under test.
using Rows = std::vector<float>;

void invariant_desc(attn_desc *d, bool window) {
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_BATCH_INVARIANT, 1) == ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_CAUSAL, ATTN_CAUSAL_BOTTOM_RIGHT) == ATTN_OK);
    if (window) REQUIRE(attn_desc_set_int(d, ATTN_PARAM_WINDOW_LEFT, 77) == ATTN_OK);
}

// The sequence alone, or in a padded batch of three (it is entry 1; the others are longer).
Rows dense_call(const Seq &s, bool padded, bool window, size_t q0 = 0, size_t q1 = 0) {
    if (q1 == 0) q1 = s.n;
    const size_t nq = q1 - q0, B = padded ? 3 : 1, me = padded ? 1 : 0;
    const size_t SQ = padded ? s.n + 50 : nq, SK = padded ? s.n + 80 : q1;
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, B, s.hq, s.hkv, SQ, SK, s.d) == ATTN_OK);
    invariant_desc(d, window);
    std::mt19937 g(1);
    std::vector<float> q(B * s.hq * SQ * s.d), k(B * s.hkv * SK * s.d), v(k.size());
    if (padded) // the batch-mates (alone, every element is the sequence's own)
        for (auto *x : {&q, &k, &v})
            for (float &e : *x) e = uni(g, -1, 1);
    std::vector<uint8_t> qvalid(B * SQ, 1);
    std::vector<int32_t> lens(B, static_cast<int32_t>(SK));
    lens[me] = static_cast<int32_t>(q1);
    for (size_t h = 0; h < s.hq; ++h)
        for (size_t i = 0; i < nq; ++i)
            std::memcpy(&q[((me * s.hq + h) * SQ + i) * s.d], &s.q[(h * s.n + q0 + i) * s.d],
                        s.d * 4);
    for (size_t i = nq; i < SQ; ++i) qvalid[me * SQ + i] = 0;
    for (size_t h = 0; h < s.hkv; ++h)
        for (size_t j = 0; j < SK; ++j) {
            float *kd = &k[((me * s.hkv + h) * SK + j) * s.d],
                  *vd = &v[((me * s.hkv + h) * SK + j) * s.d];
            if (j < q1) {
                std::memcpy(kd, &s.k[(h * s.n + j) * s.d], s.d * 4);
                std::memcpy(vd, &s.v[(h * s.n + j) * s.d], s.d * 4);
            } else {
                std::fill(kd, kd + s.d, kNaN);
                std::fill(vd, vd + s.d, kNaN);
            }
        }
    // BOTTOM_RIGHT aligns the last real query with the last key: the query positions of the
    // padded entry are its first nq rows, its keys seq_lens_k = q1, so diag(i) = i + q1 - SQ in
    // the padded call. Keep that equal to the alone call (i + q0) by padding queries at the
    // front instead: move the real queries to the end of the row range.
    if (padded) {
        std::vector<float> qq(q);
        for (size_t h = 0; h < s.hq; ++h)
            for (size_t i = 0; i < SQ; ++i) {
                float *dst = &q[((me * s.hq + h) * SQ + i) * s.d];
                const size_t src_i = i + nq >= SQ ? i + nq - SQ : SIZE_MAX;
                if (src_i != SIZE_MAX)
                    std::memcpy(dst, &qq[((me * s.hq + h) * SQ + src_i) * s.d], s.d * 4);
            }
        for (size_t i = 0; i < SQ; ++i) qvalid[me * SQ + i] = i + nq >= SQ;
    }
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    attn_args_set_f32(a, ATTN_Q, q.data(), q.size());
    attn_args_set_f32(a, ATTN_K, k.data(), k.size());
    attn_args_set_f32(a, ATTN_V, v.data(), v.size());
    if (padded) {
        attn_args_set_u8(a, ATTN_QUERY_VALID, qvalid.data(), qvalid.size());
        attn_args_set_i32(a, ATTN_SEQ_LENS_K, lens.data(), lens.size());
    }
    std::vector<float> out(B * s.hq * SQ * s.d);
    attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size());
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, attn_last_error());
    attn_args_destroy(a);
    attn_desc_destroy(d);
    Rows r(s.hq * nq * s.d);
    const size_t first = padded ? SQ - nq : 0;
    for (size_t h = 0; h < s.hq; ++h)
        for (size_t i = 0; i < nq; ++i)
            std::memcpy(&r[(h * nq + i) * s.d], &out[((me * s.hq + h) * SQ + first + i) * s.d],
                        s.d * 4);
    return r;
}

// The sequence as entry 1 of a varlen pack (paged or not), queries [q0, q1) over keys [0, q1).
Rows pack_call(const Seq &s, bool paged, bool window, size_t q0 = 0, size_t q1 = 0) {
    if (q1 == 0) q1 = s.n;
    std::mt19937 g(2);
    Pack c;
    c.mode = paged ? kVarlenPaged : kVarlen;
    c.batch = 3;
    c.hq = s.hq;
    c.hkv = s.hkv;
    c.d = c.dv = s.d;
    c.causal = ATTN_CAUSAL_BOTTOM_RIGHT;
    c.wl = window ? 77 : -1;
    c.invariant = true;
    c.lq = {13, q1 - q0, 1};
    c.lk = {250, q1, 700};
    c.max_q = std::max<size_t>(13, q1 - q0);
    c.max_k = 700;
    c.page = 16;
    // the batch-mates are the same in every call: generated once
    static Pack mates;
    if (mates.qs.empty()) {
        mates = c;
        mates.lq = {13, 0, 1};
        mates.lk = {250, 0, 700};
        fill_sequences(mates, g);
    }
    c.qs = mates.qs;
    c.ks = mates.ks;
    c.vs = mates.vs;
    c.qs[1].resize(c.hq * c.lq[1] * c.d);
    c.ks[1].resize(c.hkv * c.lk[1] * c.d);
    c.vs[1].resize(c.hkv * c.lk[1] * c.dv);
    for (size_t h = 0; h < s.hq; ++h)
        std::memcpy(&c.qs[1][h * (q1 - q0) * s.d], &s.q[(h * s.n + q0) * s.d], (q1 - q0) * s.d * 4);
    for (size_t h = 0; h < s.hkv; ++h) {
        std::memcpy(&c.ks[1][h * q1 * s.d], &s.k[h * s.n * s.d], q1 * s.d * 4);
        std::memcpy(&c.vs[1][h * q1 * s.d], &s.v[h * s.n * s.d], q1 * s.d * 4);
    }
    build(c, g);
    const Run r = run(c);
    Rows out(s.hq * (q1 - q0) * s.d);
    for (size_t h = 0; h < s.hq; ++h)
        for (size_t i = 0; i < q1 - q0; ++i)
            std::memcpy(&out[(h * (q1 - q0) + i) * s.d], &r.out[c.out_at(1, h, i)], s.d * 4);
    return out;
}

// The sequence computed in prefill chunks of `chunk` queries (each over its prefix of keys).
Rows chunked(const Seq &s, size_t chunk, bool paged, bool window) {
    Rows all(s.hq * s.n * s.d);
    for (size_t q0 = 0; q0 < s.n; q0 += chunk) {
        const size_t q1 = std::min(s.n, q0 + chunk);
        const Rows r =
            paged ? pack_call(s, true, window, q0, q1) : dense_call(s, false, window, q0, q1);
        for (size_t h = 0; h < s.hq; ++h)
            std::memcpy(&all[(h * s.n + q0) * s.d], &r[h * (q1 - q0) * s.d], (q1 - q0) * s.d * 4);
    }
    return all;
}

} // namespace

TEST_CASE("batch invariance: a sequence's output bits do not depend on the call around it") {
    Seq s;
    std::mt19937 g(17);
    s.q.resize(s.hq * s.n * s.d);
    s.k.resize(s.hkv * s.n * s.d);
    s.v.resize(s.k.size());
    for (float &x : s.q) x = uni(g, -1, 1);
    for (float &x : s.k) x = uni(g, -1, 1);
    for (float &x : s.v) x = uni(g, -1, 1);
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        for (bool window : {false, true}) {
            REQUIRE(attn_set_num_threads(1) == ATTN_OK);
            const Rows alone = dense_call(s, false, window);
            struct Variant {
                const char *name;
                Rows rows;
            };
            std::vector<Variant> vs;
            vs.push_back({"padded batch", dense_call(s, true, window)});
            vs.push_back({"varlen pack", pack_call(s, false, window)});
            vs.push_back({"paged cache", pack_call(s, true, window)});
            for (size_t chunk : {1, 7, 64, 333}) {
                vs.push_back({"dense prefill chunks", chunked(s, chunk, false, window)});
                if (chunk != 1)
                    vs.push_back({"paged prefill chunks", chunked(s, chunk, true, window)});
            }
            REQUIRE(attn_set_num_threads(2) == ATTN_OK);
            vs.push_back({"2 threads", dense_call(s, false, window)});
            vs.push_back({"2 threads, paged", pack_call(s, true, window)});
            vs.push_back({"2 threads, decode steps", chunked(s, 1, true, window)});
            for (const Variant &v : vs)
                CHECK_MESSAGE(std::memcmp(v.rows.data(), alone.data(), alone.size() * 4) == 0,
                              isa << (window ? " window" : "") << ": " << v.name);
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}

namespace {

// ---- attn_kv_append_args: caches of every storage type ----

// Independent encoders (the rules attn.h states: round to nearest, ties to the even neighbour)
// by picking the nearer of the two neighbouring 16-bit values in float64, and decoders to
// float64 written from the formats' definitions.
double dec_f16(uint16_t u) {
    const int e = (u >> 10) & 0x1f, m = u & 0x3ff;
    const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
    return (u & 0x8000) ? -mag : mag;
}
uint16_t ref_f16(float x) { // finite |x| < 65504
    const double a = std::fabs(static_cast<double>(x));
    uint16_t lo = 0, hi = 0x7bff; // the largest magnitude whose value is <= a
    while (lo < hi) {
        const uint16_t mid = static_cast<uint16_t>((lo + hi + 1) / 2);
        if (dec_f16(mid) <= a)
            lo = mid;
        else
            hi = static_cast<uint16_t>(mid - 1);
    }
    const uint16_t up = static_cast<uint16_t>(lo + 1);
    const double dl = a - dec_f16(lo), dh = dec_f16(up) - a;
    const uint16_t m = dl < dh ? lo : dh < dl ? up : (lo & 1) ? up : lo;
    return static_cast<uint16_t>(m | (x < 0 ? 0x8000 : 0));
}
double dec_bf16(uint16_t u) {
    const uint32_t w = static_cast<uint32_t>(u) << 16;
    float f;
    std::memcpy(&f, &w, 4);
    return f;
}
uint16_t ref_bf16(float x) {
    uint32_t w;
    std::memcpy(&w, &x, 4);
    const uint16_t lo = static_cast<uint16_t>(w >> 16), hi = static_cast<uint16_t>(lo + 1);
    const double dl = std::fabs(dec_bf16(lo) - x), dh = std::fabs(dec_bf16(hi) - x);
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

// Type ids: 0 f32, 1 f16, 2 bf16, 3 int8.
const char *const kTypeName[4] = {"f32", "f16", "bf16", "int8"};

// A cache of one storage type: raw bytes plus int8 scales, one row per (slot, KV head).
struct TypedCache {
    int type = 0;
    std::vector<float> f;
    std::vector<uint16_t> h;
    std::vector<int8_t> i;
    std::vector<float> scale;
    void init(int t, size_t rows, size_t dim) {
        type = t;
        f.assign(t == 0 ? rows * dim : 0, kSentinel);
        h.assign(t == 1 || t == 2 ? rows * dim : 0, 0x7777);
        i.assign(t == 3 ? rows * dim : 0, 77);
        scale.assign(t == 3 ? rows : 0, kSentinel);
    }
    void bind(attn_args *a, attn_operand w, attn_operand ws) {
        if (type == 0) REQUIRE(attn_args_set_out_f32(a, w, f.data(), f.size()) == ATTN_OK);
        if (type == 1) REQUIRE(attn_args_set_out_f16(a, w, h.data(), h.size()) == ATTN_OK);
        if (type == 2) REQUIRE(attn_args_set_out_bf16(a, w, h.data(), h.size()) == ATTN_OK);
        if (type == 3) {
            REQUIRE(attn_args_set_out_i8(a, w, i.data(), i.size()) == ATTN_OK);
            REQUIRE(attn_args_set_out_f32(a, ws, scale.data(), scale.size()) == ATTN_OK);
        }
    }
    // element e of row r (dim values per row) as float64
    double value(size_t r, size_t dim, size_t e) const {
        switch (type) {
        case 1:
            return dec_f16(h[r * dim + e]);
        case 2:
            return dec_bf16(h[r * dim + e]);
        case 3:
            return static_cast<double>(static_cast<float>(i[r * dim + e]) * scale[r]);
        default:
            return f[r * dim + e];
        }
    }
};

// The new rows of one operand, fp32 and encoded in one type (what the call binds).
struct NewRowsOf {
    std::vector<float> f;
    std::vector<uint16_t> h;
    std::vector<int8_t> i;
    std::vector<float> scale;
    void encode(int t, size_t dim) {
        const size_t rows = f.size() / dim;
        if (t == 1 || t == 2) {
            h.resize(f.size());
            for (size_t x = 0; x < f.size(); ++x) h[x] = t == 1 ? ref_f16(f[x]) : ref_bf16(f[x]);
        }
        if (t == 3) {
            i.resize(f.size());
            scale.resize(rows);
            REQUIRE(attn_quantize_i8(f.data(), rows, dim, i.data(), scale.data()) == ATTN_OK);
        }
    }
    void bind(attn_args *a, attn_operand w, attn_operand ws, int t) {
        if (t == 0) REQUIRE(attn_args_set_f32(a, w, f.data(), f.size()) == ATTN_OK);
        if (t == 1) REQUIRE(attn_args_set_f16(a, w, h.data(), h.size()) == ATTN_OK);
        if (t == 2) REQUIRE(attn_args_set_bf16(a, w, h.data(), h.size()) == ATTN_OK);
        if (t == 3) {
            REQUIRE(attn_args_set_i8(a, w, i.data(), i.size()) == ATTN_OK);
            REQUIRE(attn_args_set_f32(a, ws, scale.data(), scale.size()) == ATTN_OK);
        }
    }
};

} // namespace

TEST_CASE("attn_kv_append_args writes every cache type, from fp32 or same-typed rows, dense / "
          "packed / paged, and attention reads it back against float64") {
    // batch 2, heads 4 / 2, head_dim 8, head_dim_v 6; sequences hold lens[b] keys after the
    // append, the last n_b of them new. Layouts: 0 dense Q + dense K/V, 1 varlen Q + packed K/V,
    // 2 varlen Q + paged (page 4), 3 dense Q + paged (page 3, pages in reverse order).
    const size_t B = 2, HQ = 4, HKV = 2, D = 8, DV = 6, SK = 12;
    std::mt19937 g(29);
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        for (int layout = 0; layout < 4; ++layout)
            for (int ct = 0; ct < 4; ++ct)
                for (int same = 0; same < 2; ++same) {
                    if (ct == 0 && same) continue; // fp32 rows into fp32: one case
                    const int nt = same ? ct : 0;
                    CAPTURE(isa);
                    CAPTURE(layout);
                    CAPTURE(kTypeName[ct]);
                    CAPTURE(kTypeName[nt]);
                    const bool varlen = layout == 1 || layout == 2, paged = layout >= 2;
                    const size_t page = layout == 2 ? 4 : 3;
                    const std::vector<size_t> n =
                        varlen ? std::vector<size_t>{3, 1} : std::vector<size_t>{3, 3};
                    const std::vector<size_t> lens = {7, 11};
                    const size_t SQ = 3;
                    const size_t tokens = n[0] + n[1];
                    // cache rows: dense [B][SK] x HKV; packed [sum lens] x HKV; paged pool
                    size_t slots = B * SK; // key slots (each HKV rows)
                    std::vector<int32_t> cu_q = {0, static_cast<int32_t>(n[0]),
                                                 static_cast<int32_t>(tokens)};
                    std::vector<int32_t> cu_k = {0, 7, 18};
                    const size_t max_pages = (SK + page - 1) / page;
                    std::vector<int32_t> table(B * max_pages, -1);
                    if (layout == 1) slots = 18;
                    if (paged) {
                        size_t used = 0;
                        for (size_t b = 0; b < B; ++b) used += (lens[b] + page - 1) / page;
                        size_t id = used;
                        for (size_t b = 0; b < B; ++b)
                            for (size_t s = 0; s < (lens[b] + page - 1) / page; ++s)
                                table[b * max_pages + s] = static_cast<int32_t>(--id);
                        slots = (used + 1) * page; // one spare page never written
                    }
                    // slot of key j of sequence b (the row index is slot * HKV + head)
                    auto slot_of = [&](size_t b, size_t j) -> size_t {
                        if (paged)
                            return static_cast<size_t>(table[b * max_pages + j / page]) * page +
                                   j % page;
                        if (layout == 1) return static_cast<size_t>(cu_k[b]) + j;
                        return b * SK + j;
                    };
                    attn_desc *d = nullptr;
                    REQUIRE(attn_desc_create(&d, B, HQ, HKV, SQ, SK, D) == ATTN_OK);
                    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_HEAD_DIM_V, DV) == ATTN_OK);
                    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_CAUSAL, ATTN_CAUSAL_BOTTOM_RIGHT) ==
                            ATTN_OK);
                    if (varlen) REQUIRE(attn_desc_set_int(d, ATTN_PARAM_VARLEN, 1) == ATTN_OK);
                    if (paged) REQUIRE(attn_desc_set_int(d, ATTN_PARAM_PAGE_SIZE, page) == ATTN_OK);
                    // token-major [slot][HKV][dim] for every layout but dense, which is
                    // [B][HKV][SK][dim] by default: use token-major there too (BSHD)
                    if (!varlen && !paged) {
                        REQUIRE(attn_desc_set_strides(d, ATTN_K, SK * HKV * D, D, HKV * D) ==
                                ATTN_OK);
                        REQUIRE(attn_desc_set_strides(d, ATTN_V, SK * HKV * DV, DV, HKV * DV) ==
                                ATTN_OK);
                        REQUIRE(attn_desc_set_strides(d, ATTN_K_SCALE, SK * HKV, 1, HKV) ==
                                ATTN_OK);
                        REQUIRE(attn_desc_set_strides(d, ATTN_V_SCALE, SK * HKV, 1, HKV) ==
                                ATTN_OK);
                    }
                    TypedCache kc, vc;
                    kc.init(ct, slots * HKV, D);
                    vc.init(ct, slots * HKV, DV);
                    NewRowsOf nk, nv;
                    nk.f.resize(tokens * HKV * D);
                    nv.f.resize(tokens * HKV * DV);
                    for (float &x : nk.f) x = uni(g, -2.0f, 2.0f);
                    for (float &x : nv.f) x = uni(g, -2.0f, 2.0f);
                    nk.f[3] = 0.0f; // a zero, and a whole zero V row (int8 scale 0)
                    for (size_t e = 0; e < DV; ++e) nv.f[DV + e] = 0.0f;
                    nk.encode(nt, D);
                    nv.encode(nt, DV);
                    attn_args *a = nullptr;
                    REQUIRE(attn_args_create(&a) == ATTN_OK);
                    kc.bind(a, ATTN_K, ATTN_K_SCALE);
                    vc.bind(a, ATTN_V, ATTN_V_SCALE);
                    nk.bind(a, ATTN_NEW_K, ATTN_NEW_K_SCALE, nt);
                    nv.bind(a, ATTN_NEW_V, ATTN_NEW_V_SCALE, nt);
                    std::vector<int32_t> seq_lens = {static_cast<int32_t>(lens[0]),
                                                     static_cast<int32_t>(lens[1])};
                    attn_args_set_i32(a, ATTN_SEQ_LENS_K, seq_lens.data(), seq_lens.size());
                    if (varlen) attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, cu_q.data(), cu_q.size());
                    if (layout == 1)
                        attn_args_set_i32(a, ATTN_CU_SEQLENS_K, cu_k.data(), cu_k.size());
                    if (paged) attn_args_set_i32(a, ATTN_BLOCK_TABLE, table.data(), table.size());
                    // the keys already cached (positions < lens - n): random values encoded by
                    // the test itself
                    std::vector<std::vector<float>> oldk(B), oldv(B);
                    for (size_t b = 0; b < B; ++b)
                        for (size_t j = 0; j + n[b] < lens[b]; ++j)
                            for (size_t h = 0; h < HKV; ++h) {
                                const size_t r = slot_of(b, j) * HKV + h;
                                for (int which = 0; which < 2; ++which) {
                                    TypedCache &c = which ? vc : kc;
                                    const size_t dim = which ? DV : D;
                                    std::vector<float> x(dim);
                                    for (float &e : x) e = uni(g, -2.0f, 2.0f);
                                    for (size_t e = 0; e < dim; ++e) {
                                        if (ct == 0) c.f[r * dim + e] = x[e];
                                        if (ct == 1) c.h[r * dim + e] = ref_f16(x[e]);
                                        if (ct == 2) c.h[r * dim + e] = ref_bf16(x[e]);
                                    }
                                    if (ct == 3)
                                        REQUIRE(attn_quantize_i8(x.data(), 1, dim, &c.i[r * dim],
                                                                 &c.scale[r]) == ATTN_OK);
                                }
                            }
                    const TypedCache k0 = kc, v0 = vc;
                    REQUIRE_MESSAGE(attn_kv_append_args(d, a) == ATTN_OK, attn_last_error());
                    // every new row: exactly the expected encoding; every other byte unchanged
                    std::vector<char> written(slots * HKV, 0);
                    for (size_t b = 0; b < B; ++b)
                        for (size_t x = 0; x < n[b]; ++x)
                            for (size_t h = 0; h < HKV; ++h) {
                                const size_t tok = (varlen ? cu_q[b] : b * n[b]) + x;
                                const size_t src = tok * HKV + h;
                                const size_t r = slot_of(b, lens[b] - n[b] + x) * HKV + h;
                                written[r] = 1;
                                for (int which = 0; which < 2; ++which) {
                                    const TypedCache &c = which ? vc : kc;
                                    NewRowsOf &nr = which ? nv : nk;
                                    const size_t dim = which ? DV : D;
                                    if (ct == 3) {
                                        // as attn_quantize_i8 on the fp32 row (or the same
                                        // int8 row copied), within half a step of the value
                                        std::vector<int8_t> q(dim);
                                        float s = 0;
                                        REQUIRE(attn_quantize_i8(&nr.f[src * dim], 1, dim, q.data(),
                                                                 &s) == ATTN_OK);
                                        CHECK(c.scale[r] == s);
                                        for (size_t e = 0; e < dim; ++e) {
                                            CHECK(c.i[r * dim + e] == q[e]);
                                            CHECK(std::fabs(c.value(r, dim, e) -
                                                            nr.f[src * dim + e]) <=
                                                  0.5 * s * (1 + 1e-6));
                                        }
                                        continue;
                                    }
                                    for (size_t e = 0; e < dim; ++e) {
                                        const float x0 = nr.f[src * dim + e];
                                        if (ct == 0) CHECK(c.f[r * dim + e] == x0);
                                        if (ct == 1) CHECK(c.h[r * dim + e] == ref_f16(x0));
                                        if (ct == 2) CHECK(c.h[r * dim + e] == ref_bf16(x0));
                                    }
                                }
                            }
                    for (size_t r = 0; r < slots * HKV; ++r) {
                        if (written[r]) continue;
                        for (size_t e = 0; e < D; ++e)
                            CHECK(kc.value(r, D, e) == k0.value(r, D, e));
                        for (size_t e = 0; e < DV; ++e)
                            CHECK(vc.value(r, DV, e) == v0.value(r, DV, e));
                        if (ct == 3)
                            CHECK((kc.scale[r] == k0.scale[r] && vc.scale[r] == v0.scale[r]));
                    }
                    // attention over the cache (the same args: the queries are the new tokens,
                    // bottom-right causal) against float64 over the decoded cache values
                    const size_t qrows = varlen ? tokens : B * SQ;
                    std::vector<float> q(qrows * HQ * D), out(qrows * HQ * DV, kSentinel);
                    for (float &x : q) x = uni(g, -1.0f, 1.0f);
                    attn_args_set_f32(a, ATTN_Q, q.data(), q.size());
                    attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size());
                    // a packed K/V pack takes its key lengths from cu_seqlens_k (= lens) in a run
                    if (layout == 1) attn_args_set_i32(a, ATTN_SEQ_LENS_K, nullptr, 0);
                    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, attn_last_error());
                    double worst = 0;
                    for (size_t b = 0; b < B; ++b) {
                        const size_t nq = varlen ? n[b] : SQ;
                        for (size_t h = 0; h < HQ; ++h)
                            for (size_t i = 0; i < nq; ++i) {
                                const size_t qi = varlen ? ((cu_q[b] + i) * HQ + h) * D
                                                         : ((b * HQ + h) * SQ + i) * D;
                                const size_t oi = varlen ? ((cu_q[b] + i) * HQ + h) * DV
                                                         : ((b * HQ + h) * SQ + i) * DV;
                                const size_t kvh = h / (HQ / HKV);
                                const long long diag = static_cast<long long>(i + lens[b]) -
                                                       static_cast<long long>(nq);
                                std::vector<double> s;
                                double m = -INFINITY;
                                for (long long j = 0; j <= diag; ++j) {
                                    const size_t r = slot_of(b, j) * HKV + kvh;
                                    double dot = 0;
                                    for (size_t e = 0; e < D; ++e)
                                        dot += static_cast<double>(q[qi + e]) * kc.value(r, D, e);
                                    s.push_back(dot / std::sqrt(static_cast<double>(D)));
                                    m = std::max(m, s.back());
                                }
                                double den = 0;
                                for (double &x : s) den += (x = std::exp(x - m));
                                for (size_t e = 0; e < DV; ++e) {
                                    double o = 0;
                                    for (size_t j = 0; j < s.size(); ++j)
                                        o +=
                                            s[j] / den * vc.value(slot_of(b, j) * HKV + kvh, DV, e);
                                    worst = std::max(worst, std::fabs(o - out[oi + e]));
                                }
                            }
                    }
                    CHECK(worst <= 1e-5);
                    attn_args_destroy(a);
                    attn_desc_destroy(d);
                }
    }
    attn_set_isa(nullptr);
}

TEST_CASE("attn_kv_append_args refuses what attn_kv_append refuses, and bad storage bindings") {
    Pack c = small_pack(kVarlenPaged);
    attn_desc *d = make_desc(c);
    const size_t rows = c.total_q * c.hkv;
    std::vector<float> nk(rows * c.d, 1.0f), nv(rows * c.dv, 1.0f);
    std::vector<uint16_t> k16(c.k.size()), v16(c.v.size()), nk16(nk.size());
    std::vector<int8_t> k8(c.k.size()), v8(c.v.size());
    std::vector<float> ks(c.k.size() / c.d, kSentinel), vs(c.v.size() / c.dv, kSentinel);
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    auto fails = [&](attn_status want, const char *text) {
        const attn_status st = attn_kv_append_args(d, a);
        const std::string msg = attn_last_error();
        INFO(msg);
        return st == want && msg.find(text) != std::string::npos;
    };
    attn_args_set_f32(a, ATTN_NEW_K, nk.data(), nk.size());
    attn_args_set_f32(a, ATTN_NEW_V, nv.data(), nv.size());
    attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, c.cu_q.data(), c.cu_q.size());
    attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size());
    std::vector<int32_t> lens = {5, 9, 3};
    attn_args_set_i32(a, ATTN_SEQ_LENS_K, lens.data(), lens.size());
    CHECK(fails(ATTN_ERR_NULL_POINTER, "attn_kv_append_args: k is NULL"));
    attn_args_set_f16(a, ATTN_K, k16.data(), k16.size()); // read-only
    attn_args_set_out_f16(a, ATTN_V, v16.data(), v16.size());
    CHECK(fails(ATTN_ERR_INVALID_ARGUMENT, "k is bound read-only"));
    attn_args_set_out_f16(a, ATTN_K, k16.data(), k16.size());
    CHECK(attn_kv_append_args(d, a) == ATTN_OK);
    // new rows of another 16-bit type than the cache's
    for (uint16_t &x : nk16) x = 0x3c00;
    attn_args_set_bf16(a, ATTN_NEW_K, nk16.data(), nk16.size());
    CHECK(fails(ATTN_ERR_INVALID_ARGUMENT, "new_k is bf16 but k is f16"));
    attn_args_set_f16(a, ATTN_NEW_K, nk16.data(), nk16.size());
    CHECK(attn_kv_append_args(d, a) == ATTN_OK);
    // the old call takes fp32 rows only
    CHECK(attn_kv_append(d, a, c.k.data(), c.k.size(), c.v.data(), c.v.size()) ==
          ATTN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(attn_last_error()).find("new_k is f16: attn_kv_append takes fp32 rows") !=
          std::string::npos);
    attn_args_set_f32(a, ATTN_NEW_K, nk.data(), nk.size());
    // int8 caches need writable scales
    attn_args_set_out_i8(a, ATTN_K, k8.data(), k8.size());
    CHECK(fails(ATTN_ERR_NULL_POINTER, "k_scale is NULL but k is int8"));
    attn_args_set_f32(a, ATTN_K_SCALE, ks.data(), ks.size());
    CHECK(fails(ATTN_ERR_INVALID_ARGUMENT, "k_scale is bound read-only"));
    attn_args_set_out_f32(a, ATTN_K_SCALE, ks.data(), 1);
    CHECK(fails(ATTN_ERR_INVALID_ARGUMENT, "k_scale has 1 elements, needs at least"));
    attn_args_set_out_f32(a, ATTN_K_SCALE, ks.data(), ks.size());
    attn_args_set_out_f32(a, ATTN_V_SCALE, vs.data(), vs.size());
    CHECK(fails(ATTN_ERR_INVALID_ARGUMENT, "v_scale is bound but v is not int8"));
    attn_args_set_out_f32(a, ATTN_V_SCALE, nullptr, 0);
    // a non-finite fp32 row for an int8 cache: named, nothing written
    nk[3 * c.d + 1] = kNaN;
    std::fill(ks.begin(), ks.end(), kSentinel);
    CHECK(fails(ATTN_ERR_INVALID_ARGUMENT,
                "new_k row 3 (token 3, KV head 0) holds a non-finite value"));
    CHECK(std::all_of(ks.begin(), ks.end(), [](float x) { return x == kSentinel; }));
    nk[3 * c.d + 1] = 1.0f;
    // int8 new rows need their scales
    std::vector<int8_t> nk8(nk.size(), 1);
    std::vector<float> nks(rows, 0.5f);
    attn_args_set_i8(a, ATTN_NEW_K, nk8.data(), nk8.size());
    CHECK(fails(ATTN_ERR_NULL_POINTER, "new_k_scale is NULL but new_k is int8"));
    attn_args_set_f32(a, ATTN_NEW_K_SCALE, nks.data(), nks.size());
    CHECK(attn_kv_append_args(d, a) == ATTN_OK);
    attn_args_set_f32(a, ATTN_NEW_K, nk.data(), nk.size());
    CHECK(fails(ATTN_ERR_INVALID_ARGUMENT, "new_k_scale is bound but new_k is not int8"));
    attn_args_set_f32(a, ATTN_NEW_K_SCALE, nullptr, 0);
    // the serving checks, as attn_kv_append makes them, naming the operand
    lens = {1, 9, 3};
    CHECK(fails(ATTN_ERR_INVALID_ARGUMENT, "seq_lens_k[0] (1) is less than the 2 new tokens"));
    lens = {5, 9, 3};
    attn_args_set_out_i8(a, ATTN_V, k8.data(), k8.size()); // the K pool twice
    attn_args_set_out_f32(a, ATTN_V_SCALE, vs.data(), vs.size());
    CHECK(fails(ATTN_ERR_INVALID_ARGUMENT, "overlaps"));
    attn_args_set_out_i8(a, ATTN_V, v8.data(), v8.size());
    attn_args_set_out_f32(a, ATTN_V_SCALE, ks.data(), ks.size()); // V's scales are K's
    CHECK(fails(ATTN_ERR_INVALID_ARGUMENT, "overlaps"));
    attn_args_set_out_f32(a, ATTN_V_SCALE, vs.data(), vs.size());
    std::vector<int32_t> bad = c.table;
    bad[2 * c.max_pages] = 1000;
    attn_args_set_i32(a, ATTN_BLOCK_TABLE, bad.data(), bad.size());
    CHECK(fails(ATTN_ERR_INVALID_ARGUMENT, "block_table[2][0] (1000)"));
    attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size());
    attn_args_set_out_i8(a, ATTN_K, k8.data(), c.page * c.hkv * c.d - 1);
    CHECK(fails(ATTN_ERR_INVALID_ARGUMENT, "k has"));
    attn_args_set_out_i8(a, ATTN_K, k8.data(), k8.size());
    CHECK(attn_kv_append_args(d, a) == ATTN_OK);
    // the setters
    CHECK(attn_args_set_out_f16(a, ATTN_OUT, k16.data(), 1) == ATTN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(attn_last_error()).find("out cannot be bound with attn_args_set_out_f16") !=
          std::string::npos);
    CHECK(attn_args_set_out_i8(a, ATTN_K_SCALE, k8.data(), 1) == ATTN_ERR_INVALID_ARGUMENT);
    CHECK(attn_args_set_out_bf16(nullptr, ATTN_K, k16.data(), 1) == ATTN_ERR_NULL_POINTER);
    attn_args_destroy(a);
    attn_desc_destroy(d);
}
