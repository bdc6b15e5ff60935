// The extern "C" surface: argument checking, error messages, and the exception barrier.
// Every exported body runs inside guarded(), which turns any C++ exception into a status
// (onnxruntime's API_IMPL_BEGIN/END idea): nothing throws across the ABI.
#include "attn.h"

#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>

#include "attention.hpp"
#include "thread_pool.hpp"

namespace core = attn::core;

struct attn_desc {
    core::Params p;
    size_t len[8] = {}; // attn_desc_required_len per operand
    std::atomic<bool> used{false};
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
    static const char *const names[] = {"q",   "k",       "v",         "out",
                                        "lse", "weights", "key_valid", "allowed"};
    return which >= 0 && which < 8 ? names[which] : "?";
}

void compute_len(attn_desc *d, int which) {
    const core::Shape &s = d->p.shape;
    const core::Layout *lay[4] = {&d->p.q, &d->p.k, &d->p.v, &d->p.out};
    const bool is_q = which == ATTN_Q || which == ATTN_OUT;
    const size_t heads = is_q ? s.heads_q : s.heads_kv, seq = is_q ? s.seq_q : s.seq_k;
    span_of(s.batch, lay[which]->batch, heads, lay[which]->head, seq, lay[which]->row, s.head_dim,
            &d->len[which]);
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
    // Every buffer size must fit size_t in bytes: [b][hq][sq][d], [b][hkv][sk][d],
    // [b][hq][sq][sk] (weights).
    size_t x;
    const bool ok = mul_ok(batch, heads_q, &x) && mul_ok(x, seq_q, &x) && mul_ok(x, head_dim, &x) &&
                    mul_ok(x, 4, &x) && mul_ok(batch, heads_kv, &x) && mul_ok(x, seq_k, &x) &&
                    mul_ok(x, head_dim, &x) && mul_ok(x, 4, &x) && mul_ok(batch, heads_q, &x) &&
                    mul_ok(x, seq_q, &x) && mul_ok(x, seq_k, &x) && mul_ok(x, 4, &x) &&
                    mul_ok(seq_q, seq_k, &x) && mul_ok(batch, seq_k, &x);
    if (!ok)
        return fail(ATTN_ERR_INVALID_ARGUMENT,
                    "%s: sizes overflow size_t (batch %zu, heads_q %zu, heads_kv %zu, seq_q %zu, "
                    "seq_k %zu, head_dim %zu)",
                    fn, batch, heads_q, heads_kv, seq_q, seq_k, head_dim);
    attn_desc *d = new (std::nothrow) attn_desc;
    if (!d) return fail(ATTN_ERR_OUT_OF_MEMORY, "%s: out of memory allocating the descriptor", fn);
    core::Shape &s = d->p.shape;
    s = core::Shape{batch, heads_q, heads_kv, seq_q, seq_k, head_dim};
    d->p.q = core::Layout{heads_q * seq_q * head_dim, seq_q * head_dim, head_dim};
    d->p.out = d->p.q;
    d->p.k = core::Layout{heads_kv * seq_k * head_dim, seq_k * head_dim, head_dim};
    d->p.v = d->p.k;
    d->p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    d->p.causal = core::Causal::None;
    for (int w = 0; w < 4; ++w) compute_len(d, w);
    d->len[ATTN_LSE] = batch * heads_q * seq_q;
    d->len[ATTN_WEIGHTS] = batch * heads_q * seq_q * seq_k;
    d->len[ATTN_KEY_VALID] = batch * seq_k;
    d->len[ATTN_ALLOWED] = seq_q * seq_k;
    *out = d;
    return ATTN_OK;
}

attn_status run_forward(const char *fn, const attn_desc *desc, const float *q, const float *k,
                        const float *v, const bool *key_valid, const bool *allowed, float *out,
                        float *lse) {
    if (attn_status st = check_desc(fn, desc)) return st;
    const char *missing = !q ? "q" : !k ? "k" : !v ? "v" : !out ? "out" : nullptr;
    if (missing) return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL", fn, missing);
    const size_t *len = desc->len;
    const Buffer bufs[] = {
        {q, len[ATTN_Q] * 4, "q", false},
        {k, len[ATTN_K] * 4, "k", false},
        {v, len[ATTN_V] * 4, "v", false},
        {key_valid, len[ATTN_KEY_VALID], "key_valid", false},
        {allowed, len[ATTN_ALLOWED], "allowed", false},
        {out, len[ATTN_OUT] * 4, "out", true},
        {lse, len[ATTN_LSE] * 4, "lse", true},
    };
    if (attn_status st = check_aliasing(fn, bufs, 7)) return st;
    const_cast<attn_desc *>(desc)->used.store(true);
    core::Tensors t;
    t.q = q;
    t.k = k;
    t.v = v;
    t.key_valid = reinterpret_cast<const uint8_t *>(key_valid);
    t.allowed = reinterpret_cast<const uint8_t *>(allowed);
    t.out = out;
    t.lse = lse;
    core::forward(desc->p, t);
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

attn_status attn_desc_set_strides(attn_desc *desc, attn_operand which, size_t batch_stride,
                                  size_t head_stride, size_t row_stride) {
    static const char fn[] = "attn_desc_set_strides";
    return guarded(fn, [&]() -> attn_status {
        if (attn_status st = check_mutable(fn, desc)) return st;
        const int w = raw_enum(which);
        if (w < ATTN_Q || w > ATTN_OUT)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: which (%d) must be ATTN_Q, ATTN_K, ATTN_V or ATTN_OUT", fn, w);
        const core::Shape &s = desc->p.shape;
        const bool is_q = w == ATTN_Q || w == ATTN_OUT;
        const size_t heads = is_q ? s.heads_q : s.heads_kv, seq = is_q ? s.seq_q : s.seq_k;
        size_t span;
        if (!span_of(s.batch, batch_stride, heads, head_stride, seq, row_stride, s.head_dim, &span))
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: %s strides (%zu, %zu, %zu) make the buffer size overflow", fn,
                        operand_name(w), batch_stride, head_stride, row_stride);
        if (w == ATTN_OUT &&
            !rows_disjoint(s.batch, batch_stride, heads, head_stride, seq, row_stride, s.head_dim))
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: out strides (%zu, %zu, %zu) do not nest: output rows of %zu floats "
                        "could overlap",
                        fn, batch_stride, head_stride, row_stride, s.head_dim);
        core::Layout *lay[4] = {&desc->p.q, &desc->p.k, &desc->p.v, &desc->p.out};
        *lay[w] = core::Layout{batch_stride, head_stride, row_stride};
        desc->len[w] = span;
        return ATTN_OK;
    });
}

size_t attn_desc_required_len(const attn_desc *desc, attn_operand which) {
    if (!desc) {
        fail(ATTN_ERR_NULL_POINTER, "attn_desc_required_len: desc is NULL");
        return 0;
    }
    const int w = raw_enum(which);
    if (w < 0 || w > ATTN_ALLOWED) {
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
        const char *missing = !q ? "q" : !k ? "k" : !weights ? "weights" : nullptr;
        if (missing) return fail(ATTN_ERR_NULL_POINTER, "%s: %s is NULL", fn, missing);
        const size_t *len = desc->len;
        const Buffer bufs[] = {
            {q, len[ATTN_Q] * 4, "q", false},
            {k, len[ATTN_K] * 4, "k", false},
            {key_valid, len[ATTN_KEY_VALID], "key_valid", false},
            {allowed, len[ATTN_ALLOWED], "allowed", false},
            {weights, len[ATTN_WEIGHTS] * 4, "weights", true},
        };
        if (attn_status st = check_aliasing(fn, bufs, 5)) return st;
        const_cast<attn_desc *>(desc)->used.store(true);
        core::Tensors t;
        t.q = q;
        t.k = k;
        t.key_valid = reinterpret_cast<const uint8_t *>(key_valid);
        t.allowed = reinterpret_cast<const uint8_t *>(allowed);
        t.weights = weights;
        core::weights(desc->p, t);
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
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: name \"%.64s\" is not one of scalar, sse2, avx2, avx512", fn, name);
        if (!core::isa_supported(isa))
            return fail(ATTN_ERR_UNSUPPORTED, "%s: this CPU or build does not support %s", fn,
                        name);
        core::set_isa_cap(isa);
        return ATTN_OK;
    });
}

} // extern "C"
