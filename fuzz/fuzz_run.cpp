// libFuzzer target over the extensible call (attn_param / attn_args / attn_run, since 0.2).
//
// Each input decodes into: ISA, thread count, a fault mode (none, worker threads that cannot
// start, scratch allocations that fail: the library is built with ATTN_FAULT_INJECTION in the
// fuzz preset), dimensions, every attn_param (sometimes out of range), every optional operand
// (bias with broadcast strides and -inf entries, ALiBi slopes per head or per batch entry and
// head, sinks, a per-head q_scale, query_valid, seq_lens_k, key_valid, allowed, key_mass), K / V
// stored as fp8 (E4M3 or E5M2; a scale per tensor, per KV head or none) and
// a possible contract
// breach (a short buffer, a missing required operand, seq_lens_k out of range, slopes without
// ATTN_ALIBI_OPERAND, sinks with "+1", an output aliasing an input). The input stream continues
// as a splitmix sequence when it runs out, so short seeds drive whole cases.
//
// It abort()s when the contract breaks:
//   - a refused call must return the predicted status with a message; a valid one ATTN_OK, or
//     ATTN_ERR_OUT_OF_MEMORY only under the scratch fault (and then work once the fault is gone);
//     failed thread starts never fail a call;
//   - results match the float64 pipeline (tests/reference/reference.hpp) within 1e-4 relative (more
//     for logits in the thousands, see tolerance()), hidden
//     weights are exactly +0, unaddressed OUT elements untouched;
//   - another thread count gives bit-identical results.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "attn.h"
#include "fuzz_common.hpp"
#include "reference.hpp"

namespace {

using fuzz::g_what;
using fuzz::Source;
using fuzz::violation;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const float kSentinel = 777.0f;

struct Case {
    ref::VProblem p;
    std::vector<float> q, k, v, bias, slopes, sinks, q_scale;
    std::vector<uint8_t> key_valid, allowed, query_valid;
    std::vector<int32_t> lens;
    bool mass = false;
    int weights_mode = 0;
    // K / V storage: 0 fp32, 1 fp8 E4M3, 2 fp8 E5M2 (codes kc / vc; k / v then hold their
    // dequantized values), with scales: 0 none, 1 one per tensor, 2 one per KV head
    int fp8 = 0, scales = 0;
    std::vector<uint8_t> kc, vc;
    std::vector<float> ks, vs;
    bool int8 = false; // ATTN_COMPUTE_INT8 (the forward; weights and key mass stay exact)
};

enum Breach {
    kNone,
    kShort,      // one bound operand one element short
    kMissing,    // a required operand not bound
    kLensRange,  // seq_lens_k value out of [0, seq_k]
    kSlopesMode, // slopes bound without ATTN_ALIBI_OPERAND / missing with it
    kSinksPlus,  // sinks with ATTN_PARAM_SOFTMAX_PLUS_ONE
    kAlias,      // out aliases q
    kBreaches
};

struct Outputs {
    std::vector<float> out, lse, w, mass;
};

// One forward + weights run; returns the status of the first failing call.
attn_status run(const Case &c, attn_desc *d, Breach breach, size_t short_op, Outputs &o) {
    const ref::VProblem &p = c.p;
    attn_args *a = nullptr;
    fuzz::expect_status(attn_args_create(&a), ATTN_OK, "attn_args_create");
    auto f32 = [&](attn_operand w, const std::vector<float> &x) {
        if (x.empty()) return;
        const size_t len =
            breach == kShort && short_op == static_cast<size_t>(w) ? x.size() - 1 : x.size();
        fuzz::expect_status(attn_args_set_f32(a, w, x.data(), len), ATTN_OK, "attn_args_set_f32");
    };
    if (!(breach == kMissing && short_op == 0)) f32(ATTN_Q, c.q);
    if (c.fp8) {
        const attn_dtype fmt = c.fp8 == 1 ? ATTN_DTYPE_FP8_E4M3 : ATTN_DTYPE_FP8_E5M2;
        const size_t klen = breach == kShort && short_op == 1 ? c.kc.size() - 1 : c.kc.size();
        if (!(breach == kMissing && short_op == 1))
            fuzz::expect_status(attn_args_set_fp8(a, ATTN_K, fmt, c.kc.data(), klen), ATTN_OK,
                                "attn_args_set_fp8 k");
        const size_t vlen = breach == kShort && short_op == 2 ? c.vc.size() - 1 : c.vc.size();
        fuzz::expect_status(attn_args_set_fp8(a, ATTN_V, fmt, c.vc.data(), vlen), ATTN_OK,
                            "attn_args_set_fp8 v");
        f32(ATTN_K_SCALE, c.ks);
        f32(ATTN_V_SCALE, c.vs);
    } else {
        if (!(breach == kMissing && short_op == 1)) f32(ATTN_K, c.k);
        f32(ATTN_V, c.v);
    }
    f32(ATTN_BIAS, c.bias);
    f32(ATTN_ALIBI_SLOPES, c.slopes);
    f32(ATTN_SINKS, c.sinks);
    f32(ATTN_Q_SCALE, c.q_scale);
    auto u8 = [&](attn_operand w, const std::vector<uint8_t> &x) {
        if (!x.empty())
            fuzz::expect_status(attn_args_set_u8(a, w, x.data(), x.size()), ATTN_OK, "set_u8");
    };
    u8(ATTN_KEY_VALID, c.key_valid);
    u8(ATTN_ALLOWED, c.allowed);
    u8(ATTN_QUERY_VALID, c.query_valid);
    if (!c.lens.empty())
        fuzz::expect_status(attn_args_set_i32(a, ATTN_SEQ_LENS_K, c.lens.data(), c.lens.size()),
                            ATTN_OK, "set_i32");
    o.out.assign(p.len(3), kSentinel);
    o.lse.assign(attn_desc_required_len(d, ATTN_LSE), kSentinel);
    o.w.assign(attn_desc_required_len(d, ATTN_WEIGHTS), kSentinel);
    float *out = breach == kAlias ? const_cast<float *>(c.q.data()) : o.out.data();
    const size_t out_len = breach == kAlias ? c.q.size() : o.out.size();
    fuzz::expect_status(attn_args_set_out_f32(a, ATTN_OUT, out, out_len), ATTN_OK, "set_out_f32");
    fuzz::expect_status(attn_args_set_out_f32(a, ATTN_LSE, o.lse.data(), o.lse.size()), ATTN_OK,
                        "lse");
    if (c.mass) {
        o.mass.assign(attn_desc_required_len(d, ATTN_KEY_MASS), kSentinel);
        fuzz::expect_status(attn_args_set_out_f32(a, ATTN_KEY_MASS, o.mass.data(), o.mass.size()),
                            ATTN_OK, "mass");
    }
    attn_status st = attn_run(d, ATTN_OP_FORWARD, a);
    if (st == ATTN_OK) {
        fuzz::expect_status(attn_args_set_out_f32(a, ATTN_WEIGHTS, o.w.data(), o.w.size()), ATTN_OK,
                            "w");
        st = attn_run(d, ATTN_OP_WEIGHTS, a);
    }
    if (st == ATTN_OK && breach == kNone) {
        // the backward of the same call: every gradient buffer exactly as long as required
        // (ASan catches any write past one), status OK, gradients finite where the reference's
        // inputs are
        std::vector<float> dout(o.out.size()), dq(c.q.size()), dk(c.k.size()), dv(c.v.size());
        for (size_t x = 0; x < dout.size(); ++x)
            dout[x] = static_cast<float>((x * 7919) % 17) / 8 - 1;
        fuzz::expect_status(attn_args_set_f32(a, ATTN_DOUT, dout.data(), dout.size()), ATTN_OK,
                            "dout");
        fuzz::expect_status(attn_args_set_out_f32(a, ATTN_DQ, dq.data(), dq.size()), ATTN_OK, "dq");
        fuzz::expect_status(attn_args_set_out_f32(a, ATTN_DK, dk.data(), dk.size()), ATTN_OK, "dk");
        fuzz::expect_status(attn_args_set_out_f32(a, ATTN_DV, dv.data(), dv.size()), ATTN_OK, "dv");
        const attn_status bst = attn_run(d, ATTN_OP_BACKWARD, a);
        // under the scratch fault the backward (more scratch than the forward) may run out;
        // fp8 K / V are refused (the backward takes fp32 and 16-bit operands)
        if (!(bst == ATTN_ERR_OUT_OF_MEMORY && std::getenv("ATTN_FAULT_SCRATCH_LIMIT")))
            fuzz::expect_status(bst, c.fp8 ? ATTN_ERR_UNSUPPORTED : ATTN_OK, "attn_run backward");
    }
    attn_args_destroy(a);
    return st;
}

// fp32 rounds each score to about 6e-8 of its magnitude, and an error in a score is an error of
// the same size in its weight: logits in the thousands (ALiBi slope x a long key range) cannot
// be matched to 1e-4. The tolerance grows with the largest score magnitude the case can reach.
double tolerance(const Case &c) {
    const ref::VProblem &p = c.p;
    double qmax = 1.0; // |q|, |k| <= 1, q times its head's q_scale
    for (float x : c.q_scale) qmax = std::max(qmax, std::fabs(static_cast<double>(x)));
    double mag = std::fabs(p.eff_scale()) * p.head_dim * qmax;
    if (p.softcap > 0) mag = std::min(mag, static_cast<double>(p.softcap));
    for (float b : c.bias)
        if (std::isfinite(b))
            mag = std::max(mag, std::fabs(p.eff_scale()) * p.head_dim * qmax + std::fabs(b));
    double slope = 0;
    if (p.alibi == 1)
        for (float x : c.slopes) slope = std::max(slope, std::fabs(static_cast<double>(x)));
    if (p.alibi == 2) slope = 0.5;
    mag += slope * static_cast<double>(p.seq_k + p.seq_q);
    return 1e-4 + 16 * 6e-8 * mag;
}

// INT8's bound on the scores (capi/attn.h: scale (|q|_1 step_k + |k'|_1 step_q) / 2 with
// |k'| = |k - mean| <= 2 here), taken at its worst: every element's error in one direction.
double int8_score_bound(const Case &c) {
    const ref::VProblem &p = c.p;
    double qmax = 1.0;
    for (float x : c.q_scale) qmax = std::max(qmax, std::fabs(static_cast<double>(x)));
    const double sq = std::fabs(p.eff_scale()) * qmax;
    return p.head_dim * (sq * (2.0 / 1023) + 2.0 * (sq / 2047)) / 2;
}

void check(const Case &c, const Outputs &o) {
    const ref::VProblem &p = c.p;
    const double tol = tolerance(c);
    // INT8: an output moves by at most (e^(2 ds) - 1) max|v| through the scores, plus max|v| /
    // 1023 for V's codes and 2^-13 per probability; max|v| = 2 here
    const double ds = c.int8 ? int8_score_bound(c) : 0.0;
    const double tol_out = c.int8 ? std::max(tol, 2 * std::expm1(2 * ds) + 2.0 / 1023 + 1e-3) : tol;
    const double tol_lse = c.int8 ? std::max(tol, ds + 1e-3) : tol;
    ref::VInputs in;
    in.q = c.q.data(), in.k = c.k.data(), in.v = c.v.data();
    in.bias = c.bias.empty() ? nullptr : c.bias.data();
    in.slopes = c.slopes.empty() ? nullptr : c.slopes.data();
    in.sinks = c.sinks.empty() ? nullptr : c.sinks.data();
    in.q_scale = c.q_scale.empty() ? nullptr : c.q_scale.data();
    in.key_valid = c.key_valid.empty() ? nullptr : c.key_valid.data();
    in.allowed = c.allowed.empty() ? nullptr : c.allowed.data();
    in.query_valid = c.query_valid.empty() ? nullptr : c.query_valid.data();
    in.seq_lens_k = c.lens.empty() ? nullptr : c.lens.data();
    const ref::VResult e = ref::compute_v(p, in);
    std::vector<char> addressed(o.out.size(), 0);
    for (size_t b = 0; b < p.batch; ++b)
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i) {
                const size_t row = (b * p.heads_q + h) * p.seq_q + i;
                for (size_t d = 0; d < p.head_dim_v; ++d) {
                    const size_t at = p.at(3, b, h, i) + d;
                    addressed[at] = 1;
                    if (ref::rel_err(o.out[at], e.out[row * p.head_dim_v + d]) > tol_out)
                        violation("out[%zu,%zu,%zu,%zu] = %g, reference %g", b, h, i, d, o.out[at],
                                  e.out[row * p.head_dim_v + d]);
                }
                if (ref::rel_err(o.lse[row], e.lse[row]) > tol_lse)
                    violation("lse[%zu] = %g, reference %g", row, o.lse[row], e.lse[row]);
                for (size_t j = 0; j < p.seq_k; ++j) {
                    const float got = o.w[row * p.seq_k + j];
                    if (e.hidden[row * p.seq_k + j]) {
                        if (got != 0.0f || std::signbit(got))
                            violation("hidden weight [%zu][%zu] = %g", row, j, got);
                    } else if (ref::rel_err(got, e.w[row * p.seq_k + j]) > tol) {
                        violation("weight [%zu][%zu] = %g, reference %g", row, j, got,
                                  e.w[row * p.seq_k + j]);
                    }
                }
            }
    for (size_t x = 0; x < o.out.size(); ++x)
        if (!addressed[x] && o.out[x] != kSentinel)
            violation("out[%zu] outside the rows written", x);
    if (c.mass)
        for (size_t x = 0; x < e.mass.size(); ++x)
            if (ref::rel_err(o.mass[x], e.mass[x]) > tol)
                violation("key_mass[%zu] = %g, reference %g", x, o.mass[x], e.mass[x]);
}

void one_input(const uint8_t *data, size_t size) {
    Source in{data, size, 0x5eed};
    for (size_t x = 0; x < size; ++x) in.s = in.s * 131 + data[x];
    static const char *const isas[] = {"scalar", "sse2", "avx2", "avx512"};
    const char *isa = isas[in.u8() % 4];
    if (attn_set_isa(isa) != ATTN_OK) attn_set_isa(nullptr);
    const size_t threads = in.pick(1, 3);
    attn_set_num_threads(threads);
    const uint8_t fault = in.u8() % 8; // 0: thread starts fail, 1: scratch fails, else none
    if (fault == 0) setenv("ATTN_FAULT_THREAD_LIMIT", std::to_string(in.pick(0, 1)).c_str(), 1);
    if (fault == 1)
        setenv("ATTN_FAULT_SCRATCH_LIMIT", std::to_string(in.pick(0, 40000)).c_str(), 1);

    Case c;
    ref::VProblem &p = c.p;
    p.batch = in.pick(1, 3);
    p.heads_kv = in.pick(1, 2);
    p.heads_q = p.heads_kv * in.pick(1, 3);
    const bool decode = in.u8() % 4 == 0;
    p.seq_q = decode ? 1 : in.pick(1, 40);
    p.seq_k = decode && in.u8() % 2 ? 4096 + in.pick(0, 255) : in.pick(1, 70);
    p.head_dim = in.pick(1, decode ? 12 : 40);
    p.head_dim_v = in.u8() % 3 ? p.head_dim : in.pick(1, 40);
    p.causal = static_cast<int>(in.pick(0, 2));
    // Parameters; `bad` names a parameter set out of range (that call must be refused).
    const int bad = in.u8() % 12;
    const long long wl = in.u8() % 3 ? -1 : static_cast<long long>(in.pick(0, 30));
    const long long wr = in.u8() % 4 ? -1 : static_cast<long long>(in.pick(0, 10));
    p.window_left = wl, p.window_right = wr;
    p.softcap = in.u8() % 4 ? 0.0f : in.value(0.2f, 6.0f);
    p.bias_first = in.u8() % 2;
    p.alibi = in.u8() % 4 ? 0 : static_cast<int>(in.pick(1, 2));
    p.diagonal = in.u8() % 2 ? 0 : static_cast<int>(in.pick(1, 2));
    p.alibi_form = in.u8() % 2;
    if (p.alibi == 1 && in.u8() % 2) p.slopes_batch = p.heads_q + in.pick(0, 2);
    p.plus_one = in.u8() % 5 == 0;
    if (in.u8() % 4 == 0) {
        p.has_scale = true;
        p.scale = in.u8() % 5 ? in.value(-1.0f, 1.0f) : in.value(2.0f, 20.0f);
    }
    p.set_default_strides();
    if (in.u8() % 3 == 0) { // bias broadcast over batch and maybe heads
        p.custom_strides[4] = true;
        p.strides[4][0] = 0;
        p.strides[4][1] = in.u8() % 2 ? 0 : p.seq_q * p.seq_k;
        p.strides[4][2] = p.seq_k;
    }
    c.mass = in.u8() % 3 == 0;
    g_what = "b " + std::to_string(p.batch) + " hq " + std::to_string(p.heads_q) + " hkv " +
             std::to_string(p.heads_kv) + " sq " + std::to_string(p.seq_q) + " sk " +
             std::to_string(p.seq_k) + " d " + std::to_string(p.head_dim) + "/" +
             std::to_string(p.head_dim_v) + " causal " + std::to_string(p.causal) + " window " +
             std::to_string(wl) + "," + std::to_string(wr) + " softcap " +
             std::to_string(p.softcap) + " alibi " + std::to_string(p.alibi) + " diagonal " +
             std::to_string(p.diagonal) + " form " + std::to_string(p.alibi_form) +
             " slopes_batch " + std::to_string(p.slopes_batch) + " fault " + std::to_string(fault) +
             " bad " + std::to_string(bad);

    attn_desc *d = nullptr;
    fuzz::expect_status(
        attn_desc_create(&d, p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim), ATTN_OK,
        "attn_desc_create");
    auto seti = [&](attn_param k, int64_t v, bool ok) {
        fuzz::expect_status(attn_desc_set_int(d, k, v), ok ? ATTN_OK : ATTN_ERR_INVALID_ARGUMENT,
                            "attn_desc_set_int");
    };
    seti(ATTN_PARAM_CAUSAL, p.causal, true);
    if (bad == 0) seti(ATTN_PARAM_CAUSAL, 3, false);
    seti(ATTN_PARAM_WINDOW_LEFT, wl, true);
    if (bad == 1) seti(ATTN_PARAM_WINDOW_LEFT, -2, false);
    seti(ATTN_PARAM_WINDOW_RIGHT, wr, true);
    if (bad == 2) seti(ATTN_PARAM_WINDOW_RIGHT, int64_t(1) << 40, false);
    fuzz::expect_status(attn_desc_set_float(d, ATTN_PARAM_SOFTCAP, p.softcap), ATTN_OK, "softcap");
    if (bad == 3)
        fuzz::expect_status(attn_desc_set_float(d, ATTN_PARAM_SOFTCAP, -1.0),
                            ATTN_ERR_INVALID_ARGUMENT, "softcap -1");
    if (bad == 4)
        fuzz::expect_status(attn_desc_set_float(d, ATTN_PARAM_SOFTCAP, std::nan("")),
                            ATTN_ERR_INVALID_ARGUMENT, "softcap NaN");
    seti(ATTN_PARAM_BIAS_FIRST, p.bias_first, true);
    seti(ATTN_PARAM_ALIBI, p.alibi, true);
    if (bad == 5) seti(ATTN_PARAM_ALIBI, 3, false);
    seti(ATTN_PARAM_SOFTMAX_PLUS_ONE, p.plus_one, true);
    seti(ATTN_PARAM_HEAD_DIM_V, static_cast<int64_t>(p.head_dim_v), true);
    if (bad == 6) seti(ATTN_PARAM_HEAD_DIM_V, 0, false);
    if (bad == 7) seti(static_cast<attn_param>(17), 0, false); // in the enum's value range, no id
    seti(ATTN_PARAM_DIAGONAL, p.diagonal, true);
    if (bad == 9) seti(ATTN_PARAM_DIAGONAL, 3, false);
    seti(ATTN_PARAM_ALIBI_FORM, p.alibi_form, true);
    if (bad == 10) seti(ATTN_PARAM_ALIBI_FORM, 2, false);
    if (p.slopes_batch)
        fuzz::expect_status(attn_desc_set_strides(d, ATTN_ALIBI_SLOPES, p.slopes_batch, 1, 0),
                            ATTN_OK, "alibi_slopes strides");
    if (bad == 11)
        fuzz::expect_status(attn_desc_set_strides(d, ATTN_ALIBI_SLOPES, p.slopes_batch, 1, 1),
                            ATTN_ERR_INVALID_ARGUMENT, "alibi_slopes row_stride 1");
    if (bad == 8)
        fuzz::expect_status(attn_desc_set_float(d, ATTN_PARAM_HEAD_DIM_V, 2.5),
                            ATTN_ERR_INVALID_ARGUMENT, "head_dim_v 2.5");
    if (p.has_scale)
        fuzz::expect_status(attn_desc_set_float(d, ATTN_PARAM_SCALE, p.scale), ATTN_OK, "scale");
    if (p.custom_strides[4])
        fuzz::expect_status(
            attn_desc_set_strides(d, ATTN_BIAS, p.strides[4][0], p.strides[4][1], p.strides[4][2]),
            ATTN_OK, "bias strides");
    for (int w = 0; w < 5; ++w) {
        const attn_operand ops[5] = {ATTN_Q, ATTN_K, ATTN_V, ATTN_OUT, ATTN_BIAS};
        if (attn_desc_required_len(d, ops[w]) != p.len(w))
            violation("attn_desc_required_len(%d) = %zu, expected %zu", w,
                      attn_desc_required_len(d, ops[w]), p.len(w));
    }

    // Operands.
    if (in.u8() % 3 == 0) {
        c.key_valid.resize(p.batch * p.seq_k);
        for (auto &x : c.key_valid) x = in.u8() % 4 != 0;
    }
    if (in.u8() % 4 == 0) {
        c.allowed.resize(p.seq_q * p.seq_k);
        for (auto &x : c.allowed) x = in.u8() % 3 != 0;
    }
    if (in.u8() % 4 == 0) {
        c.query_valid.resize(p.batch * p.seq_q);
        for (auto &x : c.query_valid) x = in.u8() % 3 != 0;
    }
    if (in.u8() % 3 == 0) {
        c.lens.resize(p.batch);
        for (auto &x : c.lens) x = static_cast<int32_t>(in.pick(0, 255) % (p.seq_k + 1));
    }
    c.q.assign(p.len(0), kNaN);
    c.k.assign(p.len(1), kNaN);
    c.v.assign(p.len(2), kNaN);
    for (size_t b = 0; b < p.batch; ++b) {
        const size_t klen = c.lens.empty() ? p.seq_k : static_cast<size_t>(c.lens[b]);
        for (size_t h = 0; h < p.heads_q; ++h)
            for (size_t i = 0; i < p.seq_q; ++i)
                for (size_t x = 0; x < p.head_dim; ++x) c.q[p.at(0, b, h, i) + x] = in.value(-1, 1);
        for (size_t h = 0; h < p.heads_kv; ++h)
            for (size_t j = 0; j < p.seq_k; ++j) {
                const bool pad =
                    j >= klen || (!c.key_valid.empty() && !c.key_valid[b * p.seq_k + j]);
                for (size_t x = 0; x < p.head_dim; ++x)
                    c.k[p.at(1, b, h, j) + x] = pad ? kNaN : in.value(-1, 1);
                for (size_t x = 0; x < p.head_dim_v; ++x)
                    c.v[p.at(2, b, h, j) + x] = pad ? kNaN : in.value(-2, 2);
            }
    }
    if (in.u8() % 3 == 0) {
        c.bias.assign(p.len(4), 0.0f);
        for (auto &x : c.bias) x = in.u8() % 10 == 0 ? -kInf : in.value(-2, 2);
    }
    if (p.alibi == 1) { // [heads_q], or [batch][heads_q] with the batch stride slopes_batch
        c.slopes.resize((p.batch - 1) * p.slopes_batch + p.heads_q);
        for (auto &x : c.slopes) x = in.value(0, 0.5f);
    }
    if (!p.plus_one && in.u8() % 3 == 0) {
        c.sinks.resize(p.heads_q);
        for (auto &x : c.sinks) x = in.value(-3, 3);
    }
    if (in.u8() % 4 == 0) {
        c.q_scale.resize(p.heads_q);
        for (auto &x : c.q_scale) x = in.value(-2, 2);
    }

    // A breach of the contract (the call must be refused with the predicted status).
    const int breach_code = in.u8() % (2 * kBreaches); // half the inputs keep the contract
    Breach breach = breach_code < kBreaches ? static_cast<Breach>(breach_code) : kNone;
    size_t short_op = in.pick(0, 2);
    attn_status want = ATTN_OK;
    switch (breach) {
    case kShort:
        want = ATTN_ERR_INVALID_ARGUMENT;
        break;
    case kMissing:
        short_op = in.pick(0, 1);
        want = ATTN_ERR_NULL_POINTER;
        break;
    case kLensRange:
        c.lens.assign(p.batch, 0);
        c.lens[in.pick(0, p.batch - 1)] = static_cast<int32_t>(p.seq_k + in.pick(1, 3));
        want = ATTN_ERR_INVALID_ARGUMENT;
        break;
    case kSlopesMode:
        if (p.alibi == 1) {
            c.slopes.clear();
            want = ATTN_ERR_NULL_POINTER;
        } else {
            c.slopes.assign(p.heads_q, 0.25f);
            want = ATTN_ERR_INVALID_ARGUMENT;
        }
        break;
    case kSinksPlus:
        if (p.plus_one) {
            c.sinks.assign(p.heads_q, 0.5f);
            want = ATTN_ERR_INVALID_ARGUMENT;
        } else {
            breach = kNone;
        }
        break;
    case kAlias:
        want = ATTN_ERR_INVALID_ARGUMENT;
        break;
    default:
        break;
    }
    // The compute mode: INT8 for a quarter of the inputs (drawn last, so that the other draws of
    // an input stay what they were).
    c.int8 = in.u8() % 4 == 0;
    if (c.int8) seti(ATTN_PARAM_COMPUTE, ATTN_COMPUTE_INT8, true);
    g_what += c.int8 ? " int8" : "";
    // fp8 K / V (drawn after everything else, so the seeds keep the cases they had): every row that
    // can be read quantized with its scale and replaced by its dequantized values for the
    // reference; the other rows NaN codes, so that a read of one would show.
    c.fp8 = static_cast<int>(in.u8() % 4 % 3);
    if (c.fp8) {
        const attn_dtype fmt = c.fp8 == 1 ? ATTN_DTYPE_FP8_E4M3 : ATTN_DTYPE_FP8_E5M2;
        c.scales = static_cast<int>(in.pick(0, 2));
        if (c.scales) {
            for (auto *s : {&c.ks, &c.vs}) {
                s->resize(c.scales == 1 ? 1 : p.heads_kv);
                for (auto &x : *s) x = in.value(0.002f, 0.05f);
            }
            for (attn_operand w : {ATTN_K_SCALE, ATTN_V_SCALE})
                fuzz::expect_status(attn_desc_set_strides(d, w, 0, c.scales == 2 ? 1 : 0, 0),
                                    ATTN_OK, "scale strides");
        }
        for (int w = 1; w < 3; ++w) {
            std::vector<float> &x = w == 1 ? c.k : c.v;
            std::vector<uint8_t> &code = w == 1 ? c.kc : c.vc;
            const std::vector<float> &s = w == 1 ? c.ks : c.vs;
            const size_t dim = w == 1 ? p.head_dim : p.head_dim_v;
            code.assign(x.size(), 0x7f);
            for (size_t b = 0; b < p.batch; ++b)
                for (size_t h = 0; h < p.heads_kv; ++h)
                    for (size_t j = 0; j < p.seq_k; ++j) {
                        const size_t at = p.at(w, b, h, j);
                        if (std::isnan(x[at])) continue; // padding: never read
                        const float sc = s.empty() ? 1.0f : s[s.size() == 1 ? 0 : h];
                        fuzz::expect_status(attn_quantize_fp8(&x[at], 1, dim, fmt, sc, &code[at]),
                                            ATTN_OK, "attn_quantize_fp8");
                        fuzz::expect_status(attn_dequantize_fp8(&code[at], 1, dim, fmt, sc, &x[at]),
                                            ATTN_OK, "attn_dequantize_fp8");
                    }
        }
        g_what += " fp8 " + std::to_string(c.fp8) + " scales " + std::to_string(c.scales);
    }
    const bool lens_bad = breach == kLensRange;
    if (lens_bad) { // refused before any read: keep the reference out of it
        Outputs o;
        fuzz::expect_status(run(c, d, breach, short_op, o), want, "attn_run (bad seq_lens_k)");
        attn_desc_destroy(d);
        unsetenv("ATTN_FAULT_THREAD_LIMIT");
        unsetenv("ATTN_FAULT_SCRATCH_LIMIT");
        return;
    }
    Outputs o;
    attn_status st = run(c, d, breach, short_op, o);
    if (fault == 1 && want == ATTN_OK && st == ATTN_ERR_OUT_OF_MEMORY) {
        unsetenv("ATTN_FAULT_SCRATCH_LIMIT"); // the failure leaves the library usable
        st = run(c, d, breach, short_op, o);
    }
    fuzz::expect_status(st, want, "attn_run");
    unsetenv("ATTN_FAULT_THREAD_LIMIT");
    unsetenv("ATTN_FAULT_SCRATCH_LIMIT");
    if (want == ATTN_OK) {
        check(c, o);
        attn_set_num_threads(threads == 1 ? 2 : 1);
        Outputs o2;
        fuzz::expect_status(run(c, d, kNone, 0, o2), ATTN_OK, "attn_run (other thread count)");
        if (std::memcmp(o2.out.data(), o.out.data(), o.out.size() * 4) != 0)
            violation("out differs between thread counts");
        if (std::memcmp(o2.w.data(), o.w.data(), o.w.size() * 4) != 0)
            violation("weights differ between thread counts");
    }
    attn_desc_destroy(d);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    one_input(data, size);
    return 0;
}
