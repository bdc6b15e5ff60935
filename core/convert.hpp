// Scalar conversions between fp32 and the 16-bit and 8-bit float storage types (IEEE binary16,
// bfloat16, OCP fp8 E4M3 / E5M2). Every
// function is `static inline`: each translation unit (each ISA's kernels among them) gets its own
// copy, so the linker never picks a wide ISA's code for a baseline caller.
#pragma once

#include <cstdint>
#include <cstring>

namespace attn {
namespace core {

static inline float bits_to_float(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t float_to_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// binary16 -> fp32, exact for every value (subnormals, infinities, NaN payloads kept).
static inline float half_to_float(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));
    if (exp != 0) return bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
    // zero or subnormal: man * 2^-24 is exact in fp32
    const float mag = static_cast<float>(man) * bits_to_float(0x33800000u); // 2^-24
    return sign ? -mag : mag;
}

// fp32 -> binary16, round to nearest even; overflow gives infinity, NaN stays NaN (quiet).
static inline uint16_t float_to_half(float f) {
    const uint32_t u = float_to_bits(f);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u); // rounds to >= 65520
    if (a < 0x38800000u) { // below 2^-14: a subnormal half (or zero)
        // value * 2^24 rounded to an integer, nearest even (exact: the fp32 product is exact)
        const float scaled = bits_to_float(a) * bits_to_float(0x4b800000u); // 2^24
        uint32_t m = static_cast<uint32_t>(scaled);
        const float rem = scaled - static_cast<float>(m);
        if (rem > 0.5f || (rem == 0.5f && (m & 1u))) ++m;
        return static_cast<uint16_t>(sign | m);
    }
    // normal: drop 13 mantissa bits with round to nearest even, rebias the exponent
    const uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((r - 0x38000000u) >> 13));
}

// bfloat16 -> fp32: the upper half of an fp32 (exact).
static inline float bf16_to_float(uint16_t b) {
    return bits_to_float(static_cast<uint32_t>(b) << 16);
}

// fp32 -> bfloat16, round to nearest even; NaN stays NaN (quiet).
static inline uint16_t float_to_bf16(float f) {
    const uint32_t u = float_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
    return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// x rounded to the nearest integer, ties to even, for |x| <= 2^22 (the int8 quantizer's range).
static inline float round_even(float x) {
    const float big = 12582912.0f; // 1.5 * 2^23: adding it rounds to an integer in fp32
    return x >= 0.0f ? (x + big) - big : -((-x + big) - big);
}

// ---- fp8 (OCP FP8, as vLLM stores its caches): one byte per value ----
// E4M3 ("fn"): sign, 4 exponent bits (bias 7), 3 mantissa bits; no infinities, S.1111.111 is
// NaN, max 448. E5M2: sign, 5 exponent bits (bias 15), 2 mantissa bits: the upper byte of a
// binary16 (infinities 0x7C / 0xFC, NaN above them). Every fp8 value is an fp32 value.

// E4M3 -> fp32, exact: the bits moved into an fp32 (exponent bias 127) and scaled by 2^120
// (subnormals included: m * 2^-129 * 2^120 = m * 2^-9); the NaN codes give a quiet NaN.
static inline float e4m3_to_float(uint8_t c) {
    const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
    if ((c & 0x7fu) == 0x7fu) return bits_to_float(sign | 0x7fc00000u);
    const float mag =
        bits_to_float(static_cast<uint32_t>(c & 0x7fu) << 20) * bits_to_float(0x7b800000u); // 2^120
    return bits_to_float(float_to_bits(mag) | sign);
}

// E5M2 -> fp32, exact: the code is the upper byte of a binary16.
static inline float e5m2_to_float(uint8_t c) {
    return half_to_float(static_cast<uint16_t>(c << 8));
}

// x rounded to the nearest integer, ties to even, for 0 <= x <= 2^22.
static inline float round_even_pos(float x) {
    const float big = 12582912.0f; // 1.5 * 2^23
    return (x + big) - big;
}

// A finite fp32 -> E4M3, round to nearest even, saturating to +-448 (no code for anything
// larger). The caller refuses non-finite values; a NaN here gives the NaN code.
static inline uint8_t float_to_e4m3(float f) {
    const uint32_t u = float_to_bits(f);
    const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
    if (a > 0x43e00000u) a = 0x43e00000u; // 448
    if (a < 0x3c800000u) // below 2^-6: a subnormal code m * 2^-9 (m = 8 is 2^-6, code 8)
        return static_cast<uint8_t>(
            sign | static_cast<uint8_t>(round_even_pos(bits_to_float(a) * 512.0f)));
    // normal: drop 20 mantissa bits with round to nearest even, rebias the exponent 127 -> 7
    const uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
    return static_cast<uint8_t>(sign | ((r >> 20) - (120u << 3)));
}

// A finite fp32 -> E5M2, round to nearest even (directly from fp32: rounding through binary16
// would round twice), saturating to +-57344. A NaN gives a NaN code.
static inline uint8_t float_to_e5m2(float f) {
    const uint32_t u = float_to_bits(f);
    const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
    if (a > 0x47600000u) a = 0x47600000u; // 57344
    if (a < 0x38800000u)                  // below 2^-14: a subnormal code m * 2^-16
        return static_cast<uint8_t>(
            sign | static_cast<uint8_t>(round_even_pos(bits_to_float(a) * 65536.0f)));
    const uint32_t r = a + 0xfffffu + ((a >> 21) & 1u);
    return static_cast<uint8_t>(sign | ((r >> 21) - (112u << 2)));
}

} // namespace core
} // namespace attn
