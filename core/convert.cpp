// Array conversions between fp32 and the storage types, run by the active ISA's kernels.
#include "attention.hpp"
#include "kernel.hpp"

namespace attn {
namespace core {

void f16_to_f32(const uint16_t *src, float *dst, size_t n) {
    current_kernel().f16_to_f32(src, dst, n);
}
void bf16_to_f32(const uint16_t *src, float *dst, size_t n) {
    current_kernel().bf16_to_f32(src, dst, n);
}
void f32_to_f16(const float *src, uint16_t *dst, size_t n) {
    current_kernel().f32_to_f16(src, dst, n);
}
void f32_to_bf16(const float *src, uint16_t *dst, size_t n) {
    current_kernel().f32_to_bf16(src, dst, n);
}
size_t quantize_i8(const float *src, size_t rows, size_t dim, int8_t *dst, float *scales) {
    return current_kernel().quantize_i8(src, rows, dim, dst, scales);
}

size_t quantize_fp8(const float *src, size_t rows, size_t dim, DType type, float scale,
                    uint8_t *dst) {
    return current_kernel().quantize_fp8(src, rows, dim, type, scale, dst);
}
void fp8_to_f32(const uint8_t *src, size_t n, DType type, float scale, float *dst) {
    current_kernel().fp8_to_f32(src, n, type, scale, dst);
}

} // namespace core
} // namespace attn
