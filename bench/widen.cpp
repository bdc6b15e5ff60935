// The harness of the widening loops (see widen.hpp). Baseline flags only: it names no vector
// type and calls a loop only after checking that the CPU has its ISA.
#include "widen.hpp"

#include <algorithm>
#include <chrono>
#include <cpuid.h>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>

namespace attn_bench {

const char *const kStoreName[4] = {"f32", "f16", "bf16", "int8"};
const size_t kStoreBytes[4] = {4, 2, 2, 1};

namespace {
// CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does not know "f16c").
bool has_f16c() {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
} // namespace

std::vector<WidenLoop> available_widen_loops() {
    __builtin_cpu_init();
    std::vector<WidenLoop> r;
    if (__builtin_cpu_supports("avx512f")) r.push_back({"avx512", widen_avx512});
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
        r.push_back({"avx2", widen_avx2});
    r.push_back({"sse2", widen_sse2});
    return r;
}

const WidenLoop *widen_loop_for(const char *isa) {
    static const std::vector<WidenLoop> loops = available_widen_loops();
    const char *want = !std::strncmp(isa, "avx512", 6) ? "avx512" : isa;
    for (const WidenLoop &l : loops)
        if (!std::strcmp(l.isa, want)) return &l;
    return nullptr;
}

namespace {
// f16 / bf16 bit patterns of small values (finite, normal): the loop's work does not depend
// on them, but subnormals or NaNs could slow an FMA on some CPUs.
uint16_t small_f16(std::mt19937 &g) {
    return static_cast<uint16_t>(0x3000 + (g() & 0x03ff));
}
uint16_t small_bf16(std::mt19937 &g) {
    return static_cast<uint16_t>(0x3c00 + (g() & 0x007f));
}
} // namespace

namespace {
// A value of storage s from its bits, exactly (the reference of widen_check).
double widened(int s, const unsigned char *b, size_t i) {
    if (s == I8) return static_cast<double>(static_cast<int8_t>(b[i]));
    if (s == F32) {
        float x;
        std::memcpy(&x, b + 4 * i, 4);
        return x;
    }
    uint16_t h;
    std::memcpy(&h, b + 2 * i, 2);
    if (s == BF16) {
        const uint32_t u = static_cast<uint32_t>(h) << 16;
        float x;
        std::memcpy(&x, &u, 4);
        return x;
    }
    const int e = (h >> 10) & 31, m = h & 1023;
    const double v = e ? std::ldexp(1024 + m, e - 25) : std::ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}
} // namespace

double widen_check(const WidenLoop &loop, int s, int group, size_t d) {
    const size_t elem = kStoreBytes[s], rows = kWidenBufferBytes / (d * elem);
    auto *b = static_cast<unsigned char *>(std::aligned_alloc(64, kWidenBufferBytes));
    std::vector<float> q(static_cast<size_t>(group) * d), scale(rows, 1.0f);
    std::mt19937 g(5);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto &x : q) x = u(g);
    for (size_t i = 0; i < rows * d; ++i) {
        if (s == F32) {
            const float x = u(g);
            std::memcpy(b + 4 * i, &x, 4);
        } else if (s == I8) {
            b[i] = static_cast<unsigned char>(g());
        } else { // any finite pattern: exponent field not all ones
            uint16_t h;
            do h = static_cast<uint16_t>(g());
            while (s == F16 ? (h & 0x7c00) == 0x7c00
                            : (h & 0x7f80) == 0x7f80 || (h & 0x7f80) > 0x4f00);
            std::memcpy(b + 2 * i, &h, 2);
        }
    }
    double ref = 0, mag = 0;
    for (int r = 0; r < group; ++r)
        for (size_t row = 0; row < rows; ++row)
            for (size_t x = 0; x < d; ++x) {
                const double p = static_cast<double>(q[r * d + x]) * widened(s, b, row * d + x);
                ref += p;
                mag += std::fabs(p);
            }
    const double got = loop.fn(s, group, b, d, rows, scale.data(), q.data(), 1);
    std::free(b);
    return std::fabs(got - ref) / mag;
}

double widen_gbs(const WidenLoop &loop, int s, int group, size_t d, double seconds,
                 size_t *passes_io) {
    const size_t elem = kStoreBytes[s], rows = kWidenBufferBytes / (d * elem);
    void *kv = std::aligned_alloc(64, kWidenBufferBytes);
    std::vector<float> q(static_cast<size_t>(group) * d), scale(rows, 1.0f);
    std::mt19937 g(3);
    for (auto &x : q) x = 1e-3f * static_cast<float>(g() % 1000);
    auto *b = static_cast<unsigned char *>(kv);
    for (size_t i = 0; i < rows * d; ++i) {
        if (s == F32) {
            const float x = 1e-3f * static_cast<float>(g() % 1000);
            std::memcpy(b + 4 * i, &x, 4);
        } else if (s == I8) {
            b[i] = static_cast<unsigned char>(g());
        } else {
            const uint16_t h = s == F16 ? small_f16(g) : small_bf16(g);
            std::memcpy(b + 2 * i, &h, 2);
        }
    }
    using clock = std::chrono::steady_clock;
    volatile float sink = 0;
    size_t &passes = *passes_io;
    if (!passes) // calibrate: passes for about `seconds`
        for (size_t n = 64;; n *= 4) {
            const auto t0 = clock::now();
            sink = sink + loop.fn(s, group, kv, d, rows, scale.data(), q.data(), n);
            const double dt = std::chrono::duration<double>(clock::now() - t0).count();
            if (dt >= seconds / 4) {
                passes = static_cast<size_t>(static_cast<double>(n) * seconds / dt) + 1;
                break;
            }
        }
    // the best of 3 runs: a limit is what the core can do, and a run that lost the CPU to
    // another process for a moment says nothing about that
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
        const auto t0 = clock::now();
        sink = sink + loop.fn(s, group, kv, d, rows, scale.data(), q.data(), passes);
        best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
    }
    std::free(kv);
    return static_cast<double>(passes) * static_cast<double>(rows * d * elem) / best * 1e-9;
}

} // namespace attn_bench
