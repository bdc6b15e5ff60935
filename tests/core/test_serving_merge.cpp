// attn_merge: partial results over a key split, merged, equal one call over all keys (dense and
// varlen packs, every ISA, bit-identical on repeat); empty parts; the merge's errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "reference.hpp"
#include "serving_pack.hpp"

using namespace serving_test;

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
