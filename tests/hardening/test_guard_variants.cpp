// Guard pages for the operands of the extensible call (attn_run, since 0.2): q, k, v, bias,
// alibi_slopes, sinks, key_valid, allowed, query_valid, seq_lens_k, out, lse, weights and
// key_mass (and, for the storage types, 16-bit q / k / v, int8 and fp8 k / v and their k_scale /
// v_scale) are each placed so that they END at a PROT_NONE page, then (second pass) so that they
// START right after one; inputs are read-only, outputs surrounded by canaries. Any access one
// element outside attn_desc_required_len faults and the handler names the buffer. Results are
// checked against the float64 pipeline (tests/reference/reference.hpp), on every ISA. The fp32
// cases also run ATTN_OP_BACKWARD with dout, dq, dk, dv (dbias, dsinks) placed the same way; a
// pass runs prefill shapes with ATTN_COMPUTE_FP16 at the CPU's own level (the fp16 fast path),
// and one prefill shapes with every variant, mask and storage type in ATTN_COMPUTE_INT8 on every
// ISA (its own copies of K and V are the library's; the operands are read as in EXACT).
#include <signal.h>

#include "hardening.hpp"
#include "reference.hpp"

using hard::GuardBuf;
using hard::Place;

namespace {

char *const g_case = hard::guard_case();

size_t g_cases = 0, g_calls = 0;

struct Shape {
    ref::VProblem p;
    bool bias = false, slopes = false, sinks = false, key_valid = false, allowed = false,
         query_valid = false, lens = false, mass = false, q_scale = false;
    // q, k, v: 0 f32, 1 f16, 2 bf16, 3 int8, 4 fp8 E4M3 with a scale per row, 5 fp8 E5M2 without
    // scales (3-5: k and v only)
    int store[3] = {0, 0, 0};
    bool fp16 = false; // ATTN_PARAM_COMPUTE = ATTN_COMPUTE_FP16
    bool int8 = false; // ATTN_PARAM_COMPUTE = ATTN_COMPUTE_INT8
};

// The widened value of a 16-bit element (the library's own conversion is checked against the
// formats' definitions in core_storage).
float widen16(int store, uint16_t b) {
    float f;
    if (store == 1)
        attn_convert_f16_to_f32(&b, &f, 1);
    else
        attn_convert_bf16_to_f32(&b, &f, 1);
    return f;
}

void run_case(const Shape &s, Place place, hard::Rng &rng) {
    const ref::VProblem &p = s.p;
    std::snprintf(g_case, hard::kGuardCaseLen,
                  "b %zu hq %zu hkv %zu sq %zu sk %zu d %zu dv %zu causal %d window %lld,%lld "
                  "softcap %g alibi %d sinks %d q_scale %d qv %d lens %d mass %d store %d%d%d fp16 "
                  "%d int8 %d "
                  "isa %s place %s",
                  p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim, p.head_dim_v,
                  p.causal, p.window_left, p.window_right, static_cast<double>(p.softcap), p.alibi,
                  s.sinks, s.q_scale, s.query_valid, s.lens, s.mass, s.store[0], s.store[1],
                  s.store[2], s.fp16, s.int8, attn_isa(),
                  place == Place::EndAtGuard ? "end" : "start");
    attn_desc *d = nullptr;
    HARD_CHECK(attn_desc_create(&d, p.batch, p.heads_q, p.heads_kv, p.seq_q, p.seq_k, p.head_dim) ==
                   ATTN_OK,
               "create");
    attn_desc_set_int(d, ATTN_PARAM_CAUSAL, p.causal);
    attn_desc_set_int(d, ATTN_PARAM_WINDOW_LEFT, p.window_left);
    attn_desc_set_int(d, ATTN_PARAM_WINDOW_RIGHT, p.window_right);
    attn_desc_set_float(d, ATTN_PARAM_SOFTCAP, p.softcap);
    attn_desc_set_int(d, ATTN_PARAM_ALIBI, p.alibi);
    attn_desc_set_int(d, ATTN_PARAM_HEAD_DIM_V, static_cast<int64_t>(p.head_dim_v));
    if (s.fp16) attn_desc_set_int(d, ATTN_PARAM_COMPUTE, ATTN_COMPUTE_FP16);
    if (s.int8) attn_desc_set_int(d, ATTN_PARAM_COMPUTE, ATTN_COMPUTE_INT8);
    if (p.custom_strides[4])
        attn_desc_set_strides(d, ATTN_BIAS, p.strides[4][0], p.strides[4][1], p.strides[4][2]);
    auto len = [&](attn_operand w) { return attn_desc_required_len(d, w); };
    const float nan = std::numeric_limits<float>::quiet_NaN();

    GuardBuf q(len(ATTN_Q) * 4, place, "q"), k(len(ATTN_K) * 4, place, "k"),
        v(len(ATTN_V) * 4, place, "v");
    GuardBuf bias, slopes, sinks, qsc, kv, al, qv, lens;
    std::vector<int32_t> lens_host(p.batch, static_cast<int32_t>(p.seq_k));
    if (s.lens) {
        lens.init(len(ATTN_SEQ_LENS_K) * 4, place, "seq_lens_k");
        for (size_t b = 0; b < p.batch; ++b) {
            lens_host[b] = static_cast<int32_t>(rng.range(0, p.seq_k));
            lens.as<int32_t>()[b] = lens_host[b];
        }
    }
    if (s.key_valid) {
        kv.init(len(ATTN_KEY_VALID), place, "key_valid");
        for (size_t x = 0; x < len(ATTN_KEY_VALID); ++x) kv.as<uint8_t>()[x] = rng.chance(0.75);
    }
    for (size_t x = 0; x < len(ATTN_Q); ++x) q.as<float>()[x] = rng.value(-1, 1);
    for (size_t x = 0; x < len(ATTN_K); ++x) k.as<float>()[x] = rng.value(-1, 1);
    for (size_t x = 0; x < len(ATTN_V); ++x) v.as<float>()[x] = rng.value(-1, 1);
    for (size_t b = 0; b < p.batch; ++b) // padded keys hold NaN: never read
        for (size_t h = 0; h < p.heads_kv; ++h)
            for (size_t j = 0; j < p.seq_k; ++j) {
                const bool pad = static_cast<int32_t>(j) >= lens_host[b] ||
                                 (s.key_valid && !kv.as<uint8_t>()[b * p.seq_k + j]);
                if (!pad) continue;
                for (size_t x = 0; x < p.head_dim; ++x) k.as<float>()[p.at(1, b, h, j) + x] = nan;
                for (size_t x = 0; x < p.head_dim_v; ++x) v.as<float>()[p.at(2, b, h, j) + x] = nan;
            }
    if (s.bias) {
        bias.init(len(ATTN_BIAS) * 4, place, "bias");
        for (size_t x = 0; x < len(ATTN_BIAS); ++x)
            bias.as<float>()[x] = rng.chance(0.1) ? -INFINITY : rng.value(-1, 1);
    }
    if (s.slopes) {
        slopes.init(len(ATTN_ALIBI_SLOPES) * 4, place, "alibi_slopes");
        for (size_t x = 0; x < p.heads_q; ++x) slopes.as<float>()[x] = rng.value(0, 0.5f);
    }
    if (s.sinks) {
        sinks.init(len(ATTN_SINKS) * 4, place, "sinks");
        for (size_t x = 0; x < p.heads_q; ++x) sinks.as<float>()[x] = rng.value(-2, 2);
    }
    if (s.q_scale) {
        qsc.init(len(ATTN_Q_SCALE) * 4, place, "q_scale");
        for (size_t x = 0; x < p.heads_q; ++x) qsc.as<float>()[x] = rng.value(-2, 2);
    }
    if (s.allowed) {
        al.init(len(ATTN_ALLOWED), place, "allowed");
        for (size_t x = 0; x < len(ATTN_ALLOWED); ++x) al.as<uint8_t>()[x] = rng.chance(0.8);
    }
    if (s.query_valid) {
        qv.init(len(ATTN_QUERY_VALID), place, "query_valid");
        for (size_t x = 0; x < len(ATTN_QUERY_VALID); ++x) qv.as<uint8_t>()[x] = rng.chance(0.7);
    }
    // Stored copies of q / k / v (padded int8 rows: garbage bytes and a NaN scale), and the
    // widened values the reference sees (in place of the fp32 inputs).
    GuardBuf *qkv[3] = {&q, &k, &v};
    const char *names16[3] = {"q16", "k16", "v16"}, *names8[3] = {"", "k8", "v8"};
    const char *scale_names[3] = {"", "k_scale", "v_scale"};
    GuardBuf stored[3], scale[3];
    std::vector<float> wide[3];
    for (int x = 0; x < 3; ++x) {
        const attn_operand op = x == 0 ? ATTN_Q : x == 1 ? ATTN_K : ATTN_V;
        const size_t n = len(op);
        const float *src = qkv[x]->as<float>();
        wide[x].assign(src, src + n);
        if (s.store[x] == 1 || s.store[x] == 2) {
            stored[x].init(n * 2, place, names16[x]);
            uint16_t *bits = stored[x].as<uint16_t>();
            HARD_CHECK((s.store[x] == 1 ? attn_convert_f32_to_f16(src, bits, n)
                                        : attn_convert_f32_to_bf16(src, bits, n)) == ATTN_OK,
                       "convert");
            for (size_t e = 0; e < n; ++e) wide[x][e] = widen16(s.store[x], bits[e]);
        } else if (s.store[x] == 3) {
            const size_t dim = x == 1 ? p.head_dim : p.head_dim_v;
            const attn_operand sop = x == 1 ? ATTN_K_SCALE : ATTN_V_SCALE;
            stored[x].init(n, place, names8[x]);
            scale[x].init(len(sop) * 4, place, scale_names[x]);
            int8_t *q8 = stored[x].as<int8_t>();
            float *sc = scale[x].as<float>();
            for (size_t e = 0; e < n; ++e) q8[e] = static_cast<int8_t>(rng.range(0, 255) - 128);
            for (size_t b = 0; b < p.batch; ++b)
                for (size_t h = 0; h < p.heads_kv; ++h)
                    for (size_t j = 0; j < p.seq_k; ++j) {
                        const size_t at = p.at(x, b, h, j), si = (b * p.heads_kv + h) * p.seq_k + j;
                        sc[si] = nan;
                        if (std::isnan(src[at])) continue; // padded: never read
                        HARD_CHECK(attn_quantize_i8(src + at, 1, dim, q8 + at, sc + si) == ATTN_OK,
                                   "quantize");
                        for (size_t e = 0; e < dim; ++e)
                            wide[x][at + e] = static_cast<float>(q8[at + e]) * sc[si];
                    }
        } else if (s.store[x] >= 4) {
            const size_t dim = x == 1 ? p.head_dim : p.head_dim_v;
            const attn_operand sop = x == 1 ? ATTN_K_SCALE : ATTN_V_SCALE;
            const attn_dtype fmt = s.store[x] == 4 ? ATTN_DTYPE_FP8_E4M3 : ATTN_DTYPE_FP8_E5M2;
            stored[x].init(n, place, x == 1 ? "k_fp8" : "v_fp8");
            if (s.store[x] == 4) scale[x].init(len(sop) * 4, place, scale_names[x]);
            uint8_t *c8 = stored[x].as<uint8_t>();
            float *sc = s.store[x] == 4 ? scale[x].as<float>() : nullptr;
            for (size_t e = 0; e < n; ++e) c8[e] = static_cast<uint8_t>(rng.range(0, 255));
            for (size_t b = 0; b < p.batch; ++b)
                for (size_t h = 0; h < p.heads_kv; ++h)
                    for (size_t j = 0; j < p.seq_k; ++j) {
                        const size_t at = p.at(x, b, h, j), si = (b * p.heads_kv + h) * p.seq_k + j;
                        if (sc) sc[si] = nan;
                        if (std::isnan(src[at])) continue; // padded: never read
                        float amax = 0.0f;
                        for (size_t e = 0; e < dim; ++e)
                            amax = std::max(amax, std::fabs(src[at + e]));
                        const float rs = sc && amax > 0.0f ? amax / 224.0f : 1.0f;
                        if (sc) sc[si] = rs;
                        HARD_CHECK(attn_quantize_fp8(src + at, 1, dim, fmt, rs, c8 + at) == ATTN_OK,
                                   "quantize fp8");
                        HARD_CHECK(attn_dequantize_fp8(c8 + at, 1, dim, fmt, rs, &wide[x][at]) ==
                                       ATTN_OK,
                                   "dequantize fp8");
                    }
        }
    }
    for (GuardBuf *g : {&q, &k, &v, &bias, &slopes, &sinks, &qsc, &kv, &al, &qv, &lens, &stored[0],
                        &stored[1], &stored[2], &scale[1], &scale[2]})
        if (g->bytes()) g->read_only();
    GuardBuf out(len(ATTN_OUT) * 4, place, "out"), lse(len(ATTN_LSE) * 4, place, "lse"),
        w(len(ATTN_WEIGHTS) * 4, place, "weights"), mass;
    if (s.mass) mass.init(len(ATTN_KEY_MASS) * 4, place, "key_mass");

    attn_args *a = nullptr;
    attn_args_create(&a);
    for (int x = 0; x < 3; ++x) {
        const attn_operand op = x == 0 ? ATTN_Q : x == 1 ? ATTN_K : ATTN_V;
        attn_status bst = ATTN_OK;
        if (s.store[x] == 0)
            bst = attn_args_set_f32(a, op, qkv[x]->as<float>(), len(op));
        else if (s.store[x] == 1)
            bst = attn_args_set_f16(a, op, stored[x].as<uint16_t>(), len(op));
        else if (s.store[x] == 2)
            bst = attn_args_set_bf16(a, op, stored[x].as<uint16_t>(), len(op));
        else if (s.store[x] == 3)
            bst = attn_args_set_i8(a, op, stored[x].as<int8_t>(), len(op));
        else
            bst = attn_args_set_fp8(a, op,
                                    s.store[x] == 4 ? ATTN_DTYPE_FP8_E4M3 : ATTN_DTYPE_FP8_E5M2,
                                    stored[x].as<uint8_t>(), len(op));
        HARD_CHECK(bst == ATTN_OK, "bind");
        if (s.store[x] == 3 || s.store[x] == 4) {
            const attn_operand sop = x == 1 ? ATTN_K_SCALE : ATTN_V_SCALE;
            attn_args_set_f32(a, sop, scale[x].as<float>(), len(sop));
        }
    }
    if (s.bias) attn_args_set_f32(a, ATTN_BIAS, bias.as<float>(), len(ATTN_BIAS));
    if (s.slopes) attn_args_set_f32(a, ATTN_ALIBI_SLOPES, slopes.as<float>(), p.heads_q);
    if (s.sinks) attn_args_set_f32(a, ATTN_SINKS, sinks.as<float>(), p.heads_q);
    if (s.q_scale) attn_args_set_f32(a, ATTN_Q_SCALE, qsc.as<float>(), p.heads_q);
    if (s.key_valid) attn_args_set_u8(a, ATTN_KEY_VALID, kv.as<uint8_t>(), len(ATTN_KEY_VALID));
    if (s.allowed) attn_args_set_u8(a, ATTN_ALLOWED, al.as<uint8_t>(), len(ATTN_ALLOWED));
    if (s.query_valid)
        attn_args_set_u8(a, ATTN_QUERY_VALID, qv.as<uint8_t>(), len(ATTN_QUERY_VALID));
    if (s.lens) attn_args_set_i32(a, ATTN_SEQ_LENS_K, lens.as<int32_t>(), p.batch);
    attn_args_set_out_f32(a, ATTN_OUT, out.as<float>(), len(ATTN_OUT));
    attn_args_set_out_f32(a, ATTN_LSE, lse.as<float>(), len(ATTN_LSE));
    if (s.mass) attn_args_set_out_f32(a, ATTN_KEY_MASS, mass.as<float>(), len(ATTN_KEY_MASS));
    attn_args_set_out_f32(a, ATTN_WEIGHTS, w.as<float>(), len(ATTN_WEIGHTS));
    attn_status st = attn_run(d, ATTN_OP_FORWARD, a);
    HARD_CHECK(st == ATTN_OK, "%s: forward %s (%s)", g_case, attn_status_string(st),
               attn_last_error());
    st = attn_run(d, ATTN_OP_WEIGHTS, a);
    HARD_CHECK(st == ATTN_OK, "%s: weights %s (%s)", g_case, attn_status_string(st),
               attn_last_error());
    g_calls += 2;
    // The backward of the fp32 cases, from this forward's out and lse: dout at a guard page,
    // every gradient (dbias and dsinks with their operands) surrounded by canaries.
    GuardBuf dout, dq, dk, dv, dbias, dsinks;
    const bool fp32 = s.store[0] == 0 && s.store[1] == 0 && s.store[2] == 0;
    if (fp32) {
        dout.init(len(ATTN_DOUT) * 4, place, "dout");
        for (size_t x = 0; x < len(ATTN_DOUT); ++x) dout.as<float>()[x] = rng.value(-1, 1);
        dout.read_only();
        dq.init(len(ATTN_DQ) * 4, place, "dq");
        dk.init(len(ATTN_DK) * 4, place, "dk");
        dv.init(len(ATTN_DV) * 4, place, "dv");
        attn_args_set_f32(a, ATTN_DOUT, dout.as<float>(), len(ATTN_DOUT));
        attn_args_set_out_f32(a, ATTN_DQ, dq.as<float>(), len(ATTN_DQ));
        attn_args_set_out_f32(a, ATTN_DK, dk.as<float>(), len(ATTN_DK));
        attn_args_set_out_f32(a, ATTN_DV, dv.as<float>(), len(ATTN_DV));
        if (s.bias) {
            dbias.init(len(ATTN_DBIAS) * 4, place, "dbias");
            attn_args_set_out_f32(a, ATTN_DBIAS, dbias.as<float>(), len(ATTN_DBIAS));
        }
        if (s.sinks) {
            dsinks.init(len(ATTN_DSINKS) * 4, place, "dsinks");
            attn_args_set_out_f32(a, ATTN_DSINKS, dsinks.as<float>(), len(ATTN_DSINKS));
        }
        st = attn_run(d, ATTN_OP_BACKWARD, a);
        HARD_CHECK(st == ATTN_OK, "%s: backward %s (%s)", g_case, attn_status_string(st),
                   attn_last_error());
        ++g_calls;
        for (const GuardBuf *g : {&dq, &dk, &dv, &dbias, &dsinks}) {
            if (!g->bytes()) continue;
            HARD_CHECK(g->canary_damage() < 0, "%s: canary damaged", g_case);
            for (size_t x = 0; x < g->bytes() / 4; ++x)
                HARD_CHECK(!std::isnan(g->as<float>()[x]), "%s: NaN gradient", g_case);
        }
    }
    attn_args_destroy(a);
    attn_desc_destroy(d);
    for (const GuardBuf *g : {&out, &lse, &w, &mass})
        if (g->bytes()) HARD_CHECK(g->canary_damage() < 0, "%s: canary damaged", g_case);

    ref::VInputs in;
    in.q = wide[0].data(), in.k = wide[1].data(), in.v = wide[2].data();
    in.bias = s.bias ? bias.as<float>() : nullptr;
    in.slopes = s.slopes ? slopes.as<float>() : nullptr;
    in.sinks = s.sinks ? sinks.as<float>() : nullptr;
    in.q_scale = s.q_scale ? qsc.as<float>() : nullptr;
    in.key_valid = s.key_valid ? kv.as<uint8_t>() : nullptr;
    in.allowed = s.allowed ? al.as<uint8_t>() : nullptr;
    in.query_valid = s.query_valid ? qv.as<uint8_t>() : nullptr;
    in.seq_lens_k = s.lens ? lens.as<int32_t>() : nullptr;
    const ref::VResult e = ref::compute_v(p, in);
    double worst = 0;
    // the fp16 fast path's outputs: within its 1e-2 max|v| (|v| <= 1 here), see capi/attn.h
    // INT8's: within 5e-2 (a relative L1 of about 0.007, tests/core/test_compute_int8.cpp; the
    // largest single error is a few times that)
    const double out_scale = s.fp16 ? 1e-5 / 1e-2 : s.int8 ? 1e-5 / 5e-2 : 1.0;
    for (size_t x = 0; x < e.out.size(); ++x)
        worst = std::max(worst, out_scale * ref::rel_err(out.as<float>()[x], e.out[x]));
    for (size_t x = 0; x < e.lse.size(); ++x)
        worst = std::max(worst, out_scale * ref::rel_err(lse.as<float>()[x], e.lse[x]));
    for (size_t x = 0; x < e.w.size(); ++x)
        worst = std::max(worst, ref::rel_err(w.as<float>()[x], e.w[x]));
    if (s.mass)
        for (size_t x = 0; x < e.mass.size(); ++x)
            worst = std::max(worst, ref::rel_err(mass.as<float>()[x], e.mass[x]));
    HARD_CHECK(worst <= 1e-5, "%s: max rel error %g", g_case, worst);
    ++g_cases;
}

void all_cases(const char *, void *) {
    hard::Rng rng(77);
    for (int n = 0; n < 120; ++n) {
        Shape s;
        ref::VProblem &p = s.p;
        p.batch = rng.range(1, 2);
        p.heads_kv = rng.range(1, 2);
        p.heads_q = p.heads_kv * rng.range(1, 3);
        p.seq_q = n % 5 == 0 ? 1 : rng.range(1, 67);
        p.seq_k = rng.range(1, 67);
        p.head_dim = rng.range(1, 67);
        p.head_dim_v = rng.chance(0.5) ? p.head_dim : rng.range(1, 67);
        p.causal = static_cast<int>(rng.range(0, 2));
        if (rng.chance(0.4)) p.window_left = static_cast<long long>(rng.range(0, 20));
        if (rng.chance(0.3)) p.window_right = static_cast<long long>(rng.range(0, 10));
        if (rng.chance(0.3)) p.softcap = rng.value(0.5f, 4.0f);
        p.alibi = rng.chance(0.3) ? static_cast<int>(rng.range(1, 2)) : 0;
        s.slopes = p.alibi == 1;
        s.bias = rng.chance(0.5);
        if (s.bias && rng.chance(0.5)) { // broadcast over batch and heads
            p.custom_strides[4] = true;
            p.strides[4][0] = p.strides[4][1] = 0;
            p.strides[4][2] = p.seq_k;
        }
        p.set_default_strides();
        s.sinks = rng.chance(0.4);
        s.q_scale = rng.chance(0.3);
        s.key_valid = rng.chance(0.4);
        s.allowed = rng.chance(0.3);
        s.query_valid = rng.chance(0.4);
        s.lens = rng.chance(0.4);
        s.mass = rng.chance(0.5);
        if (n % 2) { // every other case stores q / k / v in 16 bits, int8 or fp8
            s.store[0] = static_cast<int>(rng.range(0, 2));
            s.store[1] = static_cast<int>(rng.range(1, 5));
            s.store[2] = static_cast<int>(rng.range(0, 5));
        }
        for (Place place : {Place::EndAtGuard, Place::StartAfterGuard}) run_case(s, place, rng);
    }
}

// Prefill-shaped cases with ATTN_COMPUTE_FP16 at the CPU's own level (the fast path where it
// applies: avx512fp16; elsewhere these run exact), some with variants it does not take.
void fp16_cases(const char *, void *) {
    hard::Rng rng(91);
    for (int n = 0; n < 40; ++n) {
        Shape s;
        ref::VProblem &p = s.p;
        s.fp16 = true;
        p.batch = rng.range(1, 2);
        p.heads_kv = rng.range(1, 2);
        p.heads_q = p.heads_kv * rng.range(1, 3);
        p.seq_q = rng.range(16, 140);
        p.seq_k = rng.range(1, 140);
        p.head_dim = rng.range(1, 80);
        p.head_dim_v = rng.chance(0.5) ? p.head_dim : rng.range(1, 80);
        p.causal = static_cast<int>(rng.range(0, 2));
        if (rng.chance(0.3)) p.window_left = static_cast<long long>(rng.range(0, 30));
        if (rng.chance(0.3)) p.window_right = static_cast<long long>(rng.range(0, 30));
        if (n % 4 == 3) p.softcap = rng.value(0.5f, 4.0f); // runs exact
        p.set_default_strides();
        s.lens = rng.chance(0.4);
        s.store[0] = rng.chance(0.5) ? 1 : 0;
        s.store[1] = rng.chance(0.5) ? 1 : 0;
        s.store[2] = rng.chance(0.5) ? 1 : 0;
        for (Place place : {Place::EndAtGuard, Place::StartAfterGuard}) run_case(s, place, rng);
    }
}

// Prefill-shaped cases in ATTN_COMPUTE_INT8 with every variant, mask and storage type.
void int8_cases(const char *, void *) {
    hard::Rng rng(93);
    for (int n = 0; n < 24; ++n) {
        Shape s;
        ref::VProblem &p = s.p;
        s.int8 = true;
        p.batch = rng.range(1, 2);
        p.heads_kv = rng.range(1, 2);
        p.heads_q = p.heads_kv * rng.range(1, 3);
        p.seq_q = rng.range(8, 90);
        p.seq_k = rng.range(1, 140);
        p.head_dim = rng.range(1, 80);
        p.head_dim_v = rng.chance(0.5) ? p.head_dim : rng.range(1, 80);
        p.causal = static_cast<int>(rng.range(0, 2));
        if (rng.chance(0.3)) p.window_left = static_cast<long long>(rng.range(0, 30));
        if (rng.chance(0.3)) p.softcap = rng.value(0.5f, 4.0f);
        p.alibi = rng.chance(0.3) ? static_cast<int>(rng.range(1, 2)) : 0;
        s.slopes = p.alibi == 1;
        s.bias = rng.chance(0.4);
        p.set_default_strides();
        s.sinks = rng.chance(0.4);
        s.q_scale = rng.chance(0.3);
        s.key_valid = rng.chance(0.4);
        s.allowed = rng.chance(0.3);
        s.query_valid = rng.chance(0.3);
        s.lens = rng.chance(0.4);
        s.store[0] = static_cast<int>(rng.range(0, 2));
        s.store[1] = static_cast<int>(rng.range(0, 3));
        s.store[2] = static_cast<int>(rng.range(0, 3));
        for (Place place : {Place::EndAtGuard, Place::StartAfterGuard}) run_case(s, place, rng);
    }
}

} // namespace

int main() {
    hard::install_guard_handler();
    for (size_t threads : {1u, 2u}) {
        attn_set_num_threads(threads);
        hard::for_each_isa("guard_variants", all_cases, nullptr);
        hard::for_each_isa("guard_variants int8", int8_cases, nullptr);
        attn_set_isa(nullptr); // the CPU's best level, where FP16 requests take the fast path
        fp16_cases(attn_isa(), nullptr);
    }
    std::printf("guard_variants: %zu cases, %zu calls, %d failure(s)\n", g_cases, g_calls,
                hard::failures());
    return hard::failures() ? 1 : 0;
}
