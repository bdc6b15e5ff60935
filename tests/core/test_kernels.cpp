// Kernel tests through the public API, on every ISA this CPU supports, against the float64
// reference of tests/reference/reference.hpp (ref::compute: ref::compute_v of the 0.1 problem).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attn.h"
#include "reference.hpp"

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const float kSentinel = 777.0f; // OUT elements the strides do not address must keep it

std::vector<std::string> supported_isas() {
    std::vector<std::string> out;
    for (const char *name : {"scalar", "sse2", "avx2", "avx512"})
        if (attn_set_isa(name) == ATTN_OK) out.push_back(name);
    attn_set_isa(nullptr);
    return out;
}

struct Case {
    ref::Problem p;
    std::vector<float> q, k, v;
    std::vector<uint8_t> key_valid, allowed; // empty = NULL
};

struct Run {
    attn_status st = ATTN_OK;
    std::vector<float> out, lse, w;
};

const bool *bools(const std::vector<uint8_t> &x) {
    return x.empty() ? nullptr : reinterpret_cast<const bool *>(x.data());
}

Run run(const Case &c) {
    const ref::Problem &p = c.p;
    Run r;
    attn_desc *d = nullptr;
    r.st = attn_desc_create(&d, p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim);
    REQUIRE_MESSAGE(r.st == ATTN_OK, attn_last_error());
    REQUIRE(attn_desc_set_causal(d, static_cast<attn_causal>(p.causal)) == ATTN_OK);
    if (p.has_scale) REQUIRE(attn_desc_set_scale(d, p.scale) == ATTN_OK);
    for (int w = 0; w < 4; ++w)
        if (p.custom_strides[w])
            REQUIRE(attn_desc_set_strides(d, static_cast<attn_operand>(w), p.strides[w][0],
                                          p.strides[w][1], p.strides[w][2]) == ATTN_OK);
    for (int w = 0; w < 4; ++w)
        REQUIRE(attn_desc_required_len(d, static_cast<attn_operand>(w)) == p.len(w));
    r.out.assign(p.len(3), kSentinel);
    r.lse.assign(attn_desc_required_len(d, ATTN_LSE), kSentinel);
    r.w.assign(attn_desc_required_len(d, ATTN_WEIGHTS), kSentinel);
    r.st = attn_forward(d, c.q.data(), c.k.data(), c.v.data(), bools(c.key_valid), bools(c.allowed),
                        r.out.data(), r.lse.data());
    REQUIRE_MESSAGE(r.st == ATTN_OK, attn_last_error());
    r.st =
        attn_weights(d, c.q.data(), c.k.data(), bools(c.key_valid), bools(c.allowed), r.w.data());
    REQUIRE_MESSAGE(r.st == ATTN_OK, attn_last_error());
    attn_desc_destroy(d);
    return r;
}

// Max error relative to max(1, |reference|) over out, lse, weights; checks exact zeros and gaps.
double check(const Case &c, const Run &r, const std::string &what) {
    const ref::Problem &p = c.p;
    const uint8_t *kv = c.key_valid.empty() ? nullptr : c.key_valid.data();
    const uint8_t *al = c.allowed.empty() ? nullptr : c.allowed.data();
    const ref::VResult e = ref::compute(p, c.q.data(), c.k.data(), c.v.data(), kv, al);
    const auto rel = ref::rel_err;
    double worst = 0.0;
    std::vector<char> addressed(r.out.size(), 0);
    const size_t D = p.head_dim;
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i) {
                const size_t row = (b * p.heads_q + h) * p.seq_q + i;
                for (size_t d = 0; d < D; ++d) {
                    const size_t at = p.at(3, b, h, i) + d;
                    addressed[at] = 1;
                    worst = std::max(worst, rel(r.out[at], e.out[row * D + d]));
                }
                worst = std::max(worst, rel(r.lse[row], e.lse[row]));
                double sum = 0.0;
                bool any = false;
                for (size_t j = 0; j < p.seq_k; ++j) {
                    const float got = r.w[row * p.seq_k + j];
                    if (e.hidden[row * p.seq_k + j]) {
                        if (got != 0.0f || std::signbit(got)) {
                            FAIL_CHECK(what << ": hidden weight (" << b << "," << h << "," << i
                                            << "," << j << ") = " << got);
                            return 1e30;
                        }
                        continue;
                    }
                    any = true;
                    sum += got;
                    worst = std::max(worst, rel(got, e.w[row * p.seq_k + j]));
                }
                if (any) worst = std::max(worst, std::fabs(sum - 1.0));
            }
    for (size_t x = 0; x < r.out.size(); ++x)
        if (!addressed[x] && r.out[x] != kSentinel) {
            FAIL_CHECK(what << ": out[" << x << "] outside the strided rows was written");
            return 1e30;
        }
    return worst;
}

float uniform(std::mt19937 &g, float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(g);
}

// Fills inputs; padded key rows of K and V get NaN (they must never be read).
void fill(Case &c, std::mt19937 &g) {
    const ref::Problem &p = c.p;
    c.q.assign(p.len(0), kNaN); // elements outside the view are NaN too: never read
    c.k.assign(p.len(1), kNaN);
    c.v.assign(p.len(2), kNaN);
    for (size_t b = 0; b < p.batch; ++b) {
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i)
                for (size_t d = 0; d < p.head_dim; ++d)
                    c.q[p.at(0, b, h, i) + d] = uniform(g, -1, 1);
        for (size_t h = 0; h < p.heads_kv; ++h)
            for (size_t j = 0; j < p.seq_k; ++j) {
                const bool pad = !c.key_valid.empty() && !c.key_valid[b * p.seq_k + j];
                for (size_t d = 0; d < p.head_dim; ++d) {
                    c.k[p.at(1, b, h, j) + d] = pad ? kNaN : uniform(g, -1, 1);
                    c.v[p.at(2, b, h, j) + d] = pad ? kNaN : uniform(g, -2, 2);
                }
            }
    }
}

Case random_case(std::mt19937 &g, size_t max_seq, size_t max_dim) {
    auto pick = [&](size_t lo, size_t hi) {
        return std::uniform_int_distribution<size_t>(lo, hi)(g);
    };
    Case c;
    ref::Problem &p = c.p;
    p.batch = pick(1, 3);
    p.heads_kv = pick(1, 3);
    p.heads_q = p.heads_kv * pick(1, 3);
    p.seq_q = pick(1, max_seq);
    p.seq_k = pick(1, max_seq);
    p.head_dim = pick(0, 3) == 0 ? pick(1, max_dim) : pick(1, 72);
    p.causal = static_cast<attn_causal>(pick(0, 2));
    if (pick(0, 2) == 0) {
        p.has_scale = true;
        p.scale = uniform(g, -1.0f, 1.5f);
    }
    for (int w = 0; w < 4; ++w) {
        const size_t kind = pick(0, 3);
        const bool is_q = w == 0 || w == 3;
        const size_t H = is_q ? p.heads_q : p.heads_kv, S = is_q ? p.seq_q : p.seq_k;
        const size_t D = p.head_dim;
        if (kind == 1) { // BSHD
            p.custom_strides[w] = true;
            p.strides[w][0] = S * H * D;
            p.strides[w][1] = D;
            p.strides[w][2] = H * D;
        } else if (kind == 2) { // padded rows (gaps)
            const size_t rs = D + pick(1, 5);
            p.custom_strides[w] = true;
            p.strides[w][2] = rs;
            p.strides[w][1] = S * rs + pick(0, 3);
            p.strides[w][0] = H * p.strides[w][1] + pick(0, 3);
        }
    }
    p.set_default_strides();
    if (pick(0, 1)) {
        c.key_valid.resize(p.batch * p.seq_k);
        for (auto &x : c.key_valid) x = pick(0, 4) != 0 ? static_cast<uint8_t>(pick(1, 255)) : 0;
    }
    if (pick(0, 1)) {
        c.allowed.resize(p.seq_q * p.seq_k);
        const size_t density = pick(0, 4); // 0: rows may be fully hidden
        for (auto &x : c.allowed) x = pick(0, 4) < density + 1 ? 1 : 0;
    }
    fill(c, g);
    return c;
}

Case dense_case(size_t B, size_t HQ, size_t HKV, size_t SQ, size_t SK, size_t D, attn_causal causal,
                unsigned seed) {
    Case c;
    c.p.batch = B;
    c.p.heads_q = HQ;
    c.p.heads_kv = HKV;
    c.p.seq_q = SQ;
    c.p.seq_k = SK;
    c.p.head_dim = D;
    c.p.causal = causal;
    c.p.set_default_strides();
    std::mt19937 g(seed);
    fill(c, g);
    return c;
}

void check_all_isas(const Case &c, const char *what, double tol = 1e-5) {
    for (const std::string &isa : supported_isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        const Run r = run(c);
        const double err = check(c, r, std::string(what) + " on " + isa);
        CHECK_MESSAGE(err <= tol, what << " on " << isa << ": max rel error " << err);
    }
    attn_set_isa(nullptr);
}

} // namespace

TEST_CASE("the ISAs this CPU supports are all tested") {
    const auto isas = supported_isas();
    std::string list;
    for (const auto &s : isas) list += s + " ";
    MESSAGE("ISAs: " << list << "(default " << std::string(attn_isa()) << ")");
    REQUIRE(isas.size() >= 2); // scalar and at least sse2 on x86-64
    CHECK(isas.front() == "scalar");
    // the default is the best level; "avx512fp16" runs the avx512 kernels (its fp16 fast path,
    // taken only on request, is tested in core_compute)
    const std::string def = attn_isa();
    CHECK((def == isas.back() || (def == "avx512fp16" && isas.back() == "avx512")));
    if (def == "avx512fp16") CHECK(attn_set_isa("avx512fp16") == ATTN_OK);
    attn_set_isa(nullptr);
}

TEST_CASE("seed example: Q = 0, V = [10, 20, 30], causal gives out[1][0] = 15 exactly") {
    const float q[3] = {0, 0, 0}, k[3] = {1, 2, 3}, v[3] = {10, 20, 30};
    for (const std::string &isa : supported_isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        float out[3] = {-1, -1, -1};
        REQUIRE(attn_simple(q, k, v, 3, 1, true, nullptr, out) == ATTN_OK);
        CHECK(out[0] == 10.0f);
        CHECK(out[1] == 15.0f);
        CHECK(out[2] == doctest::Approx(20.0f).epsilon(1e-6));
        // Padding the middle key: query 1 sees only key 0, query 2 keys 0 and 2.
        const bool pad[3] = {true, false, true};
        REQUIRE(attn_simple(q, k, v, 3, 1, true, pad, out) == ATTN_OK);
        CHECK(out[0] == 10.0f);
        CHECK(out[1] == 10.0f);
        CHECK(out[2] == 20.0f);
    }
    attn_set_isa(nullptr);
}

TEST_CASE("edge shapes on every ISA") {
    SUBCASE("seq 1") {
        check_all_isas(dense_case(1, 1, 1, 1, 1, 8, ATTN_CAUSAL_TOP_LEFT, 1), "seq1");
    }
    SUBCASE("head_dim not a multiple of the lane count") {
        for (size_t d : {1u, 3u, 7u, 15u, 17u, 31u, 33u, 67u, 129u})
            check_all_isas(dense_case(1, 2, 1, 37, 29, d, ATTN_CAUSAL_NONE, 2 + d), "odd head_dim");
    }
    SUBCASE("seq_q != seq_k in both causal modes") {
        for (attn_causal c : {ATTN_CAUSAL_TOP_LEFT, ATTN_CAUSAL_BOTTOM_RIGHT}) {
            check_all_isas(dense_case(2, 2, 2, 7, 40, 16, c, 3), "seq_q < seq_k");
            check_all_isas(dense_case(2, 2, 2, 40, 7, 16, c, 4), "seq_q > seq_k");
        }
    }
    SUBCASE("GQA and MQA") {
        check_all_isas(dense_case(2, 6, 2, 33, 35, 24, ATTN_CAUSAL_TOP_LEFT, 5), "gqa");
        check_all_isas(dense_case(1, 8, 1, 19, 70, 40, ATTN_CAUSAL_BOTTOM_RIGHT, 6), "mqa");
    }
    SUBCASE("BSHD strides") {
        Case c;
        ref::Problem &p = c.p;
        p.batch = 2, p.heads_q = 4, p.heads_kv = 2, p.seq_q = 13, p.seq_k = 21, p.head_dim = 20;
        for (int w = 0; w < 4; ++w) {
            const bool is_q = w == 0 || w == 3;
            const size_t H = is_q ? p.heads_q : p.heads_kv, S = is_q ? p.seq_q : p.seq_k;
            p.custom_strides[w] = true;
            p.strides[w][0] = S * H * p.head_dim;
            p.strides[w][1] = p.head_dim;
            p.strides[w][2] = H * p.head_dim;
        }
        p.causal = ATTN_CAUSAL_TOP_LEFT;
        std::mt19937 g(7);
        fill(c, g);
        check_all_isas(c, "bshd");
    }
    SUBCASE("fully masked rows: out 0, weights 0, lse -inf, never NaN") {
        Case c = dense_case(1, 2, 1, 6, 9, 12, ATTN_CAUSAL_NONE, 8);
        c.allowed.assign(6 * 9, 1);
        for (size_t j = 0; j < 9; ++j) c.allowed[2 * 9 + j] = 0; // query 2 sees nothing
        c.key_valid.assign(9, 1);
        std::mt19937 g(8);
        fill(c, g);
        check_all_isas(c, "fully masked row");
        for (const std::string &isa : supported_isas()) {
            attn_set_isa(isa.c_str());
            const Run r = run(c);
            for (size_t h = 0; h < 2; ++h) {
                const size_t row = h * 6 + 2;
                CHECK(std::isinf(r.lse[row]));
                CHECK(r.lse[row] < 0);
                for (size_t d = 0; d < 12; ++d) CHECK(r.out[row * 12 + d] == 0.0f);
            }
        }
        attn_set_isa(nullptr);
    }
    SUBCASE("every key padding in one batch") {
        Case c = dense_case(2, 1, 1, 5, 5, 4, ATTN_CAUSAL_TOP_LEFT, 9);
        c.key_valid = {0, 0, 0, 0, 0, 1, 1, 0, 1, 1};
        std::mt19937 g(9);
        fill(c, g); // padded rows are NaN
        check_all_isas(c, "all padding");
    }
    SUBCASE("padded NaN keys never reach the output") {
        Case c = dense_case(1, 1, 1, 40, 300, 32, ATTN_CAUSAL_BOTTOM_RIGHT, 10);
        c.key_valid.assign(300, 1);
        for (size_t j = 0; j < 300; j += 3) c.key_valid[j] = 0;
        std::mt19937 g(10);
        fill(c, g);
        check_all_isas(c, "padded NaN");
    }
    SUBCASE("any nonzero mask byte reads as true") {
        Case a = dense_case(1, 1, 1, 9, 9, 5, ATTN_CAUSAL_NONE, 11);
        a.key_valid = {1, 0, 1, 1, 0, 1, 1, 1, 0};
        std::mt19937 g(11);
        fill(a, g);
        Case b = a;
        b.key_valid = {2, 0, 255, 17, 0, 128, 3, 1, 0};
        const Run ra = run(a), rb = run(b);
        CHECK(ra.out == rb.out);
    }
}

TEST_CASE("values of visible keys propagate, hidden ones never do") {
    Case c = dense_case(1, 1, 1, 4, 4, 3, ATTN_CAUSAL_TOP_LEFT, 12);
    c.v[3 * 3 + 1] = kInf; // key 3 is visible to query 3 only
    for (const std::string &isa : supported_isas()) {
        attn_set_isa(isa.c_str());
        const Run r = run(c);
        for (size_t i = 0; i < 3; ++i)
            for (size_t d = 0; d < 3; ++d) CHECK(std::isfinite(r.out[i * 3 + d]));
        CHECK(std::isinf(r.out[3 * 3 + 1]));
    }
    c.v[3 * 3 + 1] = kNaN;
    c.k[0] = kNaN; // key 0 is visible to everyone: every row becomes NaN
    for (const std::string &isa : supported_isas()) {
        attn_set_isa(isa.c_str());
        const Run r = run(c);
        for (size_t i = 0; i < 4; ++i) CHECK(std::isnan(r.out[i * 3]));
    }
    attn_set_isa(nullptr);
}

TEST_CASE("1000+ random shapes match the float64 reference on every ISA") {
    std::mt19937 g(20261130);
    const auto isas = supported_isas();
    double worst = 0.0;
    size_t runs = 0;
    for (int n = 0; n < 1100; ++n) {
        const Case c = random_case(g, n % 10 == 0 ? 150 : 40, 256);
        for (const std::string &isa : isas) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const Run r = run(c);
            const double err = check(c, r, "random case " + std::to_string(n) + " on " + isa);
            worst = std::max(worst, err);
            ++runs;
            if (err > 1e-5) {
                const ref::Problem &p = c.p;
                FAIL_CHECK("case " << n << " " << isa << ": err " << err << " B" << p.batch << " HQ"
                                   << p.heads_q << " HKV" << p.heads_kv << " SQ" << p.seq_q << " SK"
                                   << p.seq_k << " D" << p.head_dim << " causal " << p.causal);
                break;
            }
        }
    }
    attn_set_isa(nullptr);
    MESSAGE(runs << " runs, max relative error " << worst);
    CHECK(worst <= 1e-5);
}

TEST_CASE("results are bit-identical for 1 and 2 threads") {
    std::mt19937 g(4242);
    auto same = [](const Case &c) {
        REQUIRE(attn_set_num_threads(1) == ATTN_OK);
        const Run a = run(c);
        REQUIRE(attn_set_num_threads(2) == ATTN_OK);
        const Run b = run(c);
        attn_set_num_threads(0);
        CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4) == 0);
        CHECK(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4) == 0);
        CHECK(std::memcmp(a.w.data(), b.w.data(), a.w.size() * 4) == 0);
    };
    for (const std::string &isa : supported_isas()) {
        attn_set_isa(isa.c_str());
        for (int n = 0; n < 40; ++n) same(random_case(g, 200, 96));
        same(dense_case(2, 4, 2, 300, 257, 64, ATTN_CAUSAL_TOP_LEFT, 13));
    }
    attn_set_isa(nullptr);
}

// Prefill with K/V rows a KiB or more apart and >= 1024 query rows per KV head runs on a copy of
// K and V made once per call (core/kv_pack.hpp): the same arithmetic as BHSD, so the same bits.
TEST_CASE("BSHD K/V copied once per call: the reference, and BHSD's bits") {
    for (const bool masked : {false, true}) {
        Case bhsd = dense_case(2, 8, 2, 260, 203, 130, ATTN_CAUSAL_BOTTOM_RIGHT, 21);
        Case bshd;
        bshd.p = bhsd.p;
        ref::Problem &p = bshd.p;
        for (int w = 1; w < 3; ++w) { // K and V: rows 2 * 130 floats (1040 bytes) apart
            p.custom_strides[w] = true;
            p.strides[w][0] = p.seq_k * p.heads_kv * p.head_dim;
            p.strides[w][1] = p.head_dim;
            p.strides[w][2] = p.heads_kv * p.head_dim;
        }
        if (masked) { // hidden keys hold NaN (fill): never read, in the copy or after it
            bhsd.key_valid.assign(p.batch * p.seq_k, 1);
            for (size_t j = 0; j < bhsd.key_valid.size(); j += 7) bhsd.key_valid[j] = 0;
            std::mt19937 g(22);
            fill(bhsd, g);
        }
        bshd.key_valid = bhsd.key_valid;
        bshd.q = bhsd.q;
        bshd.k.assign(p.len(1), kNaN);
        bshd.v.assign(p.len(2), kNaN);
        for (size_t b = 0; b < p.batch; ++b)
            for (size_t h = 0; h < p.heads_kv; ++h)
                for (size_t j = 0; j < p.seq_k; ++j)
                    for (size_t d = 0; d < p.head_dim; ++d) {
                        bshd.k[p.at(1, b, h, j) + d] = bhsd.k[bhsd.p.at(1, b, h, j) + d];
                        bshd.v[p.at(2, b, h, j) + d] = bhsd.v[bhsd.p.at(2, b, h, j) + d];
                    }
        check_all_isas(bshd, masked ? "bshd copy, key_valid" : "bshd copy");
        for (const std::string &isa : supported_isas()) {
            attn_set_isa(isa.c_str());
            for (const size_t threads : {1u, 2u}) {
                REQUIRE(attn_set_num_threads(threads) == ATTN_OK);
                const Run a = run(bhsd), b = run(bshd);
                CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4) == 0);
                CHECK(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4) == 0);
            }
            attn_set_num_threads(0);
        }
        attn_set_isa(nullptr);
    }
}

// 16 (batch entry, KV head) pairs of 4096 keys at d 128 need 64 MiB of copies, twice the copy
// buffer: they run in waves (kv_pack.hpp). Against BHSD over the same values (never copied, and
// checked against the reference above), bit for bit. Top-left causal keeps the arithmetic small
// (query i sees keys 0..i; every key is copied all the same).
TEST_CASE("BSHD K/V copies larger than the copy buffer run in waves: BHSD's bits") {
    const size_t B = 4, HQ = 16, HKV = 4, SQ = 256, SK = 4096, D = 128;
    std::mt19937 g(31);
    std::vector<float> q(B * HQ * SQ * D), k(B * HKV * SK * D), v(k.size());
    for (float &x : q) x = uniform(g, -1, 1);
    for (float &x : k) x = uniform(g, -1, 1);
    for (float &x : v) x = uniform(g, -2, 2);
    std::vector<float> ks(k.size()), vs(v.size()); // BSHD copies: [B][SK][HKV][D]
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < HKV; ++h)
            for (size_t j = 0; j < SK; ++j)
                for (size_t d = 0; d < D; ++d) {
                    ks[((b * SK + j) * HKV + h) * D + d] = k[((b * HKV + h) * SK + j) * D + d];
                    vs[((b * SK + j) * HKV + h) * D + d] = v[((b * HKV + h) * SK + j) * D + d];
                }
    std::vector<uint8_t> valid(B * SK, 1);
    for (size_t j = 0; j < valid.size(); j += 5) valid[j] = 0;
    auto forward = [&](bool bshd, std::vector<float> &out, std::vector<float> &lse) {
        attn_desc *d = nullptr;
        REQUIRE(attn_desc_create(&d, B, HQ, HKV, SQ, SK, D) == ATTN_OK);
        REQUIRE(attn_desc_set_causal(d, ATTN_CAUSAL_TOP_LEFT) == ATTN_OK);
        if (bshd)
            for (attn_operand w : {ATTN_K, ATTN_V})
                REQUIRE(attn_desc_set_strides(d, w, SK * HKV * D, D, HKV * D) == ATTN_OK);
        out.assign(B * HQ * SQ * D, kSentinel);
        lse.assign(B * HQ * SQ, kSentinel);
        const attn_status st = attn_forward(
            d, q.data(), bshd ? ks.data() : k.data(), bshd ? vs.data() : v.data(),
            reinterpret_cast<const bool *>(valid.data()), nullptr, out.data(), lse.data());
        REQUIRE_MESSAGE(st == ATTN_OK, attn_last_error());
        attn_desc_destroy(d);
    };
    for (const std::string &isa : supported_isas()) {
        if (isa == "scalar") continue; // the scalar kernel is covered above
        attn_set_isa(isa.c_str());
        std::vector<float> o1, l1, o2, l2;
        forward(false, o1, l1);
        forward(true, o2, l2);
        CHECK_MESSAGE(std::memcmp(o1.data(), o2.data(), o1.size() * 4) == 0, isa);
        CHECK_MESSAGE(std::memcmp(l1.data(), l2.data(), l1.size() * 4) == 0, isa);
        CHECK(std::isfinite(o2[0]));
    }
    attn_set_isa(nullptr);
}

TEST_CASE("decode: keys split across items merge exactly") {
    // seq_q = 1 with few heads and many keys takes the key-split path.
    Case c = dense_case(1, 4, 1, 1, 9000, 64, ATTN_CAUSAL_BOTTOM_RIGHT, 14);
    check_all_isas(c, "decode split");
    c.key_valid.assign(9000, 1);
    for (size_t j = 0; j < 5000; ++j) c.key_valid[j] = 0; // first chunk entirely padding
    std::mt19937 g(14);
    fill(c, g);
    check_all_isas(c, "decode split, padded chunk");
    Case two = dense_case(1, 2, 2, 3, 6000, 16, ATTN_CAUSAL_TOP_LEFT, 15); // top-left: 3 keys seen
    check_all_isas(two, "decode split, causal top-left");
    for (const std::string &isa : supported_isas()) {
        attn_set_isa(isa.c_str());
        attn_set_num_threads(1);
        const Run a = run(c);
        attn_set_num_threads(2);
        const Run b = run(c);
        attn_set_num_threads(0);
        CHECK(a.out == b.out);
        CHECK(a.lse == b.lse);
    }
    attn_set_isa(nullptr);
}
