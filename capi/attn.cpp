// The extern "C" surface: argument checking, error messages, and the exception barrier.
// Every exported body runs inside guarded(), which turns any C++ exception into a status
// (onnxruntime's API_IMPL_BEGIN/END idea): nothing throws across the ABI.
#include "attn.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <memory>
#include <new>
#include <vector>

#include "attention.hpp"
#include "thread_pool.hpp"

namespace core = attn::core;

// The operand table (capi/operands.def): one row per attn_operand, each at its pinned value.
struct OperandInfo {
    attn_operand id;
    const char *name;
    unsigned in_types, out_types; // bits 1u << attn_dtype
    int rank;
    int strided; // ATTN_S_*
    int grad_of; // the operand it is the gradient of, or -1
};
constexpr OperandInfo kOperandInfo[] = {
#define ATTN_OPERAND(id, name, in, out, rank, strided, grad_of)                                    \
    {id, name, in, out, rank, strided, grad_of},
#include "operands.def"
#undef ATTN_OPERAND
};
constexpr int kOperands = sizeof kOperandInfo / sizeof kOperandInfo[0];
enum OperandRow : int {
#define ATTN_OPERAND(id, ...) kRow_##id,
#include "operands.def"
#undef ATTN_OPERAND
};
#define ATTN_OPERAND(id, ...)                                                                      \
    static_assert(static_cast<int>(kRow_##id) == static_cast<int>(id),                             \
                  "capi/operands.def: the row of " #id " is not at its pinned value in attn.h");
#include "operands.def"
#undef ATTN_OPERAND

// The parameter table (capi/params.def): one row per attn_param, each at its pinned value.
struct ParamInfo {
    const char *id_name; // "ATTN_PARAM_CAUSAL", as messages name it
    const char *name;    // "causal"
    bool is_float;
    double min, max, default_value;
};
const ParamInfo kParamInfo[] = {
#define ATTN_PARAM_ROW(id, name, is_float, min, max, def) {#id, name, is_float != 0, min, max, def},
#include "params.def"
#undef ATTN_PARAM_ROW
};
constexpr int kParams = sizeof kParamInfo / sizeof kParamInfo[0];
enum ParamRow : int {
#define ATTN_PARAM_ROW(id, ...) kRow_##id,
#include "params.def"
#undef ATTN_PARAM_ROW
};
#define ATTN_PARAM_ROW(id, ...)                                                                    \
    static_assert(static_cast<int>(kRow_##id) == static_cast<int>(id),                             \
                  "capi/params.def: the row of " #id " is not at its pinned value in attn.h");
#include "params.def"
#undef ATTN_PARAM_ROW

struct attn_desc {
    core::Params p;
    size_t len[kOperands] = {};          // attn_desc_required_len per operand
    bool custom_strides[kOperands] = {}; // set by attn_desc_set_strides
    int alibi = ATTN_ALIBI_NONE;         // ATTN_PARAM_ALIBI
    std::vector<float> alibi_standard;   // the standard slopes, when alibi == STANDARD
    size_t max_pages_param = 0;          // ATTN_PARAM_MAX_PAGES as set (0 = from seq_k)
    std::atomic<bool> used{false};
};

// One bound operand of an attn_args.
struct Slot {
    const void *ptr = nullptr;
    size_t len = 0;
    core::DType type = core::DType::F32; // storage type of Q, K, V (the setter that bound it)
    bool writable = false;               // bound with an attn_args_set_out_* setter
};

struct attn_args {
    Slot slot[kOperands];
};

namespace {

constexpr size_t kMaxDim = 0x7fffffff;
constexpr size_t kMaxThreads = 256;

thread_local char t_error[512] = "";

attn_status fail(attn_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
attn_status fail(attn_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(t_error, sizeof t_error, fmt, ap);
    va_end(ap);
    return s;
}

template <class F> attn_status guarded(const char *fn, F &&body) noexcept {
    try {
        return body();
    } catch (const std::bad_alloc &) {
        return fail(ATTN_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    } catch (const std::exception &e) {
        return fail(ATTN_ERR_INTERNAL, "%s: internal error: %s", fn, e.what());
    } catch (...) {
        return fail(ATTN_ERR_INTERNAL, "%s: internal error: unknown exception", fn);
    }
}

// The integer a caller passed for an enum parameter. A C caller may pass any int; loading it as a
// C++ enum outside the enumerators' range would be undefined, so the bytes are read as an int.
template <class E> int raw_enum(const E &e) {
    static_assert(sizeof(E) == sizeof(int), "C enums are int-sized");
    int v;
    std::memcpy(&v, &e, sizeof v);
    return v;
}

bool mul_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_mul_overflow(a, b, out);
}
bool add_ok(size_t a, size_t b, size_t *out) {
    return !__builtin_add_overflow(a, b, out);
}

// Elements spanned by a strided [count0][count1][count2][dim] view; false on overflow.
bool span_of(size_t c0, size_t s0, size_t c1, size_t s1, size_t c2, size_t s2, size_t dim,
             size_t *out) {
    size_t a, b, c, x;
    if (!mul_ok(c0 - 1, s0, &a) || !mul_ok(c1 - 1, s1, &b) || !mul_ok(c2 - 1, s2, &c)) return false;
    if (!add_ok(a, b, &x) || !add_ok(x, c, &x) || !add_ok(x, dim, &x)) return false;
    size_t bytes;
    if (!mul_ok(x, sizeof(float), &bytes)) return false;
    *out = x;
    return true;
}

// True when no two rows of a [c0][c1][c2][dim] view overlap: sorted by stride, every stride
// clears the extent of everything inside it.
bool rows_disjoint(size_t c0, size_t s0, size_t c1, size_t s1, size_t c2, size_t s2, size_t dim) {
    size_t cs[3] = {c0, c1, c2}, ss[3] = {s0, s1, s2};
    for (int a = 0; a < 3; ++a)
        for (int b = a + 1; b < 3; ++b)
            if (ss[b] < ss[a]) {
                size_t t = ss[a];
                ss[a] = ss[b];
                ss[b] = t;
                t = cs[a];
                cs[a] = cs[b];
                cs[b] = t;
            }
    size_t extent = dim;
    for (int a = 0; a < 3; ++a) {
        if (cs[a] == 1) continue;
        if (ss[a] < extent) return false;
        extent = (cs[a] - 1) * ss[a] + extent; // no overflow: checked by span_of
    }
    return true;
}

struct Range {
    uintptr_t lo, hi; // [lo, hi)
};
Range range_of(const void *p, size_t bytes) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return Range{a, a + bytes};
}
bool overlaps(Range a, Range b) {
    return a.lo < b.hi && b.lo < a.hi && a.lo != a.hi && b.lo != b.hi;
}

const char *operand_name(int which) {
    return which >= 0 && which < kOperands ? kOperandInfo[which].name : "?";
}

const char *dtype_name(core::DType t) {
    switch (t) {
    case core::DType::F16:
        return "f16";
    case core::DType::BF16:
        return "bf16";
    case core::DType::I8:
        return "int8";
    default:
        return "f32";
    }
}

// The setter family an operand is bound with (messages name it): its input or output type set.
enum class Kind { F32In, F32Out, U8, I32 };
Kind operand_kind(int which) {
    const OperandInfo &o = kOperandInfo[which];
    if (o.in_types & ATTN_T_U8) return Kind::U8;
    if (o.in_types & ATTN_T_I32) return Kind::I32;
    return o.in_types ? Kind::F32In : Kind::F32Out;
}
const char *kind_setter(Kind k) {
    switch (k) {
    case Kind::F32Out:
        return "attn_args_set_out_f32";
    case Kind::U8:
        return "attn_args_set_u8";
    case Kind::I32:
        return "attn_args_set_i32";
    default:
        return "attn_args_set_f32";
    }
}
size_t kind_bytes(Kind k) {
    return k == Kind::U8 ? 1 : 4;
}

// The int8 scales of K and V: K's shape with head_dim 1.
bool is_scale(int which) {
    return kOperandInfo[which].strided == ATTN_S_SCALES;
}

// The operands with a [c0][c1][c2][dim] strided view (Q, K, V, OUT, BIAS, K_SCALE, V_SCALE).
bool is_strided(int which) {
    return which >= 0 && which < kOperands &&
           (kOperandInfo[which].strided == ATTN_S_DATA ||
            kOperandInfo[which].strided == ATTN_S_SCALES);
}

// The view of a strided operand (Q, K, V, OUT, BIAS, K_SCALE, V_SCALE) as [c0][c1][c2][dim] with
// strides: dense [batch][heads][seq]; varlen a token pack [1][heads][batch * max_len] (an upper
// bound, the real total comes with each call); a paged K/V one page [1][heads_kv][page_size].
struct View {
    size_t c0, s0, c1, s1, c2, s2, dim;
};
View view_of(const core::Shape &s, const core::Params &mode, int which, const core::Layout &lay) {
    if (which == ATTN_BIAS)
        return View{s.batch, lay.batch, s.heads_q, lay.head, s.seq_q, lay.row, s.seq_k};
    const bool is_q = which == ATTN_Q || which == ATTN_OUT;
    const size_t heads = is_q ? s.heads_q : s.heads_kv, seq = is_q ? s.seq_q : s.seq_k;
    const size_t dim = is_scale(which)                        ? 1
                       : which == ATTN_V || which == ATTN_OUT ? s.head_dim_v
                                                              : s.head_dim;
    if (!is_q && mode.page_size) return View{1, 0, heads, lay.head, mode.page_size, lay.row, dim};
    if (mode.varlen) return View{1, 0, heads, lay.head, s.batch * seq, lay.row, dim};
    return View{s.batch, lay.batch, heads, lay.head, seq, lay.row, dim};
}

// Buffer lengths of the strided operands from the shape, the layout mode and the strides.
bool strided_len(const core::Shape &s, const core::Params &mode, int which, const core::Layout &lay,
                 size_t *out) {
    const View v = view_of(s, mode, which, lay);
    return span_of(v.c0, v.s0, v.c1, v.s1, v.c2, v.s2, v.dim, out);
}

// Elements a varlen pack of `tokens` rows spans in the token view v (0 for an empty pack).
size_t pack_len(const View &v, size_t tokens) {
    return tokens ? (tokens - 1) * v.s2 + (v.c1 - 1) * v.s1 + v.dim : 0;
}

bool out_nests(const core::Shape &s, const core::Params &mode, const core::Layout &lay) {
    const View v = view_of(s, mode, ATTN_OUT, lay);
    return rows_disjoint(v.c0, v.s0, v.c1, v.s1, v.c2, v.s2, v.dim);
}

// The strides of a strided operand in p (null for any other operand).
const core::Layout *layout_in(const core::Params &p, int which) {
    switch (which) {
    case ATTN_Q:
        return &p.q;
    case ATTN_K:
        return &p.k;
    case ATTN_V:
        return &p.v;
    case ATTN_OUT:
        return &p.out;
    case ATTN_BIAS:
        return &p.bias;
    case ATTN_K_SCALE:
        return &p.ks;
    case ATTN_V_SCALE:
        return &p.vs;
    default:
        return nullptr;
    }
}
core::Layout *layout_of(attn_desc *d, int which) {
    return const_cast<core::Layout *>(layout_in(d->p, which));
}

// Contiguous default strides of a strided operand: BHSD; token-major [tokens][heads][dim] in
// varlen mode; token-major pages [page_size][heads_kv][dim] with a paged cache.
core::Layout default_layout(const core::Shape &s, const core::Params &mode, int which) {
    if (which == ATTN_BIAS)
        return core::Layout{s.heads_q * s.seq_q * s.seq_k, s.seq_q * s.seq_k, s.seq_k};
    const bool is_q = which == ATTN_Q || which == ATTN_OUT;
    const size_t heads = is_q ? s.heads_q : s.heads_kv, seq = is_q ? s.seq_q : s.seq_k;
    const size_t dim = is_scale(which)                        ? 1
                       : which == ATTN_V || which == ATTN_OUT ? s.head_dim_v
                                                              : s.head_dim;
    if (!is_q && mode.page_size)
        return core::Layout{mode.page_size * heads * dim, dim, heads * dim};
    if (mode.varlen) return core::Layout{0, dim, heads * dim};
    return core::Layout{heads * seq * dim, seq * dim, dim};
}

void compute_lens(attn_desc *d) {
    const core::Shape &s = d->p.shape;
    for (int w = 0; w < kOperands; ++w)
        if (is_strided(w)) strided_len(s, d->p, w, *layout_of(d, w), &d->len[w]);
    d->len[ATTN_LSE] = s.batch * s.heads_q * s.seq_q;
    d->len[ATTN_WEIGHTS] = s.batch * s.heads_q * s.seq_q * s.seq_k;
    d->len[ATTN_KEY_VALID] = s.batch * s.seq_k;
    d->len[ATTN_ALLOWED] = s.seq_q * s.seq_k;
    span_of(s.batch, d->p.alibi_batch, s.heads_q, d->p.alibi_head, 1, 0, 1,
            &d->len[ATTN_ALIBI_SLOPES]);
    d->len[ATTN_SINKS] = s.heads_q;
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

attn_status check_desc(const char *fn, const attn_desc *desc) {
    if (!desc) return fail(ATTN_ERR_NULL_POINTER, "%s: desc is NULL", fn);
    return ATTN_OK;
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

// Shared checks of attn_forward / attn_weights: pointers and aliasing of outputs.
struct Buffer {
    const void *ptr;
    size_t bytes;
    const char *name;
    bool output;
};

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
        if (is_strided(w)) *layout_of(d, w) = default_layout(s, d->p, w);
    d->p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    d->p.causal = core::Causal::None;
    compute_lens(d);
    *out = d;
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

// Call-time facts of the serving layouts: the totals of a varlen pack, the pages of a paged
// cache. need[] receives every operand's required length for this call.
struct CallShape {
    size_t total_q = 0, total_k = 0, num_pages = 0;
};

// Checks the serving-layout operands of a call (which must be bound with which mode, their
// values) and fills need[] / cs. `what` names the operation for UNSUPPORTED messages.
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
    for (int w : {ATTN_CU_SEQLENS_Q, ATTN_CU_SEQLENS_K, ATTN_BLOCK_TABLE, ATTN_SEQ_LENS_K})
        if (bound(w) && slot[w].len < need[w])
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s has %zu elements, needs at least %zu",
                        fn, operand_name(w), slot[w].len, need[w]);
    if (bound(ATTN_SEQ_LENS_K)) {
        const int32_t *lens = static_cast<const int32_t *>(slot[ATTN_SEQ_LENS_K].ptr);
        for (size_t b = 0; b < s.batch; ++b)
            if (lens[b] < 0 || static_cast<size_t>(lens[b]) > s.seq_k)
                return fail(ATTN_ERR_INVALID_ARGUMENT,
                            "%s: seq_lens_k[%zu] (%d) is outside [0, seq_k = %zu]", fn, b,
                            static_cast<int>(lens[b]), s.seq_k);
    }
    if (p.varlen) {
        const int32_t *cu = static_cast<const int32_t *>(slot[ATTN_CU_SEQLENS_Q].ptr);
        if (attn_status st =
                check_cu(fn, ATTN_CU_SEQLENS_Q, cu, s.batch, s.seq_q, "seq_q", &cs->total_q))
            return st;
        const View vq = view_of(s, p, ATTN_Q, p.q), vo = view_of(s, p, ATTN_OUT, p.out);
        need[ATTN_Q] = pack_len(vq, cs->total_q);
        need[ATTN_OUT] = pack_len(vo, cs->total_q);
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
                need[w] = pack_len(view_of(s, p, w, *layout_in(p, w)), cs->total_k);
        }
    }
    return ATTN_OK;
}

// With a paged cache: the pages the bound K (and V) hold, then the block table against them.
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

// Checks the operands of one operation and runs it. slot[w] holds operand w (null = unbound).
attn_status execute(const char *fn, const attn_desc *desc, int op, const Slot *slot) {
    if (attn_status st = check_desc(fn, desc)) return st;
    if (op != ATTN_OP_FORWARD && op != ATTN_OP_WEIGHTS && op != ATTN_OP_BACKWARD)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: op (%d) is not an attn_op (0 forward, 1 weights, 2 backward)", fn, op);
    const bool fwd = op == ATTN_OP_FORWARD, bwd = op == ATTN_OP_BACKWARD;
    // Operands this operation reads or writes; the others are ignored.
    bool used[kOperands] = {};
    const int common[] = {ATTN_Q,
                          ATTN_K,
                          ATTN_KEY_VALID,
                          ATTN_ALLOWED,
                          ATTN_BIAS,
                          ATTN_ALIBI_SLOPES,
                          ATTN_SINKS,
                          ATTN_QUERY_VALID,
                          ATTN_SEQ_LENS_K,
                          ATTN_CU_SEQLENS_Q,
                          ATTN_CU_SEQLENS_K,
                          ATTN_BLOCK_TABLE,
                          ATTN_K_SCALE};
    for (int w : common) used[w] = true;
    const int grads[] = {ATTN_DQ, ATTN_DK, ATTN_DV, ATTN_DBIAS, ATTN_DSINKS};
    if (fwd) {
        used[ATTN_V] = used[ATTN_OUT] = used[ATTN_LSE] = used[ATTN_KEY_MASS] = true;
        used[ATTN_V_SCALE] = true;
    } else if (bwd) {
        used[ATTN_V] = used[ATTN_OUT] = used[ATTN_LSE] = used[ATTN_DOUT] = true;
        used[ATTN_V_SCALE] = true;
        for (int w : grads) used[w] = true;
    } else {
        used[ATTN_WEIGHTS] = true;
    }
    const int required[] = {ATTN_Q, ATTN_K, fwd || bwd ? ATTN_V : ATTN_WEIGHTS,
                            fwd || bwd ? ATTN_OUT : -1, bwd ? ATTN_DOUT : -1};
    for (int w : required)
        if (w >= 0 && !slot[w].ptr)
            return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL", fn, operand_name(w));
    // int8 K / V come with their scales, and only they do
    for (int w : {ATTN_K, ATTN_V}) {
        const int sw = w == ATTN_K ? ATTN_K_SCALE : ATTN_V_SCALE;
        if (!used[w]) continue;
        const bool i8 = slot[w].type == core::DType::I8;
        if (i8 && !slot[sw].ptr)
            return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL but %s is int8", fn,
                        operand_name(sw), operand_name(w));
        if (!i8 && slot[sw].ptr)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s is bound but %s is not int8 (bound with attn_args_set_i8)", fn,
                        operand_name(sw), operand_name(w));
    }
    if (bwd) {
        for (int w : {ATTN_K, ATTN_V})
            if (slot[w].type == core::DType::I8)
                return fail(ATTN_ERR_UNSUPPORTED,
                            "%s: ATTN_OP_BACKWARD needs fp32, f16 or bf16 %s (it is int8) in "
                            "libattn %s",
                            fn, operand_name(w), ATTN_VERSION_STRING);
        if (!slot[ATTN_LSE].ptr)
            return fail(ATTN_ERR_NULL_POINTER,
                        "%s: lse is NULL: ATTN_OP_BACKWARD needs the lse (and out) of the forward",
                        fn);
        bool any = false;
        for (int w : grads) any |= slot[w].ptr != nullptr;
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
        // A gradient is written in its operand's layout: a layout whose rows overlap (a stride
        // of 0 broadcasting Q, K or V) would need the gradient summed over the copies.
        for (int g : {ATTN_DQ, ATTN_DK, ATTN_DV}) {
            const int w = g == ATTN_DQ ? ATTN_Q : g == ATTN_DK ? ATTN_K : ATTN_V;
            const core::Layout &lay = *layout_in(desc->p, w);
            const View v = view_of(desc->p.shape, desc->p, w, lay);
            if (slot[g].ptr && !rows_disjoint(v.c0, v.s0, v.c1, v.s1, v.c2, v.s2, v.dim))
                return fail(ATTN_ERR_INVALID_ARGUMENT,
                            "%s: %s is bound but the %s strides (%zu, %zu, %zu) overlap rows (a "
                            "broadcast): its gradient would be a sum over them, which libattn %s "
                            "does not compute",
                            fn, operand_name(g), operand_name(w), lay.batch, lay.head, lay.row,
                            ATTN_VERSION_STRING);
        }
        if (desc->p.page_size)
            return fail(
                ATTN_ERR_UNSUPPORTED,
                "%s: ATTN_OP_BACKWARD with a paged K/V cache is not supported in libattn %s", fn,
                ATTN_VERSION_STRING);
    }
    size_t need[kOperands];
    CallShape cs;
    if (attn_status st = check_serving(fn, desc, slot, used, op == ATTN_OP_WEIGHTS, need, &cs))
        return st;
    for (const OperandInfo &o : kOperandInfo) // varlen: the per-call totals
        if (o.grad_of >= 0) need[o.id] = need[o.grad_of];
    const core::Params &dp = desc->p;
    const bool paged = dp.page_size != 0;
    Buffer bufs[kOperands];
    int nb = 0;
    for (int w = 0; w < kOperands; ++w) {
        if (!used[w] || !slot[w].ptr) continue;
        if (slot[w].len < need[w])
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s has %zu elements, needs at least %zu",
                        fn, operand_name(w), slot[w].len, need[w]);
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
        if (attn_status st = check_pages(fn, dp, slot, fwd, need, &cs)) return st;
    core::Params p = dp;
    p.total_q = cs.total_q;
    p.q_type = slot[ATTN_Q].type;
    p.k_type = slot[ATTN_K].type;
    p.v_type = fwd || bwd ? slot[ATTN_V].type : core::DType::F32;
    const float *alibi = static_cast<const float *>(slot[ATTN_ALIBI_SLOPES].ptr);
    if (desc->alibi == ATTN_ALIBI_OPERAND && !alibi)
        return fail(ATTN_ERR_NULL_POINTER,
                    "%s: alibi_slopes is NULL but ATTN_PARAM_ALIBI is ATTN_ALIBI_OPERAND", fn);
    if (desc->alibi != ATTN_ALIBI_OPERAND && alibi)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: alibi_slopes is bound but ATTN_PARAM_ALIBI is not ATTN_ALIBI_OPERAND", fn);
    if (desc->alibi == ATTN_ALIBI_STANDARD) { // the library's [heads_q] slopes
        alibi = desc->alibi_standard.data();
        p.alibi_batch = 0;
        p.alibi_head = 1;
    }
    if (slot[ATTN_SINKS].ptr && p.plus_one)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: sinks cannot be combined with ATTN_PARAM_SOFTMAX_PLUS_ONE", fn);
    const_cast<attn_desc *>(desc)->used.store(true);
    core::Tensors t;
    if (p.q_type == core::DType::F32)
        t.q = static_cast<const float *>(slot[ATTN_Q].ptr);
    else
        t.q16 = static_cast<const uint16_t *>(slot[ATTN_Q].ptr);
    t.k = slot[ATTN_K].ptr;
    t.k_scale = static_cast<const float *>(slot[ATTN_K_SCALE].ptr);
    t.key_valid = static_cast<const uint8_t *>(slot[ATTN_KEY_VALID].ptr);
    t.allowed = static_cast<const uint8_t *>(slot[ATTN_ALLOWED].ptr);
    t.bias = static_cast<const float *>(slot[ATTN_BIAS].ptr);
    t.alibi = alibi;
    t.sinks = static_cast<const float *>(slot[ATTN_SINKS].ptr);
    t.query_valid = static_cast<const uint8_t *>(slot[ATTN_QUERY_VALID].ptr);
    t.seq_lens_k = static_cast<const int32_t *>(slot[ATTN_SEQ_LENS_K].ptr);
    t.cu_q = static_cast<const int32_t *>(slot[ATTN_CU_SEQLENS_Q].ptr);
    t.cu_k = paged ? nullptr : static_cast<const int32_t *>(slot[ATTN_CU_SEQLENS_K].ptr);
    t.block_table = paged ? static_cast<const int32_t *>(slot[ATTN_BLOCK_TABLE].ptr) : nullptr;
    if (fwd) {
        t.v = slot[ATTN_V].ptr;
        t.v_scale = static_cast<const float *>(slot[ATTN_V_SCALE].ptr);
        t.out = static_cast<float *>(const_cast<void *>(slot[ATTN_OUT].ptr));
        t.lse = static_cast<float *>(const_cast<void *>(slot[ATTN_LSE].ptr));
        t.key_mass = static_cast<float *>(const_cast<void *>(slot[ATTN_KEY_MASS].ptr));
        core::forward(p, t);
    } else if (bwd) {
        // 16-bit Q, K, V and DOUT are widened exactly to fp32 copies in their own layouts (the
        // spans attn_run checked); the kernel then runs on fp32 throughout.
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
        t.out = static_cast<float *>(const_cast<void *>(slot[ATTN_OUT].ptr));
        t.lse = static_cast<float *>(const_cast<void *>(slot[ATTN_LSE].ptr));
        t.dout = static_cast<const float *>(ptrs[3]);
        t.dq = static_cast<float *>(const_cast<void *>(slot[ATTN_DQ].ptr));
        t.dk = static_cast<float *>(const_cast<void *>(slot[ATTN_DK].ptr));
        t.dv = static_cast<float *>(const_cast<void *>(slot[ATTN_DV].ptr));
        t.dbias = static_cast<float *>(const_cast<void *>(slot[ATTN_DBIAS].ptr));
        t.dsinks = static_cast<float *>(const_cast<void *>(slot[ATTN_DSINKS].ptr));
        core::backward(p, t);
    } else {
        t.weights = static_cast<float *>(const_cast<void *>(slot[ATTN_WEIGHTS].ptr));
        core::weights(p, t);
    }
    return ATTN_OK;
}

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
        lays[x] = d->custom_strides[w] ? *layout_of(d, w) : default_layout(s, trial, w);
        size_t span;
        if (!strided_len(s, trial, w, lays[x], &span))
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s: the %s strides make the buffer size overflow", fn, param,
                        operand_name(w));
        if (w == ATTN_OUT && !out_nests(s, trial, lays[x]))
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
    case ATTN_PARAM_ALIBI: {
        // the slopes first: when they cannot be allocated (bad_alloc) nothing has changed
        std::vector<float> slopes;
        if (iv == ATTN_ALIBI_STANDARD) {
            slopes.resize(p.shape.heads_q);
            core::alibi_standard_slopes(p.shape.heads_q, slopes.data());
        }
        d->alibi_standard.swap(slopes);
        d->alibi = static_cast<int>(iv);
        break;
    }
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
            const core::Layout &lay = *layout_of(d, w);
            size_t span;
            if (!strided_len(trial, p, w, lay, &span))
                return fail(ATTN_ERR_INVALID_ARGUMENT,
                            "%s: ATTN_PARAM_HEAD_DIM_V (%zu): the %s strides make the buffer size "
                            "overflow",
                            fn, dv, operand_name(w));
            if (w == ATTN_OUT && !out_nests(trial, p, lay))
                return fail(ATTN_ERR_INVALID_ARGUMENT,
                            "%s: ATTN_PARAM_HEAD_DIM_V (%zu): the out strides (%zu, %zu, %zu) do "
                            "not nest rows of %zu floats",
                            fn, dv, lay.batch, lay.head, lay.row, dv);
        }
        p.shape.head_dim_v = dv;
        for (int w : {ATTN_V, ATTN_OUT})
            if (!d->custom_strides[w]) *layout_of(d, w) = default_layout(p.shape, p, w);
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
        p.fp16 = iv == ATTN_COMPUTE_FP16;
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
        return d->alibi;
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
        return p.fp16 ? ATTN_COMPUTE_FP16 : ATTN_COMPUTE_EXACT;
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

// A K or V cache (or its int8 scales) that attn_kv_append_args writes: an input that the output
// setters also bind, writable.
bool is_cache(int which) {
    return kOperandInfo[which].in_types && kOperandInfo[which].out_types;
}

// The bit of a setter's element type in the operand table's type sets.
unsigned type_bit(Kind kind, core::DType type) {
    if (kind == Kind::U8) return ATTN_T_U8;
    if (kind == Kind::I32) return ATTN_T_I32;
    switch (type) {
    case core::DType::F16:
        return ATTN_T_F16;
    case core::DType::BF16:
        return ATTN_T_BF16;
    case core::DType::I8:
        return ATTN_T_I8;
    default:
        return ATTN_T_F32;
    }
}

// Binds `which` if the operand table lists the setter's type in its input set (or, for the
// output setters, its output set).
attn_status bind(const char *fn, attn_args *args, int which, const void *data, size_t len,
                 Kind kind, core::DType type = core::DType::F32) {
    if (!args) return fail(ATTN_ERR_NULL_POINTER, "%s: args is NULL", fn);
    if (which < 0 || which >= kOperands)
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: which (%d) is not an attn_operand", fn, which);
    const OperandInfo &o = kOperandInfo[which];
    const bool output = kind == Kind::F32Out;
    if (!((output ? o.out_types : o.in_types) & type_bit(kind, type))) {
        if (output && type != core::DType::F32)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s cannot be bound with %s (it binds a writable K or V cache)", fn,
                        o.name, fn);
        if (type != core::DType::F32)
            return fail(
                ATTN_ERR_INVALID_ARGUMENT, "%s: %s cannot be bound with %s (%s)", fn, o.name, fn,
                type == core::DType::I8 ? "int8 storage is for K, V, NEW_K and NEW_V"
                                        : "16-bit storage is for Q, K, V, DOUT, NEW_K and NEW_V");
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s is bound with %s, not %s", fn, o.name,
                    kind_setter(operand_kind(which)), fn);
    }
    if (!data && len != 0)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: %s is NULL with len %zu (NULL unbinds the operand: pass len 0)", fn,
                    o.name, len);
    // an output setter binds a K / V cache (or its scales) writable for attn_kv_append_args;
    // attn_run reads it as an input
    args->slot[which] =
        Slot{data, data ? len : 0, type, data != nullptr && output && is_cache(which)};
    return ATTN_OK;
}

// Conversions: both pointers given (unless n = 0), no overlap.
attn_status check_convert(const char *fn, const void *src, size_t src_bytes, const void *dst,
                          size_t dst_bytes, size_t n) {
    if (n == 0) return ATTN_OK;
    if (!src) return fail(ATTN_ERR_NULL_POINTER, "%s: src is NULL", fn);
    if (!dst) return fail(ATTN_ERR_NULL_POINTER, "%s: dst is NULL", fn);
    size_t sb, db;
    if (!mul_ok(n, src_bytes, &sb) || !mul_ok(n, dst_bytes, &db))
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: n (%zu) overflows the buffer size", fn, n);
    if (overlaps(range_of(src, sb), range_of(dst, db)))
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: src and dst overlap", fn);
    return ATTN_OK;
}

template <class S, class D>
attn_status convert(const char *fn, const S *src, D *dst, size_t n,
                    void (*f)(const S *, D *, size_t)) {
    return guarded(fn, [&]() -> attn_status {
        if (attn_status st = check_convert(fn, src, sizeof(S), dst, sizeof(D), n)) return st;
        if (n) f(src, dst, n);
        return ATTN_OK;
    });
}

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
                        "attn_args_set_out_f32 / _f16 / _bf16 / _i8",
                        fn, name(w));
    }
    if (!slot[ATTN_SEQ_LENS_K].ptr)
        return fail(ATTN_ERR_NULL_POINTER, "%s: seq_lens_k is NULL", fn);
    // Storage types: an int8 cache comes with its (writable) scales, new rows are fp32 or the
    // cache's type, int8 new rows come with their scales.
    for (int w : {ATTN_K, ATTN_V}) {
        const int sw = w == ATTN_K ? ATTN_K_SCALE : ATTN_V_SCALE;
        const int nw = w == ATTN_K ? ATTN_NEW_K : ATTN_NEW_V;
        const int nsw = w == ATTN_K ? ATTN_NEW_K_SCALE : ATTN_NEW_V_SCALE;
        const core::DType ct = slot[w].type, nt = slot[nw].type;
        const bool i8 = ct == core::DType::I8;
        if (i8 && !slot[sw].ptr)
            return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL but %s is int8", fn,
                        operand_name(sw), name(w));
        if (!i8 && slot[sw].ptr)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s is bound but %s is not int8 (bound with attn_args_set_out_i8)", fn,
                        operand_name(sw), name(w));
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
    // seq_lens_k (the lengths after the append) checked like check_serving does in a run
    if (slot[ATTN_SEQ_LENS_K].len < sh.batch)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: seq_lens_k has %zu elements, needs at least %zu", fn,
                    slot[ATTN_SEQ_LENS_K].len, sh.batch);
    const int32_t *lens = static_cast<const int32_t *>(slot[ATTN_SEQ_LENS_K].ptr);
    const int32_t *cu = static_cast<const int32_t *>(slot[ATTN_CU_SEQLENS_Q].ptr);
    for (size_t b = 0; b < sh.batch; ++b) {
        const size_t n = dp.varlen ? static_cast<size_t>(cu[b + 1] - cu[b]) : sh.seq_q;
        if (lens[b] < 0 || static_cast<size_t>(lens[b]) > sh.seq_k)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: seq_lens_k[%zu] (%d) is outside [0, seq_k = %zu]", fn, b,
                        static_cast<int>(lens[b]), sh.seq_k);
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
        if (slot[w].len < need[w])
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: %s has %zu elements, needs at least %zu",
                        fn, name(w), slot[w].len, need[w]);
        const bool cache = is_cache(w);
        // a paged pool may be written anywhere: all of it counts for aliasing
        const size_t n = paged && cache ? slot[w].len : need[w];
        bufs[nb++] = Buffer{slot[w].ptr, n * core::dtype_bytes(slot[w].type), name(w), cache};
    }
    if (attn_status st = check_aliasing(fn, bufs, nb)) return st;
    if (paged)
        if (attn_status st = check_pages(fn, dp, slot, true, need, &cs)) return st;
    // Quantizing a non-finite value has no scale: refused, naming the row, before any write.
    const size_t tokens = dp.varlen ? cs.total_q : sh.batch * sh.seq_q;
    for (int w : {ATTN_K, ATTN_V}) {
        const int nw = w == ATTN_K ? ATTN_NEW_K : ATTN_NEW_V;
        if (slot[w].type != core::DType::I8 || slot[nw].type != core::DType::F32) continue;
        const size_t dim = w == ATTN_K ? sh.head_dim : sh.head_dim_v;
        const float *x = static_cast<const float *>(slot[nw].ptr);
        for (size_t r = 0; r < tokens * sh.heads_kv; ++r)
            for (size_t e = 0; e < dim; ++e)
                if (!std::isfinite(x[r * dim + e]))
                    return fail(ATTN_ERR_INVALID_ARGUMENT,
                                "%s: %s row %zu (token %zu, KV head %zu) holds a non-finite value "
                                "(NaN or infinity): it has no int8 scale",
                                fn, operand_name(nw), r, r / sh.heads_kv, r % sh.heads_kv);
    }
    core::Params p = dp;
    p.total_q = cs.total_q;
    p.k_type = slot[ATTN_K].type;
    p.v_type = slot[ATTN_V].type;
    core::Tensors t;
    t.k = slot[ATTN_K].ptr;
    t.v = slot[ATTN_V].ptr;
    t.k_scale = static_cast<const float *>(slot[ATTN_K_SCALE].ptr);
    t.v_scale = static_cast<const float *>(slot[ATTN_V_SCALE].ptr);
    t.seq_lens_k = lens;
    t.cu_q = dp.varlen ? cu : nullptr;
    t.block_table = paged ? static_cast<const int32_t *>(slot[ATTN_BLOCK_TABLE].ptr) : nullptr;
    // positions come from seq_lens_k; cu_seqlens_k only places the sequences in the pack
    t.cu_k =
        dp.varlen && !paged ? static_cast<const int32_t *>(slot[ATTN_CU_SEQLENS_K].ptr) : nullptr;
    const core::NewRows nk{slot[ATTN_NEW_K].ptr, slot[ATTN_NEW_K].type,
                           static_cast<const float *>(slot[ATTN_NEW_K_SCALE].ptr)};
    const core::NewRows nv{slot[ATTN_NEW_V].ptr, slot[ATTN_NEW_V].type,
                           static_cast<const float *>(slot[ATTN_NEW_V_SCALE].ptr)};
    core::kv_append(p, t, nk, nv);
    return ATTN_OK;
}

} // namespace

extern "C" {

const char *attn_version_string(void) {
    return ATTN_VERSION_STRING;
}
unsigned attn_version_number(void) {
    return ATTN_VERSION_NUMBER;
}

const char *attn_status_string(attn_status status) {
    switch (raw_enum(status)) {
    case ATTN_OK:
        return "ok";
    case ATTN_ERR_NULL_POINTER:
        return "null pointer";
    case ATTN_ERR_INVALID_ARGUMENT:
        return "invalid argument";
    case ATTN_ERR_OUT_OF_MEMORY:
        return "out of memory";
    case ATTN_ERR_UNSUPPORTED:
        return "unsupported";
    case ATTN_ERR_INTERNAL:
        return "internal error";
    }
    return "unknown status";
}

const char *attn_last_error(void) {
    return t_error;
}

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

namespace {
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
        if (w == ATTN_OUT && !out_nests(s, desc->p, lay))
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: out strides (%zu, %zu, %zu) do not nest: output rows of %zu floats "
                        "could overlap",
                        fn, batch_stride, head_stride, row_stride, s.head_dim_v);
        *layout_of(desc, w) = lay;
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

attn_status attn_param_bounds(attn_param param, int *is_float, double *min, double *max) {
    static const char fn[] = "attn_param_bounds";
    return guarded(fn, [&]() -> attn_status {
        const int id = raw_enum(param);
        if (id < 0 || id >= kParams)
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: param (%d) is not an attn_param", fn, id);
        if (is_float) *is_float = kParamInfo[id].is_float ? 1 : 0;
        if (min) *min = kParamInfo[id].min;
        if (max) *max = kParamInfo[id].max;
        return ATTN_OK;
    });
}

attn_status attn_param_info(attn_param param, const char **name, int *is_float, double *min,
                            double *max, double *default_value) {
    static const char fn[] = "attn_param_info";
    return guarded(fn, [&]() -> attn_status {
        const int id = raw_enum(param);
        if (id < 0 || id >= kParams)
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: param (%d) is not an attn_param", fn, id);
        const ParamInfo &pi = kParamInfo[id];
        if (name) *name = pi.name;
        if (is_float) *is_float = pi.is_float ? 1 : 0;
        if (min) *min = pi.min;
        if (max) *max = pi.max;
        if (default_value) *default_value = pi.default_value;
        return ATTN_OK;
    });
}

attn_status attn_operand_info(attn_operand which, const char **name, unsigned *in_types,
                              unsigned *out_types, int *rank, int *strided) {
    static const char fn[] = "attn_operand_info";
    return guarded(fn, [&]() -> attn_status {
        const int w = raw_enum(which);
        if (w < 0 || w >= kOperands)
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: which (%d) is not an attn_operand", fn, w);
        const OperandInfo &o = kOperandInfo[w];
        if (name) *name = o.name;
        if (in_types) *in_types = o.in_types;
        if (out_types) *out_types = o.out_types;
        if (rank) *rank = o.rank;
        if (strided) *strided = o.strided != ATTN_S_NONE ? 1 : 0;
        return ATTN_OK;
    });
}

attn_status attn_isa_info(int index, const char **name, int *supported) {
    static const char fn[] = "attn_isa_info";
    return guarded(fn, [&]() -> attn_status {
        if (index < 0 || index >= core::kIsaCount)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: index (%d) is outside [0, %d]: the ISAs are %s", fn, index,
                        core::kIsaCount - 1, core::isa_names());
        const core::Isa isa = static_cast<core::Isa>(index);
        if (name) *name = core::isa_name(isa);
        if (supported) *supported = core::isa_supported(isa) ? 1 : 0;
        return ATTN_OK;
    });
}

attn_status attn_args_create(attn_args **args) {
    static const char fn[] = "attn_args_create";
    return guarded(fn, [&]() -> attn_status {
        if (!args) return fail(ATTN_ERR_NULL_POINTER, "%s: args is NULL", fn);
        *args = new (std::nothrow) attn_args;
        if (!*args) return fail(ATTN_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        return ATTN_OK;
    });
}

void attn_args_destroy(attn_args *args) {
    delete args;
}

attn_status attn_args_clear(attn_args *args) {
    if (!args) return fail(ATTN_ERR_NULL_POINTER, "attn_args_clear: args is NULL");
    *args = attn_args{};
    return ATTN_OK;
}

attn_status attn_args_set_f32(attn_args *args, attn_operand which, const float *data, size_t len) {
    static const char fn[] = "attn_args_set_f32";
    return guarded(fn, [&]() { return bind(fn, args, raw_enum(which), data, len, Kind::F32In); });
}

attn_status attn_args_set_out_f32(attn_args *args, attn_operand which, float *data, size_t len) {
    static const char fn[] = "attn_args_set_out_f32";
    return guarded(fn, [&]() { return bind(fn, args, raw_enum(which), data, len, Kind::F32Out); });
}

attn_status attn_args_set_u8(attn_args *args, attn_operand which, const uint8_t *data, size_t len) {
    static const char fn[] = "attn_args_set_u8";
    return guarded(fn, [&]() { return bind(fn, args, raw_enum(which), data, len, Kind::U8); });
}

attn_status attn_args_set_i32(attn_args *args, attn_operand which, const int32_t *data,
                              size_t len) {
    static const char fn[] = "attn_args_set_i32";
    return guarded(fn, [&]() { return bind(fn, args, raw_enum(which), data, len, Kind::I32); });
}

attn_status attn_args_set_f16(attn_args *args, attn_operand which, const uint16_t *data,
                              size_t len) {
    static const char fn[] = "attn_args_set_f16";
    return guarded(fn, [&]() {
        return bind(fn, args, raw_enum(which), data, len, Kind::F32In, core::DType::F16);
    });
}

attn_status attn_args_set_bf16(attn_args *args, attn_operand which, const uint16_t *data,
                               size_t len) {
    static const char fn[] = "attn_args_set_bf16";
    return guarded(fn, [&]() {
        return bind(fn, args, raw_enum(which), data, len, Kind::F32In, core::DType::BF16);
    });
}

attn_status attn_args_set_i8(attn_args *args, attn_operand which, const int8_t *data, size_t len) {
    static const char fn[] = "attn_args_set_i8";
    return guarded(fn, [&]() {
        return bind(fn, args, raw_enum(which), data, len, Kind::F32In, core::DType::I8);
    });
}

attn_status attn_args_set_out_f16(attn_args *args, attn_operand which, uint16_t *data, size_t len) {
    static const char fn[] = "attn_args_set_out_f16";
    return guarded(fn, [&]() {
        return bind(fn, args, raw_enum(which), data, len, Kind::F32Out, core::DType::F16);
    });
}

attn_status attn_args_set_out_bf16(attn_args *args, attn_operand which, uint16_t *data,
                                   size_t len) {
    static const char fn[] = "attn_args_set_out_bf16";
    return guarded(fn, [&]() {
        return bind(fn, args, raw_enum(which), data, len, Kind::F32Out, core::DType::BF16);
    });
}

attn_status attn_args_set_out_i8(attn_args *args, attn_operand which, int8_t *data, size_t len) {
    static const char fn[] = "attn_args_set_out_i8";
    return guarded(fn, [&]() {
        return bind(fn, args, raw_enum(which), data, len, Kind::F32Out, core::DType::I8);
    });
}

attn_status attn_convert_f32_to_f16(const float *src, uint16_t *dst, size_t n) {
    return convert("attn_convert_f32_to_f16", src, dst, n, &core::f32_to_f16);
}
attn_status attn_convert_f32_to_bf16(const float *src, uint16_t *dst, size_t n) {
    return convert("attn_convert_f32_to_bf16", src, dst, n, &core::f32_to_bf16);
}
attn_status attn_convert_f16_to_f32(const uint16_t *src, float *dst, size_t n) {
    return convert("attn_convert_f16_to_f32", src, dst, n, &core::f16_to_f32);
}
attn_status attn_convert_bf16_to_f32(const uint16_t *src, float *dst, size_t n) {
    return convert("attn_convert_bf16_to_f32", src, dst, n, &core::bf16_to_f32);
}

attn_status attn_quantize_i8(const float *src, size_t rows, size_t dim, int8_t *dst,
                             float *scales) {
    static const char fn[] = "attn_quantize_i8";
    return guarded(fn, [&]() -> attn_status {
        size_t n;
        if (!mul_ok(rows, dim, &n))
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: rows (%zu) x dim (%zu) overflows", fn, rows,
                        dim);
        if (n == 0 && rows == 0) return ATTN_OK;
        if (!scales) return fail(ATTN_ERR_NULL_POINTER, "%s: scales is NULL", fn);
        if (attn_status st = check_convert(fn, src, sizeof(float), dst, 1, n)) return st;
        size_t sb;
        if (!mul_ok(rows, sizeof(float), &sb))
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: rows (%zu) overflows", fn, rows);
        if (overlaps(range_of(scales, sb), range_of(src, n * sizeof(float))) ||
            overlaps(range_of(scales, sb), range_of(dst, n)))
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: scales overlaps src or dst", fn);
        const size_t bad = core::quantize_i8(src, rows, dim, dst, scales);
        if (bad < rows)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: src row %zu holds a non-finite value (NaN or infinity): it has no "
                        "int8 scale",
                        fn, bad);
        return ATTN_OK;
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
            if (a[ATTN_CU_SEQLENS_Q].len < dp.shape.batch + 1)
                return fail(ATTN_ERR_INVALID_ARGUMENT,
                            "%s: cu_seqlens_q has %zu elements, needs at least %zu", fn,
                            a[ATTN_CU_SEQLENS_Q].len, dp.shape.batch + 1);
            if (attn_status st = check_cu(fn, ATTN_CU_SEQLENS_Q, cu, dp.shape.batch, dp.shape.seq_q,
                                          "seq_q", &total_q))
                return st;
            const View vo = view_of(dp.shape, dp, ATTN_OUT, dp.out);
            need[ATTN_OUT] = pack_len(vo, total_q);
            need[ATTN_LSE] = dp.shape.heads_q * total_q;
        }
        Buffer bufs[4];
        int n = 0;
        for (const Slot *sl : {a, b})
            for (int w : {ATTN_OUT, ATTN_LSE}) {
                const char *who = sl == a ? "acc" : "part";
                if (sl[w].len < need[w])
                    return fail(ATTN_ERR_INVALID_ARGUMENT,
                                "%s: %s's %s has %zu elements, needs at least %zu", fn, who,
                                operand_name(w), sl[w].len, need[w]);
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

attn_status attn_set_num_threads(size_t n) {
    static const char fn[] = "attn_set_num_threads";
    return guarded(fn, [&]() -> attn_status {
        if (n > kMaxThreads)
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: n (%zu) exceeds the limit %zu", fn, n,
                        kMaxThreads);
        core::pool_set_threads(n);
        return ATTN_OK;
    });
}

size_t attn_get_num_threads(void) {
    return core::pool_threads();
}

const char *attn_isa(void) {
    return core::isa_name(core::active_isa());
}

attn_status attn_set_isa(const char *name) {
    static const char fn[] = "attn_set_isa";
    return guarded(fn, [&]() -> attn_status {
        if (!name || !*name) {
            core::reset_isa_cap();
            return ATTN_OK;
        }
        core::Isa isa;
        if (!core::isa_from_name(name, &isa))
            return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: name \"%.64s\" is not one of %s", fn, name,
                        core::isa_names());
        if (!core::isa_supported(isa))
            return fail(ATTN_ERR_UNSUPPORTED, "%s: this CPU or build does not support %s", fn,
                        name);
        core::set_isa_cap(isa);
        return ATTN_OK;
    });
}

} // extern "C"
