// ATTN_PARAM_COMPUTE = ATTN_COMPUTE_INT8 through the public API, on every ISA this CPU runs:
// per (batch entry, query head) against the float64 reference, cosine similarity >= 0.9995 and
// relative L1 (sum |o - o_ref| / sum |o_ref|) <= 0.01, on gaussian inputs and on keys with
// per-channel outliers (20 N(0,1) added per channel), over masks and variants; the same
// quantization without K smoothing (simulated here in float64) fails that bound on the outlier
// keys; the serving layouts (varlen, paged head- and token-major, every K/V storage type) within
// the same bound; 1 vs 2 threads bit-identical; the calls the mode does not serve equal EXACT
// bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attn.h"
#include "reference.hpp"
#include "serving_pack.hpp"

namespace {

struct Case {
    ref::VProblem p;
    bool outliers = false, mask = false, lens = false, f16 = false;
    std::vector<float> q, k, v;
    std::vector<uint16_t> k16;
    std::vector<uint8_t> key_valid;
    std::vector<int32_t> seq_lens;
};

size_t pick(std::mt19937 &g, size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(g);
}

void fill(Case &c, std::mt19937 &g) {
    ref::VProblem &p = c.p;
    p.set_default_strides();
    std::normal_distribution<float> n01(0.0f, 1.0f);
    c.q.resize(p.len(0));
    c.k.resize(p.len(1));
    c.v.resize(p.len(2));
    for (float &x : c.q) x = n01(g);
    for (float &x : c.k) x = n01(g);
    for (float &x : c.v) x = n01(g);
    if (c.outliers) // SageAttention's case: a large offset per channel, the same for every key
        for (size_t b = 0; b < p.batch; ++b)
            for (size_t h = 0; h < p.heads_kv; ++h)
                for (size_t x = 0; x < p.head_dim; ++x) {
                    const float o = 20.0f * n01(g);
                    for (size_t j = 0; j < p.seq_k; ++j) c.k[p.at(1, b, h, j) + x] += o;
                }
    if (c.f16) { // the values the library sees are the fp16 ones
        c.k16.resize(c.k.size());
        REQUIRE(attn_convert_f32_to_f16(c.k.data(), c.k16.data(), c.k.size()) == ATTN_OK);
        REQUIRE(attn_convert_f16_to_f32(c.k16.data(), c.k.data(), c.k.size()) == ATTN_OK);
    }
    if (c.mask) {
        c.key_valid.resize(p.batch * p.seq_k);
        for (auto &m : c.key_valid) m = pick(g, 0, 4) != 0;
    }
    if (c.lens) {
        c.seq_lens.resize(p.batch);
        for (auto &l : c.seq_lens) l = static_cast<int32_t>(pick(g, 1, p.seq_k));
    }
}

struct Out {
    std::vector<float> out, lse;
};

Out run(const Case &c, int compute, size_t threads = 0) {
    const ref::VProblem &p = c.p;
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim) ==
            ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_CAUSAL, p.causal) == ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_WINDOW_LEFT, p.window_left) == ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_HEAD_DIM_V, static_cast<int64_t>(p.head_dim_v)) ==
            ATTN_OK);
    REQUIRE(attn_desc_set_float(d, ATTN_PARAM_SOFTCAP, p.softcap) == ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_ALIBI, p.alibi) == ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_SOFTMAX_PLUS_ONE, p.plus_one) == ATTN_OK);
    REQUIRE(attn_desc_set_int(d, ATTN_PARAM_COMPUTE, compute) == ATTN_OK);
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    REQUIRE(attn_args_set_f32(a, ATTN_Q, c.q.data(), c.q.size()) == ATTN_OK);
    if (c.f16)
        REQUIRE(attn_args_set_f16(a, ATTN_K, c.k16.data(), c.k16.size()) == ATTN_OK);
    else
        REQUIRE(attn_args_set_f32(a, ATTN_K, c.k.data(), c.k.size()) == ATTN_OK);
    REQUIRE(attn_args_set_f32(a, ATTN_V, c.v.data(), c.v.size()) == ATTN_OK);
    if (c.mask)
        REQUIRE(attn_args_set_u8(a, ATTN_KEY_VALID, c.key_valid.data(), c.key_valid.size()) ==
                ATTN_OK);
    if (c.lens)
        REQUIRE(attn_args_set_i32(a, ATTN_SEQ_LENS_K, c.seq_lens.data(), c.seq_lens.size()) ==
                ATTN_OK);
    Out o;
    o.out.assign(p.batch * p.heads_q * p.seq_q * p.head_dim_v, 777.0f);
    o.lse.assign(p.batch * p.heads_q * p.seq_q, 777.0f);
    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, o.out.data(), o.out.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, o.lse.data(), o.lse.size()) == ATTN_OK);
    if (threads) REQUIRE(attn_set_num_threads(threads) == ATTN_OK);
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, attn_last_error());
    if (threads) attn_set_num_threads(0);
    attn_args_destroy(a);
    attn_desc_destroy(d);
    return o;
}

ref::VInputs inputs(const Case &c, const float *k) {
    ref::VInputs in;
    in.q = c.q.data();
    in.k = k;
    in.v = c.v.data();
    in.key_valid = c.mask ? c.key_valid.data() : nullptr;
    in.seq_lens_k = c.lens ? c.seq_lens.data() : nullptr;
    return in;
}

// The worst (batch entry, query head) of `got` against `want`: smallest cosine similarity and
// largest relative L1 over the rows that see a key.
using Score = ref::Closeness;
Score score(const Case &c, const std::vector<float> &got, const ref::VResult &want) {
    const ref::VProblem &p = c.p;
    Score s;
    const size_t n = p.seq_q * p.head_dim_v;
    for (size_t bh = 0; bh < p.batch * p.heads_q; ++bh, s.next())
        for (size_t x = bh * n; x < (bh + 1) * n; ++x) s.add(got[x], want.out[x]);
    return s;
}

// K as the mode without smoothing would see it: each key quantized per key to |code| <= 1023
// (round to nearest even), no mean removed; Q quantized per row as the library does (scale * q,
// |code| <= 2047). Written in float64, for the failing half of the smoothing test.
void quantize_unsmoothed(const Case &c, std::vector<float> &q, std::vector<float> &k) {
    const ref::VProblem &p = c.p;
    auto per_row = [](float *row, size_t n, double top, double mul) {
        double amax = 0;
        for (size_t x = 0; x < n; ++x) amax = std::max(amax, std::fabs(double(row[x]) * mul));
        if (amax == 0) return;
        for (size_t x = 0; x < n; ++x)
            row[x] = static_cast<float>(std::nearbyint(double(row[x]) * mul * top / amax) * amax /
                                        top / mul);
    };
    q = c.q;
    k = c.k;
    const double sc = p.eff_scale();
    for (size_t x = 0; x + p.head_dim <= q.size(); x += p.head_dim)
        per_row(&q[x], p.head_dim, 2047, sc);
    for (size_t x = 0; x + p.head_dim <= k.size(); x += p.head_dim)
        per_row(&k[x], p.head_dim, 1023, 1.0);
}

std::vector<std::string> isas() {
    std::vector<std::string> out;
    for (const char *n : {"scalar", "sse2", "avx2", "avx512"})
        if (attn_set_isa(n) == ATTN_OK) out.push_back(n);
    attn_set_isa(nullptr);
    return out;
}

bool same_bits(const Out &a, const Out &b) {
    return a.out.size() == b.out.size() &&
           std::memcmp(a.out.data(), b.out.data(), a.out.size() * sizeof(float)) == 0 &&
           std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * sizeof(float)) == 0;
}

Case random_case(std::mt19937 &g, int variant) {
    Case c;
    ref::VProblem &p = c.p;
    p.batch = pick(g, 1, 2);
    p.heads_kv = pick(g, 1, 2);
    p.heads_q = p.heads_kv * pick(g, 1, 4);
    p.seq_q = pick(g, 24, 160);
    p.seq_k = pick(g, 16, 400);
    p.head_dim = pick(g, 0, 2) == 0 ? pick(g, 3, 80) : 64 * pick(g, 1, 2);
    p.head_dim_v = pick(g, 0, 3) == 0 ? pick(g, 1, 40) : p.head_dim;
    p.causal = static_cast<int>(pick(g, 0, 2));
    switch (variant % 6) {
    case 1:
        p.window_left = static_cast<long long>(pick(g, 8, 64));
        break;
    case 2:
        p.softcap = 5.0f;
        break;
    case 3:
        p.alibi = ATTN_ALIBI_STANDARD;
        break;
    case 4:
        p.plus_one = true;
        break;
    case 5:
        c.mask = true;
        break;
    default:
        break;
    }
    c.lens = pick(g, 0, 3) == 0;
    c.f16 = pick(g, 0, 3) == 0;
    c.outliers = variant % 2 == 1;
    return c;
}

} // namespace

TEST_CASE("ATTN_PARAM_COMPUTE: INT8 and BF16 settable, values past BF16 refused") {
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, 1, 1, 1, 4, 4, 8) == ATTN_OK);
    int64_t v = -1;
    for (int mode : {ATTN_COMPUTE_INT8, ATTN_COMPUTE_BF16}) {
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_COMPUTE, mode) == ATTN_OK);
        REQUIRE(attn_desc_get_int(d, ATTN_PARAM_COMPUTE, &v) == ATTN_OK);
        CHECK(v == mode);
    }
    CHECK(attn_desc_set_int(d, ATTN_PARAM_COMPUTE, 4) == ATTN_ERR_INVALID_ARGUMENT);
    CHECK(std::string(attn_last_error()).find("ATTN_PARAM_COMPUTE") != std::string::npos);
    attn_desc_destroy(d);
}

TEST_CASE("INT8: within cosine 0.9995 / relative L1 0.01 of float64 on every ISA, variants and "
          "outlier keys; 1 vs 2 threads identical; not EXACT") {
    std::mt19937 g(20261206);
    const std::vector<std::string> names = isas();
    REQUIRE(!names.empty());
    for (int variant = 0; variant < 24; ++variant) {
        Case c = random_case(g, variant);
        fill(c, g);
        const ref::VResult want = ref::compute_v(c.p, inputs(c, c.k.data()));
        for (const std::string &isa : names) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Out o = run(c, ATTN_COMPUTE_INT8, 1);
            const Score s = score(c, o.out, want);
            INFO(isa << " variant " << variant << " d " << c.p.head_dim << " n " << c.p.seq_q << "x"
                     << c.p.seq_k << " outliers " << c.outliers << " cos " << s.cos << " l1 "
                     << s.l1);
            CHECK(s.cos >= 0.9995);
            CHECK(s.l1 <= 0.01);
            CHECK(same_bits(o, run(c, ATTN_COMPUTE_INT8, 2)));
            // the integer path ran: its bits are not EXACT's
            CHECK(!same_bits(o, run(c, ATTN_COMPUTE_EXACT, 1)));
        }
        attn_set_isa(nullptr);
    }
}

TEST_CASE("INT8: K smoothing is what keeps outlier keys within the bound") {
    std::mt19937 g(7);
    for (int rep = 0; rep < 3; ++rep) {
        Case c;
        c.p.batch = 1;
        c.p.heads_q = c.p.heads_kv = 2;
        c.p.seq_q = 64;
        c.p.seq_k = 256;
        c.p.head_dim = c.p.head_dim_v = 128;
        c.outliers = true;
        fill(c, g);
        const ref::VResult want = ref::compute_v(c.p, inputs(c, c.k.data()));
        const Score lib = score(c, run(c, ATTN_COMPUTE_INT8).out, want);
        std::vector<float> qq, kq;
        quantize_unsmoothed(c, qq, kq);
        ref::VInputs in = inputs(c, kq.data());
        in.q = qq.data();
        const Score raw = score(
            c,
            [&] {
                const ref::VResult r = ref::compute_v(c.p, in);
                return std::vector<float>(r.out.begin(), r.out.end());
            }(),
            want);
        INFO("smoothed cos " << lib.cos << " l1 " << lib.l1 << "; unsmoothed cos " << raw.cos
                             << " l1 " << raw.l1);
        CHECK(lib.cos >= 0.9995);
        CHECK(lib.l1 <= 0.01);
        CHECK((raw.cos < 0.9995 || raw.l1 > 0.01));
    }
}

TEST_CASE("INT8: the calls it does not serve equal EXACT bit for bit; BF16 equals EXACT") {
    std::mt19937 g(11);
    Case c;
    c.p.batch = 2;
    c.p.heads_q = 4;
    c.p.heads_kv = 2;
    c.p.seq_q = 1; // decode: 2 rows per KV head
    c.p.seq_k = 300;
    c.p.head_dim = c.p.head_dim_v = 64;
    fill(c, g);
    CHECK(same_bits(run(c, ATTN_COMPUTE_INT8), run(c, ATTN_COMPUTE_EXACT)));
    c.p.seq_q = 40; // prefill with a non-finite key: exact
    fill(c, g);
    c.k[5] = INFINITY;
    CHECK(same_bits(run(c, ATTN_COMPUTE_INT8), run(c, ATTN_COMPUTE_EXACT)));
    c.k[5] = 0.5f;
    CHECK(same_bits(run(c, ATTN_COMPUTE_BF16), run(c, ATTN_COMPUTE_EXACT)));
    CHECK(!same_bits(run(c, ATTN_COMPUTE_INT8), run(c, ATTN_COMPUTE_EXACT)));
}

TEST_CASE("INT8: a non-finite value of a padding key is never read; one of a real key shows as in "
          "EXACT") {
    std::mt19937 g(12);
    Case c;
    c.p.batch = 1;
    c.p.heads_q = 2;
    c.p.heads_kv = 1;
    c.p.seq_q = 48;
    c.p.seq_k = 200;
    c.p.head_dim = c.p.head_dim_v = 32;
    c.mask = true;
    fill(c, g);
    c.key_valid[17] = 0; // padding: its K and V hold Inf and NaN
    for (size_t x = 0; x < 32; ++x) {
        c.k[17 * 32 + x] = INFINITY;
        c.v[17 * 32 + x] = x % 2 ? NAN : -INFINITY;
    }
    const ref::VResult want = ref::compute_v(c.p, inputs(c, c.k.data()));
    const Out o = run(c, ATTN_COMPUTE_INT8);
    const Score s = score(c, o.out, want);
    INFO("cos " << s.cos << " l1 " << s.l1);
    CHECK(s.cos >= 0.9995);
    CHECK(s.l1 <= 0.01);
    CHECK(!same_bits(o, run(c, ATTN_COMPUTE_EXACT)));
    c.key_valid[17] = 1; // now a real key: every output that sees it is not finite, as in EXACT
    const Out i8 = run(c, ATTN_COMPUTE_INT8), ex = run(c, ATTN_COMPUTE_EXACT);
    size_t bad = 0;
    for (size_t x = 0; x < ex.out.size(); ++x) {
        CHECK(std::isfinite(i8.out[x]) == std::isfinite(ex.out[x]));
        bad += !std::isfinite(ex.out[x]);
    }
    CHECK(bad > 0);
}

TEST_CASE("INT8: varlen and paged layouts, every K/V storage, within the bound; 1 vs 2 threads "
          "identical") {
    using namespace serving_test;
    std::mt19937 g(404);
    int ran = 0;
    for (const std::string &isa : serving_test::isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        for (Mode mode : {kVarlen, kVarlenPaged, kDensePaged})
            for (int rep = 0; rep < 6; ++rep) {
                Pack c = random_pack(g, mode);
                c.invariant = false;
                c.compute = ATTN_COMPUTE_INT8;
                c.store = mode == kVarlen ? rep % 3 : rep % 4; // int8 pools: paged only
                if (c.paged()) c.head_major = rep % 2 == 1;
                // prefill-sized sequences, so that the integer path runs
                const size_t sq = serving_test::pick(g, 20, 90); // dense Q: one length
                for (size_t b = 0; b < c.batch; ++b) {
                    c.lq[b] = mode == kDensePaged ? sq : serving_test::pick(g, 20, 90);
                    c.lk[b] = c.lq[b] + serving_test::pick(g, 0, 200);
                }
                c.max_q = *std::max_element(c.lq.begin(), c.lq.end());
                c.max_k = *std::max_element(c.lk.begin(), c.lk.end());
                c.max_pages_param = 0; // follows max_k
                fill_sequences(c, g);
                round_kv(c);
                build(c, g);
                const Run r = run_on_1_and_2_threads(c);
                const ref::Closeness e = check_close(c, r);
                INFO(isa << " mode " << mode << " rep " << rep << " store " << c.store << " cos "
                         << e.cos << " l1 " << e.l1);
                CHECK(e.cos >= 0.9995);
                CHECK(e.l1 <= 0.01);
                c.compute = ATTN_COMPUTE_EXACT; // and the integer path did run
                const Run x = run(c);
                CHECK(std::memcmp(r.out.data(), x.out.data(), r.out.size() * 4) != 0);
                ++ran;
            }
    }
    attn_set_isa(nullptr);
    CHECK(ran > 0);
}

// BSHD K/V rows a KiB apart with 1024 query rows per KV head: the shape whose EXACT prefill
// copies each KV head's rows first; INT8 reads its quantized copies instead, and its bits must
// be those of the same call in BHSD.
TEST_CASE("INT8: strided BSHD prefill gives the bits of BHSD") {
    const size_t B = 1, H = 2, N = 1024, D = 128;
    std::mt19937 g(5);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    std::vector<float> q(B * H * N * D), k(q.size()), v(q.size());
    for (auto *x : {&q, &k, &v})
        for (float &e : *x) e = n01(g);
    auto call = [&](bool bshd) {
        std::vector<float> kk(k.size()), vv(v.size()), out(q.size(), 777.0f);
        for (size_t h = 0; h < H; ++h) // k, v are [h][n][d]; BSHD is [n][h][d]
            for (size_t j = 0; j < N; ++j)
                for (size_t x = 0; x < D; ++x) {
                    const size_t src = (h * N + j) * D + x;
                    const size_t dst = bshd ? (j * H + h) * D + x : src;
                    kk[dst] = k[src];
                    vv[dst] = v[src];
                }
        attn_desc *d = nullptr;
        REQUIRE(attn_desc_create(&d, B, H, H, N, N, D) == ATTN_OK);
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_CAUSAL, ATTN_CAUSAL_TOP_LEFT) == ATTN_OK);
        REQUIRE(attn_desc_set_int(d, ATTN_PARAM_COMPUTE, ATTN_COMPUTE_INT8) == ATTN_OK);
        if (bshd)
            for (attn_operand w : {ATTN_K, ATTN_V})
                REQUIRE(attn_desc_set_strides(d, w, N * H * D, D, H * D) == ATTN_OK);
        attn_args *a = nullptr;
        REQUIRE(attn_args_create(&a) == ATTN_OK);
        REQUIRE(attn_args_set_f32(a, ATTN_Q, q.data(), q.size()) == ATTN_OK);
        REQUIRE(attn_args_set_f32(a, ATTN_K, kk.data(), kk.size()) == ATTN_OK);
        REQUIRE(attn_args_set_f32(a, ATTN_V, vv.data(), vv.size()) == ATTN_OK);
        REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size()) == ATTN_OK);
        REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, std::string(attn_last_error()));
        attn_args_destroy(a);
        attn_desc_destroy(d);
        return out;
    };
    for (const std::string &isa : isas()) {
        if (isa == "scalar") continue; // the same integers; 0.5 GFLOP per call
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        const std::vector<float> a = call(false), b = call(true);
        INFO(isa);
        CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    }
    attn_set_isa(nullptr);
}
