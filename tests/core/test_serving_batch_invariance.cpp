// ATTN_PARAM_BATCH_INVARIANT: a sequence's output bits do not depend on the call around it (alone,
// in a padded batch, in a varlen pack, in a paged cache, in prefill chunks or decode steps, on 1
// or 2 threads), on every ISA.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "serving_pack.hpp"

using namespace serving_test;

namespace {

struct Seq {
    size_t n = 400, hq = 4, hkv = 2, d = 64, dv = 64;
    std::vector<float> q, k, v; // [h][n][d], v [h][n][dv]
};

// What a pack call adds to the plain fp32 call: K/V storage (serving_pack's store), variants.
struct Config {
    int store = 0;
    float softcap = 0.0f;
    int alibi = 0; // 1: slopes operand, 2: standard slopes
    bool sinks = false;
    size_t mate_q = 13; // queries of the first batch-mate (1: a decode batch, no row blocks)
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
Rows pack_call(const Seq &s, bool paged, bool window, size_t q0 = 0, size_t q1 = 0,
               const Config &cfg = Config()) {
    if (q1 == 0) q1 = s.n;
    std::mt19937 g(2);
    Pack c;
    c.mode = paged ? kVarlenPaged : kVarlen;
    c.batch = 3;
    c.hq = s.hq;
    c.hkv = s.hkv;
    c.d = s.d;
    c.dv = s.dv;
    c.causal = ATTN_CAUSAL_BOTTOM_RIGHT;
    c.wl = window ? 77 : -1;
    c.invariant = true;
    c.store = cfg.store;
    c.softcap = cfg.softcap;
    c.alibi = cfg.alibi;
    if (cfg.alibi == 1)
        for (size_t h = 0; h < s.hq; ++h) c.slopes.push_back(0.05f + 0.03f * static_cast<float>(h));
    if (cfg.sinks)
        for (size_t h = 0; h < s.hq; ++h) c.sinks.push_back(0.7f * static_cast<float>(h) - 1.0f);
    c.lq = {cfg.mate_q, q1 - q0, 1};
    c.lk = {250, q1, 700};
    c.max_q = std::max<size_t>(cfg.mate_q, q1 - q0);
    c.max_k = 700;
    c.page = 16;
    // the batch-mates: the same in every call of a shape (the same seed)
    Pack mates = c;
    mates.lq = {cfg.mate_q, 0, 1};
    mates.lk = {250, 0, 700};
    fill_sequences(mates, g);
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
        std::memcpy(&c.vs[1][h * q1 * s.dv], &s.v[h * s.n * s.dv], q1 * s.dv * 4);
    }
    build(c, g);
    const Run r = run(c);
    Rows out(s.hq * (q1 - q0) * s.dv);
    for (size_t h = 0; h < s.hq; ++h)
        for (size_t i = 0; i < q1 - q0; ++i)
            std::memcpy(&out[(h * (q1 - q0) + i) * s.dv], &r.out[c.out_at(1, h, i)], s.dv * 4);
    return out;
}

// The sequence computed in prefill chunks of `chunk` queries (each over its prefix of keys).
Rows chunked(const Seq &s, size_t chunk, bool paged, bool window, const Config &cfg = Config()) {
    Rows all(s.hq * s.n * s.dv);
    for (size_t q0 = 0; q0 < s.n; q0 += chunk) {
        const size_t q1 = std::min(s.n, q0 + chunk);
        const Rows r =
            paged ? pack_call(s, true, window, q0, q1, cfg) : dense_call(s, false, window, q0, q1);
        for (size_t h = 0; h < s.hq; ++h)
            std::memcpy(&all[(h * s.n + q0) * s.dv], &r[h * (q1 - q0) * s.dv],
                        (q1 - q0) * s.dv * 4);
    }
    return all;
}

Seq random_seq(size_t n, size_t hq, size_t hkv, size_t d, size_t dv, unsigned seed) {
    Seq s;
    s.n = n;
    s.hq = hq;
    s.hkv = hkv;
    s.d = d;
    s.dv = dv;
    std::mt19937 g(seed);
    s.q.resize(hq * n * d);
    s.k.resize(hkv * n * d);
    s.v.resize(hkv * n * dv);
    for (float &x : s.q) x = uni(g, -1, 1);
    for (float &x : s.k) x = uni(g, -1, 1);
    for (float &x : s.v) x = uni(g, -1, 1);
    return s;
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
                              (isa + (window ? " window: " : ": ") + v.name));
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}

// The decode path (a few rows per KV head) against the row blocks, in the storage types and
// variants whose arithmetic differs between them: every K/V storage (int8 and fp8 rows with
// their scales), ALiBi, sinks, softcap, head_dim not a multiple of a vector, GQA groups of 1 to 4.
// The reference is the whole sequence in one paged call (row blocks); decode steps, small
// chunks and 2 threads must give its bits.
TEST_CASE("batch invariance: decode steps give the row blocks' bits in every storage and variant") {
    struct Case {
        const char *name;
        size_t hq, hkv, d, dv;
        Config cfg;
    };
    const Case cases[] = {
        {"f16 K/V", 4, 2, 64, 64, {1, 0.0f, 0, false}},
        {"bf16 K/V, group 4", 8, 2, 64, 64, {2, 0.0f, 0, false}},
        {"int8 K/V", 4, 2, 64, 64, {3, 0.0f, 0, false}},
        {"fp32, head_dim 72 / 40", 4, 4, 72, 40, {0, 0.0f, 0, false}},
        {"int8, head_dim 36, group 1", 2, 2, 36, 36, {3, 0.0f, 0, false}},
        {"ALiBi slopes, sinks", 4, 2, 64, 64, {0, 0.0f, 1, true}},
        {"standard ALiBi, softcap, f16", 4, 1, 64, 64, {1, 8.0f, 2, false}},
        {"head_dim 128, group 4", 4, 1, 128, 128, {0, 0.0f, 0, false}},
        {"fp8 E4M3 K/V, one scale", 4, 2, 64, 64, {4, 0.0f, 0, false}},
        {"fp8 E5M2 K/V, a scale per head, head_dim 36, group 1", 2, 2, 36, 36, {5, 0.0f, 0, false}},
    };
    for (Case c : cases) {
        c.cfg.mate_q = 1; // decode steps in a decode batch: the decode path
        const Seq s = random_seq(200, c.hq, c.hkv, c.d, c.dv, 23);
        for (const std::string &isa : isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            for (bool window : {false, true}) {
                REQUIRE(attn_set_num_threads(1) == ATTN_OK);
                const Rows whole = pack_call(s, true, window, 0, 0, c.cfg);
                const std::string at = isa + (window ? " window, " : ", ") + c.name + ": ";
                for (size_t chunk : {1, 64}) {
                    const Rows r = chunked(s, chunk, true, window, c.cfg);
                    CHECK_MESSAGE(std::memcmp(r.data(), whole.data(), whole.size() * 4) == 0,
                                  (at + "chunks of " + std::to_string(chunk)));
                }
                REQUIRE(attn_set_num_threads(2) == ATTN_OK);
                const Rows r2 = chunked(s, 1, true, window, c.cfg);
                CHECK_MESSAGE(std::memcmp(r2.data(), whole.data(), whole.size() * 4) == 0,
                              (at + "2 threads, decode steps"));
            }
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}
