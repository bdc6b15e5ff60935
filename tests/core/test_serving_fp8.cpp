// fp8 caches in the serving layouts: attn_kv_append_args writes fp8 rows (from fp32, quantized
// with the cache's scale, or fp8 rows copied) into dense, packed and paged caches (token- and
// head-major pages) with one scale per tensor, per KV head or none; attention then reads them
// (decode and prefill rows, batch invariance on and off) against float64 over the decoded
// cache; and what the calls refuse.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attn.h"
#include "fp8_defs.hpp"
#include "serving_pack.hpp"

using namespace serving_test;
using namespace fp8_defs;

namespace {

// Layouts: 0 dense Q + dense BSHD K/V, 1 varlen Q + packed K/V, 2 varlen Q + token-major pages
// of 16, 3 dense Q + head-major pages of 8 (in reverse order).
struct Geometry {
    int layout = 0;
    size_t B = 2, HQ = 4, HKV = 2, D = 32, DV = 24, SK = 72;
    std::vector<size_t> n, lens; // new tokens and keys after the append, per sequence
    size_t page = 0, max_pages = 0, slots = 0;
    std::vector<int32_t> cu_q, cu_k, table;

    bool varlen() const { return layout == 1 || layout == 2; }
    bool paged() const { return layout >= 2; }
    size_t sq() const { return layout == 0 ? 1 : 3; } // dense Q: decode rows or prefill rows
    explicit Geometry(int l) : layout(l) {
        n = varlen() ? std::vector<size_t>{3, 1} : std::vector<size_t>{sq(), sq()};
        lens = {37, 70};
        cu_q = {0, static_cast<int32_t>(n[0]), static_cast<int32_t>(n[0] + n[1])};
        cu_k = {0, 37, 107};
        slots = B * SK;
        if (layout == 1) slots = 107;
        if (paged()) {
            page = layout == 2 ? 16 : 8;
            max_pages = (SK + page - 1) / page;
            table.assign(B * max_pages, -1);
            size_t used = 0;
            for (size_t b = 0; b < B; ++b) used += (lens[b] + page - 1) / page;
            size_t next = 0;
            for (size_t b = 0; b < B; ++b)
                for (size_t s = 0; s < (lens[b] + page - 1) / page; ++s, ++next)
                    table[b * max_pages + s] =
                        static_cast<int32_t>(layout == 3 ? used - 1 - next : next);
            slots = (used + 1) * page; // a spare page never written
        }
    }
    size_t tokens() const { return n[0] + n[1]; }
    // element offset of key j of sequence b, KV head h, in a cache of rows of `dim`
    size_t at(size_t b, size_t h, size_t j, size_t dim) const {
        if (layout == 3) {
            const size_t pg = static_cast<size_t>(table[b * max_pages + j / page]);
            return ((pg * HKV + h) * page + j % page) * dim;
        }
        size_t slot = b * SK + j;
        if (layout == 1) slot = static_cast<size_t>(cu_k[b]) + j;
        if (layout == 2)
            slot = static_cast<size_t>(table[b * max_pages + j / page]) * page + j % page;
        return (slot * HKV + h) * dim;
    }
    attn_desc *desc(int scales, bool invariant) const {
        attn_desc *d = nullptr;
        REQUIRE(attn_desc_create(&d, B, HQ, HKV, sq(), SK, D) == ATTN_OK);
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_HEAD_DIM_V, DV) == ATTN_OK);
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_CAUSAL, ATTN_CAUSAL_BOTTOM_RIGHT) == ATTN_OK);
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_BATCH_INVARIANT, invariant) == ATTN_OK);
        if (varlen()) REQUIRE(attn_desc_set_int(d, ATTN_PARAM_VARLEN, 1) == ATTN_OK);
        if (paged()) REQUIRE(attn_desc_set_int(d, ATTN_PARAM_PAGE_SIZE, page) == ATTN_OK);
        if (layout == 0) {
            REQUIRE(attn_desc_set_strides(d, ATTN_K, SK * HKV * D, D, HKV * D) == ATTN_OK);
            REQUIRE(attn_desc_set_strides(d, ATTN_V, SK * HKV * DV, DV, HKV * DV) == ATTN_OK);
        }
        if (layout == 3) {
            REQUIRE(attn_desc_set_strides(d, ATTN_K, HKV * page * D, page * D, D) == ATTN_OK);
            REQUIRE(attn_desc_set_strides(d, ATTN_V, HKV * page * DV, page * DV, DV) == ATTN_OK);
        }
        if (scales) // one per tensor (0, 0, 0) or per KV head (0, 1, 0)
            for (attn_operand w : {ATTN_K_SCALE, ATTN_V_SCALE})
                REQUIRE(attn_desc_set_strides(d, w, 0, scales == 2 ? 1 : 0, 0) == ATTN_OK);
        return d;
    }
    void bind_layout(attn_args *a) const {
        if (varlen()) REQUIRE(attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, cu_q.data(), 3) == ATTN_OK);
        if (layout == 1)
            REQUIRE(attn_args_set_i32(a, ATTN_CU_SEQLENS_K, cu_k.data(), 3) == ATTN_OK);
        if (paged())
            REQUIRE(attn_args_set_i32(a, ATTN_BLOCK_TABLE, table.data(), table.size()) == ATTN_OK);
    }
};

// An fp8 cache: its codes and its scales (none: scale 1).
struct Cache {
    const Fmt *f = nullptr;
    size_t dim = 0;
    std::vector<uint8_t> code;
    std::vector<float> scale; // empty, [1] or [HKV]
    float scale_of(size_t h) const {
        return scale.empty() ? 1.0f : scale.size() == 1 ? scale[0] : scale[h];
    }
    double value(size_t off, size_t h) const {
        return static_cast<double>(static_cast<float>(f->value(code[off])) * scale_of(h));
    }
};

struct Result {
    std::vector<float> out, lse;
};

// The forward call over the caches, on the current ISA and thread count.
Result attend(const Geometry &G, const Cache &kc, const Cache &vc, int scales, bool invariant,
              const std::vector<float> &q) {
    attn_desc *d = G.desc(scales, invariant);
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    const size_t qrows = G.varlen() ? G.tokens() : G.B * G.sq();
    Result r;
    r.out.assign(qrows * G.HQ * G.DV, kSentinel);
    r.lse.assign(qrows * G.HQ, kSentinel);
    REQUIRE(attn_args_set_f32(a, ATTN_Q, q.data(), q.size()) == ATTN_OK);
    REQUIRE(attn_args_set_fp8(a, ATTN_K, kc.f->type, kc.code.data(), kc.code.size()) == ATTN_OK);
    REQUIRE(attn_args_set_fp8(a, ATTN_V, vc.f->type, vc.code.data(), vc.code.size()) == ATTN_OK);
    if (!kc.scale.empty())
        REQUIRE(attn_args_set_f32(a, ATTN_K_SCALE, kc.scale.data(), kc.scale.size()) == ATTN_OK);
    if (!vc.scale.empty())
        REQUIRE(attn_args_set_f32(a, ATTN_V_SCALE, vc.scale.data(), vc.scale.size()) == ATTN_OK);
    std::vector<int32_t> lens = {static_cast<int32_t>(G.lens[0]), static_cast<int32_t>(G.lens[1])};
    if (G.layout != 1) REQUIRE(attn_args_set_i32(a, ATTN_SEQ_LENS_K, lens.data(), 2) == ATTN_OK);
    G.bind_layout(a);
    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, r.out.data(), r.out.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, r.lse.data(), r.lse.size()) == ATTN_OK);
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, attn_last_error());
    attn_args_destroy(a);
    attn_desc_destroy(d);
    return r;
}

// Max error of out against float64 attention over the decoded cache (bottom-right causal).
double check_out(const Geometry &G, const Cache &kc, const Cache &vc, const std::vector<float> &q,
                 const Result &r) {
    double worst = 0.0;
    for (size_t b = 0; b < G.B; ++b) {
        const size_t nq = G.varlen() ? G.n[b] : G.sq();
        for (size_t h = 0; h < G.HQ; ++h)
            for (size_t i = 0; i < nq; ++i) {
                const size_t row =
                    G.varlen() ? (G.cu_q[b] + i) * G.HQ + h : (b * G.HQ + h) * nq + i;
                const size_t kvh = h / (G.HQ / G.HKV);
                const long long diag =
                    static_cast<long long>(i + G.lens[b]) - static_cast<long long>(nq);
                std::vector<double> s;
                double m = -INFINITY;
                for (long long j = 0; j <= diag; ++j) {
                    double dot = 0;
                    for (size_t e = 0; e < G.D; ++e)
                        dot += static_cast<double>(q[row * G.D + e]) *
                               kc.value(G.at(b, kvh, j, G.D) + e, kvh);
                    s.push_back(dot / std::sqrt(static_cast<double>(G.D)));
                    m = std::max(m, s.back());
                }
                double den = 0;
                for (double &x : s) den += (x = std::exp(x - m));
                for (size_t e = 0; e < G.DV; ++e) {
                    double o = 0;
                    for (size_t j = 0; j < s.size(); ++j)
                        o += s[j] / den * vc.value(G.at(b, kvh, j, G.DV) + e, kvh);
                    worst = std::max(worst, std::fabs(o - r.out[row * G.DV + e]) /
                                                std::max(1.0, std::fabs(o)));
                }
                const double lse = m + std::log(den);
                // LSE: [batch][heads_q][seq_q], varlen [heads_q][total_q]
                const size_t li = G.varlen() ? h * G.tokens() + G.cu_q[b] + i : row;
                worst = std::max(worst, std::fabs(lse - r.lse[li]) / std::max(1.0, std::fabs(lse)));
            }
    }
    return worst;
}

} // namespace

TEST_CASE("fp8 caches filled by attn_kv_append_args (dense, packed, token- and head-major pages; "
          "scale per tensor, per head or none) read back by attention against float64") {
    std::mt19937 g(6);
    double worst = 0.0;
    size_t calls = 0;
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        for (int layout = 0; layout < 4; ++layout)
            for (int fk = 0; fk < 2; ++fk)
                for (int scales = 0; scales < 3; ++scales)
                    for (int same = 0; same < 2; ++same) {
                        const Geometry G(layout);
                        const Fmt &fmt = kFormats[fk], &fmtv = kFormats[1 - fk];
                        CAPTURE(isa);
                        CAPTURE(layout);
                        CAPTURE(fmt.name);
                        CAPTURE(scales);
                        CAPTURE(same);
                        Cache kc, vc;
                        kc.f = &fmt;
                        vc.f = &fmtv;
                        kc.dim = G.D;
                        vc.dim = G.DV;
                        const size_t kpool = G.slots * G.HKV * G.D, vpool = G.slots * G.HKV * G.DV;
                        kc.code.assign(kpool, 0x7f); // a NaN code wherever nothing is written
                        vc.code.assign(vpool, 0x7f);
                        for (Cache *c : {&kc, &vc}) {
                            if (scales == 1) c->scale = {uni(g, 0.002f, 0.02f)};
                            if (scales == 2)
                                c->scale = {uni(g, 0.002f, 0.02f), uni(g, 0.01f, 0.1f)};
                        }
                        // the keys already cached, encoded by the test (values up to |3|)
                        for (size_t b = 0; b < G.B; ++b)
                            for (size_t j = 0; j + G.n[b] < G.lens[b]; ++j)
                                for (size_t h = 0; h < G.HKV; ++h)
                                    for (Cache *c : {&kc, &vc}) {
                                        std::vector<float> x(c->dim);
                                        for (float &e : x) e = uni(g, -3.0f, 3.0f);
                                        REQUIRE(attn_quantize_fp8(
                                                    x.data(), 1, c->dim, c->f->type, c->scale_of(h),
                                                    &c->code[G.at(b, h, j, c->dim)]) == ATTN_OK);
                                    }
                        // the new rows [tokens][HKV][dim], fp32, and as fp8 codes of the cache's
                        // scale when `same`
                        const size_t rows = G.tokens() * G.HKV;
                        std::vector<float> nk(rows * G.D), nv(rows * G.DV);
                        for (float &x : nk) x = uni(g, -3.0f, 3.0f);
                        for (float &x : nv) x = uni(g, -3.0f, 3.0f);
                        nk[5] = 1e30f; // saturates
                        std::vector<uint8_t> ck(nk.size()), cv(nv.size());
                        for (size_t r = 0; r < rows; ++r) {
                            REQUIRE(attn_quantize_fp8(&nk[r * G.D], 1, G.D, fmt.type,
                                                      kc.scale_of(r % G.HKV),
                                                      &ck[r * G.D]) == ATTN_OK);
                            REQUIRE(attn_quantize_fp8(&nv[r * G.DV], 1, G.DV, fmtv.type,
                                                      vc.scale_of(r % G.HKV),
                                                      &cv[r * G.DV]) == ATTN_OK);
                        }
                        attn_desc *d = G.desc(scales, false);
                        attn_args *a = nullptr;
                        REQUIRE(attn_args_create(&a) == ATTN_OK);
                        REQUIRE(attn_args_set_out_fp8(a, ATTN_K, fmt.type, kc.code.data(), kpool) ==
                                ATTN_OK);
                        REQUIRE(attn_args_set_out_fp8(a, ATTN_V, fmtv.type, vc.code.data(),
                                                      vpool) == ATTN_OK);
                        if (scales) { // read only: an fp8 cache's scale is not written
                            REQUIRE(attn_args_set_f32(a, ATTN_K_SCALE, kc.scale.data(),
                                                      kc.scale.size()) == ATTN_OK);
                            REQUIRE(attn_args_set_f32(a, ATTN_V_SCALE, vc.scale.data(),
                                                      vc.scale.size()) == ATTN_OK);
                        }
                        if (same) {
                            REQUIRE(attn_args_set_fp8(a, ATTN_NEW_K, fmt.type, ck.data(),
                                                      ck.size()) == ATTN_OK);
                            REQUIRE(attn_args_set_fp8(a, ATTN_NEW_V, fmtv.type, cv.data(),
                                                      cv.size()) == ATTN_OK);
                        } else {
                            REQUIRE(attn_args_set_f32(a, ATTN_NEW_K, nk.data(), nk.size()) ==
                                    ATTN_OK);
                            REQUIRE(attn_args_set_f32(a, ATTN_NEW_V, nv.data(), nv.size()) ==
                                    ATTN_OK);
                        }
                        std::vector<int32_t> lens = {static_cast<int32_t>(G.lens[0]),
                                                     static_cast<int32_t>(G.lens[1])};
                        REQUIRE(attn_args_set_i32(a, ATTN_SEQ_LENS_K, lens.data(), 2) == ATTN_OK);
                        G.bind_layout(a);
                        const Cache k0 = kc, v0 = vc;
                        REQUIRE_MESSAGE(attn_kv_append_args(d, a) == ATTN_OK, attn_last_error());
                        attn_args_destroy(a);
                        attn_desc_destroy(d);
                        // the new rows hold exactly the quantized codes; nothing else changed
                        Cache kw = k0, vw = v0;
                        for (size_t b = 0; b < G.B; ++b)
                            for (size_t x = 0; x < G.n[b]; ++x)
                                for (size_t h = 0; h < G.HKV; ++h) {
                                    const size_t tok = (G.varlen() ? G.cu_q[b] : b * G.n[b]) + x;
                                    const size_t r = tok * G.HKV + h, j = G.lens[b] - G.n[b] + x;
                                    std::memcpy(&kw.code[G.at(b, h, j, G.D)], &ck[r * G.D], G.D);
                                    std::memcpy(&vw.code[G.at(b, h, j, G.DV)], &cv[r * G.DV], G.DV);
                                }
                        CHECK(kc.code == kw.code);
                        CHECK(vc.code == vw.code);
                        CHECK(kc.scale == k0.scale);
                        // attention over the appended caches: the new tokens' queries
                        const size_t qrows = G.varlen() ? G.tokens() : G.B * G.sq();
                        std::vector<float> q(qrows * G.HQ * G.D);
                        for (float &x : q) x = uni(g, -1.0f, 1.0f);
                        for (int invariant = 0; invariant < 2; ++invariant) {
                            REQUIRE(attn_set_num_threads(1) == ATTN_OK);
                            const Result r1 = attend(G, kc, vc, scales, invariant, q);
                            REQUIRE(attn_set_num_threads(2) == ATTN_OK);
                            const Result r2 = attend(G, kc, vc, scales, invariant, q);
                            CHECK(std::memcmp(r1.out.data(), r2.out.data(), r1.out.size() * 4) ==
                                  0);
                            CHECK(std::memcmp(r1.lse.data(), r2.lse.data(), r1.lse.size() * 4) ==
                                  0);
                            const double e = check_out(G, kc, vc, q, r1);
                            CHECK_MESSAGE(e <= 1e-5, "invariant " << invariant << ": " << e);
                            worst = std::max(worst, e);
                            ++calls;
                        }
                    }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
    MESSAGE(calls << " calls over appended fp8 caches, max rel error " << worst);
    CHECK(worst <= 1e-5);
}

TEST_CASE("fp8 bindings and appends: bad formats, scales and rows are refused, naming them") {
    const Geometry G(2);
    auto fails = [](attn_status got, attn_status want, const char *text) {
        const std::string msg = attn_last_error();
        INFO(msg);
        return got == want && msg.find(text) != std::string::npos;
    };
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    std::vector<uint8_t> kb(G.slots * G.HKV * G.D, 0x38), vb(G.slots * G.HKV * G.DV, 0x38);
    CHECK(fails(attn_args_set_fp8(a, ATTN_K, ATTN_DTYPE_I8, kb.data(), kb.size()),
                ATTN_ERR_INVALID_ARGUMENT, "attn_args_set_fp8: fmt (3) is not an fp8 format"));
    CHECK(fails(attn_args_set_out_fp8(a, ATTN_K, static_cast<attn_dtype>(9), kb.data(), 1),
                ATTN_ERR_INVALID_ARGUMENT, "attn_args_set_out_fp8: fmt (9)"));
    CHECK(fails(attn_args_set_fp8(a, ATTN_Q, ATTN_DTYPE_FP8_E4M3, kb.data(), kb.size()),
                ATTN_ERR_INVALID_ARGUMENT, "fp8 storage is for K, V, NEW_K and NEW_V"));
    CHECK(fails(attn_args_set_out_fp8(a, ATTN_NEW_K, ATTN_DTYPE_FP8_E4M3, kb.data(), kb.size()),
                ATTN_ERR_INVALID_ARGUMENT, "new_k cannot be bound with attn_args_set_out_fp8"));
    CHECK(fails(attn_args_set_fp8(nullptr, ATTN_K, ATTN_DTYPE_FP8_E4M3, kb.data(), 1),
                ATTN_ERR_NULL_POINTER, "args is NULL"));
    // an append into fp8 caches with a per-head scale
    attn_desc *d = G.desc(2, false);
    REQUIRE(attn_desc_required_len(d, ATTN_K_SCALE) == G.HKV);
    const size_t rows = G.tokens() * G.HKV;
    std::vector<float> nk(rows * G.D, 1.0f), nv(rows * G.DV, 1.0f), ks = {0.5f, 0.25f},
                                                                    vs = {1.0f, 2.0f};
    std::vector<int32_t> lens = {37, 70};
    REQUIRE(attn_args_set_out_fp8(a, ATTN_K, ATTN_DTYPE_FP8_E4M3, kb.data(), kb.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_fp8(a, ATTN_V, ATTN_DTYPE_FP8_E5M2, vb.data(), vb.size()) == ATTN_OK);
    REQUIRE(attn_args_set_f32(a, ATTN_NEW_K, nk.data(), nk.size()) == ATTN_OK);
    REQUIRE(attn_args_set_f32(a, ATTN_NEW_V, nv.data(), nv.size()) == ATTN_OK);
    REQUIRE(attn_args_set_i32(a, ATTN_SEQ_LENS_K, lens.data(), 2) == ATTN_OK);
    G.bind_layout(a);
    REQUIRE(attn_args_set_f32(a, ATTN_K_SCALE, ks.data(), 1) == ATTN_OK);
    CHECK(fails(attn_kv_append_args(d, a), ATTN_ERR_INVALID_ARGUMENT,
                "k_scale has 1 elements, needs at least 2"));
    REQUIRE(attn_args_set_f32(a, ATTN_K_SCALE, ks.data(), 2) == ATTN_OK);
    REQUIRE(attn_args_set_f32(a, ATTN_V_SCALE, vs.data(), 2) == ATTN_OK);
    const std::vector<uint8_t> k0 = kb, v0 = vb;
    // a scale that cannot divide: named with the first new row that needs it, nothing written
    vs[1] = 0.0f;
    CHECK(fails(attn_kv_append_args(d, a), ATTN_ERR_INVALID_ARGUMENT,
                "new_v row 1 (token 0, KV head 1) goes to a fp8_e5m2 row whose scale (0) is not "
                "finite and > 0"));
    vs[1] = std::numeric_limits<float>::infinity();
    CHECK(fails(attn_kv_append_args(d, a), ATTN_ERR_INVALID_ARGUMENT, "scale (inf)"));
    vs[1] = 2.0f;
    nk[3 * G.D + 2] = kNaN; // row 3: token 1, KV head 1
    CHECK(fails(attn_kv_append_args(d, a), ATTN_ERR_INVALID_ARGUMENT,
                "new_k row 3 (token 1, KV head 1) holds a non-finite value (NaN or infinity): "
                "it has no fp8 code"));
    CHECK((kb == k0 && vb == v0));
    nk[3 * G.D + 2] = 1.0f;
    // fp8 new rows: the cache's format, no scales of their own
    std::vector<uint8_t> nk8(nk.size(), 0x38);
    REQUIRE(attn_args_set_fp8(a, ATTN_NEW_K, ATTN_DTYPE_FP8_E5M2, nk8.data(), nk8.size()) ==
            ATTN_OK);
    CHECK(fails(attn_kv_append_args(d, a), ATTN_ERR_INVALID_ARGUMENT,
                "new_k is fp8_e5m2 but k is fp8_e4m3: new rows are fp32 or the cache's type"));
    REQUIRE(attn_args_set_fp8(a, ATTN_NEW_K, ATTN_DTYPE_FP8_E4M3, nk8.data(), nk8.size()) ==
            ATTN_OK);
    std::vector<float> nks(rows, 1.0f);
    REQUIRE(attn_args_set_f32(a, ATTN_NEW_K_SCALE, nks.data(), nks.size()) == ATTN_OK);
    CHECK(fails(attn_kv_append_args(d, a), ATTN_ERR_INVALID_ARGUMENT,
                "new_k_scale is bound but new_k is not int8"));
    REQUIRE(attn_args_set_f32(a, ATTN_NEW_K_SCALE, nullptr, 0) == ATTN_OK);
    CHECK(attn_kv_append_args(d, a) == ATTN_OK);
    // the fp32 V rows of 1.0 at V scales 1 and 2: E5M2 1.0 (0x3c) and 0.5 (0x38)
    CHECK(vb[G.at(1, 0, 69, G.DV)] == 0x3c);
    CHECK(vb[G.at(1, 1, 69, G.DV)] == 0x38);
    CHECK(kb[G.at(1, 1, 69, G.D)] == 0x38); // copied
    attn_desc_destroy(d);
    // attention: scales of a type without them refused; backward refused
    d = G.desc(2, false);
    std::vector<float> q(G.tokens() * G.HQ * G.D, 0.5f), out(G.tokens() * G.HQ * G.DV);
    REQUIRE(attn_args_set_f32(a, ATTN_Q, q.data(), q.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size()) == ATTN_OK);
    CHECK(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK);
    std::vector<uint16_t> k16(kb.size(), 0x3c00);
    REQUIRE(attn_args_set_f16(a, ATTN_K, k16.data(), k16.size()) == ATTN_OK);
    CHECK(fails(attn_run(d, ATTN_OP_FORWARD, a), ATTN_ERR_INVALID_ARGUMENT,
                "k_scale is bound but k is not int8 or fp8"));
    REQUIRE(attn_args_set_fp8(a, ATTN_K, ATTN_DTYPE_FP8_E4M3, kb.data(), kb.size()) == ATTN_OK);
    attn_desc_destroy(d);
    REQUIRE(attn_desc_create(&d, 1, 2, 1, 3, 4, 8) == ATTN_OK);
    attn_args *b = nullptr;
    REQUIRE(attn_args_create(&b) == ATTN_OK);
    std::vector<float> q2(48, 0.5f), v2(32, 1.0f), o2(48), l2(6), do2(48, 1.0f), dq2(48);
    std::vector<uint8_t> k2(32, 0x38);
    REQUIRE(attn_args_set_f32(b, ATTN_Q, q2.data(), q2.size()) == ATTN_OK);
    REQUIRE(attn_args_set_fp8(b, ATTN_K, ATTN_DTYPE_FP8_E5M2, k2.data(), k2.size()) == ATTN_OK);
    REQUIRE(attn_args_set_f32(b, ATTN_V, v2.data(), v2.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(b, ATTN_OUT, o2.data(), o2.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(b, ATTN_LSE, l2.data(), l2.size()) == ATTN_OK);
    CHECK(attn_run(d, ATTN_OP_FORWARD, b) == ATTN_OK); // no scale: 1
    CHECK(o2[0] == 1.0f);
    REQUIRE(attn_args_set_f32(b, ATTN_DOUT, do2.data(), do2.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(b, ATTN_DQ, dq2.data(), dq2.size()) == ATTN_OK);
    CHECK(fails(attn_run(d, ATTN_OP_BACKWARD, b), ATTN_ERR_UNSUPPORTED,
                "ATTN_OP_BACKWARD needs fp32, f16 or bf16 k (it is fp8_e5m2)"));
    attn_args_destroy(b);
    attn_args_destroy(a);
    attn_desc_destroy(d);
}
