// The harness of the widening loops (see widen.hpp). Baseline flags only: it names no vector
// type and calls a loop only after checking that the CPU has its ISA.
#include "widen.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>

namespace attn_bench {

const char *const kStoreName[4] = {"f32", "f16", "bf16", "int8"};
const size_t kStoreBytes[4] = {4, 2, 2, 1};

std::vector<WidenLoop> available_widen_loops() {
    __builtin_cpu_init();
    std::vector<WidenLoop> r;
    if (__builtin_cpu_supports("avx512f")) r.push_back({"avx512", widen_avx512});
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c"))
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

double widen_gbs(const WidenLoop &loop, int s, int group, size_t d, double seconds) {
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
    // calibrate: passes for about `seconds`
    size_t passes = 64;
    for (;;) {
        const auto t0 = clock::now();
        sink = sink + loop.fn(s, group, kv, d, rows, scale.data(), q.data(), passes);
        const double dt = std::chrono::duration<double>(clock::now() - t0).count();
        if (dt >= seconds / 4) {
            passes = static_cast<size_t>(static_cast<double>(passes) * seconds / dt) + 1;
            break;
        }
        passes *= 4;
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
