// 16-bit conversions, int8 and fp8 quantization: attn_convert_*, attn_quantize_i8 / _fp8,
// attn_dequantize_fp8.
#include <cmath>

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
        size_t n = 0;
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

namespace {

// The checks attn_quantize_fp8 and attn_dequantize_fp8 share: the format, the scale, rows x dim.
attn_status check_fp8(const char *fn, size_t rows, size_t dim, int fmt, float scale, bool positive,
                      core::DType *type, size_t *n) {
    if (!fp8_format(fn, fmt, type)) return ATTN_ERR_INVALID_ARGUMENT;
    if (!std::isfinite(scale) || (positive && !(scale > 0.0f)))
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: scale (%g) must be finite%s", fn,
                    static_cast<double>(scale), positive ? " and > 0" : "");
    if (!mul_ok(rows, dim, n))
        return fail(ATTN_ERR_INVALID_ARGUMENT, "%s: rows (%zu) x dim (%zu) overflows", fn, rows,
                    dim);
    return ATTN_OK;
}

} // namespace

attn_status attn_quantize_fp8(const float *src, size_t rows, size_t dim, attn_dtype fmt,
                              float scale, uint8_t *dst) {
    static const char fn[] = "attn_quantize_fp8";
    return guarded(fn, [&]() -> attn_status {
        core::DType type;
        size_t n = 0;
        if (attn_status st = check_fp8(fn, rows, dim, raw_enum(fmt), scale, true, &type, &n))
            return st;
        if (attn_status st = check_convert(fn, src, sizeof(float), dst, 1, n)) return st;
        if (n == 0) return ATTN_OK;
        const size_t bad = core::quantize_fp8(src, rows, dim, type, scale, dst);
        if (bad < rows)
            return fail(ATTN_ERR_INVALID_ARGUMENT,
                        "%s: src row %zu holds a non-finite value (NaN or infinity): it has no "
                        "fp8 code",
                        fn, bad);
        return ATTN_OK;
    });
}

attn_status attn_dequantize_fp8(const uint8_t *src, size_t rows, size_t dim, attn_dtype fmt,
                                float scale, float *dst) {
    static const char fn[] = "attn_dequantize_fp8";
    return guarded(fn, [&]() -> attn_status {
        core::DType type;
        size_t n = 0;
        if (attn_status st = check_fp8(fn, rows, dim, raw_enum(fmt), scale, false, &type, &n))
            return st;
        if (attn_status st = check_convert(fn, src, 1, dst, sizeof(float), n)) return st;
        if (n) core::fp8_to_f32(src, n, type, scale, dst);
        return ATTN_OK;
    });
}

} // extern "C"
