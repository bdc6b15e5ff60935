// libFuzzer target over the libattn C API.
//
// Each input is decoded front to back (see decode(); fuzz/make_corpus.py writes seeds in the same
// layout) into: an API entry point, a kernel (ISA) and thread count, dimensions (sometimes
// invalid), causal mode (sometimes not an attn_causal value), scale (sometimes NaN/Inf), per
// operand strides (BSHD, padded rows, broadcast, random, overflowing, overlapping OUT), masks
// (NULL, all-true, all-false, random, one key), NULL / aliased pointers and values (moderate, or
// hostile: NaN, +-Inf, +-1e30, denormals, -0). When the input runs out, a splitmix stream seeded
// from the input continues it, so short seeds drive big shapes.
//
// It calls the API and abort()s on any violation of the contract:
//   - an invalid call (the fuzzer knows which are invalid from its own rules) must return the
//     right nonzero status with a non-empty attn_last_error(); a valid one returns ATTN_OK;
//   - hidden keys have weight exactly 0; rows with no visible key have out 0, weights 0 and
//     lse -inf, whatever the values; OUT elements the strides do not address stay untouched;
//   - inputs finite and scores unable to overflow: no NaN / Inf anywhere (never NaN from masks);
//   - inputs moderate: matches the float64 reference within a tolerance from the shape;
//   - K / V slots only padded keys address are never seen (result bit-identical with zeros);
//   - results are bit-identical for another thread count.
// Buffers are heap arrays of exactly attn_desc_required_len elements, so ASan sees any overrun.
#include <cfloat>
#include <algorithm>
#include <cinttypes>
#include <memory>

#include "fuzz_common.hpp"
#include "hardening.hpp"

namespace {

using fuzz::expect_status;
using fuzz::g_what;
using fuzz::Source;
using fuzz::violation;
using hard::Problem;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const float kSpecials[] = {kNaN,    kInf,  -kInf, 1e30f,   -1e30f,   1e-40f,
                           -1e-40f, -0.0f, 0.0f,  FLT_MAX, -FLT_MIN, 3.0f};

// ---- decoding --------------------------------------------------------------------------------
enum class Mask { None, AllTrue, AllFalse, Random, OneKey };
enum class Values { Moderate, ModerateStream, Hostile, HostileSparse };

struct Config {
    int op = 0; // 0..3 forward, 4..5 weights, 6 simple, 7 misc
    int isa = 0, threads = 1;
    bool check_threads = false, check_padding = false, want_lse = true, reconfigure = false;
    bool dims_valid = true;
    size_t dims[6] = {1, 1, 1, 1, 1, 1}; // batch, heads_q, heads_kv, seq_q, seq_k, head_dim
    int causal = 0;
    bool causal_valid = true;
    bool has_scale = false;
    float scale = 1.0f;
    int stride_mode[4] = {0, 0, 0, 0};
    size_t strides[4][3] = {};
    int bad_which = -1; // set_strides with an invalid operand
    Mask kv = Mask::None, al = Mask::None;
    int nulls = 99; // which pointer is NULL / aliased (see run_forward)
    Values values = Values::Moderate;
};

size_t pick(Source &in, size_t lo, size_t hi) { // [lo, hi]
    return lo + in.u8() % (hi - lo + 1);
}

Config decode(Source &in) {
    Config c;
    c.op = in.u8() % 8;
    c.isa = in.u8() % 5;
    const uint8_t t = in.u8();
    c.threads = 1 + t % 3;
    c.check_threads = (t & 0x80) != 0;
    c.check_padding = (t & 0x40) != 0;
    const uint8_t f = in.u8();
    size_t &B = c.dims[0], &HQ = c.dims[1], &HKV = c.dims[2], &SQ = c.dims[3], &SK = c.dims[4],
           &D = c.dims[5];
    B = pick(in, 1, 3);
    HKV = pick(in, 1, 3);
    HQ = HKV * pick(in, 1, 3);
    SQ = f & 0x10 ? pick(in, 1, 70) : pick(in, 1, 9);
    SK = f & 0x02 ? pick(in, 60, 200) : pick(in, 1, 9);
    D = f & 0x08 ? pick(in, 1, 70) : pick(in, 1, 17);
    if (f & 0x04) { // decode: key split + merge path
        SQ = 1;
        B = 1;
        HKV = 1;
        HQ = pick(in, 1, 4);
        SK = 4096 + in.u8() * 2;
        D = pick(in, 1, 9);
    }
    // Keep one iteration cheap: at most ~2M multiply-adds per pass.
    while (B * HQ * SQ * SK * D > (size_t(1) << 21) && SQ > 1) SQ = (SQ + 1) / 2;
    if (f & 0x01) { // invalid dimensions
        const uint8_t k = in.u8();
        switch (k % 4) {
        case 0:
            c.dims[k / 4 % 6] = 0;
            break;
        case 1:
            c.dims[k / 4 % 6] = size_t(0x80000000u) + in.u8();
            break;
        case 2: // heads_q not a multiple of heads_kv
            HKV = pick(in, 2, 3);
            HQ = HKV * pick(in, 1, 3) + 1;
            break;
        default:
            c.dims[k / 4 % 6] = SIZE_MAX / 2 + 1;
            break;
        }
        c.dims_valid = false;
    }
    const uint8_t cb = in.u8();
    static const int bad_causal[] = {-1, 3, 4, 255, 0x7fffffff, -0x7fffffff - 1};
    if (cb < 232) {
        c.causal = cb % 3;
    } else {
        c.causal = bad_causal[cb % 6];
        c.causal_valid = false;
    }
    const uint8_t sm = in.u8() % 8;
    if (sm == 4) {
        c.has_scale = true;
        c.scale = in.f32();
    } else if (sm == 5) {
        c.has_scale = true;
        c.scale = kSpecials[in.u8() % (sizeof kSpecials / sizeof kSpecials[0])];
    } else if (sm >= 6) {
        c.has_scale = true;
        c.scale = (static_cast<float>(in.u8()) - 128.0f) / 64.0f;
    }
    for (int w = 0; w < 4; ++w) {
        const uint8_t m = in.u8();
        c.stride_mode[w] = m % 8;
        if (m >= 0xF8) c.bad_which = 4 + m % 8 + (m & 1 ? 100 : 0);
        if (c.bad_which == ATTN_BIAS) c.bad_which = 14; // BIAS takes strides since 0.2
    }
    c.kv = static_cast<Mask>(in.u8() % 5);
    c.al = static_cast<Mask>(in.u8() % 5);
    c.nulls = in.u8() % 24;
    const uint8_t v = in.u8();
    c.values = static_cast<Values>(v % 4);
    c.want_lse = (v & 0x10) == 0;
    c.reconfigure = (v & 0x20) != 0;
    return c;
}

// Strides of operand w per its mode (dims must be valid). Returns false if left at default.
bool make_strides(Config &c, int w, Source &in) {
    const bool is_q = w == 0 || w == 3;
    const size_t H = is_q ? c.dims[1] : c.dims[2], S = is_q ? c.dims[3] : c.dims[4], D = c.dims[5];
    size_t *s = c.strides[w];
    switch (c.stride_mode[w]) {
    case 3: // BSHD
        s[0] = S * H * D, s[1] = D, s[2] = H * D;
        return true;
    case 4: { // padded rows and batches
        const size_t row = D + pick(in, 1, 9);
        s[0] = H * S * row + in.u8() % 5, s[1] = S * row, s[2] = row;
        return true;
    }
    case 5: // broadcast: every head (or every batch) reads the same rows
        if (in.u8() & 1)
            s[0] = S * D, s[1] = 0, s[2] = D;
        else
            s[0] = 0, s[1] = S * D, s[2] = D;
        return true;
    case 6: // anything small: may overlap (inputs fine, OUT must be refused then)
        for (int x = 0; x < 3; ++x) s[x] = in.u8() % (2 * D * S * H + 2);
        return true;
    case 7: // overflowing
        s[0] = SIZE_MAX / 3, s[1] = in.u8(), s[2] = SIZE_MAX / 2 + in.u8();
        return true;
    default:
        return false;
    }
}

// Our own rules for set_strides: the element span in bytes must fit size_t; OUT rows must be
// pairwise disjoint (brute force over the rows).
bool span_fits(size_t c0, size_t c1, size_t c2, const size_t *s, size_t d) {
    size_t a, b, x, y;
    if (__builtin_mul_overflow(c0 - 1, s[0], &a) || __builtin_mul_overflow(c1 - 1, s[1], &b) ||
        __builtin_mul_overflow(c2 - 1, s[2], &x))
        return false;
    if (__builtin_add_overflow(a, b, &y) || __builtin_add_overflow(y, x, &y) ||
        __builtin_add_overflow(y, d, &y) || __builtin_mul_overflow(y, size_t(4), &y))
        return false;
    return true;
}
bool rows_disjoint(size_t c0, size_t c1, size_t c2, const size_t *s, size_t d) {
    std::vector<size_t> starts;
    for (size_t i = 0; i < c0; ++i)
        for (size_t j = 0; j < c1; ++j)
            for (size_t k = 0; k < c2; ++k) starts.push_back(i * s[0] + j * s[1] + k * s[2]);
    std::sort(starts.begin(), starts.end());
    for (size_t x = 1; x < starts.size(); ++x)
        if (starts[x] - starts[x - 1] < d) return false;
    return true;
}

// The simple sufficient rule: sorted by stride, every dimension's stride clears the extent of the
// dimensions inside it ("nested" layouts: BHSD, BSHD, padded rows...).
bool rows_nested(size_t c0, size_t c1, size_t c2, const size_t *s, size_t d) {
    size_t cs[3] = {c0, c1, c2}, ss[3] = {s[0], s[1], s[2]};
    for (int a = 0; a < 3; ++a)
        for (int b = a + 1; b < 3; ++b)
            if (ss[b] < ss[a]) std::swap(ss[a], ss[b]), std::swap(cs[a], cs[b]);
    size_t extent = d;
    for (int a = 0; a < 3; ++a) {
        if (cs[a] == 1) continue;
        if (ss[a] < extent) return false;
        extent += (cs[a] - 1) * ss[a];
    }
    return true;
}

void fill_mask(std::vector<uint8_t> &m, Mask mode, size_t rows, size_t cols, Source &in) {
    m.assign(rows * cols, 0);
    switch (mode) {
    case Mask::AllTrue:
        for (auto &b : m) b = static_cast<uint8_t>(1 + in.u8() % 255); // any nonzero is true
        break;
    case Mask::Random:
        for (auto &b : m) b = in.u8() < 160 ? static_cast<uint8_t>(1 + in.u8() % 255) : 0;
        break;
    case Mask::OneKey:
        for (size_t r = 0; r < rows; ++r) m[r * cols + in.u8() % cols] = 1;
        break;
    default: // AllFalse
        break;
    }
}

float value(Values mode, Source &in) {
    switch (mode) {
    case Values::Moderate:
        return (static_cast<float>(in.u8()) - 128.0f) / 64.0f;
    case Values::Hostile: {
        const uint8_t b = in.u8();
        return b < 96 ? kSpecials[b % (sizeof kSpecials / sizeof kSpecials[0])]
                      : (static_cast<float>(b) - 176.0f) / 32.0f;
    }
    case Values::HostileSparse: {
        const uint8_t b = in.u8();
        return b < 8 ? kSpecials[b % (sizeof kSpecials / sizeof kSpecials[0])]
                     : (static_cast<float>(b) - 128.0f) / 64.0f;
    }
    default: // ModerateStream: use the fallback stream (long inputs stay short)
        return static_cast<float>(in.u32() % 4097) / 1024.0f - 2.0f;
    }
}

// Float accumulation error of a score is about (D + 8) ulp of sum |q.k| * |scale|; weights move
// by that much relatively, and out / lse follow; the sums over seq_k add their own ulps.
double tolerance(size_t d, size_t seq_k, double max_abs_dot) {
    const double eps = 1.0 / 16777216.0;
    return 2e-5 + 8.0 * (static_cast<double>(d) + 8.0) * eps * max_abs_dot +
           8.0 * static_cast<double>(seq_k) * eps;
}

std::unique_ptr<float[]> floats(size_t n) {
    return std::unique_ptr<float[]>(new float[n]);
}

// ---- the valid forward / weights path
// ------------------------------------------------------------
struct Run {
    std::unique_ptr<float[]> out, lse, w;
};

constexpr uint32_t kOutCanary = 0x7FA5A5A5u; // a NaN the library never produces

Run call(const Problem &p, const attn_desc *d, const float *q, const float *k, const float *v,
         const uint8_t *kv, const uint8_t *al, bool weights, bool want_lse) {
    Run r;
    const bool *kvp = reinterpret_cast<const bool *>(kv), *alp = reinterpret_cast<const bool *>(al);
    if (weights) {
        r.w = floats(p.weights_len());
        expect_status(attn_weights(d, q, k, kvp, alp, r.w.get()), ATTN_OK, "attn_weights");
    } else {
        const size_t lo = p.len(3);
        r.out = floats(lo);
        for (size_t x = 0; x < lo; ++x) std::memcpy(&r.out[x], &kOutCanary, 4);
        if (want_lse) r.lse = floats(p.lse_len());
        expect_status(attn_forward(d, q, k, v, kvp, alp, r.out.get(), r.lse.get()), ATTN_OK,
                      "attn_forward");
    }
    return r;
}

bool same_bits(const float *a, const float *b, size_t n) {
    return (!a && !b) || (a && b && std::memcmp(a, b, n * 4) == 0);
}

void check_valid_call(const Config &c, const Problem &p, attn_desc *d, Source &in) {
    const size_t lq = p.len(0), lk = p.len(1), lv = p.len(2), D = p.head_dim;
    std::unique_ptr<float[]> q = floats(lq), k = floats(lk), v = floats(lv);
    std::vector<uint8_t> kv, al;
    if (c.kv != Mask::None) fill_mask(kv, c.kv, p.batch, p.seq_k, in);
    if (c.al != Mask::None) fill_mask(al, c.al, p.seq_q, p.seq_k, in);
    const uint8_t *kvp = kv.empty() ? nullptr : kv.data();
    const uint8_t *alp = al.empty() ? nullptr : al.data();
    // Gaps and slots only padded keys address get a special value; addressed slots get values.
    const float filler = kSpecials[in.u8() % 5];
    for (size_t x = 0; x < lq; ++x) q[x] = filler;
    for (size_t x = 0; x < lk; ++x) k[x] = filler;
    for (size_t x = 0; x < lv; ++x) v[x] = filler;
    std::vector<char> live_k(lk, 0), live_v(lv, 0);
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i)
                for (size_t dd = 0; dd < D; ++dd) q[p.at(0, b, h, i) + dd] = value(c.values, in);
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_kv; ++h)
            for (size_t j = 0; j < p.seq_k; ++j) {
                if (kvp && !kvp[b * p.seq_k + j]) continue;
                for (size_t dd = 0; dd < D; ++dd) {
                    const size_t ik = p.at(1, b, h, j) + dd, iv = p.at(2, b, h, j) + dd;
                    if (!live_k[ik]) k[ik] = value(c.values, in), live_k[ik] = 1;
                    if (!live_v[iv]) v[iv] = value(c.values, in), live_v[iv] = 1;
                }
            }
    const bool weights = c.op >= 4;
    const Run r = call(p, d, q.get(), k.get(), v.get(), kvp, alp, weights, c.want_lse);

    // Classify the inputs: finite? moderate? can a float score overflow?
    bool finite = std::isfinite(p.eff_scale()), moderate = std::fabs(p.eff_scale()) <= 4.0f;
    auto scan = [&](const float *x, size_t n, const std::vector<char> *live) {
        for (size_t e = 0; e < n; ++e) {
            if (live && !(*live)[e]) continue;
            finite &= std::isfinite(x[e]);
            moderate &= std::fabs(x[e]) <= 4.0f;
        }
    };
    std::vector<char> live_q(lq, 0);
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i)
                for (size_t dd = 0; dd < D; ++dd) live_q[p.at(0, b, h, i) + dd] = 1;
    scan(q.get(), lq, &live_q);
    scan(k.get(), lk, &live_k);
    scan(v.get(), lv, &live_v);
    double max_abs_dot = 0.0, max_abs_v = 0.0, max_abs_qs = 0.0;
    if (finite) {
        const size_t group = p.heads_q / p.heads_kv;
        const double sc = std::fabs(static_cast<double>(p.eff_scale()));
        for (size_t b = 0; b < p.batch; ++b)
            for (size_t h = 0; h < p.heads_q; ++h)
                for (size_t i = 0; i < p.seq_q; ++i)
                    for (size_t j = 0; j < p.seq_k; ++j) {
                        if (kvp && !kvp[b * p.seq_k + j]) continue;
                        double a = 0.0;
                        for (size_t dd = 0; dd < D; ++dd) {
                            const double qs = std::fabs(double(q[p.at(0, b, h, i) + dd])) * sc;
                            a += qs * std::fabs(double(k[p.at(1, b, h / group, j) + dd]));
                            max_abs_qs = std::max(max_abs_qs, qs);
                        }
                        max_abs_dot = std::max(max_abs_dot, a);
                    }
        for (size_t e = 0; e < lv; ++e)
            if (live_v[e]) max_abs_v = std::max(max_abs_v, std::fabs(double(v[e])));
    }
    const bool no_overflow = finite && max_abs_dot <= 1e36 && max_abs_qs <= 1e36 &&
                             max_abs_v * static_cast<double>(p.seq_k) <= 1e36;

    const ref::VResult r64 = ref::compute(p, q.get(), k.get(), v.get(), kvp, alp);
    const ref::VProblem gp = p.general();
    const ref::VInputs masks = ref::inputs(q.get(), k.get(), v.get(), kvp, alp);
    const size_t rows = p.lse_len();
    for (size_t row = 0; row < rows; ++row) {
        const size_t i = row % p.seq_q, h = row / p.seq_q % p.heads_q,
                     b = row / p.seq_q / p.heads_q;
        // Whether the masks let the row see a key (r64.any is also 0 when every visible score is
        // -inf; these checks are about the masks).
        bool any = false;
        for (size_t j = 0; j < p.seq_k; ++j) any = any || ref::key_visible(gp, masks, b, i, j);
        for (size_t j = 0; j < p.seq_k && weights; ++j) {
            const float wj = r.w[row * p.seq_k + j];
            if (!ref::key_visible(gp, masks, b, i, j) && wj != 0.0f)
                violation("weights[%zu][%zu] = %g for a hidden key (must be exactly 0)", row, j,
                          double(wj));
            if (no_overflow && !(wj >= 0.0f && wj <= 1.0f))
                violation("weights[%zu][%zu] = %g with finite inputs", row, j, double(wj));
        }
        if (!weights) {
            const float *o = r.out.get() + p.at(3, b, h, i);
            for (size_t dd = 0; dd < D; ++dd) {
                if (!any && o[dd] != 0.0f)
                    violation("out[%zu][%zu] = %g for a row with no visible key", row, dd,
                              double(o[dd]));
                if (no_overflow && !std::isfinite(o[dd]))
                    violation("out[%zu][%zu] = %g with finite inputs (masks made a NaN?)", row, dd,
                              double(o[dd]));
            }
            if (r.lse) {
                const float l = r.lse[row];
                if (!any && l != -kInf)
                    violation("lse[%zu] = %g for a row with no visible key", row, double(l));
                if (no_overflow && any && !std::isfinite(l))
                    violation("lse[%zu] = %g with finite inputs", row, double(l));
            }
        }
    }
    if (!weights) { // OUT elements the strides do not address keep the canary
        std::vector<char> addressed(p.len(3), 0);
        for (size_t b = 0; b < p.batch; ++b)
            for (size_t h = 0; h < p.heads_q; ++h)
                for (size_t i = 0; i < p.seq_q; ++i)
                    for (size_t dd = 0; dd < D; ++dd) addressed[p.at(3, b, h, i) + dd] = 1;
        for (size_t e = 0; e < p.len(3); ++e)
            if (!addressed[e] && std::memcmp(&r.out[e], &kOutCanary, 4) != 0)
                violation("out[%zu] is not addressed by the OUT strides but was written", e);
    }
    if (moderate && no_overflow) {
        const double tol = tolerance(D, p.seq_k, max_abs_dot);
        const size_t bad = hard::compare(p, r64, r.out.get(), r.lse.get(), r.w.get(), tol,
                                         "fuzz vs float64 reference");
        if (bad) violation("%zu elements differ from the float64 reference (tol %g)", bad, tol);
    }
    if (c.check_threads) { // bit-identical with another thread count
        const size_t before = attn_get_num_threads();
        attn_set_num_threads(before == 1 ? 2 : 1);
        const Run r2 = call(p, d, q.get(), k.get(), v.get(), kvp, alp, weights, c.want_lse);
        attn_set_num_threads(before);
        const bool same = weights ? same_bits(r.w.get(), r2.w.get(), p.weights_len())
                                  : same_bits(r.out.get(), r2.out.get(), p.len(3)) &&
                                        same_bits(r.lse.get(), r2.lse.get(), p.lse_len());
        if (!same) violation("results differ between 1 and 2 threads");
    }
    if (c.check_padding && kvp) { // slots only padded keys address: never seen
        bool any = false;
        for (size_t e = 0; e < lk; ++e)
            if (!live_k[e]) {
                k[e] = 0.0f;
                any = true;
            }
        for (size_t e = 0; e < lv; ++e)
            if (!live_v[e]) v[e] = 0.0f;
        if (any) {
            const Run r2 = call(p, d, q.get(), k.get(), v.get(), kvp, alp, weights, c.want_lse);
            const bool same = weights ? same_bits(r.w.get(), r2.w.get(), p.weights_len())
                                      : same_bits(r.out.get(), r2.out.get(), p.len(3)) &&
                                            same_bits(r.lse.get(), r2.lse.get(), p.lse_len());
            if (!same) violation("padded K/V slots changed the result (they must never be read)");
        }
    }
}

// ---- invalid pointers / aliasing
// ------------------------------------------------------------------- nulls: 0 desc, 1 q, 2 k, 3 v
// (forward only), 4 the output (out / weights) NULL; the output overlaps 5 q, 7 the key_valid
// bytes, 8 k (weights) or v (forward); 6 lse overlaps out (forward only). Anything else: a valid
// call. Returns true if the call was invalid (and refused).
bool run_invalid_pointers(const Config &c, const Problem &p, attn_desc *d) {
    const bool weights = c.op >= 4;
    if (c.nulls > 8 || (weights && (c.nulls == 3 || c.nulls == 6))) return false;
    const size_t lq = p.len(0), lk = p.len(1), lv = p.len(2), lo = p.len(3), ll = p.lse_len(),
                 lw = p.weights_len();
    // One arena big enough for every buffer side by side, so an accepted aliasing bug cannot
    // corrupt the heap before the status check below catches it.
    const size_t total = lq + lk + lv + lo + ll + lw + p.batch * p.seq_k + 64;
    std::unique_ptr<float[]> arena = floats(total);
    for (size_t x = 0; x < total; ++x) arena[x] = 0.5f;
    float *q = arena.get(), *k = q + lq, *v = k + lk, *out = v + lv, *lse = out + lo, *w = lse + ll;
    float *&dst = weights ? w : out; // the output the aliasing cases move
    const bool *kvp = nullptr;
    switch (c.nulls) {
    case 0:
        d = nullptr;
        break;
    case 1:
        q = nullptr;
        break;
    case 2:
        k = nullptr;
        break;
    case 3:
        v = nullptr;
        break;
    case 4:
        dst = nullptr;
        break;
    case 5:
        dst = q + (lq > 1 ? lq / 2 : 0);
        break;
    case 6:
        lse = out + (lo > 1 ? lo - 1 : 0);
        break;
    case 7:
        kvp = reinterpret_cast<const bool *>(dst);
        std::memset(dst, 1, p.batch * p.seq_k); // inside the arena even past the output
        break;
    default:
        dst = weights ? k : v;
        break;
    }
    const attn_status want = c.nulls <= 4 ? ATTN_ERR_NULL_POINTER : ATTN_ERR_INVALID_ARGUMENT;
    if (weights)
        expect_status(attn_weights(d, q, k, kvp, nullptr, w), want, "attn_weights (bad pointers)");
    else
        expect_status(attn_forward(d, q, k, v, kvp, nullptr, out, lse), want,
                      "attn_forward (bad pointers)");
    return true;
}

// ---- attn_simple
// ---------------------------------------------------------------------------------
void run_simple(const Config &c, Source &in) {
    const size_t n = c.dims_valid ? std::min<size_t>(c.dims[4], 200) : (in.u8() & 1 ? 0 : 3);
    const size_t dd = c.dims_valid ? c.dims[5] : (n ? 0 : 2);
    const bool causal = c.causal & 1;
    if (n == 0 || dd == 0) {
        float x[8] = {};
        expect_status(attn_simple(x, x, x, n, dd, causal, nullptr, x + 4),
                      ATTN_ERR_INVALID_ARGUMENT, "attn_simple (n or d 0)");
        return;
    }
    Problem p;
    p.seq_q = p.seq_k = n;
    p.head_dim = dd;
    p.causal = causal ? ATTN_CAUSAL_TOP_LEFT : ATTN_CAUSAL_NONE;
    p.set_default_strides();
    std::unique_ptr<float[]> q = floats(n * dd), k = floats(n * dd), v = floats(n * dd),
                             out = floats(n * dd);
    for (size_t x = 0; x < n * dd; ++x) q[x] = value(Values::Moderate, in);
    for (size_t x = 0; x < n * dd; ++x) k[x] = value(Values::Moderate, in);
    for (size_t x = 0; x < n * dd; ++x) v[x] = value(Values::Moderate, in);
    std::vector<uint8_t> pad;
    if (c.kv != Mask::None) fill_mask(pad, c.kv, 1, n, in);
    const bool *padp = pad.empty() ? nullptr : reinterpret_cast<const bool *>(pad.data());
    if (c.nulls < 5) {
        const float *ptrs[4] = {q.get(), k.get(), v.get(), out.get()};
        ptrs[c.nulls % 4] = nullptr;
        expect_status(attn_simple(ptrs[0], ptrs[1], ptrs[2], n, dd, causal, padp,
                                  const_cast<float *>(ptrs[3])),
                      ATTN_ERR_NULL_POINTER, "attn_simple (NULL)");
        return;
    }
    if (c.nulls == 5) {
        expect_status(attn_simple(q.get(), k.get(), v.get(), n, dd, causal, padp, q.get()),
                      ATTN_ERR_INVALID_ARGUMENT, "attn_simple (out == q)");
        return;
    }
    expect_status(attn_simple(q.get(), k.get(), v.get(), n, dd, causal, padp, out.get()), ATTN_OK,
                  "attn_simple");
    const ref::VResult r64 =
        ref::compute(p, q.get(), k.get(), v.get(), pad.empty() ? nullptr : pad.data(), nullptr);
    // moderate values are within +-2, scale 1/sqrt(d): sum |q.k| * scale <= 4 sqrt(d)
    const double tol = tolerance(dd, n, 4.0 * std::sqrt(static_cast<double>(dd)));
    if (hard::compare(p, r64, out.get(), nullptr, nullptr, tol, "attn_simple vs reference"))
        violation("attn_simple differs from the float64 reference");
}

// ---- odds and ends of the API
// ----------------------------------------------------------------------
void run_misc(Source &in) {
    char name[9];
    for (char &ch : name) ch = static_cast<char>(in.u8() % 96 + 32);
    name[8] = '\0';
    static const char *const known[] = {"scalar", "sse2", "avx2", "avx512", "avx512fp16"};
    bool is_known = false;
    for (const char *k : known) is_known |= std::strcmp(k, name) == 0;
    if (!is_known)
        expect_status(attn_set_isa(name), ATTN_ERR_INVALID_ARGUMENT, "attn_set_isa(garbage)");
    attn_set_isa(nullptr);
    const size_t n = size_t(257) + in.u32();
    expect_status(attn_set_num_threads(n), ATTN_ERR_INVALID_ARGUMENT, "attn_set_num_threads(>256)");
    const int st = static_cast<int>(in.u32());
    if (!attn_status_string(static_cast<attn_status>(st)))
        violation("attn_status_string(%d) NULL", st);
    attn_desc *d = nullptr;
    expect_status(attn_desc_create(&d, 1, 1, 1, 1, 1, 1), ATTN_OK, "attn_desc_create");
    int operands = 0; // the first value past the library's operand table
    while (attn_operand_info(static_cast<attn_operand>(operands), nullptr, nullptr, nullptr,
                             nullptr, nullptr) == ATTN_OK)
        ++operands;
    const int which = operands + in.u8();
    if (attn_desc_required_len(d, static_cast<attn_operand>(which)) != 0 || !attn_last_error()[0])
        violation("attn_desc_required_len(which %d) must be 0 with a message", which);
    if (attn_desc_required_len(nullptr, ATTN_Q) != 0) violation("required_len(NULL) != 0");
    expect_status(attn_desc_set_causal(nullptr, ATTN_CAUSAL_NONE), ATTN_ERR_NULL_POINTER,
                  "set_causal(NULL)");
    expect_status(attn_desc_set_scale(nullptr, 1.0f), ATTN_ERR_NULL_POINTER, "set_scale(NULL)");
    expect_status(attn_desc_set_strides(nullptr, ATTN_Q, 1, 1, 1), ATTN_ERR_NULL_POINTER,
                  "set_strides(NULL)");
    expect_status(attn_desc_create(nullptr, 1, 1, 1, 1, 1, 1), ATTN_ERR_NULL_POINTER,
                  "create(NULL)");
    attn_desc_destroy(d);
    attn_desc_destroy(nullptr);
}

void one_input(const uint8_t *data, size_t size) {
    uint64_t seed = 0xA77Eu + size;
    for (size_t x = 0; x < size; ++x) seed = seed * 131 + data[x];
    Source in{data, size, seed};
    Config c = decode(in);
    {
        char buf[512];
        std::snprintf(
            buf, sizeof buf,
            "op %d isa %d threads %d dims (%zu,%zu,%zu,%zu,%zu,%zu)%s causal %d scale %s%g "
            "stride modes %d %d %d %d bad_which %d kv %d allowed %d nulls %d values %d "
            "lse %d check_threads %d check_padding %d",
            c.op, c.isa, c.threads, c.dims[0], c.dims[1], c.dims[2], c.dims[3], c.dims[4],
            c.dims[5], c.dims_valid ? "" : " (invalid)", c.causal, c.has_scale ? "" : "default ",
            double(c.scale), c.stride_mode[0], c.stride_mode[1], c.stride_mode[2], c.stride_mode[3],
            c.bad_which, static_cast<int>(c.kv), static_cast<int>(c.al), c.nulls,
            static_cast<int>(c.values), c.want_lse, c.check_threads, c.check_padding);
        g_what = buf;
    }
    static const char *const isas[] = {nullptr, "scalar", "sse2", "avx2", "avx512"};
    if (attn_set_isa(isas[c.isa]) != ATTN_OK) attn_set_isa(nullptr); // unsupported here
    attn_set_num_threads(static_cast<size_t>(c.threads));

    if (c.op == 7) return run_misc(in);
    if (c.op == 6) return run_simple(c, in);

    attn_desc *d = reinterpret_cast<attn_desc *>(&c); // must become NULL on failure
    const size_t *m = c.dims;
    const attn_status cs = attn_desc_create(&d, m[0], m[1], m[2], m[3], m[4], m[5]);
    if (!c.dims_valid) {
        expect_status(cs, ATTN_ERR_INVALID_ARGUMENT, "attn_desc_create (invalid dims)");
        if (d != nullptr) violation("attn_desc_create failed but did not set *desc to NULL");
        return;
    }
    expect_status(cs, ATTN_OK, "attn_desc_create");
    std::unique_ptr<attn_desc, void (*)(attn_desc *)> owner(d, attn_desc_destroy);

    Problem p;
    p.batch = m[0], p.heads_q = m[1], p.heads_kv = m[2], p.seq_q = m[3], p.seq_k = m[4],
    p.head_dim = m[5];
    const attn_status ca = attn_desc_set_causal(d, static_cast<attn_causal>(c.causal));
    if (!c.causal_valid) {
        expect_status(ca, ATTN_ERR_INVALID_ARGUMENT, "attn_desc_set_causal (invalid)");
        c.causal = 0; // the descriptor keeps its previous (default) rule
    } else {
        expect_status(ca, ATTN_OK, "attn_desc_set_causal");
    }
    p.causal = c.causal;
    if (c.has_scale) {
        const attn_status ss = attn_desc_set_scale(d, c.scale);
        if (!std::isfinite(c.scale)) {
            expect_status(ss, ATTN_ERR_INVALID_ARGUMENT, "attn_desc_set_scale (non-finite)");
        } else {
            expect_status(ss, ATTN_OK, "attn_desc_set_scale");
            p.has_scale = true;
            p.scale = c.scale;
        }
    }
    if (c.bad_which >= 0)
        expect_status(attn_desc_set_strides(d, static_cast<attn_operand>(c.bad_which), 1, 1, 1),
                      ATTN_ERR_INVALID_ARGUMENT, "attn_desc_set_strides (invalid operand)");
    bool too_big = false;
    for (int w = 0; w < 4; ++w) {
        if (!make_strides(c, w, in)) continue;
        const size_t H = p.heads(w), S = p.seq(w);
        const size_t *s = c.strides[w];
        const bool fits = span_fits(p.batch, H, S, s, p.head_dim);
        const bool ok = fits && (w != 3 || rows_disjoint(p.batch, H, S, s, p.head_dim));
        const attn_status st =
            attn_desc_set_strides(d, static_cast<attn_operand>(w), s[0], s[1], s[2]);
        // Rows that are disjoint but interleaved (not nested) may be refused as overlapping:
        // the library checks the nested rule, which is sufficient, not necessary.
        const bool may_refuse = ok && w == 3 && !rows_nested(p.batch, H, S, s, p.head_dim);
        if (may_refuse && st == ATTN_ERR_INVALID_ARGUMENT && attn_last_error()[0]) continue;
        expect_status(st, ok ? ATTN_OK : ATTN_ERR_INVALID_ARGUMENT, "attn_desc_set_strides");
        if (ok) p.set_strides(w, s[0], s[1], s[2]);
    }
    p.set_default_strides();
    for (int w = 0; w < 4; ++w) {
        const size_t len = attn_desc_required_len(d, static_cast<attn_operand>(w));
        if (len != p.len(w))
            violation("attn_desc_required_len(%d) = %zu, expected %zu", w, len, p.len(w));
        too_big |= len > (size_t(1) << 22);
    }
    if (attn_desc_required_len(d, ATTN_LSE) != p.lse_len() ||
        attn_desc_required_len(d, ATTN_WEIGHTS) != p.weights_len() ||
        attn_desc_required_len(d, ATTN_KEY_VALID) != p.batch * p.seq_k ||
        attn_desc_required_len(d, ATTN_ALLOWED) != p.seq_q * p.seq_k)
        violation("attn_desc_required_len of lse/weights/key_valid/allowed is wrong");
    if (too_big) return; // valid but larger than a fuzz iteration should touch

    const bool refused = run_invalid_pointers(c, p, d);
    if (!refused) check_valid_call(c, p, d, in);
    if (c.reconfigure) // used descriptors are immutable; a refused call does not count as use
        expect_status(attn_desc_set_causal(d, ATTN_CAUSAL_NONE),
                      refused ? ATTN_OK : ATTN_ERR_INVALID_ARGUMENT,
                      refused ? "attn_desc_set_causal after a refused call"
                              : "attn_desc_set_causal after use");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one_input(data, size);
    return 0;
}
