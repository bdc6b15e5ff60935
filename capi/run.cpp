// attn_run and the calls built on it (attn_forward, attn_weights, attn_simple): the operands an
// operation reads and writes, their checks, and the core entry point.
#include <initializer_list>
#include <memory>

#include "internal.hpp"

namespace attn {
namespace capi {

namespace {

// Operands `op` reads or writes; the others are ignored.
void mark_used(int op, bool *used) {
    for (int w : {ATTN_Q, ATTN_K, ATTN_KEY_VALID, ATTN_ALLOWED, ATTN_BIAS, ATTN_ALIBI_SLOPES,
                  ATTN_SINKS, ATTN_QUERY_VALID, ATTN_SEQ_LENS_K, ATTN_CU_SEQLENS_Q,
                  ATTN_CU_SEQLENS_K, ATTN_BLOCK_TABLE, ATTN_K_SCALE, ATTN_Q_SCALE})
        used[w] = true;
    if (op == ATTN_OP_WEIGHTS) {
        used[ATTN_WEIGHTS] = true;
        return;
    }
    for (int w : {ATTN_V, ATTN_V_SCALE, ATTN_OUT, ATTN_LSE}) used[w] = true;
    if (op == ATTN_OP_FORWARD) {
        used[ATTN_KEY_MASS] = true;
        return;
    }
    used[ATTN_DOUT] = true;
    for (const OperandInfo &o : kOperandInfo) // the gradients it writes
        if (o.grad_of >= 0 && o.out_types) used[o.id] = true;
}

// The operands `op` cannot run without.
attn_status check_required(const char *fn, int op, const Slot *slot) {
    const bool fwd = op == ATTN_OP_FORWARD, bwd = op == ATTN_OP_BACKWARD;
    const int required[] = {ATTN_Q, ATTN_K, fwd || bwd ? ATTN_V : ATTN_WEIGHTS,
                            fwd || bwd ? ATTN_OUT : -1, bwd ? ATTN_DOUT : -1};
    for (int w : required)
        if (w >= 0 && !slot[w].ptr)
            return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL", fn, operand_name(w));
    return ATTN_OK;
}

// int8 K / V come with their scales, fp8 ones may (none = 1), others have none.
attn_status check_scales(const char *fn, const Slot *slot, const bool *used) {
    for (int w : {ATTN_K, ATTN_V}) {
        const int sw = w == ATTN_K ? ATTN_K_SCALE : ATTN_V_SCALE;
        if (!used[w]) continue;
        const bool i8 = slot[w].type == core::DType::I8;
        if (i8 && !slot[sw].ptr)
            return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL but %s is int8", fn,
                        operand_name(sw), operand_name(w));
        if (!core::has_scale(slot[w].type) && slot[sw].ptr)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s is bound but %s is not int8 or fp8 (bound with "
                        "attn_args_set_i8 / _fp8)",
                        fn, operand_name(sw), operand_name(w));
    }
    return ATTN_OK;
}

// What ATTN_OP_BACKWARD needs beyond the forward's operands: fp32 / 16-bit K and V, the
// forward's LSE, at least one gradient, each gradient's operand, non-broadcast layouts for dQ,
// dK and dV, no paged cache.
attn_status check_backward(const char *fn, const attn_desc *desc, const Slot *slot) {
    for (int w : {ATTN_K, ATTN_V})
        if (core::has_scale(slot[w].type))
            return fail(ATTN_ERR_UNSUPPORTED,
                        "%s: ATTN_OP_BACKWARD needs fp32, f16 or bf16 %s (it is %s) in "
                        "libattn %s",
                        fn, operand_name(w), dtype_name(slot[w].type), ATTN_VERSION_STRING);
    if (!slot[ATTN_LSE].ptr)
        return fail(ATTN_ERR_NULL_POINTER,
                    "%s: lse is NULL: ATTN_OP_BACKWARD needs the lse (and out) of the forward", fn);
    bool any = false;
    for (const OperandInfo &o : kOperandInfo)
        if (o.grad_of >= 0 && o.out_types) any |= slot[o.id].ptr != nullptr;
    if (!any)
        return fail(ATTN_ERR_NULL_POINTER,
                    "%s: ATTN_OP_BACKWARD has nothing to compute: bind dq, dk, dv, dbias or "
                    "dsinks",
                    fn);
    if (slot[ATTN_DBIAS].ptr && !slot[ATTN_BIAS].ptr)
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: dbias is bound but bias is not", fn);
    if (slot[ATTN_DSINKS].ptr && !slot[ATTN_SINKS].ptr)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: dsinks is bound but sinks is not (ATTN_PARAM_SOFTMAX_PLUS_ONE has a "
                    "constant sink: no gradient)",
                    fn);
    // A gradient is written in its operand's layout: a layout whose rows overlap (a stride of 0
    // broadcasting Q, K or V) would need the gradient summed over the copies.
    for (int g : {ATTN_DQ, ATTN_DK, ATTN_DV}) {
        const int w = kOperandInfo[g].grad_of;
        const core::Layout &lay = layout_in(desc->p, w);
        if (slot[g].ptr && !core::rows_disjoint(view_of(desc->p.shape, desc->p, w, lay)))
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s is bound but the %s strides (%zu, %zu, %zu) overlap rows (a "
                        "broadcast): its gradient would be a sum over them, which libattn %s "
                        "does not compute",
                        fn, operand_name(g), operand_name(w), lay.batch, lay.head, lay.row,
                        ATTN_VERSION_STRING);
    }
    if (desc->p.page_size)
        return fail(ATTN_ERR_UNSUPPORTED,
                    "%s: ATTN_OP_BACKWARD with a paged K/V cache is not supported in libattn %s",
                    fn, ATTN_VERSION_STRING);
    return ATTN_OK;
}

// Every used operand's length against need[] and no output overlapping another buffer; then,
// with a paged cache, the block table against the pages the buffers hold.
attn_status check_buffers(const char *fn, const attn_desc *desc, const Slot *slot, const bool *used,
                          bool with_v, const size_t *need, CallShape *cs) {
    const bool paged = desc->p.page_size != 0;
    Buffer bufs[kOperands];
    int nb = 0;
    for (int w = 0; w < kOperands; ++w) {
        if (!used[w] || !slot[w].ptr) continue;
        if (attn_status st = check_len(fn, operand_name(w), slot[w].len, need[w])) return st;
        const Kind k = operand_kind(w);
        // a paged pool may be read anywhere: all of it counts for aliasing
        const bool pool = paged && (w == ATTN_K || w == ATTN_V || is_scale(w));
        const size_t n = pool ? slot[w].len : need[w];
        const size_t elem =
            slot[w].type != core::DType::F32 ? core::dtype_bytes(slot[w].type) : kind_bytes(k);
        bufs[nb++] = Buffer{slot[w].ptr, n * elem, operand_name(w), k == Kind::F32Out};
    }
    if (attn_status st = check_aliasing(fn, bufs, nb)) return st;
    if (paged)
        if (attn_status st = check_pages(fn, desc->p, slot, with_v, need, cs)) return st;
    return ATTN_OK;
}

// ALiBi slopes bound exactly when ATTN_PARAM_ALIBI says OPERAND; sinks not with the "+1"
// softmax.
attn_status check_alibi_sinks(const char *fn, const attn_desc *desc, const Slot *slot) {
    const bool slopes = slot[ATTN_ALIBI_SLOPES].ptr != nullptr;
    if (desc->p.alibi == core::Alibi::Operand && !slopes)
        return fail(ATTN_ERR_NULL_POINTER,
                    "%s: alibi_slopes is NULL but ATTN_PARAM_ALIBI is ATTN_ALIBI_OPERAND", fn);
    if (desc->p.alibi != core::Alibi::Operand && slopes)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: alibi_slopes is bound but ATTN_PARAM_ALIBI is not ATTN_ALIBI_OPERAND", fn);
    if (slot[ATTN_SINKS].ptr && desc->p.plus_one)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: sinks cannot be combined with ATTN_PARAM_SOFTMAX_PLUS_ONE", fn);
    return ATTN_OK;
}

// An output buffer of the call (bound through a setter that took it writable).
float *written(const Slot &s) {
    return static_cast<float *>(const_cast<void *>(s.ptr));
}

// The call's parameters (p starts as the descriptor's) and the operands every operation reads
// (Q, K and the masks and variants); the caller adds what its operation reads and writes.
void prepare(const attn_desc *desc, int op, const Slot *slot, const CallShape &cs, core::Params *p,
             core::Tensors *t) {
    const bool paged = desc->p.page_size != 0;
    p->total_q = cs.total_q;
    p->q_type = slot[ATTN_Q].type;
    p->k_type = slot[ATTN_K].type;
    p->v_type = op != ATTN_OP_WEIGHTS ? slot[ATTN_V].type : core::DType::F32;
    t->alibi = static_cast<const float *>(slot[ATTN_ALIBI_SLOPES].ptr); // STANDARD: core's
    if (p->q_type == core::DType::F32)
        t->q = static_cast<const float *>(slot[ATTN_Q].ptr);
    else
        t->q16 = static_cast<const uint16_t *>(slot[ATTN_Q].ptr);
    t->k = slot[ATTN_K].ptr;
    t->k_scale = static_cast<const float *>(slot[ATTN_K_SCALE].ptr);
    unit_scale(p->k_type, &t->k_scale, &p->ks);
    t->key_valid = static_cast<const uint8_t *>(slot[ATTN_KEY_VALID].ptr);
    t->allowed = static_cast<const uint8_t *>(slot[ATTN_ALLOWED].ptr);
    t->bias = static_cast<const float *>(slot[ATTN_BIAS].ptr);
    t->sinks = static_cast<const float *>(slot[ATTN_SINKS].ptr);
    t->q_scale = static_cast<const float *>(slot[ATTN_Q_SCALE].ptr);
    t->query_valid = static_cast<const uint8_t *>(slot[ATTN_QUERY_VALID].ptr);
    t->seq_lens_k = static_cast<const int32_t *>(slot[ATTN_SEQ_LENS_K].ptr);
    t->cu_q = static_cast<const int32_t *>(slot[ATTN_CU_SEQLENS_Q].ptr);
    t->cu_k = paged ? nullptr : static_cast<const int32_t *>(slot[ATTN_CU_SEQLENS_K].ptr);
    t->block_table = paged ? static_cast<const int32_t *>(slot[ATTN_BLOCK_TABLE].ptr) : nullptr;
}

void run_forward_op(core::Params &p, core::Tensors &t, const Slot *slot) {
    t.v = slot[ATTN_V].ptr;
    t.v_scale = static_cast<const float *>(slot[ATTN_V_SCALE].ptr);
    unit_scale(p.v_type, &t.v_scale, &p.vs);
    t.out = written(slot[ATTN_OUT]);
    t.lse = written(slot[ATTN_LSE]);
    t.key_mass = written(slot[ATTN_KEY_MASS]);
    core::forward(p, t);
}

// 16-bit Q, K, V and DOUT are widened exactly to fp32 copies in their own layouts (the spans
// need[] gives, checked); the kernel then runs on fp32 throughout.
void run_backward_op(core::Params &p, core::Tensors &t, const Slot *slot, const size_t *need) {
    std::vector<float> wide[4];
    const int ws[4] = {ATTN_Q, ATTN_K, ATTN_V, ATTN_DOUT};
    const void *ptrs[4] = {slot[ATTN_Q].ptr, slot[ATTN_K].ptr, slot[ATTN_V].ptr,
                           slot[ATTN_DOUT].ptr};
    for (int x = 0; x < 4; ++x) {
        const Slot &sl = slot[ws[x]];
        if (sl.type == core::DType::F32) continue;
        wide[x].resize(need[ws[x]]);
        const uint16_t *src = static_cast<const uint16_t *>(sl.ptr);
        if (sl.type == core::DType::F16)
            core::f16_to_f32(src, wide[x].data(), wide[x].size());
        else
            core::bf16_to_f32(src, wide[x].data(), wide[x].size());
        ptrs[x] = wide[x].data();
    }
    p.q_type = p.k_type = p.v_type = core::DType::F32;
    t.q = static_cast<const float *>(ptrs[0]);
    t.q16 = nullptr;
    t.k = ptrs[1];
    t.v = ptrs[2];
    t.out = written(slot[ATTN_OUT]);
    t.lse = written(slot[ATTN_LSE]);
    t.dout = static_cast<const float *>(ptrs[3]);
    t.dq = written(slot[ATTN_DQ]);
    t.dk = written(slot[ATTN_DK]);
    t.dv = written(slot[ATTN_DV]);
    t.dbias = written(slot[ATTN_DBIAS]);
    t.dsinks = written(slot[ATTN_DSINKS]);
    core::backward(p, t);
}

void run_weights_op(core::Params &p, core::Tensors &t, const Slot *slot) {
    t.weights = written(slot[ATTN_WEIGHTS]);
    core::weights(p, t);
}

} // namespace

attn_status execute(const char *fn, const attn_desc *desc, int op, const Slot *slot) {
    if (attn_status st = check_desc(fn, desc)) return st;
    if (op != ATTN_OP_FORWARD && op != ATTN_OP_WEIGHTS && op != ATTN_OP_BACKWARD)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: op (%d) is not an attn_op (0 forward, 1 weights, 2 backward)", fn, op);
    bool used[kOperands] = {};
    mark_used(op, used);
    if (attn_status st = check_required(fn, op, slot)) return st;
    if (attn_status st = check_scales(fn, slot, used)) return st;
    if (op == ATTN_OP_BACKWARD)
        if (attn_status st = check_backward(fn, desc, slot)) return st;
    size_t need[kOperands];
    CallShape cs;
    if (attn_status st = check_serving(fn, desc, slot, used, op == ATTN_OP_WEIGHTS, need, &cs))
        return st;
    if (op == ATTN_OP_BACKWARD) // a gradient has its operand's length (varlen: per-call totals)
        for (const OperandInfo &o : kOperandInfo)
            if (o.grad_of >= 0) need[o.id] = need[o.grad_of];
    if (attn_status st = check_buffers(fn, desc, slot, used, op == ATTN_OP_FORWARD, need, &cs))
        return st;
    if (attn_status st = check_alibi_sinks(fn, desc, slot)) return st;
    desc->used.store(true);
    core::Params p = desc->p;
    core::Tensors t;
    prepare(desc, op, slot, cs, &p, &t);
    if (op == ATTN_OP_FORWARD)
        run_forward_op(p, t, slot);
    else if (op == ATTN_OP_BACKWARD)
        run_backward_op(p, t, slot, need);
    else
        run_weights_op(p, t, slot);
    return ATTN_OK;
}

namespace {

// The 0.1 calls: their buffers are as long as the descriptor requires (checked by the caller's
// contract, not by a length).
attn_status run_forward(const char *fn, const attn_desc *desc, const float *q, const float *k,
                        const float *v, const bool *key_valid, const bool *allowed, float *out,
                        float *lse) {
    if (attn_status st = check_desc(fn, desc)) return st;
    Slot slot[kOperands];
    const void *ptrs[] = {q, k, v, out, lse, nullptr, key_valid, allowed};
    for (int w = 0; w < 8; ++w) slot[w] = Slot{ptrs[w], ptrs[w] ? desc->len[w] : 0};
    return execute(fn, desc, ATTN_OP_FORWARD, slot);
}

} // namespace
} // namespace capi
} // namespace attn

using namespace attn::capi;

extern "C" {

attn_status attn_simple(const float *q, const float *k, const float *v, size_t n, size_t d,
                        bool causal, const bool *pad_mask, float *out) {
    static const char fn[] = "attn_simple";
    return guarded(fn, [&]() -> attn_status {
        const char *missing = !q ? "q" : !k ? "k" : !v ? "v" : !out ? "out" : nullptr;
        if (missing) return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL", fn, missing);
        attn_desc *desc = nullptr;
        if (n == 0) return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: n must be > 0", fn);
        if (d == 0) return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: d must be > 0", fn);
        if (n > kMaxDim || d > kMaxDim)
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s (%zu) exceeds the limit %zu", fn,
                        n > kMaxDim ? "n" : "d", n > kMaxDim ? n : d, kMaxDim);
        if (attn_status st = create_desc(fn, &desc, 1, 1, 1, n, n, d)) return st;
        std::unique_ptr<attn_desc> owner(desc);
        desc->p.causal = causal ? core::Causal::TopLeft : core::Causal::None;
        return run_forward(fn, desc, q, k, v, pad_mask, nullptr, out, nullptr);
    });
}

attn_status attn_forward(const attn_desc *desc, const float *q, const float *k, const float *v,
                         const bool *key_valid, const bool *allowed, float *out, float *lse) {
    static const char fn[] = "attn_forward";
    return guarded(fn,
                   [&]() { return run_forward(fn, desc, q, k, v, key_valid, allowed, out, lse); });
}

attn_status attn_weights(const attn_desc *desc, const float *q, const float *k,
                         const bool *key_valid, const bool *allowed, float *weights) {
    static const char fn[] = "attn_weights";
    return guarded(fn, [&]() -> attn_status {
        if (attn_status st = check_desc(fn, desc)) return st;
        Slot slot[kOperands];
        const void *ptrs[] = {q, k, nullptr, nullptr, nullptr, weights, key_valid, allowed};
        for (int w = 0; w < 8; ++w) slot[w] = Slot{ptrs[w], ptrs[w] ? desc->len[w] : 0};
        return execute(fn, desc, ATTN_OP_WEIGHTS, slot);
    });
}

attn_status attn_run(const attn_desc *desc, attn_op op, const attn_args *args) {
    static const char fn[] = "attn_run";
    return guarded(fn, [&]() -> attn_status {
        if (attn_status st = check_desc(fn, desc)) return st;
        if (!args) return fail(ATTN_ERR_NULL_POINTER, "%s: args is NULL", fn);
        return execute(fn, desc, raw_enum(op), args->slot);
    });
}

} // extern "C"
