// The operands of the measured calls: 64-byte aligned arrays, deterministic values, the prefill
// problems (BHSD and BSHD copies, masks), and the comparison of an output with a reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace attn_bench {

// 64-byte aligned array, released with free().
template <class T> struct Array {
    std::unique_ptr<T, void (*)(void *)> p{nullptr, std::free};
    size_t len = 0;
    Array() = default;
    explicit Array(size_t n) : len(n) {
        const size_t bytes = ((n * sizeof(T) + 63) / 64) * 64;
        p.reset(static_cast<T *>(std::aligned_alloc(64, bytes ? bytes : 64)));
        if (!p) {
            std::fprintf(stderr, "attn_bench: out of memory (%zu bytes)\n", bytes);
            std::exit(1);
        }
    }
    T *data() const { return p.get(); }
    T &operator[](size_t i) const { return p.get()[i]; }
};

// Deterministic values in [-1, 1).
void fill(float *x, size_t len, uint64_t seed);

// Largest |a[i] - b[i]|; a NaN anywhere makes it NaN ("large").
double max_abs_diff(const float *a, const float *b, size_t n);

// One prefill problem's operands: logical BHSD values, stored once in BHSD and once in BSHD.
struct PrefillData {
    size_t h, n, d;
    Array<float> q, k, v, qs, ks, vs; // BHSD, then BSHD copies of the same values
    Array<uint8_t> key_valid, allowed, ones_valid, ones_allowed;
    double visible_fraction_masked = 0;

    PrefillData(size_t heads, size_t n_, size_t d_);
    void to_bshd(const Array<float> &src, Array<float> &dst) const;
    void from_bshd(const Array<float> &src, Array<float> &dst) const;
    // The masks of a mask name: "none" (null), "pad10_block" (10% padded keys + block-structured
    // `allowed`), "ones" (all-true masks).
    const uint8_t *valid_for(const std::string &mask) const;
    const uint8_t *allowed_for(const std::string &mask) const;
};

} // namespace attn_bench
