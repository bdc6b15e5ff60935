// The serving test pack (serving_pack.hpp): layout, binding, and the float64 check per sequence.
#include "serving_pack.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "reference.hpp"

namespace serving_test {

std::vector<std::string> isas() {
    std::vector<std::string> out;
    for (const char *name : {"scalar", "sse2", "avx2", "avx512"})
        if (attn_set_isa(name) == ATTN_OK) out.push_back(name);
    attn_set_isa(nullptr);
    return out;
}

size_t pick(std::mt19937 &g, size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(g);
}
float uni(std::mt19937 &g, float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(g);
}

void build(Pack &c, std::mt19937 &g) {
    const size_t B = c.batch;
    c.cu_q.assign(B + 1, 0);
    c.cu_k.assign(B + 1, 0);
    for (size_t b = 0; b < B; ++b) {
        c.cu_q[b + 1] = c.cu_q[b] + static_cast<int32_t>(c.lq[b]);
        c.cu_k[b + 1] = c.cu_k[b] + static_cast<int32_t>(c.lk[b]);
    }
    c.total_q = static_cast<size_t>(c.cu_q[B]);
    c.total_k = static_cast<size_t>(c.cu_k[B]);
    c.q.assign(c.varlen() ? std::max<size_t>(1, c.total_q) * c.hq * c.d : B * c.hq * c.max_q * c.d,
               kNaN);
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < c.hq; ++h)
            for (size_t i = 0; i < c.lq[b]; ++i)
                std::memcpy(&c.q[c.q_at(b, h, i)], &c.qs[b][(h * c.lq[b] + i) * c.d],
                            c.d * sizeof(float));
    if (c.paged()) {
        c.max_pages = c.max_pages_param ? c.max_pages_param : (c.max_k + c.page - 1) / c.page;
        size_t used = 0;
        for (size_t b = 0; b < B; ++b) used += (c.lk[b] + c.page - 1) / c.page;
        c.num_pages = used + pick(g, 0, 3);
        std::vector<int32_t> ids(std::max<size_t>(c.num_pages, 1));
        std::iota(ids.begin(), ids.end(), 0);
        std::shuffle(ids.begin(), ids.end(), g);
        c.table.assign(B * c.max_pages, -1);
        size_t next = 0;
        for (size_t b = 0; b < B; ++b)
            for (size_t s = 0; s < (c.lk[b] + c.page - 1) / c.page; ++s)
                c.table[b * c.max_pages + s] = ids[next++];
        c.num_pages = std::max<size_t>(c.num_pages, 1);
        c.k.assign(c.num_pages * c.page * c.hkv * c.d, kNaN);
        c.v.assign(c.num_pages * c.page * c.hkv * c.dv, kNaN);
        c.seq_lens.assign(B, 0);
        for (size_t b = 0; b < B; ++b) c.seq_lens[b] = static_cast<int32_t>(c.lk[b]);
    } else {
        c.k.assign(std::max<size_t>(1, c.total_k) * c.kv_row(c.d), kNaN);
        c.v.assign(std::max<size_t>(1, c.total_k) * c.kv_row(c.dv), kNaN);
    }
    for (size_t b = 0; b < B; ++b)
        for (size_t h = 0; h < c.hkv; ++h)
            for (size_t j = 0; j < c.lk[b]; ++j) {
                std::memcpy(&c.k[c.kv_at(b, h, j, c.d)], &c.ks[b][(h * c.lk[b] + j) * c.d],
                            c.d * sizeof(float));
                std::memcpy(&c.v[c.kv_at(b, h, j, c.dv)], &c.vs[b][(h * c.lk[b] + j) * c.dv],
                            c.dv * sizeof(float));
            }
}

void fill_sequences(Pack &c, std::mt19937 &g) {
    c.qs.assign(c.batch, {});
    c.ks.assign(c.batch, {});
    c.vs.assign(c.batch, {});
    for (size_t b = 0; b < c.batch; ++b) {
        c.qs[b].resize(c.hq * c.lq[b] * c.d);
        c.ks[b].resize(c.hkv * c.lk[b] * c.d);
        c.vs[b].resize(c.hkv * c.lk[b] * c.dv);
        for (float &x : c.qs[b]) x = uni(g, -1, 1);
        for (float &x : c.ks[b]) x = uni(g, -1, 1);
        for (float &x : c.vs[b]) x = uni(g, -2, 2);
    }
}

Pack random_pack(std::mt19937 &g, Mode mode) {
    Pack c;
    c.mode = mode;
    c.batch = pick(g, 1, 4);
    c.hkv = pick(g, 1, 3);
    c.hq = c.hkv * pick(g, 1, 3);
    c.d = pick(g, 0, 3) == 0 ? pick(g, 1, 9) : pick(g, 8, 72);
    c.dv = pick(g, 0, 2) == 0 ? pick(g, 1, 72) : c.d;
    c.causal = static_cast<int>(pick(g, 0, 2));
    if (pick(g, 0, 3) == 0) c.wl = static_cast<long long>(pick(g, 0, 20));
    if (pick(g, 0, 4) == 0) c.wr = static_cast<long long>(pick(g, 0, 20));
    if (pick(g, 0, 3) == 0) c.softcap = uni(g, 0.5f, 20.0f);
    c.alibi = pick(g, 0, 3) == 0 ? static_cast<int>(pick(g, 1, 2)) : 0;
    const size_t sink_kind = pick(g, 0, 4); // 0: sinks operand, 1: "+1", else none
    c.plus_one = sink_kind == 1;
    const bool chunked = pick(g, 0, 1) == 0; // chunked prefill + decode: lq <= lk
    const size_t sq = pick(g, 1, 24);        // dense Q: every sequence has seq_q queries
    c.lq.resize(c.batch);
    c.lk.resize(c.batch);
    for (size_t b = 0; b < c.batch; ++b) {
        if (mode == kDensePaged)
            c.lq[b] = sq;
        else
            c.lq[b] = pick(g, 0, 5) == 0 ? 0 : pick(g, 0, 1) ? 1 : pick(g, 1, 30);
        c.lk[b] = pick(g, 0, 7) == 0 ? 0 : pick(g, 1, 70);
        if (chunked && c.lk[b] < c.lq[b]) c.lk[b] = c.lq[b] + pick(g, 0, 40);
    }
    c.max_q = std::max<size_t>(1, *std::max_element(c.lq.begin(), c.lq.end()));
    c.max_k = std::max<size_t>(1, *std::max_element(c.lk.begin(), c.lk.end()));
    if (mode != kVarlen) {
        c.max_k += pick(g, 0, 5);
        const size_t r = pick(g, 0, 5);
        c.page = r == 0 ? 1 : r == 1 ? pick(g, 2, 7) : r == 2 ? 16 : r == 3 ? pick(g, 17, 300) : 32;
        c.head_major = pick(g, 0, 1) == 1;
        if (pick(g, 0, 3) == 0) c.max_pages_param = (c.max_k + c.page - 1) / c.page + pick(g, 1, 3);
    } else if (pick(g, 0, 3) == 0) {
        c.kv_row_pad = pick(g, 1, 5);
    }
    fill_sequences(c, g);
    if (sink_kind == 0) {
        c.sinks.resize(c.hq);
        for (float &x : c.sinks) x = uni(g, -3, 3);
    }
    if (c.alibi == 1) {
        c.slopes.resize(c.hq);
        for (float &x : c.slopes) x = uni(g, 0.01f, 0.5f);
    }
    build(c, g);
    return c;
}

attn_desc *make_desc(const Pack &c) {
    attn_desc *d = nullptr;
    REQUIRE(attn_desc_create(&d, c.batch, c.hq, c.hkv, c.max_q, c.max_k, c.d) == ATTN_OK);
    auto seti = [&](attn_param k, int64_t v) {
        REQUIRE_MESSAGE(attn_desc_set_int(d, k, v) == ATTN_OK, attn_last_error());
    };
    seti(ATTN_PARAM_CAUSAL, c.causal);
    seti(ATTN_PARAM_WINDOW_LEFT, c.wl);
    seti(ATTN_PARAM_WINDOW_RIGHT, c.wr);
    REQUIRE(attn_desc_set_float(d, ATTN_PARAM_SOFTCAP, static_cast<double>(c.softcap)) == ATTN_OK);
    seti(ATTN_PARAM_ALIBI, c.alibi);
    seti(ATTN_PARAM_DIAGONAL, c.diagonal);
    seti(ATTN_PARAM_ALIBI_FORM, c.alibi_form);
    if (c.slopes_batch)
        REQUIRE(attn_desc_set_strides(d, ATTN_ALIBI_SLOPES, c.slopes_batch, 1, 0) == ATTN_OK);
    seti(ATTN_PARAM_SOFTMAX_PLUS_ONE, c.plus_one);
    seti(ATTN_PARAM_HEAD_DIM_V, static_cast<int64_t>(c.dv));
    seti(ATTN_PARAM_VARLEN, c.varlen());
    seti(ATTN_PARAM_BATCH_INVARIANT, c.invariant);
    seti(ATTN_PARAM_COMPUTE, c.compute);
    if (c.paged()) {
        seti(ATTN_PARAM_PAGE_SIZE, static_cast<int64_t>(c.page));
        if (c.max_pages_param) seti(ATTN_PARAM_MAX_PAGES, static_cast<int64_t>(c.max_pages_param));
        if (c.head_major) {
            REQUIRE(attn_desc_set_strides(d, ATTN_K, c.hkv * c.page * c.d, c.page * c.d, c.d) ==
                    ATTN_OK);
            REQUIRE(attn_desc_set_strides(d, ATTN_V, c.hkv * c.page * c.dv, c.page * c.dv, c.dv) ==
                    ATTN_OK);
            if (c.store == 3) // the scales in the same head-major page layout (fp8: below)
                for (attn_operand w : {ATTN_K_SCALE, ATTN_V_SCALE})
                    REQUIRE(attn_desc_set_strides(d, w, c.hkv * c.page, c.page, 1) == ATTN_OK);
        }
    } else if (c.kv_row_pad) {
        REQUIRE(attn_desc_set_strides(d, ATTN_K, 0, c.d, c.kv_row(c.d)) == ATTN_OK);
        REQUIRE(attn_desc_set_strides(d, ATTN_V, 0, c.dv, c.kv_row(c.dv)) == ATTN_OK);
    }
    if (c.store >= 4) // fp8: one scale per tensor (0, 0, 0) or per KV head (0, 1, 0)
        for (attn_operand w : {ATTN_K_SCALE, ATTN_V_SCALE})
            REQUIRE(attn_desc_set_strides(d, w, 0, c.store == 5 ? 1 : 0, 0) == ATTN_OK);
    return d;
}

void quantize_rows(const std::vector<float> &x, size_t dim, std::vector<int8_t> &q,
                   std::vector<float> &scale) {
    const size_t rows = x.size() / dim;
    q.assign(x.size(), 0);
    scale.assign(rows, kNaN);
    for (size_t r = 0; r < rows; ++r) {
        const float *row = x.data() + r * dim;
        if (!std::all_of(row, row + dim, [](float v) { return std::isfinite(v); })) continue;
        REQUIRE(attn_quantize_i8(row, 1, dim, q.data() + r * dim, &scale[r]) == ATTN_OK);
    }
}

std::vector<float> fp8_scales(const Pack &c, bool value) {
    // |K| <= 1, |V| <= 2: E4M3 codes up to 256 of its 448, E5M2 far inside its range
    if (c.store == 4) return {value ? 1.0f / 128 : 1.0f / 256};
    std::vector<float> s(c.hkv);
    for (size_t h = 0; h < c.hkv; ++h) s[h] = (value ? 0.002f : 0.001f) * static_cast<float>(h + 1);
    return s;
}

namespace {

// The fp8 codes of one row of `dim` values of KV head h (its head's scale).
void fp8_row(const Pack &c, bool value, const float *x, size_t dim, size_t h, uint8_t *code) {
    const attn_dtype fmt = c.store == 4 ? ATTN_DTYPE_FP8_E4M3 : ATTN_DTYPE_FP8_E5M2;
    const std::vector<float> s = fp8_scales(c, value);
    REQUIRE(attn_quantize_fp8(x, 1, dim, fmt, s.size() == 1 ? s[0] : s[h], code) == ATTN_OK);
}

} // namespace

attn_args *make_args(const Pack &c) {
    attn_args *a = nullptr;
    REQUIRE(attn_args_create(&a) == ATTN_OK);
    REQUIRE(attn_args_set_f32(a, ATTN_Q, c.q.data(), c.q.size()) == ATTN_OK);
    if (c.store == 0) {
        REQUIRE(attn_args_set_f32(a, ATTN_K, c.k.data(), c.k.size()) == ATTN_OK);
        REQUIRE(attn_args_set_f32(a, ATTN_V, c.v.data(), c.v.size()) == ATTN_OK);
    } else if (c.store == 3) { // paged pools: one scale per row, rows in memory order
        REQUIRE(c.paged());
        quantize_rows(c.k, c.d, c.k8, c.kscale);
        quantize_rows(c.v, c.dv, c.v8, c.vscale);
        REQUIRE(attn_args_set_i8(a, ATTN_K, c.k8.data(), c.k8.size()) == ATTN_OK);
        REQUIRE(attn_args_set_i8(a, ATTN_V, c.v8.data(), c.v8.size()) == ATTN_OK);
        REQUIRE(attn_args_set_f32(a, ATTN_K_SCALE, c.kscale.data(), c.kscale.size()) == ATTN_OK);
        REQUIRE(attn_args_set_f32(a, ATTN_V_SCALE, c.vscale.data(), c.vscale.size()) == ATTN_OK);
    } else if (c.store >= 4) { // representable (round_kv): the quantization is exact
        const attn_dtype fmt = c.store == 4 ? ATTN_DTYPE_FP8_E4M3 : ATTN_DTYPE_FP8_E5M2;
        for (int value = 0; value < 2; ++value) {
            const size_t dim = value ? c.dv : c.d;
            const std::vector<float> &x = value ? c.v : c.k;
            // the keys' rows; every other byte a NaN code, so that a read of it would show
            std::vector<uint8_t> &code = value ? c.vf8 : c.kf8;
            code.assign(x.size(), 0x7f);
            for (size_t b = 0; b < c.batch; ++b)
                for (size_t h = 0; h < c.hkv; ++h)
                    for (size_t j = 0; j < c.lk[b]; ++j) {
                        const size_t at = c.kv_at(b, h, j, dim);
                        fp8_row(c, value, x.data() + at, dim, h, code.data() + at);
                    }
            REQUIRE(attn_args_set_fp8(a, value ? ATTN_V : ATTN_K, fmt, code.data(), code.size()) ==
                    ATTN_OK);
            std::vector<float> &scale = value ? c.vscale : c.kscale;
            scale = fp8_scales(c, value);
            REQUIRE(attn_args_set_f32(a, value ? ATTN_V_SCALE : ATTN_K_SCALE, scale.data(),
                                      scale.size()) == ATTN_OK);
        }
    } else { // the values are representable (round_kv): the conversion is exact
        const auto conv = c.store == 1 ? attn_convert_f32_to_f16 : attn_convert_f32_to_bf16;
        const auto set = c.store == 1 ? attn_args_set_f16 : attn_args_set_bf16;
        c.k16.resize(c.k.size());
        c.v16.resize(c.v.size());
        REQUIRE(conv(c.k.data(), c.k16.data(), c.k.size()) == ATTN_OK);
        REQUIRE(conv(c.v.data(), c.v16.data(), c.v.size()) == ATTN_OK);
        REQUIRE(set(a, ATTN_K, c.k16.data(), c.k16.size()) == ATTN_OK);
        REQUIRE(set(a, ATTN_V, c.v16.data(), c.v16.size()) == ATTN_OK);
    }
    if (!c.sinks.empty())
        REQUIRE(attn_args_set_f32(a, ATTN_SINKS, c.sinks.data(), c.sinks.size()) == ATTN_OK);
    if (!c.slopes.empty())
        REQUIRE(attn_args_set_f32(a, ATTN_ALIBI_SLOPES, c.slopes.data(), c.slopes.size()) ==
                ATTN_OK);
    if (c.varlen())
        REQUIRE(attn_args_set_i32(a, ATTN_CU_SEQLENS_Q, c.cu_q.data(), c.cu_q.size()) == ATTN_OK);
    if (c.paged()) {
        REQUIRE(attn_args_set_i32(a, ATTN_BLOCK_TABLE, c.table.data(), c.table.size()) == ATTN_OK);
        REQUIRE(attn_args_set_i32(a, ATTN_SEQ_LENS_K, c.seq_lens.data(), c.seq_lens.size()) ==
                ATTN_OK);
    } else {
        REQUIRE(attn_args_set_i32(a, ATTN_CU_SEQLENS_K, c.cu_k.data(), c.cu_k.size()) == ATTN_OK);
    }
    return a;
}

Run run(const Pack &c, bool weights) {
    Run r;
    attn_desc *d = make_desc(c);
    attn_args *a = make_args(c);
    r.out.assign(std::max<size_t>(1, c.out_len()), kSentinel);
    r.lse.assign(std::max<size_t>(1, c.lse_len()), kSentinel);
    REQUIRE(attn_args_set_out_f32(a, ATTN_OUT, r.out.data(), r.out.size()) == ATTN_OK);
    REQUIRE(attn_args_set_out_f32(a, ATTN_LSE, r.lse.data(), r.lse.size()) == ATTN_OK);
    REQUIRE_MESSAGE(attn_run(d, ATTN_OP_FORWARD, a) == ATTN_OK, std::string(attn_last_error()));
    if (weights) {
        r.w.assign(attn_desc_required_len(d, ATTN_WEIGHTS), kSentinel);
        REQUIRE(attn_args_set_out_f32(a, ATTN_WEIGHTS, r.w.data(), r.w.size()) == ATTN_OK);
        REQUIRE_MESSAGE(attn_run(d, ATTN_OP_WEIGHTS, a) == ATTN_OK, attn_last_error());
    }
    attn_args_destroy(a);
    attn_desc_destroy(d);
    return r;
}

// ref::compute_v of sequence b alone (its problem and result).
ref::VResult reference(const Pack &c, size_t b, ref::VProblem *out_p) {
    ref::VProblem p;
    p.heads_q = c.hq;
    p.heads_kv = c.hkv;
    p.seq_q = c.lq[b];
    p.seq_k = std::max<size_t>(1, c.lk[b]);
    p.head_dim = c.d;
    p.head_dim_v = c.dv;
    p.causal = c.causal;
    p.window_left = c.wl;
    p.window_right = c.wr;
    p.softcap = c.softcap;
    p.alibi = c.alibi;
    p.diagonal = c.diagonal;
    p.alibi_form = c.alibi_form;
    p.plus_one = c.plus_one;
    p.set_default_strides();
    std::vector<float> kz(c.ks[b]), vz(c.vs[b]);
    kz.resize(std::max<size_t>(kz.size(), c.hkv * c.d), kNaN);
    vz.resize(std::max<size_t>(vz.size(), c.hkv * c.dv), kNaN);
    const int32_t len = static_cast<int32_t>(c.lk[b]);
    ref::VInputs in;
    in.q = c.qs[b].data();
    in.k = kz.data();
    in.v = vz.data();
    in.sinks = c.sinks.empty() ? nullptr : c.sinks.data();
    in.slopes = c.slopes.empty() ? nullptr : c.slopes.data() + b * c.slopes_batch;
    in.seq_lens_k = &len;
    if (out_p) *out_p = p;
    return ref::compute_v(p, in);
}

ref::Closeness check_close(const Pack &c, const Run &r) {
    ref::Closeness worst;
    for (size_t b = 0; b < c.batch; ++b) {
        if (c.lq[b] == 0) continue;
        const ref::VResult e = reference(c, b, nullptr);
        for (size_t h = 0; h < c.hq; ++h, worst.next())
            for (size_t i = 0; i < c.lq[b]; ++i)
                for (size_t x = 0; x < c.dv; ++x)
                    worst.add(r.out[c.out_at(b, h, i) + x], e.out[(h * c.lq[b] + i) * c.dv + x]);
    }
    return worst;
}

double check(const Pack &c, const Run &r, const std::string &what) {
    double worst = 0.0;
    for (size_t b = 0; b < c.batch; ++b) {
        if (c.lq[b] == 0) continue;
        ref::VProblem p;
        const ref::VResult e = reference(c, b, &p);
        for (size_t h = 0; h < c.hq; ++h)
            for (size_t i = 0; i < c.lq[b]; ++i) {
                const size_t row = h * c.lq[b] + i;
                for (size_t x = 0; x < c.dv; ++x)
                    worst = std::max(
                        worst, ref::rel_err(r.out[c.out_at(b, h, i) + x], e.out[row * c.dv + x]));
                worst = std::max(worst, ref::rel_err(r.lse[c.lse_at(b, h, i)], e.lse[row]));
                if (r.w.empty()) continue;
                const float *wr = &r.w[((b * c.hq + h) * c.max_q + i) * c.max_k];
                for (size_t j = 0; j < c.max_k; ++j) {
                    const bool hidden = j >= c.lk[b] || e.hidden[row * p.seq_k + j];
                    if (hidden) {
                        if (wr[j] != 0.0f || std::signbit(wr[j])) {
                            FAIL_CHECK(what << ": hidden weight (" << b << "," << h << "," << i
                                            << "," << j << ") = " << wr[j]);
                            return 1e30;
                        }
                        continue;
                    }
                    worst = std::max(worst, ref::rel_err(wr[j], e.w[row * p.seq_k + j]));
                }
            }
    }
    return worst;
}

void check_same_bits(const Run &a, const Run &b) {
    CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * 4) == 0);
    CHECK(std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4) == 0);
}

Run run_on_1_and_2_threads(const Pack &c) {
    REQUIRE(attn_set_num_threads(1) == ATTN_OK);
    const Run r1 = run(c);
    REQUIRE(attn_set_num_threads(2) == ATTN_OK);
    check_same_bits(r1, run(c));
    return r1;
}

void round_kv(Pack &c) {
    if (c.store == 0) return;
    if (c.store >= 4) { // each row quantized with its head's scale and widened back
        const attn_dtype fmt = c.store == 4 ? ATTN_DTYPE_FP8_E4M3 : ATTN_DTYPE_FP8_E5M2;
        for (auto *seqs : {&c.ks, &c.vs}) {
            const bool value = seqs == &c.vs;
            const size_t dim = value ? c.dv : c.d;
            const std::vector<float> s = fp8_scales(c, value);
            for (std::vector<float> &x : *seqs) { // [hkv][lk][dim]
                const size_t per_head = x.size() / c.hkv;
                std::vector<uint8_t> code(x.size());
                for (size_t r = 0; r < x.size() / dim; ++r)
                    fp8_row(c, value, x.data() + r * dim, dim, r * dim / per_head,
                            code.data() + r * dim);
                for (size_t h = 0; h < c.hkv; ++h)
                    REQUIRE(attn_dequantize_fp8(code.data() + h * per_head, 1, per_head, fmt,
                                                s.size() == 1 ? s[0] : s[h],
                                                x.data() + h * per_head) == ATTN_OK);
            }
        }
        return;
    }
    if (c.store == 3) {
        for (auto *seqs : {&c.ks, &c.vs}) {
            const size_t dim = seqs == &c.ks ? c.d : c.dv;
            for (std::vector<float> &x : *seqs) {
                std::vector<int8_t> q;
                std::vector<float> scale;
                quantize_rows(x, dim, q, scale);
                for (size_t e = 0; e < x.size(); ++e)
                    x[e] = static_cast<float>(q[e]) * scale[e / dim];
            }
        }
        return;
    }
    const auto to = c.store == 1 ? attn_convert_f32_to_f16 : attn_convert_f32_to_bf16;
    const auto from = c.store == 1 ? attn_convert_f16_to_f32 : attn_convert_bf16_to_f32;
    for (auto *seqs : {&c.ks, &c.vs})
        for (std::vector<float> &x : *seqs) {
            std::vector<uint16_t> h(x.size());
            REQUIRE(to(x.data(), h.data(), x.size()) == ATTN_OK);
            REQUIRE(from(h.data(), x.data(), x.size()) == ATTN_OK);
        }
}

Pack small_pack(Mode mode) {
    std::mt19937 g(11);
    Pack c;
    c.mode = mode;
    c.batch = 3;
    c.hq = 2;
    c.hkv = 1;
    c.d = c.dv = 4;
    c.lq = mode == kDensePaged ? std::vector<size_t>{2, 2, 2} : std::vector<size_t>{2, 0, 3};
    c.lk = {5, 9, 3};
    c.max_q = 3;
    c.max_k = 10;
    c.page = mode == kVarlen ? 0 : 4;
    fill_sequences(c, g);
    build(c, g);
    return c;
}

} // namespace serving_test
