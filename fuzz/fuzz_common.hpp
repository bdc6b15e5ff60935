// Shared pieces of the libFuzzer targets (fuzz_attn.cpp, fuzz_run.cpp): the input stream and the
// contract-violation report.
#pragma once

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "attn.h"

namespace fuzz {

// The fuzzer's bytes, front to back; a splitmix stream seeded by the caller continues them once
// they run out, so short inputs still drive whole cases.
struct Source {
    const uint8_t *p;
    size_t n;
    uint64_t s; // fallback stream once the input is exhausted
    uint8_t u8() {
        if (n) {
            --n;
            return *p++;
        }
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return static_cast<uint8_t>(z ^ (z >> 31));
    }
    uint32_t u32() {
        uint32_t v = 0;
        for (int x = 0; x < 4; ++x) v = v << 8 | u8();
        return v;
    }
    size_t pick(size_t lo, size_t hi) { return lo + u8() % (hi - lo + 1); } // [lo, hi]
    float value(float lo, float hi) { return lo + (hi - lo) * (u8() / 255.0f); }
    float f32() {
        const uint32_t b = u32();
        float f;
        std::memcpy(&f, &b, 4);
        return f;
    }
};

inline std::string g_what; // decoded configuration, printed on a violation

[[noreturn]] inline void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
inline void violation(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    std::fputs("\n==== libattn contract violation: ", stderr);
    std::vfprintf(stderr, fmt, ap);
    std::fprintf(stderr, "\n==== case: %s\n==== isa %s, threads %zu\n", g_what.c_str(), attn_isa(),
                 attn_get_num_threads());
    va_end(ap);
    std::abort();
}

inline void expect_status(attn_status got, attn_status want, const char *call) {
    if (got != want)
        violation("%s returned %d (%s), expected %d (%s); message \"%s\"", call, got,
                  attn_status_string(got), want, attn_status_string(want), attn_last_error());
    if (got != ATTN_OK && attn_last_error()[0] == '\0')
        violation("%s failed with %s but attn_last_error() is empty", call,
                  attn_status_string(got));
    if (attn_status_string(got) == nullptr) violation("attn_status_string(%d) is NULL", got);
}

} // namespace fuzz
