// attn_kv_append and attn_kv_append_args: paged caches filled by appends that attention then
// reads; caches of every storage type (f32, f16, bf16, int8 with scales) written from fp32 or
// same-typed rows in every layout, checked against independent encoders and float64 attention;
// and what both calls refuse.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "serving_pack.hpp"

using namespace serving_test;

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
