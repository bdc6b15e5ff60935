// 16-bit conversions and int8 quantization: attn_convert_*, attn_quantize_i8.
#include "checked.hpp"
#include "internal.hpp"

using namespace attn::capi;

namespace {

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

} // namespace

extern "C" {

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

} // extern "C"
