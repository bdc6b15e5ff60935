// The serving calls (attn_kv_append, attn_kv_append_args, attn_merge) and the checks they share
// with attn_run: buffer lengths and aliasing, the varlen cu_seqlens, seq_lens_k, the paged
// block table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <initializer_list>

#include "checked.hpp"
#include "internal.hpp"

namespace attn {
namespace capi {

attn_status check_aliasing(const char *fn, const Buffer *bufs, int n) {
    for (int a = 0; a < n; ++a) {
        if (!bufs[a].output || !bufs[a].ptr) continue;
        for (int b = 0; b < n; ++b) {
            if (a == b || !bufs[b].ptr) continue;
            if (overlaps(range_of(bufs[a].ptr, bufs[a].bytes),
                         range_of(bufs[b].ptr, bufs[b].bytes)))
                return fail(ATTN_ERR_INVALID_ARGUMENT,
                            "%s: %s overlaps %s (outputs must not alias)", fn, bufs[a].name,
                            bufs[b].name);
        }
    }
    return ATTN_OK;
}

attn_status fail_len(const char *fn, const char *name, size_t have, size_t need) {
    return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s has %zu elements, needs at least %zu", fn, name,
                have, need);
}

namespace {

// seq_lens_k: its length, then every value in [0, seq_k].
attn_status check_seq_lens_k(const char *fn, const core::Shape &s, const Slot &slot) {
    if (attn_status st = check_len(fn, operand_name(ATTN_SEQ_LENS_K), slot.len, s.batch)) return st;
    const int32_t *lens = static_cast<const int32_t *>(slot.ptr);
    for (size_t b = 0; b < s.batch; ++b)
        if (lens[b] < 0 || static_cast<size_t>(lens[b]) > s.seq_k)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: seq_lens_k[%zu] (%d) is outside [0, seq_k = %zu]", fn, b,
                        static_cast<int>(lens[b]), s.seq_k);
    return ATTN_OK;
}

// A cu_seqlens operand: cu[0] = 0, non-decreasing, every length <= max_len. *total = cu[batch].
attn_status check_cu(const char *fn, int which, const int32_t *cu, size_t batch, size_t max_len,
                     const char *max_name, size_t *total) {
    const char *name = operand_name(which);
    if (cu[0] != 0)
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s[0] (%d) must be 0", fn, name,
                    static_cast<int>(cu[0]));
    for (size_t b = 0; b < batch; ++b) {
        const long long len = static_cast<long long>(cu[b + 1]) - cu[b];
        if (len < 0)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s must not decrease: %s[%zu] = %d > %s[%zu] = %d", fn, name, name, b,
                        static_cast<int>(cu[b]), name, b + 1, static_cast<int>(cu[b + 1]));
        if (static_cast<unsigned long long>(len) > max_len)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s: sequence %zu has length %lld, above %s = %zu", fn, name, b, len,
                        max_name, max_len);
    }
    *total = static_cast<size_t>(cu[batch]);
    return ATTN_OK;
}

// Whole pages a paged K or V buffer of `len` floats holds (one page spans `extent` floats).
size_t pages_in(size_t len, size_t extent, size_t page_stride) {
    if (len < extent) return 0;
    if (page_stride == 0) return SIZE_MAX; // every page id names the same memory
    return (len - extent) / page_stride + 1;
}

// The block table rows in use: every slot holding one of the first seq_lens_k[b] keys names a
// page the K/V buffers hold.
attn_status check_block_table(const char *fn, const core::Params &p, const int32_t *table,
                              const int32_t *lens, size_t num_pages) {
    const size_t ps = p.page_size, mp = p.max_pages;
    for (size_t b = 0; b < p.shape.batch; ++b) {
        const size_t len = static_cast<size_t>(lens[b]); // >= 0: checked before
        if (len > mp * ps)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: seq_lens_k[%zu] (%zu) exceeds max_pages x page_size = %zu x %zu", fn,
                        b, len, mp, ps);
        const size_t used = (len + ps - 1) / ps;
        for (size_t slot = 0; slot < used; ++slot) {
            const int32_t id = table[b * mp + slot];
            if (id == -1)
                return fail(ATTN_ERR_INVALID_ARGUMENT,
                            "%s: block_table[%zu][%zu] is -1 (unused) but sequence %zu has %zu "
                            "keys, which fill slots 0..%zu",
                            fn, b, slot, b, len, used - 1);
            if (id < 0 || static_cast<size_t>(id) >= num_pages)
                return fail(ATTN_ERR_INVALID_ARGUMENT,
                            "%s: block_table[%zu][%zu] (%d) is not a page of the K/V buffers, "
                            "which hold %zu pages",
                            fn, b, slot, static_cast<int>(id), num_pages);
        }
    }
    return ATTN_OK;
}

} // namespace

attn_status check_serving(const char *fn, const attn_desc *desc, const Slot *slot, const bool *used,
                          bool weights_op, size_t *need, CallShape *cs) {
    const core::Params &p = desc->p;
    const core::Shape &s = p.shape;
    const bool paged = p.page_size != 0;
    for (int w = 0; w < kOperands; ++w) need[w] = desc->len[w];
    auto bound = [&](int w) { return used[w] && slot[w].ptr != nullptr; };
    auto require = [&](int w, const char *why) -> attn_status {
        if (!bound(w))
            return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL but %s", fn, operand_name(w), why);
        return ATTN_OK;
    };
    auto refuse = [&](int w, const char *why) -> attn_status {
        if (bound(w))
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s is bound but %s", fn, operand_name(w),
                        why);
        return ATTN_OK;
    };
    if (p.varlen) {
        if (attn_status st = require(ATTN_CU_SEQLENS_Q, "ATTN_PARAM_VARLEN is 1")) return st;
        if (!paged) {
            if (attn_status st = require(ATTN_CU_SEQLENS_K, "ATTN_PARAM_VARLEN is 1 and the K/V "
                                                            "cache is not paged"))
                return st;
            if (attn_status st = refuse(ATTN_SEQ_LENS_K, "a varlen batch takes its key lengths "
                                                         "from cu_seqlens_k"))
                return st;
        }
        const int unsupported[] = {ATTN_BIAS, ATTN_QUERY_VALID, ATTN_KEY_MASS};
        for (int w : unsupported)
            if (bound(w))
                return fail(ATTN_ERR_UNSUPPORTED,
                            "%s: %s is not supported with ATTN_PARAM_VARLEN in libattn %s", fn,
                            operand_name(w), ATTN_VERSION_STRING);
        if (weights_op)
            return fail(ATTN_ERR_UNSUPPORTED,
                        "%s: ATTN_OP_WEIGHTS is not supported with ATTN_PARAM_VARLEN in libattn %s",
                        fn, ATTN_VERSION_STRING);
    } else {
        if (attn_status st = refuse(ATTN_CU_SEQLENS_Q, "ATTN_PARAM_VARLEN is 0")) return st;
    }
    if (paged) {
        if (attn_status st = require(ATTN_BLOCK_TABLE, "ATTN_PARAM_PAGE_SIZE is set")) return st;
        if (attn_status st = require(ATTN_SEQ_LENS_K, "ATTN_PARAM_PAGE_SIZE is set (the keys in "
                                                      "each sequence's cache)"))
            return st;
        if (attn_status st = refuse(ATTN_CU_SEQLENS_K, "a paged cache takes its key lengths from "
                                                       "seq_lens_k"))
            return st;
    } else {
        if (attn_status st = refuse(ATTN_BLOCK_TABLE, "ATTN_PARAM_PAGE_SIZE is 0")) return st;
        if (!p.varlen)
            if (attn_status st = refuse(ATTN_CU_SEQLENS_K, "ATTN_PARAM_VARLEN is 0")) return st;
    }
    // The integer operands first: their values size the others.
    for (int w : {ATTN_CU_SEQLENS_Q, ATTN_CU_SEQLENS_K, ATTN_BLOCK_TABLE})
        if (bound(w))
            if (attn_status st = check_len(fn, operand_name(w), slot[w].len, need[w])) return st;
    if (bound(ATTN_SEQ_LENS_K))
        if (attn_status st = check_seq_lens_k(fn, s, slot[ATTN_SEQ_LENS_K])) return st;
    if (p.varlen) {
        const int32_t *cu = static_cast<const int32_t *>(slot[ATTN_CU_SEQLENS_Q].ptr);
        if (attn_status st =
                check_cu(fn, ATTN_CU_SEQLENS_Q, cu, s.batch, s.seq_q, "seq_q", &cs->total_q))
            return st;
        const core::View vq = view_of(s, p, ATTN_Q, p.q), vo = view_of(s, p, ATTN_OUT, p.out);
        need[ATTN_Q] = core::pack_len(vq, cs->total_q);
        need[ATTN_OUT] = core::pack_len(vo, cs->total_q);
        need[ATTN_LSE] = s.heads_q * cs->total_q;
        need[ATTN_NEW_K] = cs->total_q * s.heads_kv * s.head_dim;
        need[ATTN_NEW_V] = cs->total_q * s.heads_kv * s.head_dim_v;
        need[ATTN_NEW_K_SCALE] = need[ATTN_NEW_V_SCALE] = cs->total_q * s.heads_kv;
        if (!paged) {
            const int32_t *ck = static_cast<const int32_t *>(slot[ATTN_CU_SEQLENS_K].ptr);
            if (attn_status st =
                    check_cu(fn, ATTN_CU_SEQLENS_K, ck, s.batch, s.seq_k, "seq_k", &cs->total_k))
                return st;
            for (int w : {ATTN_K, ATTN_V, ATTN_K_SCALE, ATTN_V_SCALE})
                need[w] = core::pack_len(view_of(s, p, w, layout_in(p, w)), cs->total_k);
        }
    }
    return ATTN_OK;
}

// With a paged cache: the pages the bound K (and V, and their int8 scales) all hold, then the
// block table against them.
attn_status check_pages(const char *fn, const core::Params &p, const Slot *slot, bool with_v,
                        const size_t *need, CallShape *cs) {
    cs->num_pages = pages_in(slot[ATTN_K].len, need[ATTN_K], p.k.batch);
    auto also = [&](int w, const core::Layout &lay) {
        if (slot[w].ptr)
            cs->num_pages = std::min(cs->num_pages, pages_in(slot[w].len, need[w], lay.batch));
    };
    also(ATTN_K_SCALE, p.ks);
    if (with_v) {
        also(ATTN_V, p.v);
        also(ATTN_V_SCALE, p.vs);
    }
    return check_block_table(fn, p, static_cast<const int32_t *>(slot[ATTN_BLOCK_TABLE].ptr),
                             static_cast<const int32_t *>(slot[ATTN_SEQ_LENS_K].ptr),
                             cs->num_pages);
}

namespace {

// attn_kv_append and attn_kv_append_args: slot[K] / slot[V] are the caches (named k_name /
// v_name in messages), of any storage type, with their int8 scales in slot[K_SCALE] /
// slot[V_SCALE]; the new rows are NEW_K / NEW_V (fp32 or the cache's type; int8 ones with
// NEW_K_SCALE / NEW_V_SCALE).
attn_status append(const char *fn, const attn_desc *desc, const Slot *slot, const char *k_name,
                   const char *v_name) {
    const core::Params &dp = desc->p;
    const core::Shape &sh = dp.shape;
    const bool paged = dp.page_size != 0;
    auto name = [&](int w) {
        return w == ATTN_K ? k_name : w == ATTN_V ? v_name : operand_name(w);
    };
    for (int w : {ATTN_K, ATTN_V}) {
        if (!slot[w].ptr) return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL", fn, name(w));
        if (!slot[w].writable)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s is bound read-only: bind the cache it writes with "
                        "attn_args_set_out_f32 / _f16 / _bf16 / _i8 / _fp8",
                        fn, name(w));
    }
    if (!slot[ATTN_SEQ_LENS_K].ptr)
        return fail(ATTN_ERR_NULL_POINTER, "%s: seq_lens_k is NULL", fn);
    // Storage types: an int8 cache comes with its (writable) scales, an fp8 one may come with
    // its scales (read only), new rows are fp32 or the cache's type, int8 new rows come with
    // their scales.
    for (int w : {ATTN_K, ATTN_V}) {
        const int sw = w == ATTN_K ? ATTN_K_SCALE : ATTN_V_SCALE;
        const int nw = w == ATTN_K ? ATTN_NEW_K : ATTN_NEW_V;
        const int nsw = w == ATTN_K ? ATTN_NEW_K_SCALE : ATTN_NEW_V_SCALE;
        const core::DType ct = slot[w].type, nt = slot[nw].type;
        const bool i8 = ct == core::DType::I8;
        if (i8 && !slot[sw].ptr)
            return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL but %s is int8", fn,
                        operand_name(sw), name(w));
        if (!core::has_scale(ct) && slot[sw].ptr)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s is bound but %s is not int8 or fp8 (bound with "
                        "attn_args_set_out_i8 / _fp8)",
                        fn, operand_name(sw), name(w));
        if (i8 && !slot[sw].writable)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s is bound read-only: bind the scales it writes with "
                        "attn_args_set_out_f32",
                        fn, operand_name(sw));
        if (slot[nw].ptr && nt != core::DType::F32 && nt != ct)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s is %s but %s is %s: new rows are fp32 or the cache's type", fn,
                        operand_name(nw), dtype_name(nt), name(w), dtype_name(ct));
        const bool ni8 = slot[nw].ptr && nt == core::DType::I8;
        if (ni8 && !slot[nsw].ptr)
            return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL but %s is int8", fn,
                        operand_name(nsw), operand_name(nw));
        if (!ni8 && slot[nsw].ptr)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s is bound but %s is not int8 (bound with attn_args_set_i8)", fn,
                        operand_name(nsw), operand_name(nw));
    }
    // seq_lens_k is required here in every mode (it says where the new rows go), so a varlen
    // pack without pages is refused below only if cu_seqlens_k is missing.
    bool used[kOperands] = {};
    for (int w : {ATTN_K, ATTN_V, ATTN_K_SCALE, ATTN_V_SCALE, ATTN_CU_SEQLENS_Q, ATTN_BLOCK_TABLE,
                  ATTN_NEW_K, ATTN_NEW_V, ATTN_NEW_K_SCALE, ATTN_NEW_V_SCALE})
        used[w] = true;
    used[ATTN_CU_SEQLENS_K] = dp.varlen && !paged;
    used[ATTN_SEQ_LENS_K] = paged; // checked below in every mode
    size_t need[kOperands];
    CallShape cs;
    if (attn_status st = check_serving(fn, desc, slot, used, false, need, &cs)) return st;
    for (int w : {ATTN_NEW_K, ATTN_NEW_V}) // NULL only when there is nothing to append
        if (!slot[w].ptr && need[w] > 0)
            return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL", fn, operand_name(w));
    // seq_lens_k, the lengths after the append (check_serving checked it with a paged cache)
    if (!paged)
        if (attn_status st = check_seq_lens_k(fn, sh, slot[ATTN_SEQ_LENS_K])) return st;
    const int32_t *lens = static_cast<const int32_t *>(slot[ATTN_SEQ_LENS_K].ptr);
    const int32_t *cu = static_cast<const int32_t *>(slot[ATTN_CU_SEQLENS_Q].ptr);
    for (size_t b = 0; b < sh.batch; ++b) {
        const size_t n = dp.varlen ? static_cast<size_t>(cu[b + 1] - cu[b]) : sh.seq_q;
        if (static_cast<size_t>(lens[b]) < n)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: seq_lens_k[%zu] (%d) is less than the %zu new tokens of sequence "
                        "%zu (it counts the cache after the append)",
                        fn, b, static_cast<int>(lens[b]), n, b);
        if (dp.varlen && !paged) {
            const int32_t *ck = static_cast<const int32_t *>(slot[ATTN_CU_SEQLENS_K].ptr);
            if (lens[b] > ck[b + 1] - ck[b])
                return fail(ATTN_ERR_INVALID_ARGUMENT,
                            "%s: seq_lens_k[%zu] (%d) exceeds sequence %zu's room in the pack "
                            "(cu_seqlens_k gives %d)",
                            fn, b, static_cast<int>(lens[b]), b,
                            static_cast<int>(ck[b + 1] - ck[b]));
        }
    }
    Buffer bufs[8];
    int nb = 0;
    for (int w : {ATTN_K, ATTN_V, ATTN_K_SCALE, ATTN_V_SCALE, ATTN_NEW_K, ATTN_NEW_V,
                  ATTN_NEW_K_SCALE, ATTN_NEW_V_SCALE}) {
        if (!slot[w].ptr) continue;
        if (attn_status st = check_len(fn, name(w), slot[w].len, need[w])) return st;
        const bool cache = is_cache(w);
        // a paged pool may be written anywhere: all of it counts for aliasing
        const size_t n = paged && cache ? slot[w].len : need[w];
        bufs[nb++] = Buffer{slot[w].ptr, n * core::dtype_bytes(slot[w].type), name(w), cache};
    }
    if (attn_status st = check_aliasing(fn, bufs, nb)) return st;
    if (paged)
        if (attn_status st = check_pages(fn, dp, slot, true, need, &cs)) return st;
    core::Params p = dp;
    p.total_q = cs.total_q;
    p.k_type = slot[ATTN_K].type;
    p.v_type = slot[ATTN_V].type;
    core::Tensors t;
    t.k = slot[ATTN_K].ptr;
    t.v = slot[ATTN_V].ptr;
    t.k_scale = static_cast<const float *>(slot[ATTN_K_SCALE].ptr);
    t.v_scale = static_cast<const float *>(slot[ATTN_V_SCALE].ptr);
    unit_scale(p.k_type, &t.k_scale, &p.ks);
    unit_scale(p.v_type, &t.v_scale, &p.vs);
    t.seq_lens_k = lens;
    t.cu_q = dp.varlen ? cu : nullptr;
    t.block_table = paged ? static_cast<const int32_t *>(slot[ATTN_BLOCK_TABLE].ptr) : nullptr;
    // positions come from seq_lens_k; cu_seqlens_k only places the sequences in the pack
    t.cu_k =
        dp.varlen && !paged ? static_cast<const int32_t *>(slot[ATTN_CU_SEQLENS_K].ptr) : nullptr;
    // Quantizing a non-finite value has no scale (int8) or code (fp8), nor has a value divided
    // by a scale that is not finite and > 0: refused, naming the row, before any write.
    const size_t tokens = dp.varlen ? cs.total_q : sh.batch * sh.seq_q;
    for (int w : {ATTN_K, ATTN_V}) {
        const int nw = w == ATTN_K ? ATTN_NEW_K : ATTN_NEW_V;
        if (!core::has_scale(slot[w].type) || slot[nw].type != core::DType::F32) continue;
        float bad_scale = 0.0f;
        const size_t bad = core::is_fp8(slot[w].type)
                               ? core::kv_append_bad_scale(p, t, w == ATTN_V, &bad_scale)
                               : SIZE_MAX;
        if (bad != SIZE_MAX)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s row %zu (token %zu, KV head %zu) goes to a %s row whose scale "
                        "(%g) is not finite and > 0",
                        fn, operand_name(nw), bad, bad / sh.heads_kv, bad % sh.heads_kv,
                        dtype_name(slot[w].type), static_cast<double>(bad_scale));
        const size_t dim = w == ATTN_K ? sh.head_dim : sh.head_dim_v;
        const float *x = static_cast<const float *>(slot[nw].ptr);
        for (size_t r = 0; r < tokens * sh.heads_kv; ++r)
            for (size_t e = 0; e < dim; ++e)
                if (!std::isfinite(x[r * dim + e]))
                    return fail(ATTN_ERR_INVALID_ARGUMENT,
                                "%s: %s row %zu (token %zu, KV head %zu) holds a non-finite value "
                                "(NaN or infinity): it has no %s",
                                fn, operand_name(nw), r, r / sh.heads_kv, r % sh.heads_kv,
                                core::is_fp8(slot[w].type) ? "fp8 code" : "int8 scale");
    }
    const core::NewRows nk{slot[ATTN_NEW_K].ptr, slot[ATTN_NEW_K].type,
                           static_cast<const float *>(slot[ATTN_NEW_K_SCALE].ptr)};
    const core::NewRows nv{slot[ATTN_NEW_V].ptr, slot[ATTN_NEW_V].type,
                           static_cast<const float *>(slot[ATTN_NEW_V_SCALE].ptr)};
    core::kv_append(p, t, nk, nv);
    return ATTN_OK;
}

} // namespace
} // namespace capi
} // namespace attn

using namespace attn::capi;

extern "C" {

attn_status attn_kv_append(const attn_desc *desc, const attn_args *args, float *k_cache,
                           size_t k_len, float *v_cache, size_t v_len) {
    static const char fn[] = "attn_kv_append";
    return guarded(fn, [&]() -> attn_status {
        if (attn_status st = check_desc(fn, desc)) return st;
        if (!args) return fail(ATTN_ERR_NULL_POINTER, "%s: args is NULL", fn);
        if (!k_cache) return fail(ATTN_ERR_NULL_POINTER, "%s: k_cache is NULL", fn);
        if (!v_cache) return fail(ATTN_ERR_NULL_POINTER, "%s: v_cache is NULL", fn);
        for (int w : {ATTN_NEW_K, ATTN_NEW_V})
            if (args->slot[w].ptr && args->slot[w].type != core::DType::F32)
                return fail(ATTN_ERR_INVALID_ARGUMENT,
                            "%s: %s is %s: attn_kv_append takes fp32 rows into fp32 caches "
                            "(attn_kv_append_args takes every storage type)",
                            fn, operand_name(w), dtype_name(args->slot[w].type));
        // The caches stand where K and V stand in a run (fp32, no scales).
        Slot s2[kOperands];
        for (int w = 0; w < kOperands; ++w) s2[w] = args->slot[w];
        s2[ATTN_K] = Slot{k_cache, k_len, core::DType::F32, true};
        s2[ATTN_V] = Slot{v_cache, v_len, core::DType::F32, true};
        s2[ATTN_K_SCALE] = s2[ATTN_V_SCALE] = Slot{};
        s2[ATTN_NEW_K_SCALE] = s2[ATTN_NEW_V_SCALE] = Slot{};
        return append(fn, desc, s2, "k_cache", "v_cache");
    });
}

attn_status attn_kv_append_args(const attn_desc *desc, const attn_args *args) {
    static const char fn[] = "attn_kv_append_args";
    return guarded(fn, [&]() -> attn_status {
        if (attn_status st = check_desc(fn, desc)) return st;
        if (!args) return fail(ATTN_ERR_NULL_POINTER, "%s: args is NULL", fn);
        return append(fn, desc, args->slot, "k", "v");
    });
}

attn_status attn_merge(const attn_desc *desc, const attn_args *acc, const attn_args *part) {
    static const char fn[] = "attn_merge";
    return guarded(fn, [&]() -> attn_status {
        if (attn_status st = check_desc(fn, desc)) return st;
        if (!acc) return fail(ATTN_ERR_NULL_POINTER, "%s: acc is NULL", fn);
        if (!part) return fail(ATTN_ERR_NULL_POINTER, "%s: part is NULL", fn);
        const core::Params &dp = desc->p;
        const Slot *a = acc->slot, *b = part->slot;
        for (int w : {ATTN_OUT, ATTN_LSE}) {
            if (!a[w].ptr)
                return fail(ATTN_ERR_NULL_POINTER, "%s: acc's %s is NULL", fn, operand_name(w));
            if (!b[w].ptr)
                return fail(ATTN_ERR_NULL_POINTER, "%s: part's %s is NULL", fn, operand_name(w));
        }
        size_t need[kOperands];
        for (int w = 0; w < kOperands; ++w) need[w] = desc->len[w];
        size_t total_q = 0;
        const int32_t *cu = static_cast<const int32_t *>(a[ATTN_CU_SEQLENS_Q].ptr);
        if (dp.varlen) {
            if (!cu)
                return fail(ATTN_ERR_NULL_POINTER,
                            "%s: acc's cu_seqlens_q is NULL but ATTN_PARAM_VARLEN is 1", fn);
            if (attn_status st = check_len(fn, operand_name(ATTN_CU_SEQLENS_Q),
                                           a[ATTN_CU_SEQLENS_Q].len, desc->len[ATTN_CU_SEQLENS_Q]))
                return st;
            if (attn_status st = check_cu(fn, ATTN_CU_SEQLENS_Q, cu, dp.shape.batch, dp.shape.seq_q,
                                          "seq_q", &total_q))
                return st;
            const core::View vo = view_of(dp.shape, dp, ATTN_OUT, dp.out);
            need[ATTN_OUT] = core::pack_len(vo, total_q);
            need[ATTN_LSE] = dp.shape.heads_q * total_q;
        }
        Buffer bufs[4];
        int n = 0;
        for (const Slot *sl : {a, b})
            for (int w : {ATTN_OUT, ATTN_LSE}) {
                char who[32]; // "acc's out"
                std::snprintf(who, sizeof who, "%s's %s", sl == a ? "acc" : "part",
                              operand_name(w));
                if (attn_status st = check_len(fn, who, sl[w].len, need[w])) return st;
                bufs[n++] = Buffer{sl[w].ptr, need[w] * sizeof(float),
                                   sl == a ? (w == ATTN_OUT ? "acc out" : "acc lse")
                                           : (w == ATTN_OUT ? "part out" : "part lse"),
                                   sl == a};
            }
        if (attn_status st = check_aliasing(fn, bufs, n)) return st;
        core::Params p = dp;
        p.total_q = total_q;
        core::Tensors t;
        t.out = static_cast<float *>(const_cast<void *>(a[ATTN_OUT].ptr));
        t.lse = static_cast<float *>(const_cast<void *>(a[ATTN_LSE].ptr));
        t.cu_q = dp.varlen ? cu : nullptr;
        core::merge_into(p, t, static_cast<const float *>(b[ATTN_OUT].ptr),
                         static_cast<const float *>(b[ATTN_LSE].ptr));
        return ATTN_OK;
    });
}

} // extern "C"
