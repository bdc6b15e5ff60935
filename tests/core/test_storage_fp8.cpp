// fp8 K/V storage (OCP E4M3 "fn" and E5M2): the converters against the formats' definitions
// written out here (not the library's), and attention over fp8 K / V (dense and strided, decode
// and prefill rows, batch invariance on and off; one scale per tensor, per KV head, per row, or
// none) against the float64 reference over the dequantized values, on every ISA this CPU
// supports.
#include <doctest/doctest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attn.h"
#include "fp8_defs.hpp"
#include "variant_cases.hpp"

using namespace vcases;
using namespace fp8_defs;

namespace {

// Round to nearest, ties to the even code, among the finite codes (positive codes are ordered
// like their values), saturating at the largest finite one.
int ref_encode(const Fmt &f, float x) {
    const int sign = std::signbit(x) ? 0x80 : 0;
    const double a = std::fabs(static_cast<double>(x));
    if (a >= f.value(f.max_code)) return sign | f.max_code;
    int lo = 0, hi = f.max_code; // value(lo) <= a < value(hi)
    while (hi - lo > 1) {
        const int mid = (lo + hi) / 2;
        if (f.value(mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    const double dl = a - f.value(lo), dh = f.value(hi) - a;
    return sign | (dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi));
}

float random_float(std::mt19937 &g) {
    // every sign and mantissa, exponents around both formats' ranges (and past them)
    uint32_t u = g();
    u = (u & 0x807fffffu) | ((100u + g() % 50u) << 23);
    if (g() % 8 == 0) u &= 0xfff00000u; // 3 mantissa bits: exact E4M3 values and ties
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// How a case's fp8 K or V gets its scales.
enum ScaleKind { kNone = 0, kPerTensor = 1, kPerHead = 2, kPerRow = 3 };

// Quantizes c.k / c.v into the fp8 storage c.store asks for (4 = E4M3, 5 = E5M2) with the
// scales `kind` gives, through the library's quantizer (checked above against the definition),
// then replaces them by the dequantized values written out from the definition, so that the
// reference and check() see exactly what the kernels compute with. Padded rows get random
// bytes: they must never be read.
void store_fp8(VCase &c, std::mt19937 &g, const ScaleKind kind[3]) {
    const ref::VProblem &p = c.p;
    std::vector<float> *vals[3] = {&c.q, &c.k, &c.v};
    for (int w = 1; w < 3; ++w) {
        if (c.store[w] < 4) continue;
        const Fmt &f = kFormats[c.store[w] - 4];
        std::vector<float> &x = *vals[w];
        const size_t H = p.heads_kv, S = p.seq_k, D = p.dim(w);
        c.bits8[w].resize(x.size());
        for (auto &b : c.bits8[w]) b = static_cast<int8_t>(g() & 0xff);
        // a scale that puts the values' magnitudes near the top of the format (some saturate)
        const double top = f.value(f.max_code);
        auto draw = [&]() {
            return static_cast<float>(uni(g, 0.5f, 4.0f) / top * (c.store[w] == 4 ? 1.0 : 64.0));
        };
        size_t *st = c.scale_strides[w];
        c.custom_scale[w] = kind[w] == kPerTensor || kind[w] == kPerHead;
        st[0] = kind[w] == kPerRow ? H * S : 0;
        st[1] = kind[w] == kPerRow ? S : kind[w] == kPerHead ? 1 : 0;
        st[2] = kind[w] == kPerRow ? 1 : 0;
        c.scales[w].clear();
        if (kind[w] != kNone) {
            const size_t n = kind[w] == kPerTensor ? 1 : kind[w] == kPerHead ? H : p.batch * H * S;
            c.scales[w].resize(n);
            for (auto &s : c.scales[w]) s = draw();
        }
        for (size_t b = 0; b < p.batch; ++b)
            for (size_t h = 0; h < H; ++h)
                for (size_t j = 0; j < S; ++j) {
                    const size_t at = p.at(w, b, h, j);
                    float *row = x.data() + at;
                    if (std::isnan(row[0])) continue; // a padded row: stays garbage
                    const float scale =
                        kind[w] == kNone ? 1.0f : c.scales[w][b * st[0] + h * st[1] + j * st[2]];
                    uint8_t *code = reinterpret_cast<uint8_t *>(c.bits8[w].data()) + at;
                    REQUIRE(attn_quantize_fp8(row, 1, D, f.type, scale, code) == ATTN_OK);
                    for (size_t d = 0; d < D; ++d)
                        row[d] = static_cast<float>(f.value(code[d])) * scale;
                }
    }
}

// A random case with fp8 K and / or V (the other fp32, f16 or int8-free), a random scale kind
// each, batch invariance on or off.
VCase random_fp8_case(std::mt19937 &g, int n, ScaleKind kind[3]) {
    VCase c = random_vcase(g, n % 10 == 0 ? 150 : 40, n % 3 == 0);
    c.store[0] = static_cast<int>(g() % 2);     // f32 or f16 Q
    c.store[1] = 4 + static_cast<int>(g() % 2); // fp8 K
    c.store[2] = g() % 4 == 0 ? 0 : 4 + static_cast<int>(g() % 2);
    c.invariant = g() % 3 == 0;
    for (int w = 0; w < 3; ++w) kind[w] = static_cast<ScaleKind>(g() % 4);
    if (c.store[0] == 1) {
        c.bits16[0].resize(c.q.size());
        REQUIRE(attn_convert_f32_to_f16(c.q.data(), c.bits16[0].data(), c.q.size()) == ATTN_OK);
        REQUIRE(attn_convert_f16_to_f32(c.bits16[0].data(), c.q.data(), c.q.size()) == ATTN_OK);
    }
    store_fp8(c, g, kind);
    return c;
}

} // namespace

TEST_CASE("fp8 converters: every code widens to its defined value and encodes back to itself, "
          "ties to even, saturation, on every ISA") {
    std::mt19937 g(8);
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        for (const Fmt &f : kFormats) {
            INFO(isa << " " << f.name);
            // all 256 codes, scale 1 and a scale (value * scale, one fp32 rounding)
            std::vector<uint8_t> all(256);
            for (int x = 0; x < 256; ++x) all[x] = static_cast<uint8_t>(x);
            std::vector<float> wide(256), scaled(256);
            REQUIRE(attn_dequantize_fp8(all.data(), 16, 16, f.type, 1.0f, wide.data()) == ATTN_OK);
            REQUIRE(attn_dequantize_fp8(all.data(), 1, 256, f.type, 0.37f, scaled.data()) ==
                    ATTN_OK);
            size_t bad = 0, nans = 0;
            std::vector<float> finite;
            std::vector<uint8_t> finite_codes;
            for (int x = 0; x < 256; ++x) {
                const double v = f.value(x);
                if (std::isnan(v)) {
                    ++nans;
                    bad += !std::isnan(wide[x]) + !std::isnan(scaled[x]);
                    continue;
                }
                bad += static_cast<double>(wide[x]) != v;
                bad += scaled[x] != static_cast<float>(v) * 0.37f;
                if (std::isfinite(v)) {
                    finite.push_back(static_cast<float>(v));
                    finite_codes.push_back(static_cast<uint8_t>(x));
                }
            }
            CHECK(bad == 0);
            CHECK(nans == (f.type == ATTN_DTYPE_FP8_E4M3 ? 2u : 6u));
            // decode then encode gives the code back (every finite code; -0 stays -0)
            std::vector<uint8_t> back(finite.size());
            REQUIRE(attn_quantize_fp8(finite.data(), 1, finite.size(), f.type, 1.0f, back.data()) ==
                    ATTN_OK);
            CHECK(back == finite_codes);
            // ties between neighbouring codes go to the even code, either sign
            std::vector<float> ties;
            std::vector<uint8_t> want;
            for (int c0 = 0; c0 < f.max_code; ++c0) {
                const float mid = static_cast<float>((f.value(c0) + f.value(c0 + 1)) / 2);
                REQUIRE(static_cast<double>(mid) == (f.value(c0) + f.value(c0 + 1)) / 2);
                const int even = c0 % 2 == 0 ? c0 : c0 + 1;
                ties.push_back(mid);
                want.push_back(static_cast<uint8_t>(even));
                ties.push_back(-mid);
                want.push_back(static_cast<uint8_t>(0x80 | even));
            }
            std::vector<uint8_t> got(ties.size());
            REQUIRE(attn_quantize_fp8(ties.data(), 2, ties.size() / 2, f.type, 1.0f, got.data()) ==
                    ATTN_OK);
            CHECK(got == want);
            // saturation: past the largest finite value, and an fp32 quotient that overflows
            const float top = static_cast<float>(f.value(f.max_code));
            const std::vector<float> big = {
                top,    top * 1.01f, top * 1.1f, 1e30f,   FLT_MAX, -top, -1e30f, -FLT_MAX, 3e38f,
                -3e38f, 1e36f,       -1e36f,     top * 4, top * 2, 0.0f, -0.0f,  1e-30f};
            std::vector<uint8_t> sat(big.size());
            REQUIRE(attn_quantize_fp8(big.data(), 1, big.size(), f.type, 0.01f, sat.data()) ==
                    ATTN_OK);
            for (size_t x = 0; x < big.size(); ++x) {
                const float q = big[x] / 0.01f; // inf for the largest: saturates all the same
                const int w = std::isinf(q) ? (q < 0 ? 0x80 : 0) | f.max_code : ref_encode(f, q);
                CHECK_MESSAGE(sat[x] == w, big[x]);
            }
            // random values and scales against the definition (the fp32 quotient rounded)
            std::vector<float> src(4099);
            for (int rep = 0; rep < 20; ++rep) {
                for (auto &v : src) v = random_float(g);
                const float scale = std::ldexp(uni(g, 0.5f, 1.0f), static_cast<int>(g() % 20) - 10);
                std::vector<uint8_t> q(src.size());
                REQUIRE(attn_quantize_fp8(src.data(), 1, src.size(), f.type, scale, q.data()) ==
                        ATTN_OK);
                size_t wrong = 0;
                for (size_t x = 0; x < src.size(); ++x)
                    if (q[x] != ref_encode(f, src[x] / scale)) {
                        if (wrong < 3)
                            MESSAGE(src[x] << " / " << scale << " -> " << int(q[x]) << " (want "
                                           << ref_encode(f, src[x] / scale) << ")");
                        ++wrong;
                    }
                CHECK(wrong == 0);
            }
        }
    }
    attn_set_isa(nullptr);
}

TEST_CASE("fp8 converters refuse non-finite values (naming the row), bad scales and formats") {
    std::vector<float> x = {1.0f, 2.0f, 3.0f, std::numeric_limits<float>::infinity(), 5.0f, 6.0f};
    std::vector<uint8_t> q(6, 0xAA);
    CHECK(fails(attn_quantize_fp8(x.data(), 3, 2, ATTN_DTYPE_FP8_E4M3, 1.0f, q.data()),
                ATTN_ERR_INVALID_ARGUMENT,
                "attn_quantize_fp8: src row 1 holds a non-finite value"));
    CHECK(q[0] == 0x38); // the rows before it are written: 1.0 = 0.0111.000
    CHECK(q[2] == 0xAA); // nothing from it on
    x[3] = std::numeric_limits<float>::quiet_NaN();
    CHECK(fails(attn_quantize_fp8(x.data(), 2, 3, ATTN_DTYPE_FP8_E5M2, 1.0f, q.data()),
                ATTN_ERR_INVALID_ARGUMENT, "src row 1 holds a non-finite value"));
    x[3] = 4.0f;
    for (float s : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                    std::numeric_limits<float>::infinity()})
        CHECK(fails(attn_quantize_fp8(x.data(), 3, 2, ATTN_DTYPE_FP8_E4M3, s, q.data()),
                    ATTN_ERR_INVALID_ARGUMENT, "attn_quantize_fp8: scale ("));
    std::vector<float> y(6);
    CHECK(fails(attn_dequantize_fp8(q.data(), 3, 2, ATTN_DTYPE_FP8_E4M3,
                                    std::numeric_limits<float>::infinity(), y.data()),
                ATTN_ERR_INVALID_ARGUMENT, "attn_dequantize_fp8: scale (inf) must be finite"));
    q[0] = 0x38; // E4M3 1.0
    CHECK(attn_dequantize_fp8(q.data(), 3, 2, ATTN_DTYPE_FP8_E4M3, -2.0f, y.data()) == ATTN_OK);
    CHECK(y[0] == -2.0f);
    for (int fmt : {int(ATTN_DTYPE_I8), int(ATTN_DTYPE_F16), 8, -1}) {
        CHECK(fails(attn_quantize_fp8(x.data(), 3, 2, static_cast<attn_dtype>(fmt), 1.0f, q.data()),
                    ATTN_ERR_INVALID_ARGUMENT, "is not an fp8 format"));
        CHECK(
            fails(attn_dequantize_fp8(q.data(), 3, 2, static_cast<attn_dtype>(fmt), 1.0f, y.data()),
                  ATTN_ERR_INVALID_ARGUMENT, "is not an fp8 format"));
    }
    CHECK(fails(attn_quantize_fp8(nullptr, 3, 2, ATTN_DTYPE_FP8_E4M3, 1.0f, q.data()),
                ATTN_ERR_NULL_POINTER, "src is NULL"));
    CHECK(fails(attn_dequantize_fp8(q.data(), 3, 2, ATTN_DTYPE_FP8_E4M3, 1.0f, nullptr),
                ATTN_ERR_NULL_POINTER, "dst is NULL"));
    CHECK(fails(attn_quantize_fp8(x.data(), SIZE_MAX, 2, ATTN_DTYPE_FP8_E4M3, 1.0f, q.data()),
                ATTN_ERR_INVALID_ARGUMENT, "overflows"));
    CHECK(fails(attn_quantize_fp8(x.data(), 1, 6, ATTN_DTYPE_FP8_E4M3, 1.0f,
                                  reinterpret_cast<uint8_t *>(x.data()) + 3),
                ATTN_ERR_INVALID_ARGUMENT, "overlap"));
    CHECK(attn_quantize_fp8(nullptr, 0, 5, ATTN_DTYPE_FP8_E4M3, 1.0f, nullptr) == ATTN_OK);
}

TEST_CASE("600 random cases with fp8 K / V (E4M3, E5M2; scale per tensor, per head, per row or "
          "none; batch invariance on and off) match float64 over the dequantized values on "
          "every ISA") {
    std::mt19937 g(20261206);
    const auto list = isas();
    double worst = 0.0, worst_scaled = 0.0;
    size_t runs = 0, kinds[4] = {}, formats[2] = {}, decode = 0, invariant = 0;
    for (int n = 0; n < 600; ++n) {
        ScaleKind kind[3];
        VCase c = random_fp8_case(g, n, kind);
        for (int w = 1; w < 3; ++w)
            if (c.store[w] >= 4) {
                ++kinds[kind[w]];
                ++formats[c.store[w] - 4];
            }
        decode += c.p.seq_q <= 2;
        invariant += c.invariant;
        const double logits = max_logit(c);
        const double tol = 1e-5 * std::max(1.0, logits / 50.0);
        for (const std::string &isa : list) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const VRun r = run(c);
            const double err = check(c, r, "case " + std::to_string(n) + " on " + isa);
            if (logits <= 50.0) worst = std::max(worst, err);
            worst_scaled = std::max(worst_scaled, err / tol * 1e-5);
            ++runs;
            if (err > tol) {
                FAIL_CHECK("case " << n << " on " << isa << ": max rel error " << err << " (store "
                                   << c.store[0] << c.store[1] << c.store[2] << ", scales "
                                   << kind[1] << kind[2] << ", invariant " << c.invariant << ", sq "
                                   << c.p.seq_q << " sk " << c.p.seq_k << " d " << c.p.head_dim
                                   << " dv " << c.p.head_dim_v << ")");
                break;
            }
        }
    }
    attn_set_isa(nullptr);
    MESSAGE(runs << " runs; fp8 operands e4m3/e5m2 " << formats[0] << "/" << formats[1]
                 << ", scales none/tensor/head/row " << kinds[0] << "/" << kinds[1] << "/"
                 << kinds[2] << "/" << kinds[3] << "; " << decode << " decode-row cases, "
                 << invariant << " batch invariant; max rel error " << worst
                 << " (logit condition <= 50), max error * 50 / C = " << worst_scaled);
    CHECK(worst <= 1e-5);
    CHECK(worst_scaled <= 1e-5);
}

TEST_CASE("fp8 storage: 1 and 2 threads give bit-identical results on every ISA") {
    std::mt19937 g(78);
    for (int n = 0; n < 40; ++n) {
        ScaleKind kind[3];
        VCase c = random_fp8_case(g, n % 3 == 0 ? 10 : n, kind);
        for (const std::string &isa : isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            run_on_1_and_2_threads(c);
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}

TEST_CASE("long decode (seq_k 9000, key split) with fp8 K/V, per-tensor and per-head scales") {
    std::mt19937 g(14);
    for (int n = 0; n < 4; ++n) {
        VCase c = long_decode_case(g, n % 2);
        c.store[1] = 4 + n % 2;
        c.store[2] = 5 - n % 2;
        c.invariant = n >= 2;
        const ScaleKind kind[3] = {kNone, n < 2 ? kPerTensor : kPerHead, kPerTensor};
        store_fp8(c, g, kind);
        for (const std::string &isa : isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            CHECK(check(c, run_on_1_and_2_threads(c), "decode " + isa) <= 1e-5);
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}

TEST_CASE("fp8 NaN codes read as NaN (never as a number); a hidden key's NaN is never read") {
    // 1 batch, 2 query heads on 1 KV head, 3 keys of d 16; key 1 holds a NaN code
    for (const std::string &isa : isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        for (const Fmt &f : kFormats)
            for (size_t sq : {1, 40}) { // the decode path and the row blocks
                INFO(isa << " " << f.name << " seq_q " << sq);
                attn_desc *d = nullptr;
                REQUIRE(attn_desc_create(&d, 1, 2, 1, sq, 3, 16) == ATTN_OK);
                std::vector<float> q(2 * sq * 16, 0.25f), out(2 * sq * 16);
                std::vector<uint8_t> k(48, 0x30), v(48, 0x38); // small positive values
                k[16 + 5] = static_cast<uint8_t>(f.type == ATTN_DTYPE_FP8_E4M3 ? 0x7f : 0xfe);
                attn_args *a = nullptr;
                REQUIRE(attn_args_create(&a) == ATTN_OK);
                REQUIRE(attn_args_set_f32(a, ATTN_Q, q.data(), q.size()) == ATTN_OK);
                REQUIRE(attn_args_set_fp8(a, ATTN_K, f.type, k.data(), k.size()) == ATTN_OK);
                REQUIRE(attn_args_set_fp8(a, ATTN_V, f.type, v.data(), v.size()) == ATTN_OK);
                REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size()) == ATTN_OK);
                REQUIRE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK);
                CHECK(std::isnan(out[0]));
                const uint8_t valid[3] = {1, 0, 1};
                REQUIRE(attn_args_set_u8(a, ATTN_KEY_VALID, valid, 3) == ATTN_OK);
                REQUIRE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK);
                // both visible keys' values are the code 0x38 (E4M3 1.0, E5M2 0.5)
                CHECK(out[0] == static_cast<float>(f.value(0x38)));
                attn_args_destroy(a);
                attn_desc_destroy(d);
            }
    }
    attn_set_isa(nullptr);
}
