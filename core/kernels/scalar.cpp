// Scalar kernels: the same kernel body with a one-lane "vector", compiled with baseline flags.
// It is the reference the SIMD kernels are tested against, and the fallback on any CPU.
#include <cmath>

#include "convert.hpp"
#include "kernel.hpp"

namespace attn {
namespace core {
namespace scalar {

struct vf {
    float x;
    static constexpr size_t size = 1;
};
using vm = bool;
constexpr size_t kL = 1;
constexpr size_t kNV = 4, kKT = 4, kDT = 4, kBK = 64;

static inline vf operator+(vf a, vf b) {
    return {a.x + b.x};
}
static inline vf operator-(vf a, vf b) {
    return {a.x - b.x};
}
static inline vf operator*(vf a, vf b) {
    return {a.x * b.x};
}
static inline vf operator/(vf a, vf b) {
    return {a.x / b.x};
}
static inline vf vload(const float *p) {
    return {*p};
}
static inline void vstore(float *p, vf x) {
    *p = x.x;
}
static inline vf vbcast(float x) {
    return {x};
}
static inline vf vzero() {
    return {0.0f};
}
static inline vf vfma(vf a, vf b, vf c) {
    return {a.x * b.x + c.x};
}
static inline vf vmax(vf a, vf b) {
    return {a.x > b.x ? a.x : b.x};
}
static inline vf vexp(vf a) {
    return {std::exp(a.x)};
}
static inline vf vin_register(vf a) {
    return a;
}
static inline vf vexp_nonpos(vf a) { // the xsimd kernels' softmax exp; here simply std::exp
    return vexp(a);
}
static inline vf vlog(vf a) {
    return {std::log(a.x)};
}
static inline vf vtanh(vf a) {
    return {std::tanh(a.x)};
}
static inline vf vsel(vm m, vf a, vf b) {
    return m ? a : b;
}
static inline vm vlt(vf a, vf b) {
    return a.x < b.x;
}
static inline vm veq(vf a, vf b) {
    return a.x == b.x;
}
static inline vm vne(vf a, vf b) {
    return a.x != b.x;
}
static inline vm vand(vm a, vm b) {
    return a && b;
}
static inline bool vany(vm m) {
    return m;
}
static inline float vhsum(vf a) {
    return a.x;
}
static inline vf vhsum_all(const vf *a) {
    return a[0];
}
static inline float vhmax(vf a) {
    return a.x;
}
// int32 lanes for the integer products (int8-inl.h): a word holds two int16, the even one low.
struct vi {
    int32_t x;
};
static inline vi vi_zero() {
    return {0};
}
static inline vi vi_load(const int32_t *p) {
    return {*p};
}
static inline vi vi_bcast(int32_t x) {
    return {x};
}
static inline vi vi_madd(vi acc, vi a, vi b) { // pmaddwd, then an add
    const int32_t a0 = static_cast<int16_t>(a.x & 0xFFFF), a1 = static_cast<int16_t>(a.x >> 16);
    const int32_t b0 = static_cast<int16_t>(b.x & 0xFFFF), b1 = static_cast<int16_t>(b.x >> 16);
    return {acc.x + a0 * b0 + a1 * b1};
}
static inline vf vi_to_f(vi a) {
    return {static_cast<float>(a.x)};
}
static inline void vi_store(int32_t *p, vi a) {
    *p = a.x;
}
static inline vi vi_from_f(vf x) { // nearest, ties to even
    return {static_cast<int32_t>(std::nearbyint(x.x))};
}
static inline vi vi_pack_lohi(vi lo, vi hi) {
    return {static_cast<int32_t>((static_cast<uint32_t>(hi.x) << 16) |
                                 (static_cast<uint32_t>(lo.x) & 0xFFFFu))};
}
static inline void vtranspose_add(float *st, size_t, const float *const *rows, size_t c0) {
    const float b = rows[0][c0];
    st[0] = b == -__builtin_inff() ? b : st[0] + b; // a -inf bias hides the key, whatever st[0]
}
static inline void vtranspose_pack(float *dst, size_t, const float *const *rows, size_t c0,
                                   float scale) {
    dst[0] = rows[0][c0] * scale;
}
static inline void vtranspose_unpack(const float *src, size_t, float *const *rows, size_t c0) {
    rows[0][c0] = src[0];
}

#include "body-inl.h"

} // namespace scalar

const KernelInfo &kernel_scalar() {
    static const KernelInfo info = scalar::make_info(nullptr);
    return info;
}

} // namespace core
} // namespace attn
