// The descriptor: life cycle, parameters (attn_desc_set/get_int/float), strides and required
// lengths. Its geometry comes from core/layout.hpp.
#include <cmath>
#include <initializer_list>
#include <memory>

#include "checked.hpp"
#include "internal.hpp"

namespace attn {
namespace capi {
namespace {

using core::span_of;

core::Layout &layout_of(attn_desc *d, int which) {
    return core::layout_in(d->p, strided_role(which));
}
core::Layout default_layout(const core::Shape &s, const core::Params &mode, int which) {
    return core::default_layout(s, mode, strided_role(which));
}

void compute_lens(attn_desc *d) {
    const core::Shape &s = d->p.shape;
    for (int w = 0; w < kOperands; ++w)
        if (is_strided(w)) strided_len(s, d->p, w, layout_of(d, w), &d->len[w]);
    d->len[ATTN_LSE] = s.batch * s.heads_q * s.seq_q;
    d->len[ATTN_WEIGHTS] = s.batch * s.heads_q * s.seq_q * s.seq_k;
    d->len[ATTN_KEY_VALID] = s.batch * s.seq_k;
    d->len[ATTN_ALLOWED] = s.seq_q * s.seq_k;
    span_of(s.batch, d->p.alibi_batch, s.heads_q, d->p.alibi_head, 1, 0, 1,
            &d->len[ATTN_ALIBI_SLOPES]);
    d->len[ATTN_SINKS] = d->len[ATTN_Q_SCALE] = s.heads_q;
    d->len[ATTN_QUERY_VALID] = s.batch * s.seq_q;
    d->len[ATTN_SEQ_LENS_K] = s.batch;
    d->len[ATTN_KEY_MASS] = s.batch * s.heads_q * s.seq_k;
    d->len[ATTN_CU_SEQLENS_Q] = d->len[ATTN_CU_SEQLENS_K] = s.batch + 1;
    d->len[ATTN_BLOCK_TABLE] = s.batch * d->p.max_pages;
    d->len[ATTN_NEW_K] = s.batch * s.seq_q * s.heads_kv * s.head_dim;
    d->len[ATTN_NEW_V] = s.batch * s.seq_q * s.heads_kv * s.head_dim_v;
    d->len[ATTN_NEW_K_SCALE] = d->len[ATTN_NEW_V_SCALE] = s.batch * s.seq_q * s.heads_kv;
    for (const OperandInfo &o : kOperandInfo) // a gradient has its operand's length
        if (o.grad_of >= 0) d->len[o.id] = d->len[o.grad_of];
}

attn_status check_mutable(const char *fn, attn_desc *desc) {
    if (attn_status st = check_desc(fn, desc)) return st;
    if (desc->used.load())
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: desc was already used by attn_forward/attn_weights; configured "
                    "descriptors are immutable (create a new one)",
                    fn);
    return ATTN_OK;
}

// Every buffer size fits size_t in bytes: [b][hq][sq][d], [b][hkv][sk][d] and [b][hkv][sk][dv],
// [b][hq][sq][dv], [b][hq][sq][sk] (weights and bias) floats; [sq][sk], [b][sk] bytes.
bool sizes_fit(const core::Shape &s) {
    auto fits = [](size_t elem, std::initializer_list<size_t> dims) {
        size_t x = elem;
        for (size_t d : dims)
            if (!mul_ok(x, d, &x)) return false;
        return true;
    };
    return fits(4, {s.batch, s.heads_q, s.seq_q, s.head_dim}) &&
           fits(4, {s.batch, s.heads_kv, s.seq_k, s.head_dim}) &&
           fits(4, {s.batch, s.heads_kv, s.seq_k, s.head_dim_v}) &&
           fits(4, {s.batch, s.heads_q, s.seq_q, s.head_dim_v}) &&
           fits(4, {s.batch, s.heads_q, s.seq_q, s.seq_k}) && fits(1, {s.seq_q, s.seq_k}) &&
           fits(1, {s.batch, s.seq_k});
}

} // namespace

attn_status check_desc(const char *fn, const attn_desc *desc) {
    if (!desc) return fail(ATTN_ERR_NULL_POINTER, "%s: desc is NULL", fn);
    return ATTN_OK;
}

attn_status create_desc(const char *fn, attn_desc **out, size_t batch, size_t heads_q,
                        size_t heads_kv, size_t seq_q, size_t seq_k, size_t head_dim) {
    const size_t dims[6] = {batch, heads_q, heads_kv, seq_q, seq_k, head_dim};
    const char *names[6] = {"batch", "heads_q", "heads_kv", "seq_q", "seq_k", "head_dim"};
    for (int x = 0; x < 6; ++x) {
        if (dims[x] == 0)
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s must be > 0", fn, names[x]);
        if (dims[x] > kMaxDim)
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s (%zu) exceeds the limit %zu", fn,
                        names[x], dims[x], kMaxDim);
    }
    if (heads_q % heads_kv != 0)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: heads_q (%zu) is not a multiple of heads_kv (%zu)", fn, heads_q, heads_kv);
    const bool ok =
        sizes_fit(core::Shape{batch, heads_q, heads_kv, seq_q, seq_k, head_dim, head_dim});
    if (!ok)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: sizes overflow size_t (batch %zu, heads_q %zu, heads_kv %zu, seq_q %zu, "
                    "seq_k %zu, head_dim %zu)",
                    fn, batch, heads_q, heads_kv, seq_q, seq_k, head_dim);
    attn_desc *d = new (std::nothrow) attn_desc;
    if (!d) return fail(ATTN_ERR_OUT_OF_MEMORY, "%s: out of memory allocating the descriptor", fn);
    core::Shape &s = d->p.shape;
    s = core::Shape{batch, heads_q, heads_kv, seq_q, seq_k, head_dim, head_dim};
    for (int w = 0; w < kOperands; ++w)
        if (is_strided(w)) layout_of(d, w) = default_layout(s, d->p, w);
    d->p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    d->p.causal = core::Causal::None;
    compute_lens(d);
    *out = d;
    return ATTN_OK;
}

namespace {

// Switches the layout mode (varlen, page size, max pages) to `trial`: default strides follow
// the mode, custom strides are checked again; nothing changes on failure.
attn_status relayout(const char *fn, attn_desc *d, const char *param, core::Params trial) {
    const core::Shape &s = trial.shape;
    if (trial.page_size) {
        trial.max_pages = d->max_pages_param ? d->max_pages_param
                                             : (s.seq_k + trial.page_size - 1) / trial.page_size;
        size_t cells;
        if (!mul_ok(s.batch, trial.max_pages, &cells) || !mul_ok(cells, 4, &cells))
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s: the block table (batch %zu x max_pages %zu) overflows size_t", fn,
                        param, s.batch, trial.max_pages);
    } else {
        trial.max_pages = 0;
    }
    core::Layout lays[6];
    const int ws[6] = {ATTN_Q, ATTN_K, ATTN_V, ATTN_OUT, ATTN_K_SCALE, ATTN_V_SCALE};
    for (int x = 0; x < 6; ++x) {
        const int w = ws[x];
        lays[x] = d->custom_strides[w] ? layout_of(d, w) : default_layout(s, trial, w);
        size_t span;
        if (!strided_len(s, trial, w, lays[x], &span))
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s: the %s strides make the buffer size overflow", fn, param,
                        operand_name(w));
        if (w == ATTN_OUT && !core::out_nests(s, trial, lays[x]))
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s: the out strides (%zu, %zu, %zu) do not nest in this layout", fn,
                        param, lays[x].batch, lays[x].head, lays[x].row);
    }
    const core::Layout q = lays[0], k = lays[1], v = lays[2], out = lays[3];
    d->p.varlen = trial.varlen;
    d->p.page_size = trial.page_size;
    d->p.max_pages = trial.max_pages;
    d->p.q = q;
    d->p.k = k;
    d->p.v = v;
    d->p.out = out;
    d->p.ks = lays[4];
    d->p.vs = lays[5];
    compute_lens(d);
    return ATTN_OK;
}

// Sets parameter `id` (already known to be a valid id) to `v` (within bounds, integral for an
// integer parameter).
attn_status apply_param(const char *fn, attn_desc *d, int id, double v) {
    core::Params &p = d->p;
    const long long iv = static_cast<long long>(v);
    switch (id) {
    case ATTN_PARAM_CAUSAL:
        p.causal = static_cast<core::Causal>(iv);
        break;
    case ATTN_PARAM_SCALE:
        p.scale = static_cast<float>(v);
        break;
    case ATTN_PARAM_WINDOW_LEFT:
        p.window_left = iv;
        break;
    case ATTN_PARAM_WINDOW_RIGHT:
        p.window_right = iv;
        break;
    case ATTN_PARAM_SOFTCAP:
        p.softcap = static_cast<float>(v);
        break;
    case ATTN_PARAM_ALIBI: // the standard slopes are core's, computed for the call
        static_assert(static_cast<int>(core::Alibi::None) == ATTN_ALIBI_NONE &&
                          static_cast<int>(core::Alibi::Operand) == ATTN_ALIBI_OPERAND &&
                          static_cast<int>(core::Alibi::Standard) == ATTN_ALIBI_STANDARD,
                      "core::Alibi mirrors attn_alibi");
        p.alibi = static_cast<core::Alibi>(iv);
        break;
    case ATTN_PARAM_SOFTMAX_PLUS_ONE:
        p.plus_one = iv != 0;
        break;
    case ATTN_PARAM_HEAD_DIM_V: {
        const size_t dv = static_cast<size_t>(iv);
        core::Shape trial = p.shape; // check the sizes and custom strides first
        trial.head_dim_v = dv;
        if (!sizes_fit(trial))
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: ATTN_PARAM_HEAD_DIM_V (%zu) makes the V or OUT size overflow", fn, dv);
        for (int w : {ATTN_V, ATTN_OUT}) {
            if (!d->custom_strides[w]) continue;
            const core::Layout &lay = layout_of(d, w);
            size_t span;
            if (!strided_len(trial, p, w, lay, &span))
                return fail(ATTN_ERR_INVALID_ARGUMENT,
                            "%s: ATTN_PARAM_HEAD_DIM_V (%zu): the %s strides make the buffer size "
                            "overflow",
                            fn, dv, operand_name(w));
            if (w == ATTN_OUT && !core::out_nests(trial, p, lay))
                return fail(ATTN_ERR_INVALID_ARGUMENT,
                            "%s: ATTN_PARAM_HEAD_DIM_V (%zu): the out strides (%zu, %zu, %zu) do "
                            "not nest rows of %zu floats",
                            fn, dv, lay.batch, lay.head, lay.row, dv);
        }
        p.shape.head_dim_v = dv;
        for (int w : {ATTN_V, ATTN_OUT})
            if (!d->custom_strides[w]) layout_of(d, w) = default_layout(p.shape, p, w);
        compute_lens(d);
        break;
    }
    case ATTN_PARAM_WEIGHTS_MODE:
        p.weights_mode = static_cast<core::WeightsMode>(iv);
        break;
    case ATTN_PARAM_BIAS_FIRST:
        p.bias_first = iv != 0;
        break;
    case ATTN_PARAM_VARLEN: {
        core::Params trial = p;
        trial.varlen = iv != 0;
        return relayout(fn, d, kParamInfo[id].id_name, trial);
    }
    case ATTN_PARAM_PAGE_SIZE: {
        core::Params trial = p;
        trial.page_size = static_cast<size_t>(iv);
        return relayout(fn, d, kParamInfo[id].id_name, trial);
    }
    case ATTN_PARAM_MAX_PAGES: {
        const size_t old = d->max_pages_param;
        d->max_pages_param = static_cast<size_t>(iv);
        const attn_status st = relayout(fn, d, kParamInfo[id].id_name, p);
        if (st) d->max_pages_param = old;
        return st;
    }
    case ATTN_PARAM_BATCH_INVARIANT:
        p.invariant = iv != 0;
        break;
    case ATTN_PARAM_COMPUTE:
        p.compute = static_cast<core::Compute>(iv);
        break;
    case ATTN_PARAM_DIAGONAL:
        p.diagonal = static_cast<core::Diagonal>(iv);
        break;
    case ATTN_PARAM_ALIBI_FORM:
        p.alibi_symmetric = iv == ATTN_ALIBI_SYMMETRIC;
        break;
    }
    return ATTN_OK;
}

double read_param(const attn_desc *d, int id) {
    const core::Params &p = d->p;
    switch (id) {
    case ATTN_PARAM_CAUSAL:
        return static_cast<double>(static_cast<int>(p.causal));
    case ATTN_PARAM_SCALE:
        return static_cast<double>(p.scale);
    case ATTN_PARAM_WINDOW_LEFT:
        return static_cast<double>(p.window_left);
    case ATTN_PARAM_WINDOW_RIGHT:
        return static_cast<double>(p.window_right);
    case ATTN_PARAM_SOFTCAP:
        return static_cast<double>(p.softcap);
    case ATTN_PARAM_ALIBI:
        return static_cast<double>(static_cast<int>(p.alibi));
    case ATTN_PARAM_SOFTMAX_PLUS_ONE:
        return p.plus_one ? 1 : 0;
    case ATTN_PARAM_HEAD_DIM_V:
        return static_cast<double>(p.shape.head_dim_v);
    case ATTN_PARAM_WEIGHTS_MODE:
        return static_cast<double>(static_cast<int>(p.weights_mode));
    case ATTN_PARAM_BIAS_FIRST:
        return p.bias_first ? 1 : 0;
    case ATTN_PARAM_VARLEN:
        return p.varlen ? 1 : 0;
    case ATTN_PARAM_PAGE_SIZE:
        return static_cast<double>(p.page_size);
    case ATTN_PARAM_MAX_PAGES:
        return static_cast<double>(d->max_pages_param);
    case ATTN_PARAM_BATCH_INVARIANT:
        return p.invariant ? 1 : 0;
    case ATTN_PARAM_COMPUTE:
        return static_cast<int>(p.compute);
    case ATTN_PARAM_DIAGONAL:
        return static_cast<double>(static_cast<int>(p.diagonal));
    case ATTN_PARAM_ALIBI_FORM:
        return p.alibi_symmetric ? ATTN_ALIBI_SYMMETRIC : ATTN_ALIBI_LINEAR;
    }
    return 0;
}

attn_status set_param(const char *fn, attn_desc *desc, int id, double v, bool from_int) {
    if (attn_status st = check_mutable(fn, desc)) return st;
    if (id < 0 || id >= kParams)
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: param (%d) is not an attn_param", fn, id);
    const ParamInfo &pi = kParamInfo[id];
    if (std::isnan(v))
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s must not be NaN", fn, pi.id_name);
    if (!(v >= pi.min && v <= pi.max))
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s (%.17g) is outside [%.9g, %.9g]", fn,
                    pi.id_name, v, pi.min, pi.max);
    if (!pi.is_float && !from_int && v != std::floor(v))
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s (%.17g) must be an integer", fn, pi.id_name,
                    v);
    return apply_param(fn, desc, id, v);
}

// Checks of the getters; *out receives the value (as a double) of parameter id.
attn_status get_param(const char *fn, const attn_desc *desc, int id, const void *value,
                      double *out) {
    if (attn_status st = check_desc(fn, desc)) return st;
    if (!value) return fail(ATTN_ERR_NULL_POINTER, "%s: value is NULL", fn);
    if (id < 0 || id >= kParams)
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: param (%d) is not an attn_param", fn, id);
    *out = read_param(desc, id);
    return ATTN_OK;
}

// ALiBi slopes [batch][heads_q]: slope (b, h) at b * batch_stride + h * head_stride; there is no
// row dimension.
attn_status set_slope_strides(const char *fn, attn_desc *desc, size_t batch_stride,
                              size_t head_stride, size_t row_stride) {
    if (row_stride != 0)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: alibi_slopes row_stride (%zu) must be 0 (the slopes are [batch][heads_q])",
                    fn, row_stride);
    const core::Shape &s = desc->p.shape;
    size_t span;
    if (!span_of(s.batch, batch_stride, s.heads_q, head_stride, 1, 0, 1, &span))
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: alibi_slopes strides (%zu, %zu, 0) make the buffer size overflow", fn,
                    batch_stride, head_stride);
    desc->p.alibi_batch = batch_stride;
    desc->p.alibi_head = head_stride;
    desc->len[ATTN_ALIBI_SLOPES] = span;
    return ATTN_OK;
}

} // namespace
} // namespace capi
} // namespace attn

using namespace attn::capi;

extern "C" {

attn_status attn_desc_create(attn_desc **desc, size_t batch, size_t heads_q, size_t heads_kv,
                             size_t seq_q, size_t seq_k, size_t head_dim) {
    static const char fn[] = "attn_desc_create";
    return guarded(fn, [&]() -> attn_status {
        if (!desc) return fail(ATTN_ERR_NULL_POINTER, "%s: desc is NULL", fn);
        *desc = nullptr;
        return create_desc(fn, desc, batch, heads_q, heads_kv, seq_q, seq_k, head_dim);
    });
}

void attn_desc_destroy(attn_desc *desc) {
    delete desc;
}

attn_status attn_desc_set_causal(attn_desc *desc, attn_causal causal) {
    static const char fn[] = "attn_desc_set_causal";
    return guarded(fn, [&]() -> attn_status {
        if (attn_status st = check_mutable(fn, desc)) return st;
        const int c = raw_enum(causal);
        if (c < ATTN_CAUSAL_NONE || c > ATTN_CAUSAL_BOTTOM_RIGHT)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: causal (%d) is not an attn_causal value (0 none, 1 top-left, 2 "
                        "bottom-right)",
                        fn, c);
        desc->p.causal = static_cast<core::Causal>(c);
        return ATTN_OK;
    });
}

attn_status attn_desc_set_scale(attn_desc *desc, float scale) {
    static const char fn[] = "attn_desc_set_scale";
    return guarded(fn, [&]() -> attn_status {
        if (attn_status st = check_mutable(fn, desc)) return st;
        if (!std::isfinite(scale))
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: scale (%g) must be finite", fn,
                        static_cast<double>(scale));
        desc->p.scale = scale;
        return ATTN_OK;
    });
}

attn_status attn_desc_set_strides(attn_desc *desc, attn_operand which, size_t batch_stride,
                                  size_t head_stride, size_t row_stride) {
    static const char fn[] = "attn_desc_set_strides";
    return guarded(fn, [&]() -> attn_status {
        if (attn_status st = check_mutable(fn, desc)) return st;
        const int w = raw_enum(which);
        if (w == ATTN_ALIBI_SLOPES)
            return set_slope_strides(fn, desc, batch_stride, head_stride, row_stride);
        if (!is_strided(w))
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: which (%d) must be ATTN_Q, ATTN_K, ATTN_V, ATTN_OUT or ATTN_BIAS (or "
                        "the int8 scales ATTN_K_SCALE, ATTN_V_SCALE, or ATTN_ALIBI_SLOPES)",
                        fn, w);
        const core::Shape &s = desc->p.shape;
        const core::Layout lay{batch_stride, head_stride, row_stride};
        size_t span;
        if (!strided_len(s, desc->p, w, lay, &span))
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s strides (%zu, %zu, %zu) make the buffer size overflow", fn,
                        operand_name(w), batch_stride, head_stride, row_stride);
        if (w == ATTN_OUT && !core::out_nests(s, desc->p, lay))
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: out strides (%zu, %zu, %zu) do not nest: output rows of %zu floats "
                        "could overlap",
                        fn, batch_stride, head_stride, row_stride, s.head_dim_v);
        layout_of(desc, w) = lay;
        desc->custom_strides[w] = true;
        desc->len[w] = span;
        // the gradient of an operand has its layout
        for (const OperandInfo &o : kOperandInfo)
            if (o.grad_of == w) desc->len[o.id] = span;
        return ATTN_OK;
    });
}

size_t attn_desc_required_len(const attn_desc *desc, attn_operand which) {
    if (!desc) {
        fail(ATTN_ERR_NULL_POINTER, "attn_desc_required_len: desc is NULL");
        return 0;
    }
    const int w = raw_enum(which);
    if (w < 0 || w >= kOperands) {
        fail(ATTN_ERR_INVALID_ARGUMENT, "attn_desc_required_len: which (%d) is not an attn_operand",
             w);
        return 0;
    }
    return desc->len[w];
}

attn_status attn_desc_set_int(attn_desc *desc, attn_param param, int64_t value) {
    static const char fn[] = "attn_desc_set_int";
    return guarded(fn, [&]() -> attn_status {
        // int64 values beyond 2^53 are out of every range; the double keeps them out of range.
        return set_param(fn, desc, raw_enum(param), static_cast<double>(value), true);
    });
}

attn_status attn_desc_set_float(attn_desc *desc, attn_param param, double value) {
    static const char fn[] = "attn_desc_set_float";
    return guarded(
        fn, [&]() -> attn_status { return set_param(fn, desc, raw_enum(param), value, false); });
}

attn_status attn_desc_get_int(const attn_desc *desc, attn_param param, int64_t *value) {
    static const char fn[] = "attn_desc_get_int";
    return guarded(fn, [&]() -> attn_status {
        double v = 0;
        if (attn_status st = get_param(fn, desc, raw_enum(param), value, &v)) return st;
        *value = static_cast<int64_t>(v);
        return ATTN_OK;
    });
}

attn_status attn_desc_get_float(const attn_desc *desc, attn_param param, double *value) {
    static const char fn[] = "attn_desc_get_float";
    return guarded(
        fn, [&]() -> attn_status { return get_param(fn, desc, raw_enum(param), value, value); });
}

} // extern "C"
