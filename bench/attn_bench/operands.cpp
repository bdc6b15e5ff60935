// See operands.hpp.
#include "operands.hpp"

#include <cmath>
#include <cstring>

namespace attn_bench {

void fill(float *x, size_t len, uint64_t seed) {
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = static_cast<float>(static_cast<uint32_t>(s >> 40)) / static_cast<float>(1u << 23) -
               1.0f;
    }
}

double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = std::fabs(double(a[i]) - double(b[i]));
        if (!(d <= m)) m = d; // NaN propagates as "large"
    }
    return m;
}

PrefillData::PrefillData(size_t heads, size_t n_, size_t d_)
    : h(heads), n(n_), d(d_), q(h * n * d), k(h * n * d), v(h * n * d), qs(h * n * d),
      ks(h * n * d), vs(h * n * d), key_valid(n), allowed(n * n), ones_valid(n),
      ones_allowed(n * n) {
    fill(q.data(), q.len, 11 + d);
    fill(k.data(), k.len, 12 + d);
    fill(v.data(), v.len, 13 + d);
    to_bshd(q, qs);
    to_bshd(k, ks);
    to_bshd(v, vs);
    // 10% padded keys at the end of the sequence; `allowed` forbids about one 64x64 block
    // in seven, in a fixed pattern.
    size_t vis = 0;
    for (size_t j = 0; j < n; ++j) key_valid[j] = j < n - n / 10;
    for (size_t i = 0; i < n; ++i)
        for (size_t j = 0; j < n; ++j) {
            allowed[i * n + j] = ((i / 64) + 2 * (j / 64)) % 7 != 0;
            vis += key_valid[j] && allowed[i * n + j];
        }
    visible_fraction_masked = double(vis) / (double(n) * double(n));
    std::memset(ones_valid.data(), 1, n);
    std::memset(ones_allowed.data(), 1, n * n);
}

void PrefillData::to_bshd(const Array<float> &src, Array<float> &dst) const {
    for (size_t hh = 0; hh < h; ++hh)
        for (size_t s = 0; s < n; ++s)
            std::memcpy(&dst[(s * h + hh) * d], &src[(hh * n + s) * d], d * sizeof(float));
}

void PrefillData::from_bshd(const Array<float> &src, Array<float> &dst) const {
    for (size_t hh = 0; hh < h; ++hh)
        for (size_t s = 0; s < n; ++s)
            std::memcpy(&dst[(hh * n + s) * d], &src[(s * h + hh) * d], d * sizeof(float));
}

const uint8_t *PrefillData::valid_for(const std::string &mask) const {
    return mask == "pad10_block" ? key_valid.data() : mask == "ones" ? ones_valid.data() : nullptr;
}

const uint8_t *PrefillData::allowed_for(const std::string &mask) const {
    return mask == "pad10_block" ? allowed.data() : mask == "ones" ? ones_allowed.data() : nullptr;
}

} // namespace attn_bench
