// Storage types: Q, K, V in IEEE binary16 / bfloat16, K and V in symmetric int8 with per-row
// scales. Checked against conversions written out here (not the library's), and attention over
// them against the float64 reference over the widened values, on every ISA this CPU supports.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attn.h"
#include "variant_cases.hpp"

using namespace vcases;

namespace {

float from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
uint32_t to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// binary16 by its definition: (-1)^s * 2^(e-15) * (1 + m/1024), subnormal 2^-14 * m/1024.
double half_value(uint16_t h) {
    const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 31)
        v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    else if (e == 0)
        v = std::ldexp(m, -24);
    else
        v = std::ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

double bf16_value(uint16_t b) {
    return static_cast<double>(from_bits(static_cast<uint32_t>(b) << 16));
}

// Round to nearest, ties to the even code, among the finite codes of a 16-bit format whose
// positive codes are ordered like their values; `top` is the value the first code past the
// largest finite one stands for (2^16 for binary16, 2^128 for bfloat16), so overflow goes to
// infinity exactly when round-to-nearest-even says so.
template <class Value> uint16_t nearest(float f, uint16_t inf_code, double top, Value value) {
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const double a = std::fabs(static_cast<double>(f));
    uint16_t lo = 0, hi = inf_code; // value(lo) <= a < value(hi) (value(inf_code) = top)
    auto val = [&](uint16_t c) { return c == inf_code ? top : value(c); };
    if (a >= top) return sign | inf_code;
    while (hi - lo > 1) {
        const uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
        if (val(mid) <= a)
            lo = mid;
        else
            hi = mid;
    }
    const double dl = a - val(lo), dh = val(hi) - a;
    const uint16_t c = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
    return sign | c;
}

uint16_t ref_f16(float f) {
    return nearest(f, 0x7c00, 65536.0, half_value);
}
uint16_t ref_bf16(float f) {
    return nearest(f, 0x7f80, std::ldexp(1.0, 128), bf16_value);
}

float random_float(std::mt19937 &g) {
    // every exponent and mantissa, with halfway points of both 16-bit formats planted
    uint32_t u = g();
    const int kind = static_cast<int>(g() % 8);
    if (kind == 0) u = (u & 0xffffe000u) | 0x1000u; // binary16 tie (for normal halves)
    if (kind == 1) u = (u & 0xffff0000u) | 0x8000u; // bfloat16 tie
    if (kind == 2) u = (u & 0x807fffffu) | ((100u + g() % 50u) << 23); // around the half range
    return from_bits(u);
}

std::vector<std::string> all_isas() {
    return isas();
}

// The fp32 value of element x of a stored operand (the reference's view of it).
float widen16(int store, uint16_t b) {
    return store == 1 ? static_cast<float>(half_value(b)) : static_cast<float>(bf16_value(b));
}

// Converts c.q / c.k / c.v into the storage c.store asks for (through the library's converters;
// they are checked above against the definitions), then replaces them by the widened values so
// that the reference and check() see exactly what the kernels compute with. Padded and skipped
// int8 rows get random bytes and a NaN scale: they must never be read.
void store_case(VCase &c, std::mt19937 &g) {
    const ref::VProblem &p = c.p;
    std::vector<float> *vals[3] = {&c.q, &c.k, &c.v};
    for (int w = 0; w < 3; ++w) {
        std::vector<float> &x = *vals[w];
        if (c.store[w] == 1 || c.store[w] == 2) {
            c.bits16[w].resize(x.size());
            REQUIRE((c.store[w] == 1
                         ? attn_convert_f32_to_f16(x.data(), c.bits16[w].data(), x.size())
                         : attn_convert_f32_to_bf16(x.data(), c.bits16[w].data(), x.size())) ==
                    ATTN_OK);
            for (size_t e = 0; e < x.size(); ++e) x[e] = widen16(c.store[w], c.bits16[w][e]);
        } else if (c.store[w] == 3) {
            const size_t H = p.heads_kv, S = p.seq_k, D = p.dim(w);
            c.bits8[w].resize(x.size());
            for (auto &b : c.bits8[w]) b = static_cast<int8_t>(g() & 0xff);
            size_t *st = c.scale_strides[w];
            if (!c.custom_scale[w]) {
                st[0] = H * S;
                st[1] = S;
                st[2] = 1;
            }
            const size_t slen = (p.batch - 1) * st[0] + (H - 1) * st[1] + (S - 1) * st[2] + 1;
            c.scales[w].assign(slen, std::numeric_limits<float>::quiet_NaN());
            for (size_t b = 0; b < p.batch; ++b)
                for (size_t h = 0; h < H; ++h)
                    for (size_t j = 0; j < S; ++j) {
                        const size_t at = p.at(w, b, h, j);
                        float *row = x.data() + at;
                        if (std::isnan(row[0])) continue; // a padded row: stays garbage
                        float &scale = c.scales[w][b * st[0] + h * st[1] + j * st[2]];
                        REQUIRE(attn_quantize_i8(row, 1, D, c.bits8[w].data() + at, &scale) ==
                                ATTN_OK);
                        for (size_t d = 0; d < D; ++d)
                            row[d] = static_cast<float>(c.bits8[w][at + d]) * scale;
                    }
        }
    }
}

} // namespace

TEST_CASE("f16 / bf16 conversions round to nearest even, as the formats define, on every ISA") {
    std::mt19937 g(5);
    std::vector<float> src(200000);
    for (auto &f : src) f = random_float(g);
    const float specials[] = {0.0f,
                              -0.0f,
                              65504.0f,
                              65519.99f,
                              65520.0f,
                              1e-8f,
                              2.98e-8f,
                              5.96e-8f,
                              6.1e-5f,
                              3.4e38f,
                              -3.4e38f,
                              std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::denorm_min()};
    std::copy(std::begin(specials), std::end(specials), src.begin());
    std::vector<uint16_t> all(65536);
    for (size_t x = 0; x < all.size(); ++x) all[x] = static_cast<uint16_t>(x);
    for (const std::string &isa : all_isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        std::vector<uint16_t> h(src.size()), b(src.size());
        REQUIRE(attn_convert_f32_to_f16(src.data(), h.data(), src.size()) == ATTN_OK);
        REQUIRE(attn_convert_f32_to_bf16(src.data(), b.data(), src.size()) == ATTN_OK);
        size_t bad = 0;
        for (size_t x = 0; x < src.size(); ++x) {
            if (std::isnan(src[x])) {
                bad += !(std::isnan(half_value(h[x])) && std::isnan(bf16_value(b[x])));
                continue;
            }
            if (h[x] != ref_f16(src[x]) || b[x] != ref_bf16(src[x])) {
                if (bad < 5)
                    MESSAGE(isa << ": " << src[x] << " -> f16 " << h[x] << " (want "
                                << ref_f16(src[x]) << "), bf16 " << b[x] << " (want "
                                << ref_bf16(src[x]) << ")");
                ++bad;
            }
        }
        CHECK_MESSAGE(bad == 0, isa);
        std::vector<float> wide(65536), wideb(65536);
        REQUIRE(attn_convert_f16_to_f32(all.data(), wide.data(), all.size()) == ATTN_OK);
        REQUIRE(attn_convert_bf16_to_f32(all.data(), wideb.data(), all.size()) == ATTN_OK);
        size_t wbad = 0;
        for (size_t x = 0; x < all.size(); ++x) {
            const double hv = half_value(all[x]), bv = bf16_value(all[x]);
            if (std::isnan(hv) ? !std::isnan(wide[x]) : static_cast<double>(wide[x]) != hv) ++wbad;
            if (std::isnan(bv) ? !std::isnan(wideb[x]) : static_cast<double>(wideb[x]) != bv)
                ++wbad;
        }
        CHECK_MESSAGE(wbad == 0, isa);
    }
    attn_set_isa(nullptr);
}

TEST_CASE("int8 quantization: scale = max|x| / 127, q = nearest-even of x / scale") {
    std::mt19937 g(9);
    for (const std::string &isa : all_isas()) {
        REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
        for (int n = 0; n < 300; ++n) {
            const size_t rows = 1 + g() % 7, dim = 1 + g() % 150;
            std::vector<float> x(rows * dim);
            const float mag = std::ldexp(1.0f, static_cast<int>(g() % 60) - 30);
            for (auto &v : x) v = std::uniform_real_distribution<float>(-mag, mag)(g);
            if (n % 10 == 0) std::fill(x.begin(), x.begin() + dim, 0.0f); // a zero row
            std::vector<int8_t> q(x.size());
            std::vector<float> s(rows);
            REQUIRE(attn_quantize_i8(x.data(), rows, dim, q.data(), s.data()) == ATTN_OK);
            for (size_t r = 0; r < rows; ++r) {
                float amax = 0.0f;
                for (size_t d = 0; d < dim; ++d) amax = std::max(amax, std::fabs(x[r * dim + d]));
                REQUIRE(s[r] == amax / 127.0f);
                for (size_t d = 0; d < dim; ++d) {
                    const float want = s[r] == 0.0f
                                           ? 0.0f
                                           : std::nearbyint(std::min(
                                                 127.0f, std::max(-127.0f, x[r * dim + d] / s[r])));
                    REQUIRE_MESSAGE(q[r * dim + d] == static_cast<int>(want),
                                    isa << " row " << r << " col " << d);
                }
            }
        }
    }
    attn_set_isa(nullptr);
}

// 16-bit operands give exactly the fp32 call over their widened values. So does int8 K / V, except
// on the decode path (a few query rows per KV head), which applies a key's scale once to its
// score and to its probabilities instead of to each of its head_dim values: there the outputs
// may differ from the fp32 call in the last bits (the float64 check is the same for both).
TEST_CASE("1000+ random cases with f16 / bf16 / int8 Q, K, V match float64 over the widened "
          "values on every ISA, bit-identical to fp32 over them (16-bit; int8 off the decode "
          "path)") {
    std::mt19937 g(20261202);
    const auto list = all_isas();
    double worst = 0.0, worst_scaled = 0.0;
    size_t runs = 0, typed[4] = {}, large = 0, int8_runs = 0, int8_differ = 0;
    for (int n = 0; n < 1100; ++n) {
        VCase c = random_vcase(g, n % 10 == 0 ? 150 : 40, n % 4 == 0);
        c.store[0] = static_cast<int>(g() % 3);
        c.store[1] = static_cast<int>(1 + g() % 3);
        c.store[2] = static_cast<int>(g() % 4);
        for (int w = 1; w < 3; ++w)
            if (c.store[w] == 3 && g() % 3 == 0) { // scales token-major [b][s][h], or gaps
                const size_t H = c.p.heads_kv, S = c.p.seq_k;
                c.custom_scale[w] = true;
                const bool bsh = g() % 2 == 0;
                c.scale_strides[w][1] = bsh ? 1 : S + 2;
                c.scale_strides[w][2] = bsh ? H : 1;
                c.scale_strides[w][0] = bsh ? S * H + 3 : H * (S + 2);
            }
        for (int w = 0; w < 3; ++w) ++typed[c.store[w]];
        store_case(c, g);
        VCase plain = c; // the same widened values, bound as fp32
        for (int &s : plain.store) s = 0;
        const double logits = max_logit(c);
        const double tol = 1e-5 * std::max(1.0, logits / 50.0);
        large += logits > 50.0;
        for (const std::string &isa : list) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            const VRun r = run(c);
            const double err = check(c, r, "case " + std::to_string(n) + " on " + isa);
            if (logits <= 50.0) worst = std::max(worst, err);
            worst_scaled = std::max(worst_scaled, err / tol * 1e-5);
            ++runs;
            const VRun f = run(plain);
            const bool identical = std::memcmp(r.out.data(), f.out.data(), r.out.size() * 4) == 0 &&
                                   std::memcmp(r.lse.data(), f.lse.data(), r.lse.size() * 4) == 0 &&
                                   std::memcmp(r.w.data(), f.w.data(), r.w.size() * 4) == 0;
            const bool int8 = c.store[1] == 3 || c.store[2] == 3;
            int8_runs += int8;
            int8_differ += int8 && !identical;
            const bool same = identical || int8;
            if (err > tol || !same) {
                FAIL_CHECK("case " << n << " on " << isa << ": max rel error " << err
                                   << ", identical to fp32 " << same << " (store " << c.store[0]
                                   << c.store[1] << c.store[2] << ", sq " << c.p.seq_q << " sk "
                                   << c.p.seq_k << " d " << c.p.head_dim << " dv " << c.p.head_dim_v
                                   << " scale " << c.p.has_scale << ":" << c.p.scale << " softcap "
                                   << c.p.softcap << " causal " << c.p.causal << " bias "
                                   << !c.bias.empty() << " alibi " << c.p.alibi << ")");
                break;
            }
        }
    }
    attn_set_isa(nullptr);
    MESSAGE(runs << " runs (operands stored f32/f16/bf16/int8: " << typed[0] << "/" << typed[1]
                 << "/" << typed[2] << "/" << typed[3] << "), max rel error " << worst
                 << " (cases with logit condition <= 50); " << large
                 << " cases with a larger condition C: max error * 50 / C = " << worst_scaled
                 << "; int8 K/V runs " << int8_runs << ", " << int8_differ
                 << " not bit-identical to fp32 (decode path)");
    CHECK(worst <= 1e-5);
    CHECK(worst_scaled <= 1e-5);
}

TEST_CASE("16-bit and int8 storage: 1 and 2 threads give bit-identical results") {
    std::mt19937 g(77);
    for (int n = 0; n < 40; ++n) {
        VCase c = random_vcase(g, n % 3 == 0 ? 300 : 70, n % 2 == 0);
        c.store[0] = n % 3;
        c.store[1] = 1 + n % 3;
        c.store[2] = 3 - n % 3;
        store_case(c, g);
        for (const std::string &isa : all_isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            REQUIRE(attn_set_num_threads(1) == ATTN_OK);
            const VRun a = run(c);
            REQUIRE(attn_set_num_threads(2) == ATTN_OK);
            const VRun b = run(c);
            CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4) == 0);
            CHECK(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4) == 0);
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}

TEST_CASE("long decode (seq_k 9000, key split) with f16 and int8 K/V") {
    std::mt19937 g(13);
    for (int n = 0; n < 4; ++n) {
        VCase c = long_decode_case(g, n % 2);
        c.store[1] = n < 2 ? 1 : 3;
        c.store[2] = n < 2 ? 2 : 3;
        store_case(c, g);
        for (const std::string &isa : all_isas()) {
            REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
            REQUIRE(attn_set_num_threads(1) == ATTN_OK);
            const VRun a = run(c);
            REQUIRE(attn_set_num_threads(2) == ATTN_OK);
            const VRun b = run(c);
            CHECK(check(c, a, "decode " + isa) <= 1e-5);
            CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4) == 0);
        }
    }
    attn_set_num_threads(0);
    attn_set_isa(nullptr);
}

TEST_CASE("storage types: bad bindings and calls are refused with the argument named") {
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, 1, 2, 1, 3, 4, 8) == ATTN_OK);
    // the scale strides are checked like any operand's
    CHECK(fails(attn_desc_set_strides(d, ATTN_V_SCALE, 1, 1, SIZE_MAX / 2),
                ATTN_ERR_INVALID_ARGUMENT, "v_scale strides"));
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    std::vector<float> q(48, 0.5f), k(32, 0.25f), v(32, 1.0f), out(48), lse(6), ks(4, 0.01f);
    std::vector<uint16_t> k16(32, 0x3c00), q16(48, 0x3c00);
    std::vector<int8_t> k8(32, 3);
    CHECK(fails(attn_args_set_i8(a, ATTN_Q, k8.data(), k8.size()), ATTN_ERR_INVALID_ARGUMENT,
                "int8 storage is for K, V, NEW_K and NEW_V"));
    CHECK(fails(attn_args_set_f16(a, ATTN_BIAS, k16.data(), k16.size()), ATTN_ERR_INVALID_ARGUMENT,
                "16-bit storage is for Q, K, V, DOUT, NEW_K and NEW_V"));
    CHECK(fails(attn_args_set_bf16(a, ATTN_OUT, k16.data(), k16.size()), ATTN_ERR_INVALID_ARGUMENT,
                "out"));
    CHECK(fails(attn_args_set_f16(a, (attn_operand)99, k16.data(), 1), ATTN_ERR_INVALID_ARGUMENT,
                "which (99)"));
    REQUIRE(attn_args_set_f32(a, ATTN_Q, q.data(), q.size()) == ATTN_OK);
    REQUIRE(attn_args_set_f32(a, ATTN_V, v.data(), v.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, out.data(), out.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, lse.data(), lse.size()) == ATTN_OK);
    REQUIRE(attn_args_set_i8(a, ATTN_K, k8.data(), k8.size()) == ATTN_OK);
    CHECK(fails(attn_run(d, ATTN_OP_FORWARD, a), ATTN_ERR_NULL_POINTER,
                "k_scale is NULL but k is int8"));
    REQUIRE(attn_args_set_f32(a, ATTN_K_SCALE, ks.data(), 3) == ATTN_OK);
    CHECK(fails(attn_run(d, ATTN_OP_FORWARD, a), ATTN_ERR_INVALID_ARGUMENT,
                "k_scale has 3 elements, needs at least 4"));
    REQUIRE(attn_args_set_f32(a, ATTN_K_SCALE, ks.data(), ks.size()) == ATTN_OK);
    CHECK(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK);
    // int8 k: 3 * 0.01 each; all keys equal, so out = mean of v = 1
    CHECK(out[0] == 1.0f);
    REQUIRE(attn_args_set_i8(a, ATTN_K, k8.data(), 31) == ATTN_OK);
    CHECK(fails(attn_run(d, ATTN_OP_FORWARD, a), ATTN_ERR_INVALID_ARGUMENT,
                "k has 31 elements, needs at least 32"));
    REQUIRE(attn_args_set_f16(a, ATTN_K, k16.data(), k16.size()) == ATTN_OK);
    CHECK(fails(attn_run(d, ATTN_OP_FORWARD, a), ATTN_ERR_INVALID_ARGUMENT,
                "k_scale is bound but k is not int8"));
    REQUIRE(attn_args_set_f32(a, ATTN_K_SCALE, nullptr, 0) == ATTN_OK);
    CHECK(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK);
    std::vector<float> dout(48, 1.0f), dq(48);
    REQUIRE(attn_args_set_f32(a, ATTN_DOUT, dout.data(), dout.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_DQ, dq.data(), dq.size()) == ATTN_OK);
    CHECK(attn_run(d, ATTN_OP_BACKWARD, a) == ATTN_OK); // f16 k is widened
    REQUIRE(attn_args_set_i8(a, ATTN_K, k8.data(), k8.size()) == ATTN_OK);
    REQUIRE(attn_args_set_f32(a, ATTN_K_SCALE, ks.data(), ks.size()) == ATTN_OK);
    CHECK(fails(attn_run(d, ATTN_OP_BACKWARD, a), ATTN_ERR_UNSUPPORTED,
                "ATTN_OP_BACKWARD needs fp32, f16 or bf16 k (it is int8)"));
    REQUIRE(attn_args_set_f16(a, ATTN_K, k16.data(), k16.size()) == ATTN_OK);
    REQUIRE(attn_args_set_f32(a, ATTN_K_SCALE, nullptr, 0) == ATTN_OK);
    // an f16 q overlapping the output is caught with its 2-byte length
    REQUIRE(attn_args_set_f16(a, ATTN_Q, reinterpret_cast<const uint16_t *>(out.data()), 48) ==
            ATTN_OK);
    CHECK(fails(attn_run(d, ATTN_OP_FORWARD, a), ATTN_ERR_INVALID_ARGUMENT, "overlaps"));
    attn_args_destroy(a);
    attn_desc_destroy(d);

    std::vector<float> x = {1.0f, 2.0f, std::numeric_limits<float>::quiet_NaN(), 4.0f};
    std::vector<int8_t> qx(4);
    std::vector<float> sx(2);
    CHECK(fails(attn_quantize_i8(x.data(), 2, 2, qx.data(), sx.data()), ATTN_ERR_INVALID_ARGUMENT,
                "src row 1 holds a non-finite value"));
    CHECK(fails(attn_quantize_i8(x.data(), 2, 2, qx.data(), nullptr), ATTN_ERR_NULL_POINTER,
                "scales"));
    CHECK(fails(attn_quantize_i8(x.data(), SIZE_MAX, 2, qx.data(), sx.data()),
                ATTN_ERR_INVALID_ARGUMENT, "overflows"));
    // rows of dim 0 have max |x| = 0: scale 0 each (every face gives the same)
    std::vector<float> s3 = {7.0f, 7.0f, 7.0f};
    CHECK(attn_quantize_i8(nullptr, 3, 0, nullptr, s3.data()) == ATTN_OK);
    CHECK(s3 == std::vector<float>(3, 0.0f));
    std::vector<uint16_t> h(4);
    CHECK(fails(attn_convert_f32_to_f16(nullptr, h.data(), 4), ATTN_ERR_NULL_POINTER, "src"));
    CHECK(fails(attn_convert_f16_to_f32(h.data(), nullptr, 4), ATTN_ERR_NULL_POINTER, "dst"));
    CHECK(fails(attn_convert_f32_to_bf16(x.data(), reinterpret_cast<uint16_t *>(x.data()) + 1, 2),
                ATTN_ERR_INVALID_ARGUMENT, "overlap"));
    CHECK(attn_convert_f32_to_f16(nullptr, nullptr, 0) == ATTN_OK);
}

TEST_CASE("paged (token- and head-major) and varlen caches in f16 / bf16 / int8: bit-identical to "
          "fp32 over the widened values (int8: within 1e-6, the decode path scales once per "
          "key), on every ISA") {
    // 3 sequences: chunked prefill (3 new of 37), empty, decode (1 new of 70); pages of 16.
    const size_t B = 3, HQ = 4, HKV = 2, D = 64, PS = 16, NP = 12, MP = 5;
    const std::vector<int32_t> cu_q = {0, 3, 3, 4}, lens = {37, 0, 70};
    std::mt19937 g(21);
    std::vector<int32_t> table(B * MP, -1);
    std::vector<int32_t> ids(NP);
    for (size_t x = 0; x < NP; ++x) ids[x] = static_cast<int32_t>(x);
    std::shuffle(ids.begin(), ids.end(), g);
    size_t next = 0;
    for (size_t b = 0; b < B; ++b)
        for (size_t s = 0; s < (static_cast<size_t>(lens[b]) + PS - 1) / PS; ++s)
            table[b * MP + s] = ids[next++];
    const size_t pool = NP * PS * HKV * D;
    std::vector<float> q(4 * HQ * D), k(pool), v(pool);
    for (auto &x : q) x = std::uniform_real_distribution<float>(-1, 1)(g);
    for (auto &x : k) x = std::uniform_real_distribution<float>(-1, 1)(g);
    for (auto &x : v) x = std::uniform_real_distribution<float>(-2, 2)(g);
    for (int head_major = 0; head_major < 2; ++head_major)
        for (int store = 1; store <= 3; ++store) {
            attn_desc *d = nullptr;
            REQUIRE(attn_desc_create(&d, B, HQ, HKV, 3, MP * PS, D) == ATTN_OK);
            REQUIRE(attn_desc_set_int(d, ATTN_PARAM_CAUSAL, ATTN_CAUSAL_BOTTOM_RIGHT) == ATTN_OK);
            REQUIRE(attn_desc_set_int(d, ATTN_PARAM_VARLEN, 1) == ATTN_OK);
            REQUIRE(attn_desc_set_int(d, ATTN_PARAM_PAGE_SIZE, PS) == ATTN_OK);
            if (head_major) {
                for (attn_operand w : {ATTN_K, ATTN_V})
                    REQUIRE(attn_desc_set_strides(d, w, HKV * PS * D, PS * D, D) == ATTN_OK);
                for (attn_operand w : {ATTN_K_SCALE, ATTN_V_SCALE})
                    REQUIRE(attn_desc_set_strides(d, w, HKV * PS, PS, 1) == ATTN_OK);
            }
            REQUIRE(attn_desc_required_len(d, ATTN_K_SCALE) == PS * HKV);
            // the stored pools (rows of D in memory order, whatever the layout), and the
            // widened fp32 pools
            std::vector<uint16_t> k16(pool), v16(pool);
            std::vector<int8_t> k8(pool), v8(pool);
            std::vector<float> ks(NP * PS * HKV), vs(NP * PS * HKV), kw(pool), vw(pool);
            if (store == 3) {
                REQUIRE(attn_quantize_i8(k.data(), pool / D, D, k8.data(), ks.data()) == ATTN_OK);
                REQUIRE(attn_quantize_i8(v.data(), pool / D, D, v8.data(), vs.data()) == ATTN_OK);
                for (size_t x = 0; x < pool; ++x) {
                    kw[x] = static_cast<float>(k8[x]) * ks[x / D];
                    vw[x] = static_cast<float>(v8[x]) * vs[x / D];
                }
            } else {
                auto conv = store == 1 ? attn_convert_f32_to_f16 : attn_convert_f32_to_bf16;
                REQUIRE(conv(k.data(), k16.data(), pool) == ATTN_OK);
                REQUIRE(conv(v.data(), v16.data(), pool) == ATTN_OK);
                for (size_t x = 0; x < pool; ++x) {
                    kw[x] = widen16(store, k16[x]);
                    vw[x] = widen16(store, v16[x]);
                }
            }
            for (const std::string &isa : all_isas()) {
                REQUIRE(attn_set_isa(isa.c_str()) == ATTN_OK);
                std::vector<float> out[2], lse[2];
                for (int typed = 0; typed < 2; ++typed) {
                    attn_args *a = nullptr;
                    REQUIRE(attn_args_create(&a) == ATTN_OK);
                    out[typed].assign(q.size(), kSentinel);
                    lse[typed].assign(HQ * 4, kSentinel);
                    REQUIRE(attn_args_set_f32(a, ATTN_Q, q.data(), q.size()) == ATTN_OK);
                    if (!typed) {
                        REQUIRE(attn_args_set_f32(a, ATTN_K, kw.data(), pool) == ATTN_OK);
                        REQUIRE(attn_args_set_f32(a, ATTN_V, vw.data(), pool) == ATTN_OK);
                    } else if (store == 3) {
                        REQUIRE(attn_args_set_i8(a, ATTN_K, k8.data(), pool) == ATTN_OK);
                        REQUIRE(attn_args_set_i8(a, ATTN_V, v8.data(), pool) == ATTN_OK);
                        REQUIRE(attn_args_set_f32(a, ATTN_K_SCALE, ks.data(), ks.size()) ==
                                ATTN_OK);
                        REQUIRE(attn_args_set_f32(a, ATTN_V_SCALE, vs.data(), vs.size()) ==
                                ATTN_OK);
                    } else {
                        auto set = store == 1 ? attn_args_set_f16 : attn_args_set_bf16;
                        REQUIRE(set(a, ATTN_K, k16.data(), pool) == ATTN_OK);
                        REQUIRE(set(a, ATTN_V, v16.data(), pool) == ATTN_OK);
                    }
                    REQUIRE(attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, cu_q.data(), cu_q.size()) ==
                            ATTN_OK);
                    REQUIRE(attn_args_set_i32(a, ATTN_SEQ_LENS_K, lens.data(), lens.size()) ==
                            ATTN_OK);
                    REQUIRE(attn_args_set_i32(a, ATTN_BLOCK_TABLE, table.data(), table.size()) ==
                            ATTN_OK);
                    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, out[typed].data(),
                                                  out[typed].size()) == ATTN_OK);
                    REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, lse[typed].data(),
                                                  lse[typed].size()) == ATTN_OK);
                    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, attn_last_error());
                    attn_args_destroy(a);
                }
                if (store == 3) {
                    double worst = 0.0;
                    for (size_t x = 0; x < q.size(); ++x)
                        worst = std::max(worst, std::fabs(double(out[0][x]) - out[1][x]) /
                                                    std::max(1.0, std::fabs(double(out[0][x]))));
                    for (size_t x = 0; x < lse[0].size(); ++x)
                        worst = std::max(worst, std::fabs(double(lse[0][x]) - lse[1][x]) /
                                                    std::max(1.0, std::fabs(double(lse[0][x]))));
                    CHECK_MESSAGE(worst <= 1e-6, isa << " int8 head_major " << head_major
                                                     << ": max rel difference " << worst);
                } else {
                    CHECK_MESSAGE(std::memcmp(out[0].data(), out[1].data(), q.size() * 4) == 0,
                                  isa << " store " << store << " head_major " << head_major);
                    CHECK(std::memcmp(lse[0].data(), lse[1].data(), lse[0].size() * 4) == 0);
                }
                CHECK(out[1][0] != kSentinel);
            }
            attn_desc_destroy(d);
        }
    attn_set_isa(nullptr);
}
